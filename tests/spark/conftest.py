"""One local[2] SparkSession (127.0.0.1, no UI) for the whole session, and one synthetic fleet
with damage on three clusters. Missing Java or pyspark is a test error, never a skip."""

from __future__ import annotations

from pathlib import Path

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


def kafka_uuid() -> str:
    """A cluster id as Kafka prints one (Uuid.toString: URL-safe base64 of 16 bytes, no padding)."""
    import base64
    import uuid

    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@pytest.fixture
def formatted_fleet(fleet, tmp_path):
    """``<tmp>/data/ux/demo`` and ``<tmp>/data/ux/other``: two nodes (1 and 2) of one cluster,
    each formatted by ``kraftkit storage format`` (meta.properties with cluster.id and node.id, as
    kafka-storage writes it), holding a copy of one generated node's metadata log. Returns
    (root, cluster id, {node directory: node id})."""
    import shutil

    from kraftkit.cli.main import main

    cid = kafka_uuid()
    root = tmp_path / "data"
    src = sorted((Path(fleet.root) / fleet.clusters[2].name).glob("node-*/__cluster_metadata-0"))[0]
    nodes = {root / "ux" / "demo": 1, root / "ux" / "other": 2}
    for d, node_id in nodes.items():
        assert main(["storage", "format", "--cluster-id", cid, "--node-id", str(node_id), "--directories", str(d),
                     "--release-version", "3.9"]) == 0
        shutil.copytree(src, d / "__cluster_metadata-0")
    return root, cid, nodes
