"""The one progress line of every ``kraftkit`` command that can run for more than a moment.

A line on stderr, redrawn in place (``\\r``), erased when the work ends, so nothing of it stays in
the terminal or reaches a file:

* only when stderr is a terminal (never in a pipe, a file or a test), and not when the command's
  own output goes to that terminal as it is made (``stdout_busy``: a dump printing as it reads);
* off with the command's ``--quiet``;
* only after the first second (a quick command shows nothing), then at most ten times a second.

Determinate work (``total``) shows ``done/total unit`` and a bar; indeterminate work (a replay in
the Rust core) shows what is being done and the seconds so far, redrawn from a timer thread while
the core runs without the GIL.

    with Progress("verify-log", total=len(files), unit="files", quiet=args.quiet) as p:
        for f in files:
            ...
            p.advance(1)
"""

from __future__ import annotations

import sys
import threading
import time

TYPE_CHECKING = False  # (typing is not imported at run time: dump-log starts without it)
if TYPE_CHECKING:
    from typing import IO, Self

#: seconds before the line first shows, and between redraws
DELAY = 1.0
INTERVAL = 0.1
WIDTH = 30

__all__ = ["Progress", "add_quiet"]


def add_quiet(p, help: str = "no progress line on stderr") -> None:
    """``--quiet``/``-q`` for a command whose progress line it turns off."""
    p.add_argument("--quiet", "-q", action="store_true", help=help)


def _isatty(stream: IO[str] | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    def __init__(
        self,
        what: str,
        total: int | None = None,
        *,
        unit: str = "",
        quiet: bool = False,
        stdout_busy: bool = False,
        stream: IO[str] | None = None,
    ) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.done = 0
        self.stream = sys.stderr if stream is None else stream
        self.enabled = not quiet and _isatty(self.stream) and not (stdout_busy and _isatty(sys.stdout))
        self._start = time.monotonic()
        self._last = 0.0
        self._shown = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __enter__(self) -> Self:
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, name="kraftkit-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _tick(self) -> None:
        if self._stop.wait(DELAY):
            return
        while not self._stop.is_set():
            self._draw(force=True)
            if self._stop.wait(INTERVAL if self.total is None else 1.0):
                return

    def advance(self, n: int = 1, what: str | None = None) -> None:
        self.update(self.done + n, what)

    def update(self, done: int, what: str | None = None) -> None:
        """``done`` of the total so far (and, if given, what is being done now)."""
        self.done = done
        if what is not None:
            self.what = what
        if self.enabled:
            self._draw()

    def _text(self) -> str:
        if self.total is None:
            return f"{self.what}... {time.monotonic() - self._start:.0f}s"
        n = int(WIDTH * min(self.done, self.total) / max(self.total, 1))
        unit = f" {self.unit}" if self.unit else ""
        return f"[{'#' * n}{'.' * (WIDTH - n)}] {self.done}/{self.total}{unit} {self.what}"

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if now - self._start < DELAY or (not force and now - self._last < INTERVAL):
            return
        with self._lock:
            if self._stop.is_set():
                return
            self._last = now
            self._shown = True
            cols = 200
            try:
                import shutil

                cols = shutil.get_terminal_size().columns
            except (OSError, ValueError):
                pass
            self.stream.write("\r" + self._text()[: max(cols - 1, 10)] + "\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        """Stops the line and erases it."""
        with self._lock:
            self._stop.set()
            if self._shown:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
                self._shown = False
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join(timeout=1.0)
            self._ticker = None
