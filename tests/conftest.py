"""Session fixtures for tests that use a real Apache Kafka as oracle (marker ``kafka``).

Missing Java/Maven or a failed download is a test *error* with a clear message, never a
skip: CI must run these tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import jars
from tests.harness.jars import HarnessError


@pytest.fixture(scope="session")
def kafka_jars() -> dict[str, Path]:
    """``{version: libs dir}`` for the pinned ``jars.KAFKA_4`` and ``jars.KAFKA_3``."""
    try:
        jars.require_java()
        return {v: jars.ensure_kafka(v) for v in (jars.KAFKA_4, jars.KAFKA_3)}
    except HarnessError as e:
        pytest.fail(f"kafka harness: {e}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_oracle(kafka_jars, tmp_path_factory):
    """``scenario.OracleData`` built by real Kafka ``jars.KAFKA_4`` (cached in .cache/),
    copied to a per-session tmp dir so tests may modify it."""
    from tests.harness import scenario

    try:
        return scenario.build_oracle_data(tmp_path_factory.mktemp("kafka-oracle") / "data")
    except HarnessError as e:
        pytest.fail(f"kafka harness: {e}", pytrace=False)


@pytest.fixture(scope="session")
def kafka_metadata_oracle(kafka_jars, tmp_path_factory):
    """``metadata_scenario.MetadataOracle``: varied metadata written by real Kafka
    ``jars.KAFKA_4`` and what its admin APIs reported (cached in .cache/), copied to a
    per-session tmp dir."""
    from tests.harness import metadata_scenario

    try:
        return metadata_scenario.build_metadata_oracle(tmp_path_factory.mktemp("kafka-metadata-oracle") / "data")
    except HarnessError as e:
        pytest.fail(f"kafka harness: {e}", pytrace=False)
