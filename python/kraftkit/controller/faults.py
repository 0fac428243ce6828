"""Crash points for the fault tests: a process started with ``KRAFTKIT_CRASH_AT=POINT[,POINT...]``
kills itself with SIGKILL (as ``kill -9`` would, nothing flushed or closed) when it reaches one of
the named points, so a test can stop a leader exactly between appending records and their commit.

The points: ``bootstrap-appended`` (the bootstrap batch is in the leader's log, not yet committed),
``feature-update-appended`` (an UpdateFeatures batch likewise) and ``metadata-rewrite-pending`` (a
replica, leader or not, applied a committed lossy metadata.version downgrade and has not written its
rewritten snapshot yet). Unset, this costs one dict lookup per point reached.
"""

from __future__ import annotations

import logging
import os
import signal

__all__ = ["CRASH_ENV", "crash_point"]

CRASH_ENV = "KRAFTKIT_CRASH_AT"

log = logging.getLogger(__name__)


def crash_point(name: str) -> None:
    """Kills this process with SIGKILL if ``name`` is among the points ``KRAFTKIT_CRASH_AT`` names."""
    points = os.environ.get(CRASH_ENV)
    if points and name in points.split(","):
        log.warning("crash point %s reached: killing this process (%s)", name, CRASH_ENV)
        logging.shutdown()
        os.kill(os.getpid(), signal.SIGKILL)
