#!/usr/bin/env python3
"""Generate ``python/kraftkit/metadata/kafka_features.json`` from real Apache Kafka releases, and
from it the metadata.version levels by name as constants: ``rust/src/schema/metadata_versions.rs``
for Rust and ``python/kraftkit/metadata/mv_levels.py`` for Python.

For each release the oracle fetches (``tests/harness/jars.py``: the newest 4.x, the newest
3.9.x and an older 3.x line), ``scripts/java/FeatureTable.java`` runs against that release's
jars and reads, by reflection, its ``MetadataVersion`` enum (feature level, version string,
``didMetadataChange``, every record-version and ``is...Supported`` helper) and its finalized
features (``Feature``/``Features``: levels, bootstrap metadata.version, dependencies,
production ranges). The script keeps what kraftkit needs and writes one JSON document,
release by release, newest first. ``kraftkit.features`` builds its registry from it; code that
names a level (``MV_3_3_IV0`` ...) takes it from the constants written alongside, so that no
level is typed by hand anywhere.

Usage::

    python scripts/gen_features.py            # (re)write the JSON and the constants
    python scripts/gen_features.py --check    # exit 1 with a diff if a committed file differs (CI)

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
OUT_RS = REPO / "rust" / "src" / "schema" / "metadata_versions.rs"
OUT_PY = REPO / "python" / "kraftkit" / "metadata" / "mv_levels.py"
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


def metadata_version_levels(doc: dict) -> list[tuple[int, str]]:
    """(level, name) of every metadata.version the releases name: all of the newest release's, and
    the production levels of the older ones it no longer lists (3.0-IV1 .. 3.3-IV2); an older
    release's testing levels were renumbered later and are left out. A name or a level given two
    meanings is refused."""
    by_name: dict[str, int] = {}
    for i, r in enumerate(doc["releases"]):
        for row in r["metadataVersions"]:
            if i > 0 and row["level"] > r["latestProduction"]:
                continue
            seen = by_name.setdefault(row["version"], row["level"])
            if seen != row["level"]:
                raise SystemExit(f"gen_features: {row['version']} is level {seen} and {row['level']} (Kafka {r['release']})")
    by_level = {level: name for name, level in by_name.items()}
    if len(by_level) != len(by_name):
        raise SystemExit("gen_features: two metadata.version names share a level")
    return sorted(by_level.items())


HEADER = ("@generated by scripts/gen_features.py -- DO NOT EDIT BY HAND.",
          "Regenerate with `python scripts/gen_features.py`; CI runs `--check` and fails on any difference.",
          "Source: python/kraftkit/metadata/kafka_features.json (Kafka's MetadataVersion, release by release).")


def mv_ident(name: str) -> str:
    return "MV_" + name.replace(".", "_").replace("-", "_")


def render_constants(doc: dict, comment: str, preamble: str, line: str) -> str:
    """The header (``comment``-marked), ``preamble``, then ``line`` (with ``{ident}`` and ``{level}``)
    for every metadata.version level in ``doc`` (kafka_features.json)."""
    out = [f"{comment} {h}\n" for h in HEADER] + [preamble]
    out.extend(line.format(ident=mv_ident(name), level=level) for level, name in metadata_version_levels(doc))
    return "".join(out)


def render_rust(doc: dict) -> str:
    return render_constants(doc, "//", "\n//! metadata.version feature levels by name (`MV_3_3_IV0` is 3.3-IV0). i64, "
                            "as the image keeps\n//! feature levels.\n\n", "pub const {ident}: i64 = {level};\n")


def render_python(doc: dict) -> str:
    return render_constants(doc, "#", '"""metadata.version feature levels by name (``MV_3_3_IV0`` is 3.3-IV0); names '
                            'and levels of\n``kafka_features.json``, which ``kraftkit.metadata.versions`` describes."""\n\n',
                            "{ident} = {level}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if a committed output is out of date")
    args = ap.parse_args(argv)
    text = render()
    doc = json.loads(text)
    outputs = {OUT: text, OUT_RS: render_rust(doc), OUT_PY: render_python(doc)}
    if args.check:
        bad = False
        for path, new in outputs.items():
            old = path.read_text() if path.exists() else ""
            if old != new:
                bad = True
                sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                           str(path.relative_to(REPO)), "regenerated"))
                print(f"gen_features: {path.relative_to(REPO)} is out of date; run python scripts/gen_features.py",
                      file=sys.stderr)
        if bad:
            return 1
        print(f"gen_features: {', '.join(str(path.relative_to(REPO)) for path in outputs)} are up to date")
        return 0
    for path, new in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new)
        print(f"gen_features: wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
