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


def local_session(
    master: str = "local[2]", app: str = "kraftkit", conf: dict[str, str] | None = None, quiet: bool = False
) -> Any:
    """A SparkSession on this machine (``master`` like ``local[2]``) with ``kraft`` registered.
    ``quiet``: the driver's JVM logs errors only (:data:`QUIET_LOG4J2`) from its start, so none
    of Spark's WARN and INFO lines reach the output (a new JVM only: an existing session keeps
    its logging)."""
    conf = dict(conf or {})
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

    b = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config(
            "spark.default.parallelism", master[6:-1] if master.startswith("local[") and master[6:-1].isdigit() else "2"
        )
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.driver.memory", "2g")
    )
    for k, v in conf.items():
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
