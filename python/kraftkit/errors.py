"""The one exception hierarchy of kraftkit.

Every error kraftkit raises on bad input derives from :class:`KraftkitError`. Errors about
bytes carry ``file``, ``offset`` (base offset of the batch, when known), ``position`` (byte
position in the file) and ``reason`` attributes.
"""

from kraftkit._core import (
    CompressionError,
    CorruptIndexError,
    CorruptRecordError,
    KraftkitError,
    TruncatedError,
    UnsupportedFormatError,
)

__all__ = [
    "KraftkitError",
    "CorruptRecordError",
    "TruncatedError",
    "CompressionError",
    "UnsupportedFormatError",
    "CorruptIndexError",
    "LogError",
]


class LogError(KraftkitError):
    """A partition directory that cannot be opened or changed as asked."""
