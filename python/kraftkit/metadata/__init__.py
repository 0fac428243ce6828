"""KRaft metadata: records (``kraftkit.metadata.records``) and snapshots (``kraftkit.metadata.snapshot``)."""

from kraftkit.metadata import records
from kraftkit.metadata.records import *  # noqa: F403  (the records API is the package's API)

__all__ = list(records.__all__)
