"""The package's metadata (pyproject.toml) as a registry and a user see it: license, the Pythons it
claims, the files that must ship with it. Fast: nothing is built (tests/packaging/test_wheels.py builds)."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
#: sha256 of the Apache License 2.0 text as apache.org publishes it (LICENSE-2.0.txt)
APACHE_2_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_is_the_apache_2_text_and_notice_names_kafka() -> None:
    assert PROJECT["license"] == "Apache-2.0"  # an SPDX expression (PEP 639)
    assert PROJECT["license-files"] == ["LICENSE", "NOTICE"]
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_SHA256
    notice = (ROOT / "NOTICE").read_text()
    assert notice.startswith("kraftkit\n") and "Apache Kafka" in notice and "The Apache Software Foundation" in notice
    # PEP 639: license classifiers are superseded by the expression, and refused beside it
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]
    # maturin writes License-Expression and ships license-files from 1.9 (older ones fail or leave them out)
    assert PYPROJECT["build-system"]["requires"] == ["maturin>=1.9,<2"]


def test_the_pythons_claimed_are_those_the_wheels_are_built_for() -> None:
    """Requires-Python's floor, the version classifiers and the interpreters scripts/build_wheels.sh
    builds wheels for (one per CPython version: the extension is not abi3) are the same list."""
    script = (ROOT / "scripts" / "build_wheels.sh").read_text()
    built = re.search(r"KRAFTKIT_WHEEL_PYTHONS:-([^}]*)\}", script).group(1).split()
    built_versions = [v.removeprefix("python") for v in built]
    classified = [c.rsplit(" :: ", 1)[1] for c in PROJECT["classifiers"]
                  if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert classified == built_versions
    assert PROJECT["requires-python"] == f">={built_versions[0]}"
    assert "Programming Language :: Python :: Implementation :: CPython" in PROJECT["classifiers"]
    cargo = (ROOT / "Cargo.toml").read_text()
    assert "abi3" not in re.search(r"^pyo3 = .*$", cargo, re.M).group(0)  # per-version wheels, as said


def test_the_rest_of_the_metadata() -> None:
    assert PROJECT["name"] == "kraftkit" and PROJECT["readme"] == "README.md"
    assert {"kafka", "kraft"} <= set(PROJECT["keywords"])
    assert "Operating System :: POSIX :: Linux" in PROJECT["classifiers"]
    assert "Typing :: Typed" in PROJECT["classifiers"] and (ROOT / "python" / "kraftkit" / "py.typed").exists()
    assert PROJECT["scripts"] == {"kraftkit": "kraftkit.cli.main:main"}
    # no project URL is claimed: there is no public repository or documentation site to point to
    assert "urls" not in PROJECT
