"""kraftkit: a toolkit for Apache Kafka's KRaft metadata layer, with a Rust core.

The byte-level work (record batches, CRC-32C, compression, segments and indexes) lives in
the compiled extension ``kraftkit._core``; the Python packages make the decisions.
"""

from kraftkit._core import __version__

__all__ = ["__version__"]
