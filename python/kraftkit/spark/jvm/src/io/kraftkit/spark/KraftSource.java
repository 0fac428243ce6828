package io.kraftkit.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("kraft")} on the JVM: the same source as kraftkit's Python data source
 * ({@code kraftkit.spark.datasource}, same options, columns and rows), with columnar reads. The
 * files and byte ranges are planned by that module in Python ({@link Planner}), once, when the
 * DataFrame is made; each task reads its ranges with the Rust core through JNI into Arrow
 * vectors ({@link KraftPartitionReader}).
 */
public final class KraftSource implements TableProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "kraft";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return Columns.schema(Columns.fromOption(options.get("columns")));
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Columns.check(schema);
    return new KraftTable(schema, Planner.plan(properties));
  }
}
