package io.kraftkit.spark;

import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** A fleet's files as planned when the DataFrame was made; scans read the columns asked for. */
final class KraftTable implements SupportsRead {
  private final StructType schema;
  private final Planner.Plan plan;

  KraftTable(StructType schema, Planner.Plan plan) {
    this.schema = schema;
    this.plan = plan;
  }

  @Override
  public String name() {
    return "kraft";
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new Builder();
  }

  /** Column pruning: only the columns Spark needs are built by the core. */
  private final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
    private StructType required = schema;

    @Override
    public void pruneColumns(StructType requiredSchema) {
      required = requiredSchema;
    }

    @Override
    public Scan build() {
      return new KraftScan(required, plan);
    }
  }

  static final class KraftScan implements Scan, Batch {
    private final StructType schema;
    private final Planner.Plan plan;

    KraftScan(StructType schema, Planner.Plan plan) {
      this.schema = schema;
      this.plan = plan;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return "KraftScan(JVM, Rust core via JNI) " + plan.partitions.size() + " partitions";
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    @Override
    public InputPartition[] planInputPartitions() {
      List<KraftPartition> ps = plan.partitions;
      return ps.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new KraftReaderFactory(schema.fieldNames(), plan.chunkRows);
    }
  }
}
