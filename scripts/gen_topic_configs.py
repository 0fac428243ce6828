#!/usr/bin/env python3
"""Generate ``python/kraftkit/controller/topic_configs.json``, Kafka's topic configuration
definitions, from the real Apache Kafka jars (``KAFKA_NEWEST``, 4.4.0).

``scripts/java/TopicConfigTable.java`` runs against the jars and reads ``LogConfig``'s ``ConfigDef``
(every key in definition order: its type, its default rendered as Kafka renders it, its validator, whether
it is internal) and the broker synonyms of each key (``ServerTopicConfigSynonyms``, e.g. ``retention.ms``
from ``log.retention.ms``, ``log.retention.minutes`` or ``log.retention.hours``, with the factor the
synonym's value is multiplied by). kraftkit's controller (:mod:`kraftkit.controller.topic_configs`)
validates topic configs and resolves a topic's effective configs from it, so that no topic config
name, type, default or synonym is typed by hand.

Usage::

    python scripts/gen_topic_configs.py            # (re)write the JSON
    python scripts/gen_topic_configs.py --check    # exit 1 with a diff if the committed file differs (CI)

The jars come from ``python -m tests.harness fetch`` (Maven Central, cached in ``.cache/``).
Output is deterministic (one config per line, in the ConfigDef's order).
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.harness import jars  # noqa: E402

OUT = REPO / "python" / "kraftkit" / "controller" / "topic_configs.json"
DUMPER = REPO / "scripts" / "java" / "TopicConfigTable.java"


def dump(release: str) -> list[dict]:
    libs = jars.ensure_kafka(release)
    java = jars.require_java()
    proc = subprocess.run([java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{libs}/*", str(DUMPER)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"gen_topic_configs: TopicConfigTable failed on Kafka {release}:\n{proc.stderr[-3000:]}")
    configs = json.loads(proc.stdout)["configs"]
    for c in configs:
        c["order"] = int(c["order"])
        if c.get("validator") is None:
            c.pop("validator", None)
        for s in c["synonyms"]:
            s["factor"] = int(s["factor"])
    return sorted(configs, key=lambda c: c["order"])


def render() -> str:
    release = jars.KAFKA_NEWEST
    configs = dump(release)
    lines = ["{", f' "release": {json.dumps(release)},',
             ' "generatedBy": "scripts/gen_topic_configs.py (scripts/java/TopicConfigTable.java on the release\'s jars)",',
             ' "configs": [']
    lines.append(",\n".join(f"  {json.dumps(c, sort_keys=True)}" for c in configs))
    lines += [" ]", "}"]
    text = "\n".join(lines) + "\n"
    json.loads(text)  # well-formed
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed output is out of date")
    args = ap.parse_args(argv)
    new = render()
    rel = OUT.relative_to(REPO)
    if args.check:
        old = OUT.read_text() if OUT.exists() else ""
        if old != new:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(rel),
                                                       "regenerated"))
            print(f"gen_topic_configs: {rel} is out of date; run python scripts/gen_topic_configs.py",
                  file=sys.stderr)
            return 1
        print(f"gen_topic_configs: {rel} is up to date")
        return 0
    OUT.write_text(new)
    print(f"gen_topic_configs: wrote {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
