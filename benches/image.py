"""The metadata image engine against the pure-Python image it replaced, in one run:

    .venv/bin/python benches/image.py [--records N] [--snapshot-topics N] [--json out.json]

* replay: ``load_image(dir)`` of the metadata suite's log (5 M records shaped like a busy
  controller's, 98% PartitionChangeRecords; generated once into ``.cache/bench/``), by the Rust
  engine (``kraftkit.metadata.image``) and by the pure-Python image
  (``tests/image/reference_image.py``, the test oracle); target >= 2 M records/s;
* snapshot: ``write_snapshot(dir)`` of an image with 1 M partitions (20k topics x 50) by both
  (the files must be byte for byte equal); target < 2 s on one core.

The rows are the metadata suite's (``benches/metadata.py``, ``run.py --suites metadata``) without
the decode and dump rows. Pinned to one core; ratios are the engine's rate over the oracle's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
import metadata  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=5_000_000, help="records in the metadata log (default 5 M)")
    p.add_argument("--snapshot-topics", type=int, default=20_000, help="topics x 50 partitions of the snapshot image")
    p.add_argument("--snapshot-partitions", type=int, default=50)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=15.0)
    p.add_argument("--data-dir", default=str(metadata.REPO / ".cache" / "bench"))
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    pinned = None if a.no_pin else benchlib.pin_to_one_core()
    say = lambda m="": print(m, file=sys.stderr, flush=True)  # noqa: E731
    say(f"image benchmarks, pinned to CPU {pinned}")
    load0 = os.getloadavg()
    root = Path(a.data_dir)
    ml = metadata.ensure_metadata_log(root, records=a.records, log=say)
    extra: dict = {"metadata_log": {**ml.dataset.to_json(), "mix": ml.mix}}
    say("  replay")
    rows, extra["replay_image"] = metadata.run_replay(ml, warmup=a.warmup, repeat=a.repeat, max_seconds=a.max_seconds, log=say)
    say("  snapshot")
    r, extra["snapshot_image"] = metadata.run_snapshot(topics=a.snapshot_topics, partitions=a.snapshot_partitions,
                                                       warmup=a.warmup, repeat=a.repeat, max_seconds=a.max_seconds,
                                                       tmp_root=root / "tmp", log=say)
    rows += r
    benchlib.finalize(rows)
    print(f"best of {a.repeat} after {a.warmup} warm-up (the pure-Python rows: one run); load average "
          f"{load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(metadata.describe(extra))
    print()
    print(metadata.print_table(rows))
    tg = metadata.targets(rows)
    for t in tg:
        print(f"  [{'MET ' if t['met'] else 'MISS'}] {t['target']:<58} {t['dataset']:<11} {t['value']}")
    print(f"total time {time.perf_counter() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps({"results": [r.to_json() for r in rows], "targets": tg, **extra}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
