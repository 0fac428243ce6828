"""``python -m kraftkit.spark.plan``: the JVM reader's planner (``KraftSource``, see
:mod:`kraftkit.spark.jvm`). Reads ``{"options": {...}, "default_min_partitions": N}`` (the
``format("kraft")`` options) as JSON on stdin and prints the partitions, each a list of byte
ranges with where the file sits and the offsets to read, planned by :mod:`kraftkit.spark.planning`
exactly as the Python data source plans them. Bad options or paths: the reason on stderr, exit
status 2."""

from __future__ import annotations

import json
import sys
from typing import Any

from kraftkit.errors import KraftkitError
from kraftkit.spark import layout
from kraftkit.spark.planning import ReadOptions, plan_partitions

#: the offsets of a range without bounds (Java's Long.MIN_VALUE and Long.MAX_VALUE)
NO_MIN = -(1 << 63)
NO_MAX = (1 << 63) - 1


def plan(request: dict[str, Any]) -> dict[str, Any]:
    """The JSON answer for a request (see the module docstring)."""
    options = {str(k): str(v) for k, v in dict(request.get("options") or {}).items()}
    opts = ReadOptions.parse(options, int(request.get("default_min_partitions") or 2))
    parts = []
    for group in plan_partitions(opts):
        ranges = []
        for r in group:
            seg = r.kind == "segment"
            lo = opts.start_offset if seg else None
            hi = opts.end_offset if seg else None
            ranges.append(
                {
                    "path": r.path,
                    "local": layout.local_path(r.path),
                    "cluster": r.cluster,
                    "node": r.node,
                    "kind": r.kind,
                    "start": r.start,
                    "end": -1 if r.end is None else r.end,
                    "min_offset": NO_MIN if lo is None else lo,
                    "max_offset": NO_MAX if hi is None else hi,
                }
            )
        parts.append(ranges)
    return {"partitions": parts, "chunk_rows": opts.chunk_rows}


def main() -> int:
    try:
        answer = plan(json.loads(sys.stdin.buffer.read()))
    except (ValueError, OSError, KraftkitError) as e:
        print(str(e) if str(e).startswith("kraft") else f"kraft: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
