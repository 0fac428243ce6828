"""Control record types (Kafka's ``ControlRecordType``): the int16 type in a control record's key."""

from __future__ import annotations

import enum


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def control_type_name(control_type: int, unknown: str = "UNKNOWN") -> str:
    """Kafka's name for a control type, or ``unknown`` (Kafka prints ``UNKNOWN``)."""
    try:
        return ControlType(control_type).name
    except ValueError:
        return unknown
