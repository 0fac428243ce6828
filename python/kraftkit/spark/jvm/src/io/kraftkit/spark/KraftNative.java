package io.kraftkit.spark;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The JNI entry points of kraftkit's Rust core (the {@code kraftkit-jni} library, {@code
 * rust/jni}): a record scan of a byte range of one file into Arrow-layout column buffers. The library is
 * a resource of this jar ({@code /io/kraftkit/spark/native/<os>-<arch>/}), copied to a temporary
 * file and loaded once per JVM; the system property {@code kraftkit.jni.library} names another
 * copy instead.
 */
final class KraftNative {
  private KraftNative() {}

  /** Column numbers of the core's scan, the bits of a column mask ({@code arrow::COLUMNS}). */
  static final String[] CORE_COLUMNS = {
    "base_offset", "offset", "epoch", "timestamp", "crc_valid", "is_control", "control_type",
    "record_type", "record_version", "record", "value", "position", "error"
  };

  private static volatile Throwable loadError;
  private static volatile boolean loaded;

  static synchronized void load() {
    if (loaded) {
      return;
    }
    if (loadError != null) {
      throw new IllegalStateException("kraft: the kraftkit JNI library could not be loaded: " + loadError, loadError);
    }
    try {
      String given = System.getProperty("kraftkit.jni.library");
      if (given != null && !given.isEmpty()) {
        System.load(Path.of(given).toAbsolutePath().toString());
      } else {
        String res = "/io/kraftkit/spark/native/" + platform() + "/libkraftkit_jni.so";
        try (InputStream in = KraftNative.class.getResourceAsStream(res)) {
          if (in == null) {
            throw new IOException("this jar has no " + res + " (built for another platform?)");
          }
          Path tmp = Files.createTempFile("kraftkit_jni", ".so");
          tmp.toFile().deleteOnExit();
          Files.copy(in, tmp, StandardCopyOption.REPLACE_EXISTING);
          System.load(tmp.toAbsolutePath().toString());
        }
      }
      loaded = true;
    } catch (IOException | UnsatisfiedLinkError | SecurityException e) {
      loadError = e;
      throw new IllegalStateException("kraft: the kraftkit JNI library could not be loaded: " + e, e);
    }
  }

  static String platform() {
    String os = System.getProperty("os.name", "").toLowerCase().startsWith("linux") ? "linux" : System.getProperty("os.name", "").toLowerCase().replace(' ', '_');
    String arch = System.getProperty("os.arch", "");
    if (arch.equals("amd64")) {
      arch = "x86_64";
    }
    return os + "-" + arch;
  }

  /** A scan of the local file {@code path}, bytes [start, end) (end &lt; 0: to the end of the file). */
  static native long open(String path, long start, long end, int mask, long minOffset, long maxOffset, int chunkRows) throws IOException;

  /** As {@link #open}, over the bytes of a file read by Java. */
  static native long openBytes(byte[] bytes, long start, long end, int mask, long minOffset, long maxOffset, int chunkRows);

  /** The next chunk's rows (0: done). */
  static native int next(long handle);

  /**
   * Where the last chunk's columns are: for core column i, {@code out[4i..4i+4]} = the addresses
   * of its validity bitmap, offsets (strings and bytes; else 0) and values, and its null count
   * (see {@link NativeColumn}); valid until the next {@link #next} or {@link #close}.
   */
  static native void columns(long handle, long[] out);

  static native void close(long handle);
}
