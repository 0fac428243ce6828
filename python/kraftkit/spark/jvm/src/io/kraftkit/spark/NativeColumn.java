package io.kraftkit.spark;

import java.util.Objects;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column of the Rust core's last chunk, read where the core wrote it (no copy): an Arrow-layout
 * validity bitmap (LSB first, a set bit a value), the values (8- or 4-byte little-endian ints, a
 * bitmap for booleans) and, for strings and bytes, {@code rows + 1} int offsets into the data.
 * The addresses come from {@link KraftNative#columns} and stay valid until the scan's next {@code
 * next} or {@code close}: the reader's batch has the same lifetime ({@link
 * org.apache.spark.sql.connector.read.PartitionReader#get}). Every read checks its row against
 * the chunk's row count, so a bad index is an exception, not a read outside the buffers.
 */
abstract class NativeColumn extends ColumnVector {
  protected long validity;
  protected long offsets;
  protected long values;
  protected int nulls;
  protected int rows;

  NativeColumn(DataType type) {
    super(type);
  }

  /** The column's type and Java class: one final class per type keeps each read monomorphic. */
  static NativeColumn of(DataType type) {
    if (type.equals(DataTypes.LongType)) {
      return new Longs();
    } else if (type.equals(DataTypes.IntegerType)) {
      return new Ints();
    } else if (type.equals(DataTypes.BooleanType)) {
      return new Booleans();
    } else if (type.equals(DataTypes.StringType) || type.equals(DataTypes.BinaryType)) {
      return new Strings(type);
    }
    throw new IllegalArgumentException("kraft: no native column of type " + type.simpleString());
  }

  /** Points this column at the chunk's buffers ({@code rows} rows, {@code nulls} of them null). */
  final void reset(long validity, long offsets, long values, int nulls, int rows) {
    this.validity = validity;
    this.offsets = offsets;
    this.values = values;
    this.nulls = nulls;
    this.rows = rows;
  }

  @Override
  public void close() {
    // the buffers are the scan's (freed by KraftNative.close)
  }

  @Override
  public final boolean hasNull() {
    return nulls > 0;
  }

  @Override
  public final int numNulls() {
    return nulls;
  }

  @Override
  public final boolean isNullAt(int rowId) {
    Objects.checkIndex(rowId, rows);
    return nulls > 0 && (Platform.getByte(null, validity + (rowId >>> 3)) & (1 << (rowId & 7))) == 0;
  }

  private UnsupportedOperationException unsupported() {
    return new UnsupportedOperationException("kraft: a " + dataType().simpleString() + " column has no such value");
  }

  @Override
  public boolean getBoolean(int rowId) {
    throw unsupported();
  }

  @Override
  public byte getByte(int rowId) {
    throw unsupported();
  }

  @Override
  public short getShort(int rowId) {
    throw unsupported();
  }

  @Override
  public int getInt(int rowId) {
    throw unsupported();
  }

  @Override
  public long getLong(int rowId) {
    throw unsupported();
  }

  @Override
  public float getFloat(int rowId) {
    throw unsupported();
  }

  @Override
  public double getDouble(int rowId) {
    throw unsupported();
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    throw unsupported();
  }

  @Override
  public ColumnarMap getMap(int rowId) {
    throw unsupported();
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    throw unsupported();
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    throw unsupported();
  }

  @Override
  public byte[] getBinary(int rowId) {
    throw unsupported();
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    throw unsupported();
  }

  static final class Longs extends NativeColumn {
    Longs() {
      super(DataTypes.LongType);
    }

    @Override
    public long getLong(int rowId) {
      Objects.checkIndex(rowId, rows);
      return Platform.getLong(null, values + 8L * rowId);
    }
  }

  static final class Ints extends NativeColumn {
    Ints() {
      super(DataTypes.IntegerType);
    }

    @Override
    public int getInt(int rowId) {
      Objects.checkIndex(rowId, rows);
      return Platform.getInt(null, values + 4L * rowId);
    }
  }

  static final class Booleans extends NativeColumn {
    Booleans() {
      super(DataTypes.BooleanType);
    }

    @Override
    public boolean getBoolean(int rowId) {
      Objects.checkIndex(rowId, rows);
      return (Platform.getByte(null, values + (rowId >>> 3)) & (1 << (rowId & 7))) != 0;
    }
  }

  /** Strings (UTF-8, read in place) and bytes (copied out, as Spark keeps them). */
  static final class Strings extends NativeColumn {
    Strings(DataType type) {
      super(type);
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
      Objects.checkIndex(rowId, rows);
      long at = offsets + 4L * rowId;
      int start = Platform.getInt(null, at);
      return UTF8String.fromAddress(null, values + start, Platform.getInt(null, at + 4) - start);
    }

    @Override
    public byte[] getBinary(int rowId) {
      Objects.checkIndex(rowId, rows);
      long at = offsets + 4L * rowId;
      int start = Platform.getInt(null, at);
      byte[] out = new byte[Platform.getInt(null, at + 4) - start];
      Platform.copyMemory(null, values + start, out, Platform.BYTE_ARRAY_OFFSET, out.length);
      return out;
    }
  }
}
