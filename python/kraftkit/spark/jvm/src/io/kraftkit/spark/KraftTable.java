package io.kraftkit.spark;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
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

  /**
   * Column pruning (only the columns Spark needs are built by the core) and filters: bounds and
   * equality on {@code offset} narrow the offsets the core reads (records outside are not built),
   * equality and IN on {@code cluster}, {@code node}, {@code kind} drop the ranges of other files.
   * Every filter is handed back to Spark, which still applies them all: pushing never changes a
   * result (as the Python source's {@code pushFilters}).
   */
  private final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
    private StructType required = schema;
    private Filter[] pushed = new Filter[0];
    private long lo = Long.MIN_VALUE;
    private long hi = Long.MAX_VALUE;
    private final Map<String, Set<String>> in = new HashMap<>();

    @Override
    public void pruneColumns(StructType requiredSchema) {
      required = requiredSchema;
    }

    private Long integral(Object v) {
      if (v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte) {
        return ((Number) v).longValue();
      }
      return null;
    }

    private void restrict(String column, Set<String> values) {
      Set<String> cur = in.get(column);
      if (cur == null) {
        in.put(column, new HashSet<>(values));
      } else {
        cur.retainAll(values);
      }
    }

    private boolean use(Filter f) {
      if (f instanceof GreaterThan && ((GreaterThan) f).attribute().equals("offset")) {
        Long v = integral(((GreaterThan) f).value());
        if (v != null) {
          lo = Math.max(lo, v == Long.MAX_VALUE ? v : v + 1);
          hi = v == Long.MAX_VALUE ? Long.MIN_VALUE : hi;
          return true;
        }
      } else if (f instanceof GreaterThanOrEqual && ((GreaterThanOrEqual) f).attribute().equals("offset")) {
        Long v = integral(((GreaterThanOrEqual) f).value());
        if (v != null) {
          lo = Math.max(lo, v);
          return true;
        }
      } else if (f instanceof LessThan && ((LessThan) f).attribute().equals("offset")) {
        Long v = integral(((LessThan) f).value());
        if (v != null) {
          hi = Math.min(hi, v);
          return true;
        }
      } else if (f instanceof LessThanOrEqual && ((LessThanOrEqual) f).attribute().equals("offset")) {
        Long v = integral(((LessThanOrEqual) f).value());
        if (v != null && v != Long.MAX_VALUE) {
          hi = Math.min(hi, v + 1);
          return true;
        }
      } else if (f instanceof EqualTo) {
        EqualTo e = (EqualTo) f;
        if (e.attribute().equals("offset") && integral(e.value()) != null && integral(e.value()) != Long.MAX_VALUE) {
          long v = integral(e.value());
          lo = Math.max(lo, v);
          hi = Math.min(hi, v + 1);
          return true;
        }
        if (Columns.LOCATION.contains(e.attribute()) && !e.attribute().equals("file") && e.value() instanceof String) {
          restrict(e.attribute(), new HashSet<>(Arrays.asList((String) e.value())));
          return true;
        }
      } else if (f instanceof In) {
        In i = (In) f;
        if (Columns.LOCATION.contains(i.attribute()) && !i.attribute().equals("file")) {
          Set<String> vals = new HashSet<>();
          for (Object v : i.values()) {
            if (!(v instanceof String)) {
              return false;
            }
            vals.add((String) v);
          }
          restrict(i.attribute(), vals);
          return true;
        }
      }
      return false;
    }

    @Override
    public Filter[] pushFilters(Filter[] filters) {
      List<Filter> used = new ArrayList<>();
      for (Filter f : filters) {
        if (use(f)) {
          used.add(f);
        }
      }
      pushed = used.toArray(new Filter[0]);
      return filters;
    }

    @Override
    public Filter[] pushedFilters() {
      return pushed;
    }

    @Override
    public Scan build() {
      if (pushed.length == 0) {
        return new KraftScan(required, plan, Long.MIN_VALUE, Long.MAX_VALUE);
      }
      List<KraftPartition> parts = new ArrayList<>();
      for (KraftPartition p : plan.partitions) {
        List<KraftPartition.Range> keep = new ArrayList<>();
        for (KraftPartition.Range r : p.ranges) {
          if (matches(in.get("cluster"), r.cluster) && matches(in.get("node"), r.node) && matches(in.get("kind"), r.kind)) {
            keep.add(r);
          }
        }
        if (!keep.isEmpty()) {
          parts.add(new KraftPartition(keep));
        }
      }
      if (parts.isEmpty()) {
        parts.add(new KraftPartition(new ArrayList<>()));
      }
      return new KraftScan(required, new Planner.Plan(parts, plan.chunkRows), lo, hi);
    }
  }

  private static boolean matches(Set<String> values, String v) {
    return values == null || values.contains(v);
  }

  static final class KraftScan implements Scan, Batch {
    private final StructType schema;
    private final Planner.Plan plan;
    /** Offsets pushed by filters: records in [lo, hi) only. */
    private final long lo;
    private final long hi;

    KraftScan(StructType schema, Planner.Plan plan, long lo, long hi) {
      this.schema = schema;
      this.plan = plan;
      this.lo = lo;
      this.hi = hi;
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      String offsets = lo == Long.MIN_VALUE && hi == Long.MAX_VALUE ? "" : ", offsets [" + lo + ", " + hi + ")";
      return "KraftScan(JVM, Rust core via JNI) " + plan.partitions.size() + " partitions" + offsets;
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
      return new KraftReaderFactory(schema.fieldNames(), plan.chunkRows, lo, hi);
    }
  }
}
