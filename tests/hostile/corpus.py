"""The hostile corpus: a valid KRaft log directory written by kraftkit, and generators that each
damage a copy of it in one way the issue names (bombs, gaps, duplicates, lying lengths, wrong
names, special files, and the counts, deltas and timestamps around them).

The valid base (:func:`write_base`) is a formatted log directory (``kraftkit storage format``:
``meta.properties``, ``bootstrap.checkpoint``) holding ``__cluster_metadata-0``: a few hundred
Topic/Partition/Config/RegisterBroker/FeatureLevel/NoOp records (``kraftkit.metadata.generate``'s record
builders) over three leader epochs, in batches of up to 30 records (every codec appears; the
log's last batch is uncompressed), rolled every 8 KiB into five segments, and a snapshot written
by ``kraftkit snapshot create`` at the end of the first data batch (so every segment is replayed
after it).

Each generator gets the base's layout and a fresh copy of it, damages the copy and returns a
:class:`Damage`: the hostile file and what a correct error must name (file names, any one of
which will do; batch offsets and byte positions where the case knows them). The damaged segment's
``.index``/``.timeindex`` are removed (Kafka rebuilds missing indexes, kraftkit accepts them
missing), so that each case holds exactly one kind of damage.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.hostile import batches as B

PART = "__cluster_metadata-0"
#: the example cluster id of Kafka's quickstart (any valid 22-character id does)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
SEGMENT_BYTES = 8 * 1024
CODEC_CYCLE = ["none", "zstd", "none", "gzip", "none", "lz4", "none", "snappy"]
#: 2^31-1: the largest int32
INT32_MAX = 2**31 - 1
#: far past Python's datetime range (year 9999 ends at 253402300799999 ms)
HUGE_TIMESTAMP = 2**62


def seg_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def snap_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def kraftkit_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=True)


# --------------------------------------------------------------------------------- the base


@dataclass(frozen=True)
class Base:
    """The valid log directory and its layout (names and batch headers, read with ``struct``)."""

    root: Path
    segments: dict[int, list[B.BatchInfo]]  # base offset -> batches, in order
    snapshot: str  # file name in the partition directory
    snapshot_batches: list[B.BatchInfo]
    log_end: int

    @property
    def bases(self) -> list[int]:
        return sorted(self.segments)

    def last_batch(self) -> tuple[int, B.BatchInfo]:
        base = self.bases[-1]
        return base, self.segments[base][-1]

    def pick(self, segment: int, *, codec: int | None = 0, min_count: int = 1, skip: int = 0) -> tuple[int, B.BatchInfo]:
        """A data batch of the ``segment``-th segment (after ``skip`` batches)."""
        base = self.bases[segment]
        for b in self.segments[base][skip:]:
            if not b.is_control and b.count >= min_count and (codec is None or b.codec == codec):
                return base, b
        raise AssertionError(f"segment {base} has no data batch with codec {codec} and {min_count}+ records")


def write_base(root: Path) -> Base:
    """Writes the valid log directory at ``root`` (see the module docstring)."""
    from kraftkit.metadata.generate import leader_change_value, metadata_records
    from kraftkit.log import Log, encode_batch
    from kraftkit.log.control import ControlType
    from kraftkit._core import control_record_key

    root.mkdir(parents=True)
    kraftkit_cli("storage", "format", "--cluster-id", CLUSTER_ID, "--node-id", "1", "--directories", str(root),
                 "--release-version", "3.9")
    part = root / PART
    rng = random.Random(15)
    groups = list(metadata_records(rng, topics=40, partitions=6, brokers=4))
    epochs, voters, now, n = 3, [1, 2, 3], 1_700_000_000_000, 0
    per_epoch = -(-len(groups) // epochs)
    with Log(part, create=True, segment_bytes=SEGMENT_BYTES) as log:
        def flush(values: list[bytes], epoch: int, codec: str) -> None:
            log.append(encode_batch([(now, None, v, []) for v in values], base_offset=log.log_end_offset,
                                    partition_leader_epoch=epoch, compression=codec))

        for epoch in range(1, epochs + 1):
            lc = leader_change_value(voters[(epoch - 1) % 3], voters)
            log.append(encode_batch([(now, control_record_key(ControlType.LEADER_CHANGE), lc, [])],
                                    base_offset=log.log_end_offset, partition_leader_epoch=epoch, control=True))
            pending: list[bytes] = []
            for group in groups[(epoch - 1) * per_epoch: epoch * per_epoch]:
                if pending and len(pending) + len(group) > 30:
                    flush(pending, epoch, CODEC_CYCLE[n % len(CODEC_CYCLE)])
                    n += 1
                    pending = []
                    now += 7
                pending.extend(group)
            flush(pending, epoch, "none")  # the log's last batch is uncompressed
            now += 1000
    segments = {int(p.name[:20]): B.parse_batches(p.read_bytes()) for p in part.glob("*.log")}
    first = segments[0]
    assert len(segments) >= 4 and len(first) >= 4, "the base log needs 4+ segments and 4+ batches in the first"
    snap_at = first[1].last_offset + 1
    kraftkit_cli("snapshot", "create", str(root), "--at", str(snap_at))
    (snap,) = [p for p in part.glob("*.checkpoint")]
    last = segments[max(segments)][-1]
    return Base(root, segments, snap.name, B.parse_batches(snap.read_bytes()), last.last_offset + 1)


# ---------------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Damage:
    """What a generator did: the hostile file, and what a correct error must name."""

    file: Path
    #: basenames; a correct error names at least one of them
    names: tuple[str, ...]
    #: batch offsets; a correct error names at least one of them (empty: not required)
    offsets: tuple[int, ...] = ()
    #: byte positions; a correct error names at least one of them (empty: not required)
    positions: tuple[int, ...] = ()
    #: ``snapshot create --at``: an offset whose image needs the damaged bytes (None: the log end)
    at: int | None = None
    #: the snapshot file ``snapshot verify``/``rewrite`` read (None: the partition's snapshot)
    snapshot: Path | None = None
    #: the path ``features describe`` reads (None: the log directory)
    describe: Path | None = None
    #: a regular expression (case-insensitive) the reason must match where an error names
    #: ``file`` itself: what the file is (a FIFO, a loop...), not a misleading OS error
    reason: str | None = None


@dataclass(frozen=True)
class Spec:
    name: str
    #: the issue's class: bombs, counts, deltas, timestamps, gaps, duplicates, lying lengths,
    #: truncation, wrong names, special files
    klass: str
    #: "data": damaged bytes or layout; "special": a file that is not a regular file;
    #: "benign": unusual but not invalid (exit 0 allowed, never a traceback)
    level: str
    commands: tuple[str, ...]
    make: Callable[[Base, Path], Damage]
    #: commands whose argument is the hostile file itself (unreadable input: exit 2)
    direct: frozenset[str] = frozenset()
    #: commands that may skip the hostile file and succeed (Kafka's log loader skips whatever
    #: is not a regular file; skipping must not leave a hole in the log)
    may_skip: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Case:
    spec: Spec
    root: Path
    damage: Damage
    log_end: int
    default_snapshot: Path

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def part(self) -> Path:
        return self.root / PART

    @property
    def at(self) -> int:
        return self.log_end if self.damage.at is None else self.damage.at

    @property
    def snapshot(self) -> Path:
        return self.damage.snapshot or self.default_snapshot


REGISTRY: dict[str, Spec] = {}

# the commands, by the names the tests use
DUMP = "dump-log"
DUMP_DEEP = "dump-log --deep"
DUMP_DATA = "dump-log --deep --print-data"
VERIFY = "verify-log --deep"
MDUMP = "metadata dump"
MRECORDS = "metadata records"
IMAGE = "metadata image"
SVERIFY = "snapshot verify"
CREATE = "snapshot create"
REWRITE = "snapshot rewrite"
STORAGE = "storage info"
DESCRIBE = "features describe"
ALL_COMMANDS = (DUMP, DUMP_DEEP, DUMP_DATA, VERIFY, MDUMP, MRECORDS, IMAGE, SVERIFY, CREATE, REWRITE, STORAGE, DESCRIBE)
#: commands that read the whole log directory
LOG_READERS = (VERIFY, MDUMP, MRECORDS, IMAGE, CREATE, DESCRIBE)
#: commands whose documented output is a report that lists the problems on stdout
REPORTS = frozenset({VERIFY, SVERIFY, STORAGE})


def case(name: str, klass: str, level: str, commands: tuple[str, ...], *, direct: tuple[str, ...] = (),
         may_skip: tuple[str, ...] = ()) -> Callable[[Callable[[Base, Path], Damage]], Callable[[Base, Path], Damage]]:
    def register(make: Callable[[Base, Path], Damage]) -> Callable[[Base, Path], Damage]:
        assert name not in REGISTRY
        REGISTRY[name] = Spec(name, klass, level, commands, make, frozenset(direct), frozenset(may_skip))
        return make
    return register


def make_case(name: str, base: Base, dest: Path) -> Case:
    """A copy of the base under ``dest``, damaged by the generator ``name``."""
    spec = REGISTRY[name]
    root = dest / "logdir"
    shutil.copytree(base.root, root, symlinks=True)
    damage = spec.make(base, root)
    return Case(spec, root, damage, base.log_end, root / PART / base.snapshot)


def valid_case(base: Base, dest: Path) -> Case:
    """An undamaged copy (every command must exit 0 on it)."""
    root = dest / "logdir"
    shutil.copytree(base.root, root, symlinks=True)
    spec = Spec("valid", "valid", "valid", ALL_COMMANDS, lambda b, r: Damage(r, ()))
    name = seg_name(base.bases[1])
    return Case(spec, root, Damage(root / PART / name, (name,)), base.log_end, root / PART / base.snapshot)


# ------------------------------------------------------------------------ segment surgery


def _drop_indexes(seg: Path) -> None:
    for suffix in (".index", ".timeindex"):
        seg.with_suffix(suffix).unlink(missing_ok=True)


def replace_batch(seg: Path, batch: B.BatchInfo, new: bytes) -> None:
    data = seg.read_bytes()
    seg.write_bytes(data[: batch.position] + new + data[batch.end:])
    _drop_indexes(seg)


def batch_bytes(seg: Path, batch: B.BatchInfo) -> bytearray:
    return bytearray(seg.read_bytes()[batch.position: batch.end])


def _segment(root: Path, base: int) -> Path:
    return root / PART / seg_name(base)


# ------------------------------------------------------------------------------------ bombs

#: two records of ~2 GiB of zeros and a small one: > 4 GiB, every record length a valid int32
BOMB_VALUES = [INT32_MAX - 63, INT32_MAX - 63, 1 << 20]
#: lz4 cannot beat ~255:1: ~1.05 GiB (more than the runner's 1 GiB address space) in ~4.5 MB
LZ4_BOMB_VALUES = [540 << 20, 540 << 20]
_BOMB_CACHE: dict[str, tuple[bytes, int]] = {}


def bomb_area(codec: str) -> tuple[bytes, int]:
    """(compressed records area, record count) of the ``codec`` bomb, made once per process."""
    if codec not in _BOMB_CACHE:
        if codec == "zstd":
            _BOMB_CACHE[codec] = (B.zstd_bomb(B.framed_records(BOMB_VALUES)), len(BOMB_VALUES))
        elif codec == "gzip":
            _BOMB_CACHE[codec] = (B.gzip_bomb(B.framed_records(BOMB_VALUES)), len(BOMB_VALUES))
        elif codec == "lz4":
            _BOMB_CACHE[codec] = (B.lz4_bomb(B.framed_records(LZ4_BOMB_VALUES)), len(LZ4_BOMB_VALUES))
        else:
            head = B.framed_records([INT32_MAX - 63])[0]
            _BOMB_CACHE[codec] = (B.snappy_lying_bomb(head, 0xFFFFFFFF), 1)
    return _BOMB_CACHE[codec]


def _bomb(codec: str) -> Callable[[Base, Path], Damage]:
    def make(base: Base, root: Path) -> Damage:
        seg_base, last = base.last_batch()
        seg = _segment(root, seg_base)
        area, count = bomb_area(codec)
        replace_batch(seg, last, B.build_batch(area, base_offset=last.base_offset, count=count,
                                               last_offset_delta=count - 1, codec=codec, epoch=last.epoch,
                                               timestamp=last.max_timestamp))
        return Damage(seg, (seg.name,), (last.base_offset,), (last.position,), at=last.base_offset + count)
    return make


_RECORD_READERS = (DUMP_DEEP, DUMP_DATA, *LOG_READERS)
_FRAME_READERS = (DUMP, DUMP_DEEP, DUMP_DATA, *LOG_READERS)

for _codec in ("gzip", "zstd", "lz4", "snappy"):
    case(f"bomb-{_codec}", "bombs", "data", _RECORD_READERS)(_bomb(_codec))


# ------------------------------------------------------------------- counts, deltas, times


def _last_batch_patched(base: Base, root: Path, fields: dict[str, int]) -> tuple[Path, B.BatchInfo]:
    seg_base, last = base.last_batch()
    seg = _segment(root, seg_base)
    raw = batch_bytes(seg, last)
    for name, value in fields.items():
        B.patch(raw, name, value)
    replace_batch(seg, last, bytes(raw))
    return seg, last


@case("count-int32-max", "counts", "data", _RECORD_READERS)
def count_int32_max(base: Base, root: Path) -> Damage:
    """The log's last batch (uncompressed) says it holds 2^31-1 records (lastOffsetDelta to
    match, CRC valid): a reader that sizes anything by the count runs out of memory."""
    seg, last = _last_batch_patched(base, root, {"records_count": INT32_MAX, "last_offset_delta": INT32_MAX - 1})
    return Damage(seg, (seg.name,), (last.base_offset,), (last.position,), at=last.base_offset + INT32_MAX)


@case("count-2pow28-compressed", "counts", "data", _RECORD_READERS)
def count_2_28_compressed(base: Base, root: Path) -> Damage:
    """The log's last batch, its records zstd-compressed, says it holds 2^28 records."""
    seg_base, last = base.last_batch()
    seg = _segment(root, seg_base)
    raw = batch_bytes(seg, last)
    assert last.codec == 0
    area = B.zstd_bomb([bytes(raw[B.HEADER_SIZE:])])
    n = 2**28
    replace_batch(seg, last, B.build_batch(area, base_offset=last.base_offset, count=n, last_offset_delta=n - 1,
                                           codec="zstd", epoch=last.epoch, timestamp=last.max_timestamp))
    return Damage(seg, (seg.name,), (last.base_offset,), (last.position,), at=last.base_offset + n)


@case("last-offset-delta-short", "deltas", "data", _RECORD_READERS)
def last_offset_delta_short(base: Base, root: Path) -> Damage:
    """A batch of the second segment whose lastOffsetDelta is 3 below its last record's offset
    delta (CRC valid): records past the batch's own last offset (compaction can only make the
    delta larger than the records', never smaller)."""
    seg_base, b = base.pick(1, min_count=5, skip=1)
    seg = _segment(root, seg_base)
    raw = B.patch(batch_bytes(seg, b), "last_offset_delta", b.count - 4)
    replace_batch(seg, b, bytes(raw))
    return Damage(seg, (seg.name,), (b.base_offset,), (b.position,))


@case("timestamp-out-of-range", "timestamps", "benign", _FRAME_READERS)
def timestamp_out_of_range(base: Base, root: Path) -> Damage:
    """The log's last batch (the image's provenance) with record timestamps of 2^62 ms, far past
    what Python's datetime holds (CRC valid). Not invalid bytes: a tool may print it or refuse
    it, but not crash on it."""
    seg, last = _last_batch_patched(base, root, {"base_timestamp": HUGE_TIMESTAMP, "max_timestamp": HUGE_TIMESTAMP})
    return Damage(seg, (seg.name,), (last.base_offset,), (last.position,))


# ------------------------------------------------------------------------- lying lengths


@case("record-length-huge", "lying lengths", "data", _RECORD_READERS)
def record_length_huge(base: Base, root: Path) -> Damage:
    """The first record of an uncompressed batch says it is 0x3fffffff bytes long; the batch
    length and CRC are made consistent with the new bytes."""
    seg_base, b = base.pick(1, min_count=2, skip=1)
    seg = _segment(root, seg_base)
    raw = batch_bytes(seg, b)
    (pos, _), *_ = B.records_of(bytes(raw))
    _, after = B.read_varint(bytes(raw), pos)
    new = raw[:pos] + B.varint(0x3FFFFFFF) + raw[after:]
    B.patch(new, "length", len(new) - 12, crc=False)
    replace_batch(seg, b, bytes(B.fix_crc(new)))
    return Damage(seg, (seg.name,), (b.base_offset,), (b.position, b.position + pos))


def _batch_length(value: Callable[[B.BatchInfo], int]) -> Callable[[Base, Path], Damage]:
    def make(base: Base, root: Path) -> Damage:
        seg_base, b = base.pick(1, codec=None, skip=1)
        seg = _segment(root, seg_base)
        raw = B.patch(batch_bytes(seg, b), "length", value(b), crc=False)  # the length is outside the CRC
        replace_batch(seg, b, bytes(raw))
        return Damage(seg, (seg.name,), (b.base_offset,), (b.position,))
    return make


case("batch-length-huge", "lying lengths", "data", _FRAME_READERS)(_batch_length(lambda b: 0x7FFFFFF0))
case("batch-length-negative", "lying lengths", "data", _FRAME_READERS)(_batch_length(lambda b: -1))
case("batch-length-short", "lying lengths", "data", _FRAME_READERS)(_batch_length(lambda b: b.length - 7))


@case("truncated-mid-batch", "truncation", "data", _FRAME_READERS)
def truncated_mid_batch(base: Base, root: Path) -> Damage:
    """The second segment cut in the middle of its second batch (not the active segment: a
    torn write cannot explain it, and the offsets after it are lost)."""
    seg_base, b = base.pick(1, codec=None, skip=1)
    seg = _segment(root, seg_base)
    cut = b.position + b.size // 2
    os.truncate(seg, cut)
    _drop_indexes(seg)
    return Damage(seg, (seg.name,), (b.base_offset,), (b.position, cut))


# ------------------------------------------------------------------- gaps and duplicates


@case("segment-missing", "gaps", "data", LOG_READERS)
def segment_missing(base: Base, root: Path) -> Damage:
    """The second of five segments deleted: offsets missing in the middle of the log."""
    prev, gone, nxt = base.bases[0], base.bases[1], base.bases[2]
    seg = _segment(root, gone)
    seg.unlink()
    _drop_indexes(seg)
    return Damage(_segment(root, nxt), (seg_name(prev), seg_name(gone), seg_name(nxt)), (gone, gone - 1, nxt))


@case("first-segment-truncated", "gaps", "data", LOG_READERS)
def first_segment_truncated(base: Base, root: Path) -> Damage:
    """The first segment cut at a batch boundary (after the snapshot's end): every batch is
    whole, but the offsets up to the next segment's base are gone."""
    first = base.segments[0]
    keep = first[2]
    seg = _segment(root, 0)
    os.truncate(seg, keep.end)
    _drop_indexes(seg)
    gap = keep.last_offset + 1
    return Damage(seg, (seg.name, seg_name(base.bases[1])), (gap, gap - 1, base.bases[1]))


@case("segment-duplicate", "duplicates", "data", (VERIFY, MDUMP, MRECORDS, IMAGE, DESCRIBE))
def segment_duplicate(base: Base, root: Path) -> Damage:
    """A copy of the last segment under the next base offset's name (the log end): the same
    offsets twice. (``snapshot create`` is not run: no batch ends past the log end.)"""
    last = base.bases[-1]
    dup = _segment(root, base.log_end)
    shutil.copyfile(_segment(root, last), dup)
    return Damage(dup, (dup.name, seg_name(last)), (last, base.log_end))


@case("segment-wrong-base", "wrong names", "data", LOG_READERS)
def segment_wrong_base(base: Base, root: Path) -> Damage:
    """The third segment renamed 5 offsets past its first batch's offset."""
    real = base.bases[2]
    wrong = _segment(root, real + 5)
    _segment(root, real).rename(wrong)
    _drop_indexes(_segment(root, real))
    return Damage(wrong, (wrong.name,), (real, real + 5))


# ------------------------------------------------------------------------------ snapshots

_SNAPSHOT_READERS = (SVERIFY, REWRITE, IMAGE, CREATE, DESCRIBE)


def _snapshot(base: Base, root: Path) -> Path:
    return root / PART / base.snapshot


@case("snapshot-empty", "truncation", "data", _SNAPSHOT_READERS)
def snapshot_empty(base: Base, root: Path) -> Damage:
    snap = _snapshot(base, root)
    os.truncate(snap, 0)
    return Damage(snap, (snap.name,), snapshot=snap)


@case("snapshot-wrong-epoch", "wrong names", "data", _SNAPSHOT_READERS)
def snapshot_wrong_epoch(base: Base, root: Path) -> Damage:
    """The snapshot renamed with epoch+6; its batches carry the real epoch."""
    snap = _snapshot(base, root)
    end, epoch = int(base.snapshot[:20]), int(base.snapshot[21:31])
    wrong = snap.with_name(snap_name(end, epoch + 6))
    snap.rename(wrong)
    return Damage(wrong, (wrong.name,), snapshot=wrong)


@case("snapshot-epoch-overflow", "wrong names", "data", (*_SNAPSHOT_READERS, VERIFY, MDUMP, MRECORDS))
def snapshot_epoch_overflow(base: Base, root: Path) -> Damage:
    """The snapshot renamed with an epoch of ten digits above Kafka's int32 (9999999999)."""
    snap = _snapshot(base, root)
    wrong = snap.with_name(f"{base.snapshot[:20]}-9999999999.checkpoint")
    snap.rename(wrong)
    return Damage(wrong, (wrong.name,), snapshot=wrong)


@case("snapshot-base-offset", "lying lengths", "data", (*_SNAPSHOT_READERS, DUMP_DEEP, VERIFY, MDUMP, MRECORDS))
def snapshot_base_offset(base: Base, root: Path) -> Damage:
    """The snapshot's second batch given the first batch's base offset (outside the CRC, so
    the CRC stays valid): its offsets overlap the first batch's."""
    snap = _snapshot(base, root)
    first, b = base.snapshot_batches[0], base.snapshot_batches[1]
    raw = B.patch(bytearray(snap.read_bytes()[b.position: b.end]), "base_offset", first.base_offset, crc=False)
    replace_batch(snap, b, bytes(raw))
    return Damage(snap, (snap.name,), (b.base_offset,), (b.position,), snapshot=snap)


@case("snapshot-footer-delta", "deltas", "data", (*_SNAPSHOT_READERS, DUMP_DEEP, DUMP_DATA, VERIFY, MDUMP, MRECORDS))
def snapshot_footer_delta(base: Base, root: Path) -> Damage:
    """The snapshot's footer batch (one record) says lastOffsetDelta 2^31-1 (CRC valid)."""
    snap = _snapshot(base, root)
    footer = base.snapshot_batches[-1]
    assert footer.is_control and footer.count == 1
    raw = B.patch(bytearray(snap.read_bytes()[footer.position: footer.end]), "last_offset_delta", INT32_MAX)
    replace_batch(snap, footer, bytes(raw))
    return Damage(snap, (snap.name,), (footer.base_offset,), (footer.position,), snapshot=snap)


# -------------------------------------------------------------------------- special files


FIFO_REASON = r"fifo|pipe|special|not a regular file"
LOOP_REASON = r"loop|too many levels|symbolic link|symlink"
DANGLING_REASON = r"dangling|broken|symbolic link|symlink|no such file|does not exist|not found|missing"
DIRECTORY_REASON = r"director"
DEVICE_REASON = r"device|special|not a regular file|too (large|big|long)|exceeds|limit"


def _replace_segment(make: Callable[[Path], None], reason: str) -> Callable[[Base, Path], Damage]:
    """The third segment replaced by a special file; skipping it leaves a hole in the log."""
    def gen(base: Base, root: Path) -> Damage:
        prev, gone, nxt = base.bases[1], base.bases[2], base.bases[3]
        seg = _segment(root, gone)
        seg.unlink()
        _drop_indexes(seg)
        make(seg)
        return Damage(seg, (seg.name, seg_name(prev), seg_name(nxt)), reason=reason)
    return gen


_SEG_SPECIAL = (DUMP, *LOG_READERS)
case("fifo-segment", "special files", "special", _SEG_SPECIAL, direct=(DUMP,))(_replace_segment(os.mkfifo, FIFO_REASON))
case("symlink-loop-segment", "special files", "special", _SEG_SPECIAL, direct=(DUMP,))(
    _replace_segment(lambda p: os.symlink(p.name, p), LOOP_REASON))
case("dangling-symlink-segment", "special files", "special", _SEG_SPECIAL, direct=(DUMP,))(
    _replace_segment(lambda p: os.symlink("gone.log", p), DANGLING_REASON))


@case("directory-named-like-segment", "special files", "special", (DUMP, VERIFY, MDUMP, MRECORDS, IMAGE, DESCRIBE),
      direct=(DUMP,), may_skip=(VERIFY, MDUMP, MRECORDS, IMAGE, DESCRIBE))
def directory_named_like_segment(base: Base, root: Path) -> Damage:
    """A directory named like the next segment (at the log end: skipping it loses nothing)."""
    d = _segment(root, base.log_end)
    d.mkdir()
    return Damage(d, (d.name,), reason=DIRECTORY_REASON)


@case("fifo-snapshot", "special files", "special", (DUMP, SVERIFY, REWRITE, *LOG_READERS),
      direct=(DUMP, SVERIFY, REWRITE), may_skip=LOG_READERS)
def fifo_snapshot(base: Base, root: Path) -> Damage:
    """The snapshot replaced by a FIFO (skipping it is fine: the log starts at offset 0)."""
    snap = _snapshot(base, root)
    snap.unlink()
    os.mkfifo(snap)
    return Damage(snap, (snap.name,), snapshot=snap, reason=FIFO_REASON)


@case("fifo-meta-properties", "special files", "special", (STORAGE,))
def fifo_meta_properties(base: Base, root: Path) -> Damage:
    mp = root / "meta.properties"
    mp.unlink()
    os.mkfifo(mp)
    return Damage(mp, (mp.name,), reason=FIFO_REASON)


@case("meta-properties-dev-zero", "special files", "special", (STORAGE,))
def meta_properties_dev_zero(base: Base, root: Path) -> Damage:
    """meta.properties a symlink to /dev/zero: endless bytes."""
    mp = root / "meta.properties"
    mp.unlink()
    os.symlink("/dev/zero", mp)
    return Damage(mp, (mp.name,), reason=DEVICE_REASON)


@case("fifo-bootstrap", "special files", "special", (STORAGE, VERIFY, DUMP, SVERIFY, DESCRIBE),
      direct=(DUMP, SVERIFY, DESCRIBE), may_skip=(VERIFY,))
def fifo_bootstrap(base: Base, root: Path) -> Damage:
    bp = root / "bootstrap.checkpoint"
    bp.unlink()
    os.mkfifo(bp)
    return Damage(bp, (bp.name,), snapshot=bp, describe=bp, reason=FIFO_REASON)


@dataclass
class Corpus:
    """The base and the cases made from it so far (each made once)."""

    base: Base
    dest: Path
    cases: dict[str, Case] = field(default_factory=dict)

    def get(self, name: str) -> Case:
        if name not in self.cases:
            d = self.dest / name
            d.mkdir()
            self.cases[name] = make_case(name, self.base, d)
        return self.cases[name]
