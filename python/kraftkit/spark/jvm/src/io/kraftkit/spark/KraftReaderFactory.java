package io.kraftkit.spark;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Columnar readers only: each task's rows come as Arrow vectors filled by the Rust core. */
final class KraftReaderFactory implements PartitionReaderFactory {
  private static final long serialVersionUID = 1L;
  private final String[] columns;
  private final int chunkRows;
  private final long lo;
  private final long hi;

  KraftReaderFactory(String[] columns, int chunkRows, long lo, long hi) {
    this.columns = columns;
    this.chunkRows = chunkRows;
    this.lo = lo;
    this.hi = hi;
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("kraft: the JVM reader is columnar only");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new KraftPartitionReader((KraftPartition) partition, columns, chunkRows, lo, hi);
  }
}
