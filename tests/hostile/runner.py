"""Runs one ``kraftkit`` command as a child process under hostile-input limits.

* ``RLIMIT_AS`` (address space) of 1 GiB: a command that tries to hold a decompression bomb
  or size a buffer by a lying count fails to allocate instead of taking the machine. An
  ordinary command on the valid corpus needs far less (the Python interpreter, the Rust
  extension with mimalloc and the rayon threads fit; ``test_reading_commands`` checks every
  command on the valid log under this same limit), so RLIMIT_AS itself is used, not
  RLIMIT_DATA.
* ``RLIMIT_FSIZE`` of 64 MiB: stdout and stderr go to files, and a command that floods them
  (printing a bomb) is stopped by SIGXFSZ, which counts as a crash.
* ``RLIMIT_CORE`` 0: a crash leaves no core file behind.
* stdin is /dev/null; the child leads its own session, so on timeout its whole process group
  (and nothing else) is killed. A timeout is reported as a hang.

The child is reaped with ``os.wait4``, which gives its own peak RSS (``ru_maxrss``), not the
maximum over every child this process ever had.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ADDRESS_SPACE = 1 << 30
OUTPUT_LIMIT = 64 << 20
TIMEOUT = 30.0


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    #: the exit code; negative: killed by that signal; None: timed out (and killed)
    returncode: int | None
    stdout: str
    stderr: str
    #: the child's peak resident set size, in KiB
    peak_rss_kib: int

    @property
    def hang(self) -> bool:
        return self.returncode is None

    @property
    def crash(self) -> bool:
        return self.returncode is not None and self.returncode < 0

    def describe(self) -> str:
        """A summary for assertion messages: command, outcome and the ends of both streams."""
        if self.hang:
            outcome = "HANG (killed after the timeout)"
        elif self.crash:
            outcome = f"CRASH (signal {signal.Signals(-self.returncode).name})"
        else:
            outcome = f"exit {self.returncode}"
        return (f"kraftkit {' '.join(self.args)}: {outcome}, peak RSS {self.peak_rss_kib // 1024} MiB\n"
                f"--- stderr (last 1500 chars):\n{self.stderr[-1500:]}\n"
                f"--- stdout (last 800 chars):\n{self.stdout[-800:]}")


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_LIMIT, OUTPUT_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_kraftkit(args: list[str] | tuple[str, ...], *, timeout: float = TIMEOUT, cwd: str | os.PathLike[str] | None = None) -> Result:
    """Runs ``python -m kraftkit.cli.main *args`` under the limits above."""
    cmd = [sys.executable, "-m", "kraftkit.cli.main", *map(str, args)]
    with tempfile.TemporaryDirectory(prefix="kraftkit-run-") as tmp:
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd,
                                    preexec_fn=_limits, start_new_session=True)
        deadline = time.monotonic() + timeout
        timed_out = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                timed_out = True
                break
            time.sleep(0.005)
        code = os.waitstatus_to_exitcode(status)
        proc.returncode = code  # reaped here: Popen must not wait for it again
        return Result(tuple(map(str, args)), None if timed_out else code,
                      out_path.read_bytes().decode("utf-8", "replace"),
                      err_path.read_bytes().decode("utf-8", "replace"), usage.ru_maxrss)
