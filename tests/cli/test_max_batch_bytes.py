"""``--max-batch-bytes``: every command that reads record batches takes the limit on how far a
compressed batch may inflate; a decompression bomb is an error naming the batch (exit 1), an
out-of-range limit a usage error (exit 2). Run as processes: the limit is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import zstandard

from kraftkit.log import encode_batch
from tests.hostile.batches import varint
from tests.log.test_limits import bomb_batch

MIB = 1024 * 1024


def run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONWARNINGS": "error"})
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


@pytest.fixture(scope="module")
def bomb_dir(tmp_path_factory):
    """A metadata partition whose second batch is one zstd record claiming 256 MiB (~8 KB on disk)."""
    d = tmp_path_factory.mktemp("bomb") / "__cluster_metadata-0"
    d.mkdir()
    c = zstandard.ZstdCompressor().compressobj()
    area = c.compress(varint(256 * MIB - 8)) + b"".join(c.compress(bytes(MIB)) for _ in range(256)) + c.flush()
    good = encode_batch([(0, None, b"v", [])])
    (d / "00000000000000000000.log").write_bytes(good + bomb_batch("zstd", area, base_offset=1))
    return d, len(good)


@pytest.mark.parametrize("command", [["dump-log", "--deep"], ["verify-log", "--deep"]])
def test_the_default_limit_stops_a_bomb(bomb_dir, command):
    d, position = bomb_dir
    target = str(d / "00000000000000000000.log") if command[0] == "dump-log" else str(d)
    proc = run(*command, target)
    assert proc.returncode == 1
    out = proc.stderr + proc.stdout
    assert f"zstd records area inflates to more than {100 * MIB} bytes" in out
    assert f"batch base offset 1, byte position {position}" in out
    assert "00000000000000000000.log" in out


@pytest.mark.parametrize("command", [["dump-log", "--deep"], ["verify-log", "--deep"]])
def test_the_limit_is_set_per_run(bomb_dir, command):
    d, position = bomb_dir
    target = str(d / "00000000000000000000.log") if command[0] == "dump-log" else str(d)
    proc = run(*command, "--max-batch-bytes", "4096", target)
    assert proc.returncode == 1
    assert "inflates to more than 4096 bytes" in proc.stderr + proc.stdout


@pytest.mark.parametrize("command", [["dump-log"], ["verify-log"], ["metadata", "dump"], ["metadata", "image"],
                                     ["snapshot", "verify"], ["snapshot", "rewrite", "x", "--metadata-version", "3.9"],
                                     ["features", "describe"], ["storage", "info"]])
@pytest.mark.parametrize("value", ["0", "-1", "1e6", "99999999999999999999"])
def test_an_unusable_limit_is_a_usage_error(command, value, tmp_path):
    proc = run(*command, "--max-batch-bytes", value, str(tmp_path))
    assert proc.returncode == 2
    assert "--max-batch-bytes" in proc.stderr
