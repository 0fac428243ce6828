"""The exit codes of every ``kraftkit`` command (:data:`EXIT_CODES` says what each means to the user;
the man pages print it), and the one way a command reports an error.

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

#: What each exit code means, as the user reads it (the EXIT STATUS of every ``kraftkit man`` page).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "done; nothing wrong found.",
    EXIT_PROBLEMS: "the command ran and found problems in the data (corrupt or missing batches, a CRC mismatch, "
    "a bad index, a torn tail, a refused change, a failed node or append).",
    EXIT_USAGE: "a usage error or an input that cannot be read (a missing path, a FIFO or device in place of a "
    "file, a path with no metadata there), or an output that exists already (never overwritten).",
    EXIT_INTERRUPTED: "stopped by Ctrl-C (128 + SIGINT, as shells report it).",
}

#: How the codes combine (said once with the table).
EXIT_CODES_NOTE = (
    "The same condition has the same code in every command. A command given several inputs exits with the "
    f"worst code: {EXIT_USAGE} outranks {EXIT_PROBLEMS}, which outranks {EXIT_OK}."
)


def error_code(e: BaseException) -> int:
    """The exit code of an error a command stops on: :data:`EXIT_PROBLEMS` when it is damage found
    in the data (a corrupt or torn batch, a CRC mismatch, a bad index, a log with holes or a snapshot
    that does not match it, a replay the records make impossible, a snapshot misnamed), else
    :data:`EXIT_USAGE` (bad input, an unreadable or missing file, an existing output)."""
    # (imported here: ``kraftkit --version`` and the parser load this module without the core)
    from kraftkit.errors import CorruptIndexError, CorruptRecordError
    from kraftkit.metadata.image import ReplayError
    from kraftkit.metadata.snapshot import SnapshotNameError
    from kraftkit.metadata.source import ContinuityError

    damage = (CorruptRecordError, CorruptIndexError, ContinuityError, ReplayError, SnapshotNameError)
    return EXIT_PROBLEMS if isinstance(e, damage) else EXIT_USAGE


def fail(command: str, message: str, code: int = EXIT_USAGE) -> int:
    """Prints ``kraftkit <command>: <message>`` to stderr and returns ``code`` (the command's exit code)."""
    print(f"kraftkit {command}: {message}", file=sys.stderr)
    return code


__all__ = [
    "EXIT_CODES",
    "EXIT_CODES_NOTE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "EXIT_USAGE",
    "error_code",
    "fail",
]
