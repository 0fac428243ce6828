"""Spark's static registration of kraftkit's ``kraft`` data source.

Spark 4 looks up the top-level modules named ``pyspark_*`` on the Python path of its workers and
registers each one's ``DefaultSource``: with the kraftkit wheel installed,
``spark.read.format("kraft")`` works in any session, without ``kraftkit.spark.register(spark)``
(which remains useful: it sets ``minPartitions`` to the session's parallelism).
"""

from kraftkit.spark.datasource import KraftDataSource as DefaultSource

__all__ = ["DefaultSource"]
