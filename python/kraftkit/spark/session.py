"""SparkSessions with the ``kraft`` source registered: a local one for laptops, tests and the
demo (bound to 127.0.0.1, no UI, small shuffles, Python workers running this interpreter), or
the one spark-submit configured."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any


def java_available() -> bool:
    """Whether a Java runtime is reachable (JAVA_HOME or ``java`` on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


#: a log4j2 configuration that lets only errors through (to stderr)
QUIET_LOG4J2 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2-quiet.properties")


#: what the JVM itself prints on stderr before any logging is set up, dropped by a quiet session: Spark's
#: launcher always adds ``--add-modules=jdk.incubator.vector``, and the JVM warns about it on every start
JVM_NOISE = (b"WARNING: Using incubator modules:",)


def _jvm_stderr() -> int:
    """The write end of a pipe whose lines go on to this process's stderr (file descriptor 2), but
    for :data:`JVM_NOISE`; read by a daemon thread, started before the JVM that writes into it."""
    import threading

    r, w = os.pipe()

    def pump() -> None:
        with os.fdopen(r, "rb") as src:
            for line in src:
                if not line.startswith(JVM_NOISE):
                    try:
                        os.write(2, line)
                    except OSError:
                        return

    threading.Thread(target=pump, name="kraftkit-jvm-stderr", daemon=True).start()
    return w


def _start_quiet_jvm(options: dict[str, str]) -> None:
    """Starts the driver's JVM (PySpark's gateway) as the session builder would with ``options``, but
    with its stderr through :func:`_jvm_stderr`; nothing when a JVM runs already."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        conf = SparkConf()
        for k, v in options.items():
            conf.set(k, v)
        w = _jvm_stderr()
        try:
            SparkContext._gateway = launch_gateway(conf, popen_kwargs={"stderr": w})
            SparkContext._jvm = SparkContext._gateway.jvm
        finally:
            os.close(w)  # (the JVM holds its own copy: the pump ends when the JVM does)


def local_session(
    master: str = "local[2]",
    app: str = "kraftkit",
    conf: dict[str, str] | None = None,
    quiet: bool = False,
    jvm: bool = True,
) -> Any:
    """A SparkSession on this machine (``master`` like ``local[2]``) with ``kraft`` registered.
    ``quiet``: the driver's JVM logs errors only (:data:`QUIET_LOG4J2`) from its start, so none
    of Spark's WARN and INFO lines reach the output, and the JVM's own start-up warning
    (:data:`JVM_NOISE`) is dropped from its stderr (a new JVM only: an existing session keeps
    its logging). ``jvm``: put the JVM reader's jar (:mod:`kraftkit.spark.jvm`, when it was built)
    on the classpath, so ``format("kraft")`` reads through it; False: the Python data source
    reads (a new JVM only: the classpath of a running one stays)."""
    conf = dict(conf or {})
    if jvm:
        from kraftkit.spark.jvm import with_jar

        conf = with_jar(conf)
    if quiet:
        opts = conf.get("spark.driver.extraJavaOptions", "")
        if "log4j2.configurationFile" not in opts:
            conf["spark.driver.extraJavaOptions"] = (
                f"-Dlog4j2.configurationFile={Path(QUIET_LOG4J2).as_uri()} {opts}".strip()
            )
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kraftkit.spark import register

    options = {
        "spark.master": master,
        "spark.app.name": app,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": (master[6:-1] if master.startswith("local[") and master[6:-1].isdigit() else "2"),
        "spark.python.worker.reuse": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.memory": "2g",
        **conf,
    }
    if quiet:
        _start_quiet_jvm(options)
    b = SparkSession.builder
    for k, v in options.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def ambient_session() -> Any:
    """The session spark-submit configured (master, resources, file systems) with ``kraft`` registered."""
    from pyspark.sql import SparkSession

    from kraftkit.spark import register

    spark = SparkSession.builder.getOrCreate()
    register(spark)
    return spark
