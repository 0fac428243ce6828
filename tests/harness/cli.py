"""``python -m tests.harness fetch [--version V]`` / ``versions`` / ``oracle``."""

from __future__ import annotations

import argparse
import time

from . import jars


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.harness")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download Kafka jars into .cache/kafka/<version>/libs")
    f.add_argument("--version", action="append",
                   help=f"Kafka version (repeatable; default {jars.KAFKA_NEWEST}, {jars.KAFKA_4}, {jars.KAFKA_3} "
                        f"and {jars.KAFKA_OLD})")
    sub.add_parser("versions", help="show newest complete 4.x / 3.9.x releases on Maven Central")
    o = sub.add_parser("oracle", help="build (or reuse) the cached oracle data set")
    o.add_argument("--version", default=jars.KAFKA_4)
    args = ap.parse_args(argv)

    if args.cmd == "fetch":
        for v in args.version or [jars.KAFKA_NEWEST, jars.KAFKA_4, jars.KAFKA_3, jars.KAFKA_OLD]:
            t0 = time.monotonic()
            libs = jars.ensure_kafka(v)
            n = len(list(libs.glob("*.jar")))
            print(f"kafka {v}: {n} jars in {libs} ({time.monotonic() - t0:.1f}s)")
    elif args.cmd == "versions":
        found = jars.discover_versions()
        for k in ("KAFKA_4", "KAFKA_3"):
            pinned = getattr(jars, k)
            print(f"{k}: newest={found.get(k)} pinned={pinned}")
    elif args.cmd == "oracle":
        from . import scenario
        t0 = time.monotonic()
        data = scenario.build_oracle_data(version=args.version)
        print(f"oracle data in {data.root} ({time.monotonic() - t0:.1f}s)")
    return 0
