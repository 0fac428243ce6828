#!/usr/bin/env python3
"""Generate ``python/kraftkit/controller/broker_configs.json``, Kafka's broker configuration
definitions, from the real Apache Kafka jars (``KAFKA_NEWEST``, 4.4.0).

``scripts/java/BrokerConfigTable.java`` runs against the jars and reads ``KafkaConfig``'s
``ConfigDef`` (every key: its type, its default rendered as Kafka renders it) and
``DynamicBrokerConfig``'s sets (the dynamically updatable keys with their validators, the
per-broker-only keys, the cluster-level listener keys, the security keys that need a listener
prefix, the listener mechanism keys) and the synonyms ``brokerConfigSynonyms`` gives. kraftkit's
controller (:mod:`kraftkit.controller.configs`) answers DescribeConfigs for BROKER resources from it,
and decides which dynamic values a Kafka node would take, so that no config name, type or default is
typed by hand.

Usage::

    python scripts/gen_broker_configs.py            # (re)write the JSON
    python scripts/gen_broker_configs.py --check    # exit 1 with a diff if the committed file differs (CI)

The jars come from ``python -m tests.harness fetch`` (Maven Central, cached in ``.cache/``).
Output is deterministic (keys sorted, one config per line).
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

OUT = REPO / "python" / "kraftkit" / "controller" / "broker_configs.json"
DUMPER = REPO / "scripts" / "java" / "BrokerConfigTable.java"
#: what kraftkit keeps of a config's row
FIELDS = ("name", "type", "default", "dynamic", "kafkaConfig", "internal", "validator", "synonyms")
SETS = ("perBroker", "clusterLevelListener", "dynamicSecurity", "listenerMechanism")


def dump(release: str) -> dict:
    libs = jars.ensure_kafka(release)
    java = jars.require_java()
    proc = subprocess.run([java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{libs}/*", str(DUMPER)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"gen_broker_configs: BrokerConfigTable failed on Kafka {release}:\n{proc.stderr[-3000:]}")
    raw = json.loads(proc.stdout)
    configs = [{k: c[k] for k in FIELDS if k in c} for c in raw["configs"]]
    for c in configs:
        if c.get("validator") is None:
            c.pop("validator", None)
    dynamic = {c["name"] for c in configs if c["dynamic"]}
    if dynamic != set(raw["allDynamic"]):
        raise SystemExit(f"gen_broker_configs: the dynamic keys differ from ALL_DYNAMIC_CONFIGS: "
                         f"{sorted(dynamic ^ set(raw['allDynamic']))}")
    return {
        "release": release,
        "generatedBy": "scripts/gen_broker_configs.py (scripts/java/BrokerConfigTable.java on the release's jars)",
        "listenerConfigRegex": raw["listenerConfigRegex"],
        **{k: sorted(raw[k]) for k in SETS},
        "configs": sorted(configs, key=lambda c: c["name"]),
    }


def render() -> str:
    doc = dump(jars.KAFKA_NEWEST)
    lines = ["{"]
    for k in ("release", "generatedBy", "listenerConfigRegex", *SETS):
        lines.append(f" {json.dumps(k)}: {json.dumps(doc[k], sort_keys=True)},")
    lines.append(' "configs": [')
    rows = [f"  {json.dumps(c, sort_keys=True)}" for c in doc["configs"]]
    lines.append(",\n".join(rows))
    lines.append(" ]")
    lines.append("}")
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
            print(f"gen_broker_configs: {rel} is out of date; run python scripts/gen_broker_configs.py",
                  file=sys.stderr)
            return 1
        print(f"gen_broker_configs: {rel} is up to date")
        return 0
    OUT.write_text(new)
    print(f"gen_broker_configs: wrote {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
