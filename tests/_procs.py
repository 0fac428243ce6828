"""A ``kraftkit`` server command (``quorum run``, ``controller run``) as a child process, for the
tests that drive real processes: started, its ``listening`` line read, stopped by its pid
(SIGTERM, then SIGKILL after a bound); its stderr goes to a log file."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest


class KraftkitProcess:
    def __init__(self, command: list[str], args: list[str], log_path: Path, *, timeout: float = 60.0) -> None:
        self.command = " ".join(command)
        self.log_path = log_path
        self._err = open(log_path, "wb")  # noqa: SIM115 (open as long as the process runs: closed by stop)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kraftkit.cli.main", *command, *args],
            stdout=subprocess.PIPE,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            self.info = self._listening(timeout)
        except BaseException:
            self.stop()
            raise
        self.address = f"{self.info['host']}:{self.info['port']}"

    def _listening(self, timeout: float) -> dict:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            pytest.fail(
                f"kraftkit {self.command} did not start within {timeout:.0f}s (exit {self.proc.poll()}):\n"
                f"{self.log_tail()}"
            )
        info = json.loads(line)
        assert info["event"] == "listening", info
        return info

    def stop(self, timeout: float = 30.0) -> int:
        terminate(self.proc, timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()
        return self.proc.returncode

    def log_tail(self, lines: int = 40) -> str:
        return log_tail(self.log_path, lines)


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of the log at ``path``, headed by its name (``(no log)``: none yet)."""
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except FileNotFoundError:
        return "(no log)"
    return f"--- tail of {path} ---\n" + "\n".join(text)


def readme_block(section: str) -> str:
    """The first ``sh`` block after ``section`` (a heading line) in README.md, as it is written."""
    import re

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    start = text.index(section)
    m = re.compile(r"```sh\n(.*?)\n```", re.S).search(text, start)
    assert m is not None, f"no sh block after {section!r} in README.md"
    return m.group(1)


def terminate(proc: subprocess.Popen, timeout: float) -> int:
    """SIGTERM to ``proc`` if it runs, up to ``timeout`` s for it to exit, then SIGKILL to its process
    group; its exit status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode


def stop_group(proc: subprocess.Popen) -> None:
    """Stops everything started in ``proc``'s process group (a shell block's background jobs too):
    SIGTERM and up to 30 s, then SIGKILL and up to 10 s."""
    import time

    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
