"""The metadata image: the state a KRaft node builds by replaying metadata records.

:class:`MetadataImage` holds what Kafka's ``MetadataImage`` holds -- finalized features and
metadata.version, the ZK migration state, brokers and controllers, topics and their
partitions, configs, client quotas, the next producer id, ACLs, SCRAM credentials and
delegation tokens -- plus its provenance (last offset, epoch and append time) and the KRaft
control state (kraft.version and the voter set) a snapshot must carry.

Replay follows Kafka's image deltas (``org.apache.kafka.image.*Delta``):

* ``FeatureLevelRecord`` sets a level; level 0 removes a feature other than metadata.version.
* ``RegisterBrokerRecord`` replaces a broker's registration; ``UnregisterBrokerRecord``
  removes it; ``FenceBrokerRecord``/``UnfenceBrokerRecord``/``BrokerRegistrationChangeRecord``
  need a registered broker with the same epoch (Fenced 1 = fence, -1 = unfence, 0 = no change;
  InControlledShutdown 1 = enter, 0 = no change; a non-empty LogDirs replaces the directories).
* ``PartitionChangeRecord`` merges as ``PartitionRegistration.merge``: null lists and
  Leader -2 mean "unchanged", a leader change bumps the leader epoch, every change bumps the
  partition epoch, LeaderRecoveryState -1 means unchanged; directories that are all
  ``MIGRATING`` (the zero uuid) or empty become one ``MIGRATING`` per replica.
* ``RemoveTopicRecord`` removes the topic and its configs; ``ClearElrRecord`` clears ELR and
  LastKnownElr (of one topic, or of all when TopicName is empty) as a partition change.
* ``ConfigRecord`` with a null value deletes the key; a resource without keys disappears.
* ``Begin/End/AbortTransactionRecord`` group records that apply together (or not at all).

Errors in the records (a change to an unknown broker or partition...) raise
:class:`ReplayError` with the offset and Kafka's message.

The engine is Rust (``kraftkit._core.ImageState``, ``rust/src/image/``): records, batches and
whole segment and snapshot files are replayed there (files with the GIL released), and
snapshots are generated and written there. This module is its face: the attributes below
(``brokers``, ``topics``, ``configs``...) are Python views made from the engine on first
access and kept until the image changes; they are read-only snapshots of the image at that
moment (a view taken before a replay does not see it). ``replay(api_key, version, dict)`` takes
a record as ``decode_metadata_record`` gives it; missing fields take their schema defaults, as
if the record had been encoded and read back. The original pure-Python implementation is the
test oracle in ``tests/image/reference_image.py``.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

from kraftkit._core import ImageError, ImageState, RecordBatch, encode_control_record, zk_migration_states
from kraftkit._kafka import (  # noqa: F401  (metadata record api keys, importable from here)
    ABORT_TRANSACTION,
    ACCESS_CONTROL_ENTRY,
    BEGIN_TRANSACTION,
    BROKER_REGISTRATION_CHANGE,
    CLEAR_ELR,
    CLIENT_QUOTA,
    CONFIG,
    DELEGATION_TOKEN,
    END_TRANSACTION,
    FEATURE_LEVEL,
    FENCE_BROKER,
    NO_OP,
    PARTITION,
    PARTITION_CHANGE,
    PRODUCER_IDS,
    REGISTER_BROKER,
    REGISTER_CONTROLLER,
    REMOVE_ACCESS_CONTROL_ENTRY,
    REMOVE_DELEGATION_TOKEN,
    REMOVE_TOPIC,
    REMOVE_USER_SCRAM_CREDENTIAL,
    TOPIC,
    UNFENCE_BROKER,
    UNREGISTER_BROKER,
    UNREGISTER_CONTROLLER,
    USER_SCRAM_CREDENTIAL,
    ZK_MIGRATION_STATE,
)
from kraftkit.errors import KraftkitError
from kraftkit.log.control import ControlType
from kraftkit.metadata.versions import MINIMUM_KRAFT_MV, check_known, mv_name

if TYPE_CHECKING:
    from kraftkit.log.continuity import Discontinuity
    from kraftkit.metadata.snapshot import SnapshotId

ZERO_UUID = uuid.UUID(int=0)
#: DirectoryId.MIGRATING
MIGRATING = ZERO_UUID
MV_FEATURE = "metadata.version"
ELR_FEATURE = "eligible.leader.replicas.version"

# control record types
LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = (
    ControlType.LEADER_CHANGE,
    ControlType.SNAPSHOT_HEADER,
    ControlType.SNAPSHOT_FOOTER,
    ControlType.KRAFT_VERSION,
    ControlType.KRAFT_VOTERS,
)

#: ZkMigrationState names by id (from the engine's table).
ZK_MIGRATION_STATES = dict(zk_migration_states())
CONFIG_TYPES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
SCRAM_MECHANISMS = {0: "UNKNOWN", 1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def uuid_text(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


class ReplayError(KraftkitError):
    """A record that cannot be applied to the image (Kafka would fail to load it too)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(f"offset {offset}: {message}" if offset is not None else message)
        self.offset = offset
        self.reason = message


class UnwritableMetadataError(KraftkitError):
    """The image holds something the requested metadata.version cannot represent
    (``UnwritableMetadataException``)."""


def _raise(e: ImageError) -> NoReturn:
    """The engine's error as the exception callers catch."""
    if e.kind == "replay":
        raise ReplayError(e.reason, e.offset) from None
    if e.kind == "unwritable":
        raise UnwritableMetadataError(
            "Metadata has been lost because the following could not be represented "
            f"in metadata.version {mv_name(e.metadata_version)}: " + "; ".join(e.losses)
        ) from None
    if e.kind == "snapshot":
        from kraftkit.metadata.snapshot import SnapshotError

        raise SnapshotError(e.reason) from None
    raise e


@dataclass
class Provenance:
    """``MetadataProvenance``: the last offset in the image, its epoch and append time."""

    offset: int = -1
    epoch: int = -1
    timestamp: int = -1

    @property
    def end_offset(self) -> int:
        return self.offset + 1


@dataclass
class Topic:
    name: str
    id: uuid.UUID
    #: partition id -> PartitionRecord-shaped dict (Replicas, Isr, ..., LastKnownElr; lists, never None)
    partitions: dict[int, dict[str, Any]] = field(default_factory=dict)


_T = TypeVar("_T")


def _view(build: Callable[[MetadataImage], _T]) -> property:
    """A read-only attribute made by ``build`` on first access and kept until the image changes."""
    name = build.__name__

    def get(self: MetadataImage) -> _T:
        try:
            return self._views[name]
        except KeyError:
            v = self._views[name] = build(self)
            return v

    return property(get, doc=build.__doc__)


class MetadataImage:
    """An in-memory metadata image. Build one with :func:`load_image` or by replaying
    records (``replay(api_key, version, data)``, ``replay_batch(batch)``)."""

    def __init__(self, _state: ImageState | None = None) -> None:
        self._state = ImageState() if _state is None else _state
        self._views: dict[str, Any] = {}

    # ------------------------------------------------------------------ state
    @property
    def metadata_version(self) -> int | None:
        return self._state.metadata_version

    @property
    def zk_migration_state(self) -> int:
        return self._state.zk_migration_state

    @property
    def next_producer_id(self) -> int:
        return self._state.next_producer_id

    @property
    def kraft_version(self) -> int | None:
        """kraft.version from KRaftVersion control records (None: never seen, i.e. 0)."""
        return self._state.kraft_version

    @property
    def records_replayed(self) -> int:
        return self._state.records_replayed

    def records_replayed_of(self, api_keys: Iterable[int]) -> int:
        """Records applied of the given types (api keys; a record of a metadata transaction counts
        when the transaction ends): a reader following some kinds of records compares two counts to
        learn whether any was applied between them."""
        return self._state.replayed_of(list(api_keys))

    @property
    def provenance(self) -> Provenance:
        return Provenance(*self._state.provenance)

    @provenance.setter
    def provenance(self, p: Provenance) -> None:
        self._state.set_provenance(p.offset, p.epoch, p.timestamp)

    @_view
    def features(self) -> dict[str, int]:
        """Finalized feature levels other than metadata.version."""
        return self._state.features()

    @_view
    def brokers(self) -> dict[int, dict[str, Any]]:
        return self._state.brokers()

    @_view
    def controllers(self) -> dict[int, dict[str, Any]]:
        return self._state.controllers()

    @_view
    def topics(self) -> dict[uuid.UUID, Topic]:
        return {tid: Topic(name, tid, parts) for name, tid, parts in self._state.topics()}

    @_view
    def topic_ids(self) -> dict[str, uuid.UUID]:
        return self._state.topic_ids()

    @_view
    def configs(self) -> dict[tuple[int, str], dict[str, str]]:
        return self._state.configs()

    @_view
    def client_quotas(self) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        return self._state.client_quotas()

    @_view
    def acls(self) -> dict[uuid.UUID, dict[str, Any]]:
        return self._state.acls()

    @_view
    def scram(self) -> dict[tuple[int, str], dict[str, Any]]:
        return self._state.scram()

    @_view
    def delegation_tokens(self) -> dict[str, dict[str, Any]]:
        return self._state.delegation_tokens()

    @_view
    def voters(self) -> dict[str, Any] | None:
        """The last VotersRecord, decoded (None: none seen)."""
        return self._state.voters()

    @property
    def in_transaction(self) -> bool:
        """A metadata transaction is open (BeginTransactionRecord seen, no End or Abort yet)."""
        return bool(self._state.in_transaction)

    @_view
    def pending_transaction(self) -> list[tuple[int, int, dict[str, Any], int | None]] | None:
        """Records of an open metadata transaction (BeginTransactionRecord seen, no End yet)."""
        return self._state.pending_transaction()

    # ------------------------------------------------------------------ accessors
    def copy(self) -> MetadataImage:
        return MetadataImage(self._state.copy())

    def topic(self, name: str) -> Topic | None:
        tid = self.topic_ids.get(name)
        return None if tid is None else self.topics.get(tid)

    @property
    def topic_count(self) -> int:
        return self._state.topic_count

    @property
    def partition_count(self) -> int:
        """Partitions of every topic (without building the topic views)."""
        return self._state.partition_count

    @property
    def finalized_features(self) -> dict[str, int]:
        """All finalized feature levels, metadata.version included (when set)."""
        out = dict(self.features)
        if self.metadata_version is not None:
            out[MV_FEATURE] = self.metadata_version
        return out

    @property
    def effective_metadata_version(self) -> int:
        return MINIMUM_KRAFT_MV if self.metadata_version is None else self.metadata_version

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MetadataImage):
            return NotImplemented
        return self.sections() == other.sections()

    __hash__: ClassVar[None] = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MetadataImage(mv={mv_name(self.metadata_version)}, brokers={sorted(self.brokers)}, "
            f"topics={self.topic_count}, offset={self._state.provenance[0]})"
        )

    # ------------------------------------------------------------------ replay
    def replay_batch(self, batch: RecordBatch) -> None:
        """Applies every record of one KRaft batch (data or control) and moves the
        provenance to its last offset."""
        self._views.clear()
        try:
            self._state.replay_batch(batch)
        except ImageError as e:
            _raise(e)

    def replay_control(self, control_type: int, data: dict[str, Any] | None) -> None:
        self._views.clear()
        try:
            self._state.replay_control(control_type, data)
        except ImageError as e:
            _raise(e)

    def replay(self, api_key: int, version: int, data: dict[str, Any], offset: int | None = None) -> None:
        """Applies one metadata record (decoded dict, schema field names). The dict is
        encoded at ``version`` and applied as the record it encodes: missing fields take their
        defaults, and a dict the codec cannot encode (a wrong type, a non-default field the
        version lacks, an invalid version) raises :class:`ReplayError` ("malformed ... record")."""
        if self._views:
            self._views.clear()
        try:
            self._state.replay(api_key, version, data, offset)
        except ImageError as e:
            _raise(e)

    def _replay_log(self, files: list[Path], start: int, at: int | None, *, skip_below_start: bool) -> int:
        """Replays log segment files (records at or above ``start`` and below ``at``); returns the
        end offset reached."""
        self._views.clear()
        try:
            end, _ = self._state.replay_log([str(f) for f in files], start, at, skip_below_start)
        except ImageError as e:
            _raise(e)
        return end

    # ------------------------------------------------------------------ views
    def sections(self) -> dict[str, Any]:
        """The image as plain JSON-able data, one entry per section (the delta and the shell
        are computed from this). Uuids are in Kafka's text form."""
        return {
            "features": {
                "metadataVersion": mv_name(self.metadata_version),
                "metadataVersionLevel": self.metadata_version,
                "finalized": dict(sorted(self.features.items())),
                "zkMigrationState": ZK_MIGRATION_STATES.get(self.zk_migration_state, str(self.zk_migration_state)),
            },
            "brokers": {str(k): _jsonable(v) for k, v in sorted(self.brokers.items())},
            "controllers": {str(k): _jsonable(v) for k, v in sorted(self.controllers.items())},
            "topics": {
                t.name: {
                    "id": uuid_text(t.id),
                    "partitions": {str(p): _jsonable(v) for p, v in sorted(t.partitions.items())},
                }
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            },
            "configs": {_config_node(k): dict(sorted(v.items())) for k, v in sorted(self.configs.items())},
            "clientQuotas": {
                _entity_node(k): dict(sorted(v.items())) for k, v in sorted(self.client_quotas.items(), key=_quota_sort)
            },
            "producerIds": {"nextProducerId": self.next_producer_id},
            "acls": {uuid_text(k): _jsonable(v) for k, v in sorted(self.acls.items(), key=lambda kv: uuid_text(kv[0]))},
            "scram": {f"{SCRAM_MECHANISMS.get(m, m)}:{u}": _jsonable(v) for (m, u), v in sorted(self.scram.items())},
            "delegationTokens": {k: _jsonable(v) for k, v in sorted(self.delegation_tokens.items())},
        }

    # ------------------------------------------------------------------ snapshots
    def snapshot_records(self, metadata_version: int | None = None) -> list[tuple[int, int, dict[str, Any]]]:
        """The records of a snapshot of this image, in Kafka's order (``MetadataImage.write``),
        at the record versions of ``metadata_version`` (default: the image's), keys sorted
        within each section so equal images give equal records. Raises
        :class:`UnwritableMetadataError` when something cannot be represented at that version,
        :class:`~kraftkit.metadata.versions.NewerThanKnownError` for a level the tables lack."""
        mv = self.effective_metadata_version if metadata_version is None else metadata_version
        check_known({MV_FEATURE: mv}, "write records at it (kraftkit does not know the record versions it writes)")
        try:
            return self._state.snapshot_records(metadata_version)
        except ImageError as e:
            _raise(e)

    def write_snapshot(
        self,
        directory: str | os.PathLike[str],
        snapshot_id: SnapshotId | None = None,
        *,
        last_contained_log_timestamp: int | None = None,
        metadata_version: int | None = None,
        kraft_version: int | None = None,
        voters: dict[str, Any] | bool | None = True,
        time_ms: int | None = None,
        batch_records: int = 1024,
    ) -> Path:
        """Writes this image as a KRaft snapshot ``<end offset>-<epoch>.checkpoint`` in
        ``directory`` and returns its path.

        ``snapshot_id`` defaults to the provenance (end offset = last offset + 1, its epoch);
        ``last_contained_log_timestamp`` to the provenance's time. kraft.version and the voter
        set default to the image's (from KRaftVersion/Voters control records); pass
        ``voters=None`` to leave the voter set out. Every batch timestamp is ``time_ms``,
        by default the last contained log timestamp, so that the same image always gives
        the same bytes. Records go to the writer in lists of ``batch_records`` (Kafka's
        ``SnapshotEmitter`` uses 1024), as :class:`~kraftkit.metadata.snapshot.SnapshotWriter`
        writes them (same batches, same bytes); the engine generates, encodes and writes them
        with the GIL released."""
        from kraftkit.metadata.snapshot import MAX_BATCH_BYTES, SnapshotId

        prov = self.provenance
        if snapshot_id is None:
            if prov.offset < 0:
                raise KraftkitError("the image has no provenance; pass a snapshot id")
            snapshot_id = SnapshotId(prov.end_offset, prov.epoch)
        if batch_records < 1:
            raise ValueError(f"batch_records must be at least 1, got {batch_records}")
        ts = prov.timestamp if last_contained_log_timestamp is None else last_contained_log_timestamp
        kv = (self.kraft_version or 0) if kraft_version is None else kraft_version
        if voters is True:
            voters_arg: bool | bytes | None = True if kv >= 1 else None
        else:
            voters_arg = None if not voters else encode_control_record(KRAFT_VOTERS, voters)
        # the record versions a level writes are known only for the levels of the tables
        mv = self.effective_metadata_version if metadata_version is None else metadata_version
        check_known({MV_FEATURE: mv}, "write a snapshot at it (kraftkit does not know the record versions it writes)")
        prefix = f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}-"
        try:
            path = self._state.write_snapshot(
                os.fspath(directory),
                snapshot_id.file_name,
                prefix,
                epoch=snapshot_id.epoch,
                last_contained_log_timestamp=ts,
                kraft_version=kv,
                voters=voters_arg,
                time_ms=ts if time_ms is None else time_ms,
                metadata_version=metadata_version,
                batch_records=batch_records,
                max_batch_bytes=MAX_BATCH_BYTES,
            )
        except ImageError as e:
            _raise(e)
        return Path(path)


def _jsonable(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return uuid_text(v)
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


def _config_node(key: tuple[int, str]) -> str:
    """``ConfigurationsImageNode``: ``TYPE`` for the default resource, ``TYPE:name`` otherwise."""
    rtype, name = key
    t = CONFIG_TYPES.get(rtype, str(rtype))
    return t if name == "" else f"{t}:{name}"


def _quota_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _entity_node(entity: tuple[tuple[str, str | None], ...]) -> str:
    """``ClientQuotasImageNode.clientQuotaEntityToString``: clientId(..)_ip(..)_user(..)."""
    d = dict(entity)
    parts = []
    for t in ("client-id", "ip", "user"):
        if t in d:
            label = {"client-id": "clientId"}.get(t, t)
            parts.append(f"{label}({_quota_escape(d[t] or '')})")
    others = sorted(t for t in d if t not in ("client-id", "ip", "user"))
    parts += [f"{t}({_quota_escape(d[t] or '')})" for t in others]
    return "_".join(parts)


def _quota_sort(kv):
    return tuple((t, n or "") for t, n in kv[0])


# ---------------------------------------------------------------------- loading


def replay_records(
    records: Iterable[tuple[int, int, dict[str, Any]]], image: MetadataImage | None = None
) -> MetadataImage:
    """Replays (api_key, version, dict) records into ``image`` (a new one by default)."""
    img = MetadataImage() if image is None else image
    for i, (k, v, d) in enumerate(records):
        img.replay(k, v, d, i)
    return img


def load_snapshot(path: str | os.PathLike[str]) -> MetadataImage:
    """The image a snapshot file holds (provenance from its name and header)."""
    from kraftkit.metadata.snapshot import SnapshotReader

    reader = SnapshotReader(path)
    err = reader.verify()["error"]
    if err is not None:
        raise err
    img = MetadataImage()
    try:
        ts = img._state.replay_snapshot(str(Path(path)))
    except ImageError as e:
        _raise(e)
    if img._state.in_transaction:
        raise ReplayError(f"{path}: snapshot ends inside a metadata transaction")
    sid = reader.snapshot_id
    if sid is not None:
        img.provenance = Provenance(sid.end_offset - 1, sid.epoch, ts)
    else:
        img.provenance = Provenance(-1, 0, ts)
    return img


def load_image(
    path: str | os.PathLike[str],
    at: int | None = None,
    *,
    use_snapshots: bool = True,
    allow_gaps: bool = False,
    gaps: list[Discontinuity] | None = None,
) -> MetadataImage:
    """The image at ``at`` (an exclusive end offset; default: the end of the log) of a
    log directory or ``__cluster_metadata-0`` directory: the newest snapshot whose end offset
    is at most ``at``, then the log's batches from the snapshot's end up to ``at``.
    A snapshot file gives its own image; a segment file is replayed alone.
    ``use_snapshots=False`` replays the log from its start (which must be offset 0).

    The log is checked first (``source.check_log``): a hole, an overlap or a snapshot that does
    not match the log raises :class:`~kraftkit.metadata.source.ContinuityError` listing them.
    With ``allow_gaps`` they are appended to ``gaps`` instead, offsets held twice are replayed
    once (the first time) and the replay goes on after a hole; corrupt bytes still raise.

    Every batch read is CRC checked; a batch that straddles the snapshot's end or ``at`` is
    applied record by record. The log is replayed by the engine with the GIL released."""
    from kraftkit.log.continuity import check_segments
    from kraftkit.log.log import list_segments
    from kraftkit.metadata.snapshot import list_snapshots
    from kraftkit.metadata.source import (
        MetadataSourceError,
        check_log,
        classify,
        metadata_dir,
        order_errors,
        refuse_or_note,
        scan_segments,
    )

    if at is not None and at < 0:
        raise ValueError(f"offset {at} is negative")
    p = Path(path)
    if p.is_file():
        f = classify(p)
        if p.suffix == ".checkpoint" or (f is not None and f.kind == "snapshot"):
            img = load_snapshot(p)
            if at is not None and at != img.provenance.end_offset:
                raise MetadataSourceError(f"{p}: a snapshot ending at {img.provenance.end_offset} has no image at {at}")
            return img
        if p.suffix == ".log":
            reps = scan_segments([p])
            probs = check_segments(reps, dense=True) + order_errors(reps)
            refuse_or_note([x for x in probs if at is None or x.offset is None or x.offset < at], allow_gaps, gaps)
            img = MetadataImage()
            img._replay_log([p], 0, at, skip_below_start=False)
            return img
        raise MetadataSourceError(f"{p}: not a metadata log segment or snapshot")
    if not p.is_dir():
        raise MetadataSourceError(f"{p}: no such file or directory")
    d = metadata_dir(p)
    segs = list_segments(d)
    snaps = [s for s in list_snapshots(d) if at is None or s.end_offset <= at] if use_snapshots else []
    if not segs and not snaps:
        raise MetadataSourceError(f"{d}: no metadata log segments or snapshots")
    start = snaps[-1].end_offset if snaps else 0
    refuse_or_note(check_log(d, at=at, snapshots=snaps[-1:], start=start), allow_gaps, gaps)
    img = load_snapshot(d / snaps[-1].file_name) if snaps else MetadataImage()
    if at is not None and at <= start:
        return img
    if not segs:
        if at is not None:
            raise MetadataSourceError(f"{d}: no log segments after the snapshot at {start}; cannot reach offset {at}")
        return img
    # segments that end before the start are not read; each file is replayed from the end
    # reached so far, so that offsets held twice (allowed with allow_gaps) are applied once
    files = [d / f"{base:020d}.log" for i, base in enumerate(segs) if not (i + 1 < len(segs) and segs[i + 1] <= start)]
    end = start
    for seg in files:
        end = max(end, img._replay_log([seg], end, at, skip_below_start=True))
        if at is not None and end >= at:
            break
    if at is not None and end < at:
        raise MetadataSourceError(f"{d}: the log ends at offset {end}, below {at}")
    return img


def batch_ending_at(path: str | os.PathLike[str], offset: int) -> RecordBatch:
    """The log batch whose last offset is ``offset - 1`` in a metadata partition directory
    (a snapshot may only end at a batch boundary). Raises ``MetadataSourceError`` otherwise."""
    from kraftkit.log.log import list_segments
    from kraftkit.metadata.source import MetadataSourceError, batches, metadata_dir

    d = metadata_dir(path)
    segs = [b for b in list_segments(d) if b < offset]
    if offset <= 0 or not segs:
        raise MetadataSourceError(f"{d}: no log batch ends at offset {offset}")
    for batch in batches(d / f"{segs[-1]:020d}.log"):
        if batch.last_offset + 1 == offset:
            return batch
        if batch.last_offset + 1 > offset:
            before = f"{batch.base_offset} (its start) or " if batch.base_offset > 0 else ""
            raise MetadataSourceError(
                f"{d}: offset {offset} is inside the batch {batch.base_offset}..{batch.last_offset}; "
                f"a snapshot must end at a batch boundary: use {before}{batch.last_offset + 1} (its end)"
            )
    raise MetadataSourceError(f"{d}: offset {offset} is past the end of the log")
