"""The JVM reader of ``spark.read.format("kraft")``: a DataSource V2 (``src/io/kraftkit/spark``)
whose tasks read with the Rust core through JNI into Arrow vectors, as columnar batches, without
a Python worker per task (the Python data source's cost: see docs/spark.md). Same options, columns
and rows as :mod:`kraftkit.spark.datasource`; the files and byte ranges are planned by the same
Python code (:mod:`kraftkit.spark.plan`), the bytes parsed by the same core.

``scripts/build_spark_jvm.sh`` (run by ``./dev``) builds :data:`JAR`, the classes and the JNI
library for this platform in one jar. A session with the jar on its classpath
(``spark.jars``: :func:`kraftkit.spark.session.local_session` adds it) reads ``format("kraft")``
with it (Spark picks a JVM source registered under a name before a Python one); without it, the
Python data source reads, as before. For a session made elsewhere::

    spark-submit --jars "$(python -m kraftkit.spark.jvm)" job.py
"""

from __future__ import annotations

import ctypes
import functools
import platform
import tempfile
import zipfile
from pathlib import Path
from typing import Any

#: where ``scripts/build_spark_jvm.sh`` puts the jar (inside the package, so wheels ship it)
JAR = Path(__file__).resolve().with_name("kraftkit-spark.jar")
#: the JVM source's class (registered as ``kraft`` in the jar's ``META-INF/services``)
SOURCE_CLASS = "io.kraftkit.spark.KraftSource"


def native_entry() -> str:
    """Where the jar keeps the JNI library for this machine (as ``KraftNative.platform()`` names it)."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    system = platform.system().lower().replace(" ", "_")
    return f"io/kraftkit/spark/native/{system}-{arch}/libkraftkit_jni.so"


def jar() -> str | None:
    """The jar's path, or None when it was not built (no javac where the package was built) or
    its JNI library cannot be loaded here: none for this platform (a wheel built on another), or
    one this machine's C library is too old for (:func:`loads`)."""
    if not JAR.is_file():
        return None
    st = JAR.stat()
    return str(JAR) if loads(str(JAR), st.st_mtime_ns, st.st_size) else None


@functools.cache
def loads(path: str, _mtime_ns: int = 0, _size: int = 0) -> bool:
    """Whether the jar at ``path`` holds a JNI library for this machine that the dynamic loader
    accepts (tried in this process with ``ctypes``: the library needs no JVM to load). Cached per
    jar file version."""
    try:
        with zipfile.ZipFile(path) as z, tempfile.TemporaryDirectory(prefix="kraftkit-jni-") as d:
            lib = Path(d) / "libkraftkit_jni.so"
            lib.write_bytes(z.read(native_entry()))
            ctypes.CDLL(str(lib))
    except (KeyError, OSError, zipfile.BadZipFile):
        return False
    return True


def with_jar(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the jar added to ``spark.jars`` (unchanged without a jar)."""
    j = jar()
    if j is None:
        return conf
    jars = [x for x in conf.get("spark.jars", "").split(",") if x]
    if j not in jars:
        jars.append(j)
    return {**conf, "spark.jars": ",".join(jars)}


def active(spark: Any) -> bool:
    """Whether ``format("kraft")`` reads with the JVM source in this session (its class is on the
    driver's classpath); False on Spark Connect, whose client cannot tell."""
    try:
        jvm = spark.sparkContext._jvm
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(SOURCE_CLASS, False, loader)
        return True
    except Exception:
        return False
