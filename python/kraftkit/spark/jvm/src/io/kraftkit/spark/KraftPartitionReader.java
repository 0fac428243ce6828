package io.kraftkit.spark;

import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BaseVariableWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.VarBinaryVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads a partition's byte ranges with the Rust core (JNI): each chunk of rows comes as Arrow
 * buffers copied into this reader's vectors (reused from chunk to chunk), the location columns
 * as constants. A batch is valid until the next call of {@link #next}.
 */
final class KraftPartitionReader implements PartitionReader<ColumnarBatch> {
  private final KraftPartition partition;
  private final String[] columns;
  private final int chunkRows;
  private final int mask;
  /** Offsets pushed by filters (every range's own bounds narrowed to them). */
  private final long lo;
  private final long hi;
  private final BufferAllocator allocator;
  /** Per output column: its Arrow vector (core columns) or null (location columns). */
  private final FieldVector[] vectors;
  private final ColumnVector[] arrowColumns;
  private final int[] core;
  private final int[] sizes = new int[KraftNative.CORE_COLUMNS.length];
  private int range = -1;
  private long handle;
  private ColumnarBatch batch;

  KraftPartitionReader(KraftPartition partition, String[] columns, int chunkRows, long lo, long hi) {
    KraftNative.load();
    this.lo = lo;
    this.hi = hi;
    this.partition = partition;
    this.columns = columns;
    this.chunkRows = chunkRows;
    this.allocator = ArrowUtils.rootAllocator().newChildAllocator("kraft", 0, Long.MAX_VALUE);
    this.vectors = new FieldVector[columns.length];
    this.arrowColumns = new ColumnVector[columns.length];
    this.core = new int[columns.length];
    int m = 0;
    for (int i = 0; i < columns.length; i++) {
      int c = Columns.coreIndex(columns[i]);
      core[i] = c;
      if (c < 0) {
        continue;
      }
      m |= 1 << c;
      vectors[i] = vector(columns[i]);
      arrowColumns[i] = new ArrowColumnVector(vectors[i]);
    }
    this.mask = m;
  }

  private FieldVector vector(String name) {
    switch (Columns.TYPES[Columns.index(name)].typeName()) {
      case "long":
        return new BigIntVector(name, allocator);
      case "integer":
        return new IntVector(name, allocator);
      case "boolean":
        return new BitVector(name, allocator);
      case "binary":
        return new VarBinaryVector(name, allocator);
      default:
        return new VarCharVector(name, allocator);
    }
  }

  private boolean openNext() throws IOException {
    closeScan();
    range++;
    if (range >= partition.ranges.size()) {
      return false;
    }
    KraftPartition.Range r = partition.ranges.get(range);
    long min = Math.max(r.minOffset, lo);
    long max = Math.min(r.maxOffset, hi);
    if (r.local != null) {
      handle = KraftNative.open(r.local, r.start, r.end, mask, min, max, chunkRows);
    } else {
      handle = KraftNative.openBytes(readAll(r.path), r.start, r.end, mask, min, max, chunkRows);
    }
    return true;
  }

  private static byte[] readAll(String uri) throws IOException {
    Path p = new Path(URI.create(uri));
    FileSystem fs = p.getFileSystem(new Configuration());
    long len = fs.getFileStatus(p).getLen();
    if (len > Integer.MAX_VALUE - 8) {
      throw new IOException(uri + ": " + len + " bytes: too large to read into memory");
    }
    byte[] out = new byte[(int) len];
    try (FSDataInputStream in = fs.open(p)) {
      in.readFully(0, out);
    }
    return out;
  }

  @Override
  public boolean next() throws IOException {
    if (handle == 0 && !openNext()) {
      return false;
    }
    while (true) {
      int rows = KraftNative.next(handle, sizes);
      if (rows > 0) {
        fill(rows);
        return true;
      }
      if (!openNext()) {
        return false;
      }
    }
  }

  private void fill(int rows) {
    KraftPartition.Range r = partition.ranges.get(range);
    ColumnVector[] out = new ColumnVector[columns.length];
    for (int i = 0; i < columns.length; i++) {
      FieldVector v = vectors[i];
      if (v == null) {
        out[i] = constant(rows, columns[i], r);
        continue;
      }
      v.clear();
      if (v instanceof BaseVariableWidthVector) {
        BaseVariableWidthVector w = (BaseVariableWidthVector) v;
        w.allocateNew(Math.max(1, sizes[core[i]]), rows);
        KraftNative.fill(handle, core[i], w.getValidityBufferAddress(), w.getOffsetBufferAddress(), w.getDataBufferAddress());
        w.setLastSet(rows - 1);
      } else {
        BaseFixedWidthVector f = (BaseFixedWidthVector) v;
        f.allocateNew(rows);
        KraftNative.fill(handle, core[i], f.getValidityBufferAddress(), 0, f.getDataBufferAddress());
      }
      v.setValueCount(rows);
      out[i] = arrowColumns[i];
    }
    batch = new ColumnarBatch(out, rows);
  }

  private static ColumnVector constant(int rows, String name, KraftPartition.Range r) {
    String value;
    switch (name) {
      case "cluster":
        value = r.cluster;
        break;
      case "node":
        value = r.node;
        break;
      case "file":
        value = r.path;
        break;
      default:
        value = r.kind;
    }
    ConstantColumnVector c = new ConstantColumnVector(rows, DataTypes.StringType);
    c.setUtf8String(UTF8String.fromString(value));
    return c;
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  private void closeScan() {
    if (handle != 0) {
      KraftNative.close(handle);
      handle = 0;
    }
  }

  @Override
  public void close() {
    closeScan();
    for (FieldVector v : vectors) {
      if (v != null) {
        v.close();
      }
    }
    allocator.close();
  }
}
