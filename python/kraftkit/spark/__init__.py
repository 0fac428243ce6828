"""kraftkit on Spark: a data source for fleets of KRaft metadata logs and snapshots, UDFs over
record values, and fleet jobs (audit, verify, rewrite), with the Rust core doing the bytes.

    >>> import kraftkit.spark
    >>> kraftkit.spark.register(spark)                                 # doctest: +SKIP
    >>> spark.read.format("kraft").load("/data/fleet").count()         # doctest: +SKIP

Modules: ``scan`` (Arrow record batches from the core, no Spark needed), ``layout`` (where a
fleet's files are), ``datasource`` (``format("kraft")``), ``udfs``, ``jobs``, ``fleet`` (a
generator of synthetic fleets), ``session`` (a local SparkSession for laptops and tests, or
spark-submit's). The spark-submit entry point is ``kraftkit/cli/spark_submit.py``.
Needs ``pyspark>=4`` and ``pyarrow`` (``pip install kraftkit[spark]``).
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Registers the ``kraft`` data source with a SparkSession (idempotent). With the wheel
    installed on the executors, ``spark.read.format("kraft")`` then works everywhere."""
    from kraftkit.spark.datasource import KraftDataSource

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


__all__ = ["register"]
