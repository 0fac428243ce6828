"""The errors of the storage commands: bad input (exit 2) and what is on disk refusing the request (exit 1)."""

from __future__ import annotations

from kraftkit.errors import KraftkitError


class StorageError(KraftkitError):
    """A storage command that cannot be carried out."""

    exit_code = 2


class StorageInputError(StorageError):
    """Bad input: an unknown release or feature level, a failed dependency, a malformed id."""

    exit_code = 2


class StorageStateError(StorageError):
    """What is on disk refuses the request (formatted already, another cluster or node)."""

    exit_code = 1
