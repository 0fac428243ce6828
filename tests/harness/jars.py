"""Fetch Apache Kafka server + tools jars (with runtime dependencies) from Maven Central.

The jars land in ``<repo>/.cache/kafka/<version>/libs/`` (git-ignored).  A marker file
``libs/.complete`` says the copy finished; a ``fcntl`` lock on ``<version>.lock``
keeps two processes (e.g. pytest-xdist workers, or CI + a developer) from racing.

Maven does the dependency resolution: we write a throwaway ``pom.xml`` that depends
on ``org.apache.kafka:kafka_2.13`` and ``org.apache.kafka:kafka-tools`` (plus a logging
binding) and run ``maven-dependency-plugin:copy-dependencies``.  Maven's local
repository is ``<repo>/.cache/m2`` so a fresh clone is self-contained.

Pinned versions (from
https://repo1.maven.org/maven2/org/apache/kafka/kafka_2.13/maven-metadata.xml): the newest
release, 4.4.0 (``KAFKA_NEWEST``: the tables are generated from it); the 4.x line before it,
4.3.1 (``KAFKA_4``: most real-Kafka suites run it); the newest 3.9.x, 3.9.2; and 3.5.2 (newest
3.5.x), the older line the downgrade tests boot. (4.4.0 was incomplete on Central for a while:
``kafka-tools-4.4.0`` answered 404.) ``python -m tests.harness versions`` re-checks which releases
are complete (newest-first, both artifacts must exist).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

#: The newest release: the tables (scripts/gen_features.py, gen_schemas.py) are read from it, and the
#: tests that check 4.4's own behaviour (storage layout, preallocated indexes, its metadata.version
#: levels) run it. The other suites keep the previous 4.x line, so CI's time stays bounded.
KAFKA_NEWEST = "4.4.0"
KAFKA_4 = "4.3.1"
KAFKA_3 = "3.9.2"
#: An older 3.x line for metadata.version downgrade tests (3.5: metadata.version 3.5-IV2, before
#: metadata transactions, delegation tokens, controller registration and JBOD).
KAFKA_OLD = "3.5.2"
DEFAULT_VERSION = KAFKA_4

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("KRAFTKIT_CACHE_DIR", REPO_ROOT / ".cache"))
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
LOG4J2_VERSION = "2.24.3"  # Kafka 4.x logs through log4j2
SLF4J_1_VERSION = "1.7.36"  # Kafka 3.x logs through slf4j 1.7 + reload4j

MARKER = ".complete"


class HarnessError(RuntimeError):
    """The harness could not provide what a test asked for (not a kraftkit bug)."""


def major(version: str) -> int:
    return int(version.split(".", 1)[0])


def kafka_home(version: str) -> Path:
    return CACHE_DIR / "kafka" / version


def libs_dir(version: str) -> Path:
    return kafka_home(version) / "libs"


def classpath(version: str) -> str:
    """A ``java -cp`` value for the fetched jars (``ensure_kafka`` first)."""
    return str(libs_dir(version) / "*")


def is_fetched(version: str) -> bool:
    return (libs_dir(version) / MARKER).is_file()


@contextlib.contextmanager
def file_lock(path: Path, timeout: float = 1800.0) -> Iterator[None]:
    """Exclusive inter-process lock on ``path`` (created if needed), bounded wait."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise HarnessError(f"timed out after {timeout:.0f}s waiting for lock {path}")
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _dep(group: str, artifact: str, version: str, exclusions: list[tuple[str, str]] = ()) -> str:
    excl = ""
    if exclusions:
        excl = "<exclusions>" + "".join(
            f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
            for g, a in exclusions
        ) + "</exclusions>"
    return (
        f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version>{excl}</dependency>\n"
    )


def render_pom(version: str) -> str:
    deps = _dep("org.apache.kafka", "kafka_2.13", version)
    # kafka-tools: DumpLogSegments (4.3+), ProducerPerformance, TopicCommand, ...
    # Its Connect dependency (jetty, jersey, ...) is not needed by any tool we run.
    deps += _dep("org.apache.kafka", "kafka-tools", version,
                 exclusions=[("org.apache.kafka", "connect-runtime")])
    if major(version) >= 4:
        for art in ("log4j-api", "log4j-core", "log4j-slf4j-impl"):
            deps += _dep("org.apache.logging.log4j", art, LOG4J2_VERSION)
    else:
        deps += _dep("org.slf4j", "slf4j-reload4j", SLF4J_1_VERSION)
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kraftkit.harness</groupId>
  <artifactId>kafka-jars-{version}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}  </dependencies>
</project>
"""


def _mvn_base() -> list[str]:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise HarnessError(
            "Maven ('mvn') is not on PATH; the kafka oracle tests need it to fetch Apache "
            "Kafka jars from Maven Central (install maven, e.g. `apt-get install maven`)."
        )
    repo = Path(os.environ.get("KRAFTKIT_M2_REPO", CACHE_DIR / "m2"))
    return [mvn, "-B", "-q", f"-Dmaven.repo.local={repo}",
            "-Dmaven.wagon.http.retryHandler.count=3",
            "-Dmaven.wagon.httpconnectionManager.ttlSeconds=30"]


def ensure_kafka(version: str = DEFAULT_VERSION, *, timeout: float = 900.0) -> Path:
    """Make sure Kafka ``version``'s jars are in ``.cache/kafka/<version>/libs``; return that dir.

    Idempotent and safe to call concurrently.  Raises ``HarnessError`` with mvn's output
    when the download fails or exceeds ``timeout`` seconds.
    """
    libs = libs_dir(version)
    if (libs / MARKER).is_file():
        return libs
    home = kafka_home(version)
    with file_lock(home.parent / f"{version}.lock", timeout=timeout + 60):
        if (libs / MARKER).is_file():
            return libs
        home.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="libs.tmp-", dir=home))
        try:
            pom = home / "pom.xml"
            pom.write_text(render_pom(version))
            cmd = _mvn_base() + [
                "-f", str(pom),
                f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                f"-DoutputDirectory={tmp}",
                "-DincludeScope=runtime",
            ]
            last = None
            for attempt in range(2):
                try:
                    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True, timeout=timeout, cwd=home)
                except subprocess.TimeoutExpired:
                    raise HarnessError(f"mvn timed out after {timeout:.0f}s fetching Kafka {version}")
                if proc.returncode == 0:
                    break
                last = proc.stdout
            else:
                raise HarnessError(
                    f"mvn failed to fetch Kafka {version} jars:\n{(last or '')[-4000:]}")
            jars = sorted(p.name for p in tmp.glob("*.jar"))
            if not any(j.startswith(f"kafka_2.13-{version}") for j in jars):
                raise HarnessError(f"mvn finished but kafka_2.13-{version}.jar is missing in {tmp}")
            (tmp / MARKER).write_text("\n".join(jars) + "\n")
            if libs.exists():
                shutil.rmtree(libs)
            tmp.rename(libs)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return libs


def require_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise HarnessError(
            "Java ('java', 17+) is not on PATH; the kafka oracle tests run real Apache Kafka "
            "(install e.g. openjdk-17-jre-headless).")
    return java


# ---------------------------------------------------------------- version discovery

def _metadata_versions(artifact: str) -> list[str]:
    url = f"{MAVEN_CENTRAL}/org/apache/kafka/{artifact}/maven-metadata.xml"
    with urllib.request.urlopen(url, timeout=30) as resp:
        root = ET.fromstring(resp.read())
    return [v.text for v in root.iter("version") if v.text]


def _exists(artifact: str, version: str) -> bool:
    url = f"{MAVEN_CENTRAL}/org/apache/kafka/{artifact}/{version}/{artifact}-{version}.jar"
    req = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status == 200
    except OSError:
        return False


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def discover_versions() -> dict[str, str]:
    """Newest complete 4.x and 3.9.x releases on Maven Central (network; CLI use only)."""
    plain = [v for v in _metadata_versions("kafka_2.13") if all(p.isdigit() for p in v.split("."))]
    out: dict[str, str] = {}
    for key, pred in (("KAFKA_4", lambda v: v.startswith("4.")),
                      ("KAFKA_3", lambda v: v.startswith("3.9."))):
        for v in sorted(filter(pred, plain), key=_vkey, reverse=True):
            if all(_exists(a, v) for a in ("kafka_2.13", "kafka-tools", "kafka-tools-api")):
                out[key] = v
                break
    return out
