"""Oracle data sets built once by a real Kafka and cached under ``.cache/oracle-data/``.

A build runs in ``<root>.tmp`` and is renamed to ``<root>`` with a ``.complete`` marker, under
a file lock, so parallel test processes build it once and never see half a data set.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from . import jars
from .jars import file_lock


def build_cached(root: Path, version: str, build: Callable[[Path, str], None]) -> Path:
    """Runs ``build(tmp_dir, version)`` unless ``root`` already holds a complete build."""
    marker = root / ".complete"
    if not marker.exists():
        with file_lock(root.parent / f"{root.name}.lock", timeout=900):
            if not marker.exists():
                jars.ensure_kafka(version)
                if root.exists():
                    shutil.rmtree(root)
                tmp = root.with_name(root.name + ".tmp")
                if tmp.exists():
                    shutil.rmtree(tmp)
                tmp.mkdir(parents=True)
                t0 = time.monotonic()
                build(tmp, version)
                (tmp / "build-seconds").write_text(f"{time.monotonic() - t0:.1f}\n")
                # Configs written during the build hold absolute tmp paths; they are only
                # informative afterwards (the data dirs are self-contained).
                tmp.rename(root)
                marker.write_text("ok\n")
    return root


def copy_of(root: Path, workdir: Path | str | None) -> Path:
    """``root`` itself, or a fresh copy of it at ``workdir`` (which tests may modify)."""
    if workdir is None:
        return root
    dest = Path(workdir)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, symlinks=True)
    return dest
