package io.kraftkit.spark;

import java.io.Serializable;
import java.util.List;
import org.apache.spark.sql.connector.read.InputPartition;

/** The byte ranges one task reads (as {@code kraftkit.spark.datasource.KraftPartition}). */
final class KraftPartition implements InputPartition {
  private static final long serialVersionUID = 1L;

  /** A byte range of one file, where the file sits in the fleet, and the offsets to read. */
  static final class Range implements Serializable {
    private static final long serialVersionUID = 1L;
    final String path;
    /** The local path, or null for a file the core cannot map (read through Hadoop's file systems). */
    final String local;
    final String cluster;
    final String node;
    final String kind;
    final long start;
    /** -1: to the end of the file. */
    final long end;
    final long minOffset;
    final long maxOffset;

    Range(String path, String local, String cluster, String node, String kind, long start, long end, long minOffset, long maxOffset) {
      this.path = path;
      this.local = local;
      this.cluster = cluster;
      this.node = node;
      this.kind = kind;
      this.start = start;
      this.end = end;
      this.minOffset = minOffset;
      this.maxOffset = maxOffset;
    }
  }

  final List<Range> ranges;

  KraftPartition(List<Range> ranges) {
    this.ranges = ranges;
  }
}
