"""kraftkit on Spark: a data source for fleets of KRaft metadata logs and snapshots, UDFs over
record values, and fleet jobs (audit, verify, rewrite), with the Rust core doing the bytes.

    >>> import kraftkit.spark
    >>> kraftkit.spark.register(spark)                                 # doctest: +SKIP
    >>> spark.read.format("kraft").load("/data/fleet").count()         # doctest: +SKIP

Modules: ``scan`` (Arrow record batches from the core, no Spark needed), ``layout`` (where a
fleet's files are), ``planning`` (which byte ranges a read takes, for both readers),
``datasource`` (``format("kraft")`` as a Python data source, also ``format("kraft_python")``),
``jvm`` (the JVM reader of ``format("kraft")``, where its jar is on the classpath; ``plan`` is
its planner), ``udfs``, ``jobs``, ``fleet`` (a
generator of synthetic fleets), ``session`` (a local SparkSession for laptops and tests, or
spark-submit's). The spark-submit entry point is ``kraftkit/cli/spark_submit.py``.
Needs ``pyspark>=4.1`` and ``pyarrow`` (``pip install 'kraftkit[spark]'``).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)


def worker_python(spark: Any) -> str | None:
    """Makes the session's Python workers run an interpreter that has kraftkit, and returns it
    (None when the session has no SparkContext, as under Spark Connect).

    PySpark starts its workers with ``PYSPARK_PYTHON`` as the driver process saw it when the
    session started, else ``python3`` from PATH, which in a virtualenv run as
    ``venv/bin/python script.py`` is another interpreter without kraftkit (or pyspark): reading
    ``format("kraft")`` then fails in the workers. Kept as it is when ``PYSPARK_PYTHON`` is set;
    else ``spark.pyspark.python`` when the session's conf has it; else, on a ``local`` master
    (the workers run on this machine), this interpreter (``sys.executable``), said in an INFO
    line of the ``kraftkit.spark`` logger. On other masters without either setting, the
    executors' ``python3`` is left (set ``spark.pyspark.python`` as the README's spark-submit
    example does)."""
    try:
        sc = spark.sparkContext
    except Exception:  # Spark Connect has no SparkContext
        return None
    if os.environ.get("PYSPARK_PYTHON"):
        return str(sc.pythonExec)
    conf = sc.getConf().get("spark.pyspark.python")
    if conf:
        sc.pythonExec = conf
    elif str(sc.master).startswith("local") and sc.pythonExec != sys.executable:
        log.info(
            "Spark's Python workers run %s (this interpreter): PYSPARK_PYTHON and spark.pyspark.python "
            "are unset, and %s from PATH may lack kraftkit",
            sys.executable,
            sc.pythonExec,
        )
        sc.pythonExec = sys.executable
    return str(sc.pythonExec)


#: the name of the Python data source alone (``kraft`` is the JVM reader where its jar is loaded)
PYTHON_NAME = "kraft_python"


def register(spark: Any) -> None:
    """Registers the ``kraft`` data source with a SparkSession (idempotent), its Python
    workers running an interpreter that has kraftkit (:func:`worker_python`). With the wheel
    installed on the executors, ``spark.read.format("kraft")`` then works everywhere."""
    from kraftkit.spark.datasource import KraftDataSource

    worker_python(spark)
    try:
        n = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect has no SparkContext
        n = KraftDataSource.default_min_partitions
    # a subclass that carries the session's parallelism (pickled by value to the workers that
    # plan reads): minPartitions defaults to the cores there are
    cls = type(
        f"KraftDataSource_{n}",
        (KraftDataSource,),
        {"default_min_partitions": max(1, n), "__module__": "kraftkit.spark._registered"},
    )
    spark.dataSource.register(cls)
    # the Python source under a second name, whatever reads ``kraft`` (the JVM reader when its
    # jar is on the classpath, see kraftkit.spark.jvm)
    named = type(
        f"KraftPythonDataSource_{n}",
        (cls,),
        {"name": classmethod(lambda _cls: PYTHON_NAME), "__module__": "kraftkit.spark._registered"},
    )
    spark.dataSource.register(named)


__all__ = ["PYTHON_NAME", "register", "worker_python"]
