"""metadata.version levels and their names, as the Kafka releases describe them.

``kafka_features.json`` (next to this module) holds what ``scripts/gen_features.py`` read from
real Kafka releases: per release, its metadata.version levels and its features. This module
picks the row that describes each level (the rule below) and names levels; the feature
registry (``kraftkit.features.registry``) builds its model on the same rows.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from kraftkit.errors import UnsupportedFormatError
from kraftkit.metadata.mv_levels import MV_3_0_IV1

MV_FEATURE = "metadata.version"

#: An image without a metadata.version record is at 3.0-IV1 (FeaturesImage.EMPTY).
MINIMUM_KRAFT_MV = MV_3_0_IV1


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
    record); a level the tables lack is shown as such, never given a name:
    ``33 (unknown: newer than kraftkit's newest, 4.4-IV0 = 31)``."""
    rows = metadata_version_rows()
    row = rows.get(MINIMUM_KRAFT_MV if level is None else level)
    if row is not None:
        return row["version"]
    return unknown_label(MV_FEATURE, level)


def unknown_label(feature: str, level: int | None) -> str:
    """A level the tables lack, shown as such: ``2 (unknown: newer than kraftkit's newest, 1)``."""
    return f"{level} (unknown: {_unknown_reason(feature, level)})"


class NewerThanKnownError(UnsupportedFormatError):
    """Input at a metadata.version or feature level (or a feature) kraftkit's tables do not
    describe: refused rather than guessed at. ``feature``, ``level`` and ``newest`` (the newest
    level known, None for a feature the tables lack) say which."""

    def __init__(
        self, message: str, feature: str | None = None, level: int | None = None, newest: int | None = None
    ) -> None:
        super().__init__(message)
        self.feature = feature
        self.level = level
        self.newest = newest


@functools.cache
def newest_known_levels() -> dict[str, int]:
    """Feature -> the highest level any release of the tables defines (metadata.version and
    kraft.version included)."""
    out: dict[str, int] = {MV_FEATURE: max(metadata_version_rows())}
    for r in kafka_releases():
        for f in r["features"]:
            top = max((lv["level"] for lv in f["levels"]), default=0)
            out[f["name"]] = max(out.get(f["name"], 0), top)
    return out


def newest_text(feature: str) -> str:
    """How the newest level known of a feature is named: ``4.4-IV0 = 31``, ``1``."""
    top = newest_known_levels().get(feature)
    if top is None:
        return "none: kraftkit does not know the feature"
    return f"{mv_name(top)} = {top}" if feature == MV_FEATURE else str(top)


def _unknown_reason(feature: str, level: int | None) -> str:
    top = newest_known_levels().get(feature)
    if top is None:
        return "a feature kraftkit does not know"
    if level is not None and level > top:
        return f"newer than kraftkit's newest, {newest_text(feature)}"
    return f"not a level kraftkit knows (newest: {newest_text(feature)})"


def level_known(feature: str, level: int) -> bool:
    """Whether the tables describe ``level`` of ``feature`` (0, not finalized, always is)."""
    if level == 0:
        return True
    if feature == MV_FEATURE:
        return level in metadata_version_rows()
    top = newest_known_levels().get(feature)
    return top is not None and 0 <= level <= top


def unknown_levels(finalized: Mapping[str, int]) -> list[dict[str, Any]]:
    """The finalized levels the tables do not describe, one entry each: ``feature``, ``level``,
    ``newestKnown`` (None: the feature is unknown) and ``reason``."""
    return [
        {
            "feature": name,
            "level": level,
            "newestKnown": newest_known_levels().get(name),
            "reason": f"{name} level {level} is " + _level_problem(name, level),
        }
        for name, level in sorted(finalized.items())
        if not level_known(name, level)
    ]


def _level_problem(feature: str, level: int) -> str:
    top = newest_known_levels().get(feature)
    if top is None:
        return "of a feature kraftkit does not know (newer than its tables)"
    if level > top:
        return f"newer than kraftkit knows (newest: {newest_text(feature)})"
    return f"not a level kraftkit knows (newest: {newest_text(feature)})"


def check_known(finalized: Mapping[str, int], action: str) -> None:
    """Raises :class:`NewerThanKnownError` naming the first finalized level the tables do not
    describe (``metadata.version level 33 is newer than kraftkit knows (newest: 4.4-IV0 =
    31); refusing to <action>``)."""
    bad = unknown_levels(finalized)
    if bad:
        b = bad[0]
        rest = ", ".join(f"{x['feature']}={x['level']}" for x in bad[1:])
        more = f" (and {rest})" if rest else ""
        raise NewerThanKnownError(
            f"{b['reason']}{more}; refusing to {action}", b["feature"], b["level"], b["newestKnown"]
        )
