package io.kraftkit.spark;

import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads a partition's byte ranges with the Rust core (JNI): each chunk of rows is read where the
 * core wrote it ({@link NativeColumn}), the location columns are constants. A batch is valid
 * until the next call of {@link #next}.
 */
final class KraftPartitionReader implements PartitionReader<ColumnarBatch> {
  private final KraftPartition partition;
  private final String[] columns;
  private final int chunkRows;
  private final int mask;
  /** Offsets pushed by filters (every range's own bounds narrowed to them). */
  private final long lo;
  private final long hi;
  /** Per output column: its native column (core columns) or null (location columns). */
  private final NativeColumn[] natives;
  private final int[] core;
  private final long[] addrs = new long[4 * KraftNative.CORE_COLUMNS.length];
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
    this.natives = new NativeColumn[columns.length];
    this.core = new int[columns.length];
    int m = 0;
    for (int i = 0; i < columns.length; i++) {
      int c = Columns.coreIndex(columns[i]);
      core[i] = c;
      if (c < 0) {
        continue;
      }
      m |= 1 << c;
      natives[i] = NativeColumn.of(Columns.TYPES[Columns.index(columns[i])]);
    }
    this.mask = m;
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
      int rows = KraftNative.next(handle);
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
    KraftNative.columns(handle, addrs);
    ColumnVector[] out = new ColumnVector[columns.length];
    for (int i = 0; i < columns.length; i++) {
      NativeColumn n = natives[i];
      if (n == null) {
        out[i] = constant(rows, columns[i], r);
        continue;
      }
      int at = 4 * core[i];
      n.reset(addrs[at], addrs[at + 1], addrs[at + 2], (int) addrs[at + 3], rows);
      out[i] = n;
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
  }
}
