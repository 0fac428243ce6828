"""Type stubs for the compiled core ``kraftkit._core`` (Rust, PyO3)."""

from collections.abc import Iterable, Iterator, Sequence
from os import PathLike
from typing import Any, Literal, TypeAlias, final, overload
from uuid import UUID

from typing_extensions import Buffer

__version__: str

Compression: TypeAlias = Literal["none", "gzip", "snappy", "lz4", "zstd"]
Header: TypeAlias = tuple[str, bytes | None]
RecordInput: TypeAlias = tuple[int, bytes | None, bytes | None, Sequence[Header]]
ScanReport: TypeAlias = dict[str, Any]
"""Keys: file, batches, records, valid_bytes, total_bytes, first_offset, last_offset,
max_timestamp, epochs (list of (epoch, base offset)), error (exception instance or None)."""

#: The default limit on the size a compressed batch's records area may inflate to (100 MiB)
DEFAULT_MAX_UNCOMPRESSED_BYTES: int

def max_uncompressed_bytes() -> int:
    """The most a compressed batch's records area may inflate to in this process; past it,
    reading the batch's records raises ``CompressionError``."""

def set_max_uncompressed_bytes(limit: int) -> None:
    """Sets that limit for the whole process (bytes, at least 1)."""

class KraftkitError(Exception):
    file: str | None
    offset: int | None
    position: int | None
    reason: str

class CorruptRecordError(KraftkitError): ...
class TruncatedError(CorruptRecordError): ...
class CompressionError(CorruptRecordError): ...
class UnsupportedFormatError(KraftkitError): ...
class CorruptIndexError(KraftkitError): ...

class Record:
    offset: int
    timestamp: int
    sequence: int
    attributes: int
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def key_size(self) -> int: ...
    @property
    def value_size(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def headers(self) -> list[Header]: ...
    @property
    def is_control(self) -> bool: ...

@final
class ControlRecord(Record):
    control_type: int
    key_version: int
    @property
    def control_type_name(self) -> str: ...

@final
class RecordBatch:
    """A v2 record batch. ``memoryview(batch)`` exposes its bytes without a copy."""

    position: int
    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    @property
    def partition_leader_epoch(self) -> int: ...
    @property
    def magic(self) -> int: ...
    @property
    def crc(self) -> int: ...
    def compute_crc(self) -> int: ...
    @property
    def is_valid(self) -> bool: ...
    def ensure_valid(self) -> None: ...
    @property
    def attributes(self) -> int: ...
    @property
    def compression(self) -> Compression: ...
    @property
    def timestamp_type(self) -> Literal["CreateTime", "LogAppendTime"]: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def delete_horizon_ms(self) -> int | None: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def file(self) -> str | None: ...
    def records(self) -> list[Record]:
        """Every record, decoded (and decompressed) at once, in a new list; a corrupt record
        raises CorruptRecordError before any is returned."""
    def __iter__(self) -> Iterator[Record]:
        """The records decoded one at a time (the fastest way to read them): a corrupt record
        raises where it is, after the records before it. A record the loop no longer holds is
        recycled for a later one (its key and value bytes too, when nothing else holds them):
        whatever you keep stays as it was, only ``id()`` can tell."""
    def __len__(self) -> int: ...
    def to_bytes(self) -> bytes: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def decode_batches(data: Buffer, *, verify_crc: bool = False) -> list[RecordBatch]: ...
def encode_batch(
    records: Iterable[RecordInput],
    *,
    base_offset: int = 0,
    compression: Compression = "none",
    compression_level: int | None = None,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    log_append_time: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes: ...
def assign_offsets(data: Buffer, base_offset: int, partition_leader_epoch: int) -> tuple[bytes, int]:
    """A leader's intake of a client's batches (Kafka's LogValidator, offsets assigned in place):
    each whole batch checked (sizes, magic, CRC, count), given consecutive offsets from
    ``base_offset``, the partition leader epoch and a new CRC. Returns (bytes, record count)."""

def crc32c(data: Buffer, crc: int = 0) -> int: ...

@final
class BatchIter:
    @property
    def position(self) -> int: ...
    def __iter__(self) -> BatchIter: ...
    def __next__(self) -> RecordBatch: ...

@final
class DumpIter:
    def __iter__(self) -> DumpIter: ...
    def __next__(self) -> bytes: ...
    def write_to(self, fd: int) -> None:
        """Writes the rest of the dump to the open file descriptor ``fd`` (GIL released)."""
    def summary(self) -> dict[str, Any]: ...

@final
class Segment:
    path: str
    base_offset: int
    def __init__(self, path: str | PathLike[str]) -> None: ...
    @property
    def size(self) -> int: ...
    def batches(self, start: int = 0, max_bytes: int | None = None, verify_crc: bool = False) -> BatchIter: ...
    def read_batches(self, verify_crc: bool = False) -> list[RecordBatch]: ...
    def scan(self, deep: bool = False, verify_crc: bool = True, dense: bool = False) -> ScanReport:
        """Checks every batch without Python objects (GIL released), up to the size the file had
        when the segment was opened; a file that shrank since (even during the scan) reports a
        truncated batch where it now ends."""
    def rebuild_indexes(self, index_interval_bytes: int = 4096) -> tuple[ScanReport, bytes, bytes]: ...
    def offset_index(self) -> list[tuple[int, int]]: ...
    def time_index(self) -> list[tuple[int, int]]: ...
    def verify_indexes(self) -> list[tuple[str, int, str]]: ...
    def position_of(self, offset: int) -> int | None: ...
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...
    def dump(
        self,
        deep: bool = False,
        print_data: bool = False,
        json: bool = False,
        max_bytes: int | None = None,
        chunk_bytes: int | None = None,
        dense: bool = False,
    ) -> DumpIter:
        """``dense``: a KRaft file (snapshot or metadata log segment), whose batches hold one offset
        per record: a lastOffsetDelta other than count - 1 is the dump's error, and the
        ``non_consecutive`` offsets of its summary are errors, not compaction."""

@final
class SegmentWriter:
    @staticmethod
    def create(dir: str | PathLike[str], base_offset: int, index_interval_bytes: int = 4096) -> SegmentWriter: ...
    @staticmethod
    def open(
        dir: str | PathLike[str], base_offset: int, index_interval_bytes: int = 4096, truncate: bool = False
    ) -> tuple[SegmentWriter, ScanReport]: ...
    def append(self, data: bytes) -> dict[str, Any]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    @property
    def size(self) -> int: ...
    @property
    def base_offset(self) -> int: ...
    @property
    def next_offset(self) -> int | None: ...
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...

def verify_segments(
    paths: Sequence[str | PathLike[str]], deep: bool = False, check_indexes: bool = True, dense: bool = False
) -> list[ScanReport]: ...
def truncate_segment(
    dir: str | PathLike[str], base_offset: int, offset: int, index_interval_bytes: int = 4096
) -> int: ...
def write_atomic(path: str | PathLike[str], data: bytes, *, mode: int = 0o666) -> None:
    """``<path>.tmp`` (a new file gets ``mode`` less the umask), write, fsync, rename over ``path``,
    fsync of the directory; on failure ``path`` is as it was and no temporary file is left."""

def commit_part(part: str | PathLike[str], dst: str | PathLike[str], *, mode: int | None = None) -> None:
    """Finishes a temporary output written in full and closed: fsync, ``mode`` (0o444: read-only),
    rename over ``dst``, fsync of the directory; until the rename a failure removes ``part``."""

def fsync_dir(path: str | PathLike[str]) -> None: ...

# --- metadata and control records (schema codec; see kraftkit.metadata.records) ---------------
RecordDict: TypeAlias = dict[str, Any]
"""A record body keyed by the schema's field names ("BrokerId"); "_unknown_tags": [(tag, bytes)]."""

def decode_metadata_record(value: bytes) -> tuple[int, int, RecordDict]: ...
def encode_metadata_record(api_key: int, version: int, data: RecordDict) -> bytes: ...
def metadata_record_json(value: bytes) -> str: ...
def decode_control_record(control_type: int, value: bytes) -> RecordDict: ...
def encode_control_record(control_type: int, data: RecordDict) -> bytes: ...
def control_record_json(control_type: int, value: bytes) -> tuple[str, str]: ...
def metadata_record_types() -> list[tuple[int, str, int, int]]: ...
def check_metadata_batches(data: Buffer) -> int:
    """Record count of batches fit for the metadata log (whole, valid CRCs, not control or
    transactional, consecutive offset deltas, every value a decodable metadata record); raises
    CorruptRecordError naming the batch and record otherwise."""

@overload
def decode_metadata_batch(
    batch: RecordBatch, json: Literal[False] = False
) -> list[tuple[int, int | None, int, RecordDict | None]]: ...
@overload
def decode_metadata_batch(batch: RecordBatch, json: Literal[True]) -> list[tuple[int, int | None, int, str | None]]: ...
@overload
def decode_metadata_batch(
    batch: RecordBatch, json: bool = False
) -> list[tuple[int, int | None, int, RecordDict | str | None]]: ...
def metadata_schema() -> dict[str, list[dict[str, Any]]]: ...

@final
class MetadataDump:
    """Chunks of ``metadata dump`` output (UTF-8 bytes) of one file, then its problem raised."""

    def __iter__(self) -> MetadataDump: ...
    def __next__(self) -> bytes: ...
    def write_chunk(self, fd: int) -> bool:
        """Renders the next chunk and writes it to the open descriptor ``fd`` (GIL released); False
        once done (the dump's problem is raised then, after the lines before it)."""
    @property
    def records(self) -> int:
        """Records given out so far (a line each)."""
    @property
    def position(self) -> int:
        """Byte position in the file up to which batches were read."""

def metadata_dump(path: str | PathLike[str], json: bool = False) -> MetadataDump:
    """The records of a metadata log segment or snapshot as ``kraftkit metadata dump`` prints them
    (``json``: its ``--json`` lines), rendered in Rust with the GIL released; CRC checked. Raises,
    after the lines of the batches before it, the first problem: CorruptRecordError (a bad batch
    or record, naming file, offset, position and reason), KraftkitError for offsets held twice."""

# -- snapshots (rust/src/snapshot.rs) --------------------------------------------------------
def validate_snapshot(path: str | PathLike[str], epoch: int | None = None) -> dict[str, Any]:
    """Keys: file, batches, records, data_records, valid_bytes, total_bytes,
    last_contained_log_timestamp, kraft_version, has_voters, has_footer, next_offset, error."""

def snapshot_header_value(last_contained_log_timestamp: int) -> bytes: ...
def snapshot_footer_value() -> bytes: ...
def kraft_version_value(level: int) -> bytes: ...
def control_record_key(control_type: int) -> bytes: ...

# -- the metadata image engine (rust/src/image/; see kraftkit.metadata.image) -----------------
class ImageError(KraftkitError):
    """An error of the image engine. ``kind``: "replay" (``offset``, ``reason``), "unwritable"
    (``metadata_version``, ``losses``) or "snapshot" (``reason``)."""

    kind: str
    offset: int | None
    reason: str
    metadata_version: int
    losses: list[str]

@final
class ImageState:
    """The state of a metadata image, replayed in Rust (wrapped by ``MetadataImage``)."""

    def __init__(self) -> None: ...
    def copy(self) -> ImageState: ...
    def replay(self, api_key: int, version: int, data: RecordDict, offset: int | None = None) -> None: ...
    def replay_control(self, control_type: int, data: RecordDict | None = None) -> None: ...
    def replay_batch(self, batch: RecordBatch) -> None: ...
    def replay_log(
        self, files: Sequence[str], start: int = 0, at: int | None = None, skip_below_start: bool = True
    ) -> tuple[int, bool]:
        """(end offset reached, whether a batch at or past ``at`` was reached)."""
    def replay_snapshot(self, path: str) -> int:
        """The SnapshotHeader's LastContainedLogTimestamp (-1 without one)."""
    @property
    def metadata_version(self) -> int | None: ...
    @property
    def zk_migration_state(self) -> int: ...
    @property
    def next_producer_id(self) -> int: ...
    @property
    def kraft_version(self) -> int | None: ...
    @property
    def records_replayed(self) -> int: ...
    def replayed_of(self, api_keys: list[int]) -> int: ...
    @property
    def provenance(self) -> tuple[int, int, int]: ...
    def set_provenance(self, offset: int, epoch: int, timestamp: int) -> None: ...
    @property
    def in_transaction(self) -> bool: ...
    @property
    def topic_count(self) -> int: ...
    @property
    def partition_count(self) -> int: ...
    def features(self) -> dict[str, int]: ...
    def brokers(self) -> dict[int, RecordDict]: ...
    def controllers(self) -> dict[int, RecordDict]: ...
    def topics(self) -> list[tuple[str, UUID, dict[int, RecordDict]]]: ...
    def topic_ids(self) -> dict[str, UUID]: ...
    def configs(self) -> dict[tuple[int, str], dict[str, str]]: ...
    def client_quotas(self) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]: ...
    def acls(self) -> dict[UUID, RecordDict]: ...
    def scram(self) -> dict[tuple[int, str], RecordDict]: ...
    def delegation_tokens(self) -> dict[str, RecordDict]: ...
    def voters(self) -> RecordDict | None: ...
    def pending_transaction(self) -> list[tuple[int, int, RecordDict, int | None]] | None: ...
    def snapshot_records(self, metadata_version: int | None = None) -> list[tuple[int, int, RecordDict]]: ...
    def write_snapshot(
        self,
        directory: str | PathLike[str],
        file_name: str,
        part_prefix: str,
        *,
        epoch: int,
        last_contained_log_timestamp: int,
        kraft_version: int,
        voters: bytes | bool | None,
        time_ms: int,
        metadata_version: int | None = None,
        batch_records: int = 1024,
        max_batch_bytes: int = 8388608,
    ) -> str: ...

def zk_migration_states() -> list[tuple[int, str]]: ...

# ---------------------------------------------------------------------------- snapshot rewriting

@final
class RewritePlan:
    """What a rewrite does to every record, compiled once: ``versions`` (api key -> highest
    version the target can write, None: the target cannot hold the type; absent keys are kept),
    ``features`` (name -> {old level: new level}, 0 drops the FeatureLevelRecord),
    ``drop_kraft_control`` (KRaftVersion/KRaftVoters control records) and ``semantic_defaults``
    ((record, field, rule) with rule "all-zero-uuids" or "empty"). ``refuse_unknown``: a
    FeatureLevelRecord or KRaftVersion level ``features`` does not map (0 aside), or a control type
    without a schema, is refused (UnsupportedFormatError) instead of kept; ``newest`` names the
    newest known level per feature for that message. ``drop_cidr_acls``: ACLs whose host is a
    CIDR range are dropped and reported lost (a target below 4.4-IV1). A record type or version
    the schemas do not know is always refused. Policy: ``kraftkit.features.rewrite``."""
    def __init__(
        self,
        versions: dict[int, int | None],
        features: dict[str, dict[int, int]],
        *,
        drop_kraft_control: bool = False,
        semantic_defaults: list[tuple[str, str, str]] = ...,
        refuse_unknown: bool = False,
        newest: dict[str, str] = ...,
        drop_cidr_acls: bool = False,
    ) -> None: ...

def rewrite_snapshot(
    src: str | PathLike[str],
    dst: str | PathLike[str] | None,
    plan: RewritePlan,
    *,
    samples: int = 5,
    epoch: int | None = None,
) -> dict[str, Any]:
    """Rewrites the snapshot ``src`` into ``dst`` (None: dry run) per ``plan``; returns the report
    (counts, ``losses``: record/field/count/samples, ``feature_changes``). Streaming, GIL released,
    atomic output. ``epoch``: the one every batch must carry (None: the first batch's)."""

# ---------------------------------------------------------------------------- RPC messages

def encode_request(api_key: int, version: int, correlation_id: int, client_id: str | None, body: RecordDict) -> bytes:
    """Request header (v2 when the version is flexible, else v1) + body, without the size prefix."""

def decode_request(data: bytes) -> tuple[int, int, int, str | None, RecordDict]:
    """(api_key, version, correlation_id, client_id, body) of a request."""

def encode_response(api_key: int, version: int, correlation_id: int, body: RecordDict) -> bytes:
    """Response header (v1 when flexible, v0 otherwise and always for ApiVersions) + body."""

def decode_response(api_key: int, version: int, data: bytes) -> tuple[int, RecordDict]:
    """(correlation_id, body) of a response to a request of ``api_key`` at ``version``."""

def rpc_schema() -> list[dict[str, Any]]:
    """The generated RPC schema tables (name, api_key, kind, versions, fields)."""

# ---------------------------------------------------------------------------- Arrow export (kraftkit.spark)

ColumnParts: TypeAlias = tuple[ArrowBuffer | None, ArrowBuffer | None, ArrowBuffer, int]
"""(validity bitmap or None, offsets or None, values, null count): ``pyarrow.Array.from_buffers``'s layout."""
StringParts: TypeAlias = tuple[ArrowBuffer | None, ArrowBuffer, ArrowBuffer, int]
"""The ColumnParts of a string column, whose offsets are always there."""

@final
class ArrowBuffer:
    """Bytes built in Rust, exposed read-only through the buffer protocol (``pyarrow.py_buffer``)."""
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class RecordScan:
    """The records of one file as chunks of Arrow column buffers (see ``kraftkit.spark.scan``)."""

    file: str
    def __init__(
        self,
        source: str | PathLike[str] | bytes,
        *,
        start: int = 0,
        end: int | None = None,
        columns: Sequence[str] | None = None,
        min_offset: int | None = None,
        max_offset: int | None = None,
        chunk_rows: int = 65536,
    ) -> None: ...
    def __iter__(self) -> RecordScan: ...
    def __next__(self) -> tuple[int, list[tuple[str, ColumnParts]]]: ...
    def stats(self) -> dict[str, int]: ...

def record_columns() -> list[str]: ...
def batch_splits(source: str | PathLike[str] | bytes, target: int) -> list[int]: ...
def decode_values(
    validity: Any, offsets: Any, data: Any, offset: int, length: int
) -> tuple[ColumnParts, ColumnParts, ColumnParts, ColumnParts]: ...
def batch_crc_values(validity: Any, offsets: Any, data: Any, offset: int, length: int) -> ColumnParts: ...
def record_losses(
    validity: Any, offsets: Any, data: Any, offset: int, length: int, plan: RewritePlan
) -> tuple[ArrowBuffer | None, ArrowBuffer, StringParts, int]: ...
