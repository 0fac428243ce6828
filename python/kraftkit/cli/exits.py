"""The exit codes of every ``kraftkit`` command, and the one way a command reports an error.

* ``EXIT_OK`` (0): done; nothing wrong found.
* ``EXIT_PROBLEMS`` (1): the command ran and found problems in the data (corrupt or missing
  batches, a refused change, a failed node or append).
* ``EXIT_USAGE`` (2): a usage error or input that cannot be read (argparse's own code for a bad
  argument; also a missing path, a FIFO or device in place of a file, a path with no metadata
  there), and an output that exists already (kraftkit never overwrites one).

The same condition has the same code in every command: a CRC mismatch is 1 wherever it is found,
an existing output 2 (README, "Command-line tools", says so once for the user).
* ``EXIT_INTERRUPTED`` (130): stopped by Ctrl-C (128 + SIGINT, as shells report it).

A command that checks several inputs keeps the worst code (``max``: ``EXIT_USAGE`` outranks
``EXIT_PROBLEMS``, which outranks ``EXIT_OK``). Errors go to stderr as
``kraftkit <command>: <file>: <reason>`` (:func:`fail`).
"""

from __future__ import annotations

import sys

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def fail(command: str, message: str, code: int = EXIT_USAGE) -> int:
    """Prints ``kraftkit <command>: <message>`` to stderr and returns ``code`` (the command's exit code)."""
    print(f"kraftkit {command}: {message}", file=sys.stderr)
    return code


__all__ = ["EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PROBLEMS", "EXIT_USAGE", "fail"]
