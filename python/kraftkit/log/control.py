"""Control record types (Kafka's ``ControlRecordType``): the int16 type in a control record's key."""

from __future__ import annotations

from kraftkit._kafka import ControlType

__all__ = ["ControlType", "control_type_name"]


def control_type_name(control_type: int, unknown: str = "UNKNOWN") -> str:
    """Kafka's name for a control type, or ``unknown`` (Kafka prints ``UNKNOWN``)."""
    try:
        return ControlType(control_type).name
    except ValueError:
        return unknown
