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
    """What is on disk refuses the request (a damaged meta.properties, a reserved or duplicate directory id)."""

    exit_code = 1


class StorageExistsError(StorageStateError):
    """The output exists: a directory formatted already (for this or another cluster or node), a
    bootstrap snapshot already there, a file where a directory is to be. As for every command, an
    existing output is refused with exit 2."""

    exit_code = 2
