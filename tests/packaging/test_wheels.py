"""The release wheels and the sdist as a registry and a user get them: ``scripts/build_wheels.sh`` (what
``./dev wheels`` runs) builds an x86_64 and an aarch64 manylinux2014 wheel for the running CPython and
the sdist; ``auditwheel show`` must agree with each wheel's platform tag, LICENSE and NOTICE must be in
the wheels and the sdist, and the x86_64 wheel, installed in a new virtualenv, must work there.
Slow: minutes (two release builds, the aarch64 one cross-compiled by zig)."""

from __future__ import annotations

import email.parser
import os
import platform
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
ARCHES = ("x86_64", "aarch64")
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"
VERSION = "0.1.0"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    env = {
        **os.environ,
        "KRAFTKIT_WHEEL_TARGETS": " ".join(f"{a}-unknown-linux-gnu" for a in ARCHES),
        # by name (python3.11): maturin takes the version of a cross-compiled wheel from it
        "KRAFTKIT_WHEEL_PYTHONS": f"python{sys.version_info.major}.{sys.version_info.minor}",
    }
    proc = subprocess.run([str(ROOT / "scripts" / "build_wheels.sh"), str(out)], capture_output=True, text=True,
                          timeout=3000, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def _wheel(dist: Path, arch: str) -> Path:
    want = f"kraftkit-{VERSION}-{CP}-{CP}-manylinux2014_{arch}.manylinux_2_17_{arch}.whl"
    assert (dist / want).is_file(), sorted(p.name for p in dist.iterdir())
    return dist / want


@pytest.mark.parametrize("arch", ARCHES)
def test_auditwheel_agrees_with_the_manylinux2014_tag(dist: Path, arch: str) -> None:
    wheel = _wheel(dist, arch)
    proc = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(wheel)], capture_output=True, text=True,
                          timeout=300, check=True)
    report = " ".join(proc.stdout.split())
    assert f'is consistent with the following platform tag: "manylinux_2_17_{arch}"' in report, report
    # no library outside the manylinux set (those would have to be bundled by auditwheel repair)
    assert "external shared libraries are required" not in report, report
    glibc = [tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", report)]
    assert glibc and max(glibc) <= (2, 17), report


@pytest.mark.parametrize("arch", ARCHES)
def test_wheel_contents_and_metadata(dist: Path, arch: str) -> None:
    with zipfile.ZipFile(_wheel(dist, arch)) as z:
        names = set(z.namelist())
        info = f"kraftkit-{VERSION}.dist-info"
        assert z.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
        assert z.read(f"{info}/licenses/NOTICE") == (ROOT / "NOTICE").read_bytes()
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
        wheel = email.parser.Parser().parsestr(z.read(f"{info}/WHEEL").decode())
        core = [n for n in names if n.startswith("kraftkit/_core.") and n.endswith(".so")]
    assert meta["Requires-Python"] == ">=3.11" and meta["License-Expression"] == "Apache-2.0"
    assert sorted(meta.get_all("License-File")) == ["LICENSE", "NOTICE"]
    assert f"Programming Language :: Python :: {sys.version_info.major}.{sys.version_info.minor}" in meta.get_all(
        "Classifier")
    assert wheel["Root-Is-Purelib"] == "false"
    assert wheel.get_all("Tag") == [f"{CP}-{CP}-manylinux2014_{arch}", f"{CP}-{CP}-manylinux_2_17_{arch}"]
    # the extension is built for this CPython version (not abi3), and the typing files ship with it
    assert core == [f"kraftkit/_core.{CP.replace('cp', 'cpython-')}-{arch}-linux-gnu.so"]
    assert {"kraftkit/py.typed", "kraftkit/_core.pyi", "kraftkit/cli/main.py", "kraftkit/metadata/iterate.py"} <= names
    assert any(n.startswith("pyspark_kraft/") for n in names)


def test_sdist_holds_the_license_and_notice(dist: Path) -> None:
    (sdist,) = dist.glob("kraftkit-*.tar.gz")
    with tarfile.open(sdist) as t:
        top = f"kraftkit-{VERSION}"
        lic = t.extractfile(f"{top}/LICENSE")
        notice = t.extractfile(f"{top}/NOTICE")
        pkg_info = t.extractfile(f"{top}/PKG-INFO")
        assert lic is not None and notice is not None and pkg_info is not None
        assert lic.read() == (ROOT / "LICENSE").read_bytes() and notice.read() == (ROOT / "NOTICE").read_bytes()
        meta = email.parser.Parser().parsestr(pkg_info.read().decode())
        names = set(t.getnames())
    assert sorted(meta.get_all("License-File")) == ["LICENSE", "NOTICE"] and meta["Requires-Python"] == ">=3.11"
    assert {f"{top}/Cargo.toml", f"{top}/pyproject.toml", f"{top}/rust/src/lib.rs", f"{top}/python/kraftkit/py.typed"} <= names


def test_the_wheel_installed_elsewhere_works(dist: Path, tmp_path: Path) -> None:
    """A new virtualenv, the wheel of this machine's architecture installed from the file alone (no
    index), run outside the checkout: the same output as the development install."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--disable-pip-version-check",
                    str(_wheel(dist, platform.machine()))], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import kraftkit._core as c; print(c.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout.strip()
    assert where.startswith(str(venv))
    snap = next((ROOT / "fixtures" / "kafka-4.3.1" / "data" / "__cluster_metadata-0").glob("*-0000000001.checkpoint"))
    installed = subprocess.run([str(venv / "bin" / "kraftkit"), "metadata", "records", "--json", str(snap)],
                               capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    here = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "metadata", "records", "--json", str(snap)],
                          capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0 and installed.stdout == here.stdout and installed.stdout.count("\n") > 10
