package io.kraftkit.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;

/**
 * The files and byte ranges to read, planned in Python by {@code kraftkit.spark.datasource}
 * (the same code the Python data source plans with): {@code python -m kraftkit.spark.plan}
 * gets the options as JSON on its stdin and prints the partitions as JSON. The interpreter is
 * the session's {@code spark.kraftkit.python}, else {@code spark.pyspark.driver.python},
 * {@code spark.pyspark.python}, {@code PYSPARK_DRIVER_PYTHON}, {@code PYSPARK_PYTHON}, else
 * {@code python3}.
 */
final class Planner {
  private Planner() {}

  /** Longest a plan may take (a fleet of millions of files on a slow file system). */
  static final long TIMEOUT_SECONDS = 600;

  static final class Plan {
    final List<KraftPartition> partitions;
    final int chunkRows;

    Plan(List<KraftPartition> partitions, int chunkRows) {
      this.partitions = partitions;
      this.chunkRows = chunkRows;
    }
  }

  static String python(SparkConf conf) {
    for (String k : new String[] {"spark.kraftkit.python", "spark.pyspark.driver.python", "spark.pyspark.python"}) {
      if (conf != null && conf.contains(k) && !conf.get(k).isEmpty()) {
        return conf.get(k);
      }
    }
    for (String k : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
      String v = System.getenv(k);
      if (v != null && !v.isEmpty()) {
        return v;
      }
    }
    return "python3";
  }

  static Plan plan(Map<String, String> properties) {
    SparkSession spark = SparkSession.active();
    ObjectMapper json = new ObjectMapper();
    Map<String, Object> request = new TreeMap<>();
    request.put("options", properties);
    request.put("default_min_partitions", spark.sparkContext().defaultParallelism());
    String python = python(spark.sparkContext().getConf());
    byte[] out;
    byte[] err;
    int rc;
    try {
      Process p = new ProcessBuilder(python, "-m", "kraftkit.spark.plan").start();
      try (OutputStream in = p.getOutputStream()) {
        in.write(json.writeValueAsBytes(request));
      }
      ByteArrayOutputStream errBuf = new ByteArrayOutputStream();
      Thread pump = new Thread(() -> copy(p.getErrorStream(), errBuf), "kraftkit-plan-stderr");
      pump.setDaemon(true);
      pump.start();
      out = p.getInputStream().readAllBytes();
      if (!p.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        throw new IllegalStateException("kraft: planning (" + python + " -m kraftkit.spark.plan) took over " + TIMEOUT_SECONDS + " s");
      }
      pump.join(10_000);
      rc = p.exitValue();
      err = errBuf.toByteArray();
    } catch (IOException e) {
      throw new IllegalStateException("kraft: could not run the planner " + python + " -m kraftkit.spark.plan: " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("kraft: interrupted while planning", e);
    }
    if (rc != 0) {
      String msg = new String(err, StandardCharsets.UTF_8).trim();
      throw new IllegalArgumentException(msg.isEmpty() ? "kraft: the planner " + python + " exited with " + rc : msg);
    }
    try {
      JsonNode root = json.readTree(out);
      List<KraftPartition> parts = new ArrayList<>();
      for (JsonNode part : root.get("partitions")) {
        List<KraftPartition.Range> ranges = new ArrayList<>();
        for (JsonNode r : part) {
          ranges.add(new KraftPartition.Range(
              r.get("path").asText(),
              r.get("local").isNull() ? null : r.get("local").asText(),
              r.get("cluster").asText(),
              r.get("node").asText(),
              r.get("kind").asText(),
              r.get("start").asLong(),
              r.get("end").asLong(),
              r.get("min_offset").asLong(),
              r.get("max_offset").asLong()));
        }
        parts.add(new KraftPartition(ranges));
      }
      return new Plan(parts, root.get("chunk_rows").asInt());
    } catch (IOException | NullPointerException e) {
      throw new IllegalStateException("kraft: the planner's answer could not be read: " + e, e);
    }
  }

  private static void copy(InputStream in, ByteArrayOutputStream out) {
    try {
      in.transferTo(out);
    } catch (IOException e) {
      // the process is gone; what it wrote so far is the message
    }
  }
}
