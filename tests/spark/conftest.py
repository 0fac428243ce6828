"""One local[2] SparkSession (127.0.0.1, no UI) for the whole session, and one synthetic fleet
with damage on three clusters. Missing Java or pyspark is a test error, never a skip."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from kraftkit.spark.session import java_available, local_session

    if not java_available():
        pytest.fail("the Spark tests need Java 17+ (JAVA_HOME or java on PATH)", pytrace=False)
    s = local_session("local[2]", app="kraftkit-tests")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    """4 clusters x 3 nodes; one node of clusters 0, 1, 3 damaged (a flipped byte, a torn tail,
    a bad index entry: see ``fleet.json``)."""
    from kraftkit.spark.fleet import generate_fleet

    return generate_fleet(tmp_path_factory.mktemp("fleet") / "fleet", clusters=4, nodes=3, corrupt=3,
                          topics=(15, 40), partitions=8, segment_bytes=64 << 10, seed=7)
