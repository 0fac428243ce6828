package io.kraftkit.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** The source's columns and their Spark types, as {@code kraftkit.spark.scan.COLUMNS} lists them. */
final class Columns {
  private Columns() {}

  static final String[] NAMES = {
    "cluster", "node", "file", "kind", "base_offset", "offset", "epoch", "timestamp", "crc_valid",
    "is_control", "control_type", "record_type", "record_version", "record", "value", "position", "error"
  };
  static final DataType[] TYPES = {
    DataTypes.StringType, DataTypes.StringType, DataTypes.StringType, DataTypes.StringType,
    DataTypes.LongType, DataTypes.LongType, DataTypes.IntegerType, DataTypes.LongType,
    DataTypes.BooleanType, DataTypes.BooleanType, DataTypes.StringType, DataTypes.StringType,
    DataTypes.IntegerType, DataTypes.StringType, DataTypes.BinaryType, DataTypes.LongType,
    DataTypes.StringType
  };
  /** The columns that say where a file is: the same for all its rows. */
  static final List<String> LOCATION = Arrays.asList("cluster", "node", "file", "kind");

  static int index(String name) {
    return Arrays.asList(NAMES).indexOf(name);
  }

  /** The core's column number of {@code name}, -1 for a location column. */
  static int coreIndex(String name) {
    return Arrays.asList(KraftNative.CORE_COLUMNS).indexOf(name);
  }

  static List<String> fromOption(String option) {
    if (option == null || option.trim().isEmpty()) {
      return Arrays.asList(NAMES);
    }
    List<String> out = new ArrayList<>();
    for (String c : option.split(",")) {
      if (!c.trim().isEmpty()) {
        out.add(c.trim());
      }
    }
    return out;
  }

  static StructType schema(List<String> names) {
    List<StructField> fields = new ArrayList<>();
    for (String n : names) {
      int i = index(n);
      if (i < 0) {
        throw new IllegalArgumentException("kraft: unknown column(s) " + n + "; known: " + String.join(", ", NAMES));
      }
      fields.add(DataTypes.createStructField(n, TYPES[i], true));
    }
    return DataTypes.createStructType(fields);
  }

  static void check(StructType schema) {
    for (StructField f : schema.fields()) {
      int i = index(f.name());
      if (i < 0) {
        throw new IllegalArgumentException("kraft: unknown column(s) " + f.name() + "; known: " + String.join(", ", NAMES));
      }
      if (!TYPES[i].equals(f.dataType())) {
        throw new IllegalArgumentException("kraft: column " + f.name() + " is " + TYPES[i].simpleString() + ", not " + f.dataType().simpleString());
      }
    }
  }
}
