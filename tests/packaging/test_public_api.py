"""The public API as type checkers see it: ``pyright --verifytypes`` finds kraftkit's exported symbols
and their types (the lazily loaded names included), and a user's script over ``kraftkit.metadata.records``
type-checks with pyright and mypy. Slow: pyright takes seconds to analyse the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

VENV = Path(sys.prefix)
SCRIPT = '''\
from collections.abc import Iterator
from pathlib import Path
from typing import Any, assert_type

import kraftkit.metadata
from kraftkit.log import Log, list_segments
from kraftkit.metadata import MetadataBatch, MetadataRecord, decode_metadata_record, records
from kraftkit.metadata.image import MetadataImage, load_image
from kraftkit.metadata.records import encode_metadata_record

assert_type(records("/data"), Iterator[MetadataRecord])
for r in kraftkit.metadata.records("/data", allow_gaps=True):
    assert_type(r.offset, int)
    assert_type(r.type, str)
    assert_type(r.data, dict[str, Any] | None)
    assert_type(r.batch, MetadataBatch)
    assert_type(r.batch.position, int)
assert_type(decode_metadata_record(encode_metadata_record(12, 0, {})), tuple[int, int, dict[str, Any]])
assert_type(load_image("/data", at=5), MetadataImage)
assert_type(list_segments(Path("/data")), list[int])
assert_type(Log, type[Log])
'''


def _pyright() -> str:
    exe = shutil.which("pyright", path=str(VENV / "bin")) or shutil.which("pyright")
    assert exe is not None, "pyright is not installed (it is in the test extra: pip install -e .[test])"
    return exe


def _env() -> dict[str, str]:
    # pyright finds the environment's packages (kraftkit's editable install too) through VIRTUAL_ENV
    return {**os.environ, "VIRTUAL_ENV": str(VENV), "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def test_verifytypes_sees_the_exported_symbols_and_their_types(tmp_path: Path) -> None:
    proc = subprocess.run(
        [_pyright(), "--verifytypes", "kraftkit", "--ignoreexternal", "--outputjson"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=_env(),
    )
    report = json.loads(proc.stdout)["typeCompleteness"]
    assert report["pyTypedPath"].endswith("kraftkit/py.typed")
    counts = report["exportedSymbolCounts"]
    assert sum(counts.values()) > 1000
    assert report["completenessScore"] > 0.90, counts
    symbols = {s["name"]: s for s in report["symbols"]}
    for name, category in [
        ("kraftkit.metadata.records", "function"),
        ("kraftkit.metadata.MetadataRecord", "class"),
        ("kraftkit.metadata.decode_metadata_record", "function"),
        ("kraftkit.metadata.image.load_image", "function"),
        ("kraftkit.log.Log", "class"),  # loaded on first use at run time
    ]:
        assert symbols[name]["category"] == category and symbols[name]["isTypeKnown"], symbols[name]


def test_a_users_script_type_checks(tmp_path: Path) -> None:
    script = tmp_path / "user.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([_pyright(), "--outputjson", str(script)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=_env())
    out = json.loads(proc.stdout)
    assert out["summary"]["errorCount"] == 0, out["generalDiagnostics"]
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--strict", str(script)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout
