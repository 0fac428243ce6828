"""Argparse types shared by the commands: a bad value is a usage error (exit 2) naming the
argument and what it takes, never an overflow or a traceback later."""

from __future__ import annotations

import argparse
from collections.abc import Callable

INT32_MAX = 2**31 - 1
#: the longest wait a command takes (a day)
MAX_SECONDS = 86400.0


def shown(text: str) -> str:
    """An argument as a message quotes it: in full unless it is long."""
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


def int_arg(lo: int, hi: int = INT32_MAX, unit: str = "") -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``[lo, hi]`` (ASCII digits only)."""

    def parse(text: str) -> int:
        t = text.strip()
        digits = t[1:] if t[:1] in "+-" else t
        if not digits.isascii() or not digits.isdigit():
            raise argparse.ArgumentTypeError(f"{shown(text)!r} is not a whole number")
        if len(digits) > 40 or not lo <= int(t) <= hi:
            raise argparse.ArgumentTypeError(f"must be from {lo} to {hi}{unit}, not {shown(t)}")
        return int(t)

    parse.__name__ = "int"
    return parse


def seconds(text: str) -> float:
    """An argparse ``type``: a number of seconds, above 0 and at most a day."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)!r} is not a number of seconds") from None
    if not 0 < v <= MAX_SECONDS:  # (NaN fails this too)
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most {MAX_SECONDS:.0f} seconds, not {shown(text)}"
        )
    return v
