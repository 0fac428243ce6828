#!/usr/bin/env python3
"""Generate ``python/kraftkit/metadata/kafka_features.json`` from real Apache Kafka releases.

For each release the oracle fetches (``tests/harness/jars.py``: the newest 4.x, the newest
3.9.x and an older 3.x line), ``scripts/java/FeatureTable.java`` runs against that release's
jars and reads, by reflection, its ``MetadataVersion`` enum (feature level, version string,
``didMetadataChange``, every record-version and ``is...Supported`` helper) and its finalized
features (``Feature``/``Features``: levels, bootstrap metadata.version, dependencies,
production ranges). The script keeps what kraftkit needs and writes one JSON document,
release by release, newest first. ``kraftkit.features`` builds its registry from it.

Usage::

    python scripts/gen_features.py            # (re)write the JSON
    python scripts/gen_features.py --check    # exit 1 with a diff if the committed file differs (CI)

The jars come from ``python -m tests.harness fetch`` (Maven Central, cached in ``.cache/``).
Output is deterministic (sorted keys, releases newest first, levels ascending).
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

OUT = REPO / "python" / "kraftkit" / "metadata" / "kafka_features.json"
DUMPER = REPO / "scripts" / "java" / "FeatureTable.java"

#: MetadataVersion getters kept in the table (the others are inter-broker RPC versions).
MV_FIELDS = (
    "didMetadataChange", "isProduction", "version", "shortVersion",
    "registerBrokerRecordVersion", "registerControllerRecordVersion",
    "partitionRecordVersion", "partitionChangeRecordVersion",
    "isControllerRegistrationSupported", "isCordonedLogDirsSupported", "isDelegationTokenSupported",
    "isDirectoryAssignmentSupported", "isElrSupported", "isLeaderEpochBumpRequiredOnIsrShrink",
    "isMetadataTransactionSupported", "isMigrationSupported", "isScramSupported",
    "isBrokerRegistrationChangeRecordSupported", "isInControlledShutdownStateSupported",
    "isNoOpRecordSupported", "isLeaderRecoverySupported",
    "isCidrAclSupported", "isControllerUnregistrationSupported",
)


def releases() -> list[str]:
    return [jars.KAFKA_NEWEST, jars.KAFKA_4, jars.KAFKA_3, jars.KAFKA_OLD]


def dump(release: str) -> dict:
    libs = jars.ensure_kafka(release)
    java = jars.require_java()
    proc = subprocess.run([java, "-Xmx256m", "-XX:+UseSerialGC", "-cp", f"{libs}/*", str(DUMPER)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"gen_features: FeatureTable failed on Kafka {release}:\n{proc.stderr[-3000:]}")
    raw = json.loads(proc.stdout)
    mvs = []
    for m in raw["metadata_versions"]:
        row = {"level": m["featureLevel"]}
        row.update({k: m[k] for k in MV_FIELDS if k in m})
        mvs.append(row)
    consts = raw["metadata_version_constants"]
    features = [
        {k: f[k] for k in ("name", "production", "minimumProduction", "latestProduction", "latestTesting", "levels")}
        for f in raw["features"] if not f["name"].startswith("unit.test.")
    ]
    for f in features:
        for lv in f["levels"]:
            lv.pop("constant", None)
    return {
        "release": release,
        "minimumVersion": consts.get("MINIMUM_VERSION", consts.get("MINIMUM_KRAFT_VERSION")),
        "minimumBootstrapVersion": consts.get("MINIMUM_BOOTSTRAP_VERSION", consts.get("MINIMUM_VERSION")),
        # 3.5 and older have no unstable versions: every level is production
        "latestProduction": consts.get("LATEST_PRODUCTION", consts["latestTesting"]),
        "latestTesting": consts["latestTesting"],
        "metadataVersions": sorted(mvs, key=lambda r: r["level"]),
        "features": sorted(features, key=lambda f: f["name"]),
    }


def render() -> str:
    doc = {
        "generatedBy": "scripts/gen_features.py (scripts/java/FeatureTable.java on each release's jars)",
        "releases": [dump(r) for r in releases()],
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if the committed JSON is out of date")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        old = OUT.read_text() if OUT.exists() else ""
        if old != text:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                                       str(OUT.relative_to(REPO)), "regenerated"))
            print(f"gen_features: {OUT.relative_to(REPO)} is out of date; run python scripts/gen_features.py",
                  file=sys.stderr)
            return 1
        print(f"gen_features: {OUT.relative_to(REPO)} is up to date")
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"gen_features: wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
