"""metadata.version levels and their names, as the Kafka releases describe them.

``kafka_features.json`` (next to this module) holds what ``scripts/gen_features.py`` read from
real Kafka releases: per release, its metadata.version levels and its features. This module
picks the row that describes each level (the rule below) and names levels; the feature
registry (``kraftkit.features.registry``) builds its model on the same rows.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

#: An image without a metadata.version record is at 3.0-IV1 (FeaturesImage.EMPTY).
MINIMUM_KRAFT_MV = 1


@functools.cache
def kafka_releases() -> tuple[dict[str, Any], ...]:
    """The releases of ``kafka_features.json``, newest first."""
    doc = json.loads(resources.files("kraftkit.metadata").joinpath("kafka_features.json").read_text())
    return tuple(doc["releases"])


@functools.cache
def metadata_version_rows() -> dict[int, dict[str, Any]]:
    """Level -> the row that describes it. A level known to several releases is described by
    the newest of them; levels a newer release no longer lists (4.x dropped 3.0-IV1 .. 3.3-IV2)
    come from the older ones. Unstable levels of an older release, beyond its latest production
    level (3.9's 4.0-IV0/IV1 testing levels), were renumbered later and are ignored."""
    releases = kafka_releases()
    rows: dict[int, dict[str, Any]] = {}
    for r in releases:
        for row in r["metadataVersions"]:
            if row["level"] not in rows and (row["level"] <= r["latestProduction"] or r is releases[0]):
                rows[row["level"]] = row
    return dict(sorted(rows.items()))


def mv_name(level: int | None) -> str:
    """``3.7-IV4`` for level 19; no level means 3.0-IV1 (an image without a metadata.version
    record); an unknown level is ``level-N``."""
    rows = metadata_version_rows()
    row = rows.get(MINIMUM_KRAFT_MV if level is None else level)
    return row["version"] if row is not None else f"level-{level}"
