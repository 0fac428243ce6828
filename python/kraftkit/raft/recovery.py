"""Recovery after a lost majority (beyond Kafka): a new controller quorum from what survives.

Kafka has no supported way back when most of a quorum's controllers are gone for good: the survivor
cannot elect itself, and formatting new controllers loses the cluster's metadata. Every replica of
``__cluster_metadata`` holds a copy of it, though: a surviving controller's, and every broker's (brokers
replicate the log as observers). :func:`survey` reads each survivor's log (its snapshots and segments,
CRC checked; a torn or damaged tail is cut where its whole batches end and said so), :func:`plan`
chooses the most complete one as Raft would (the highest last epoch, then the longest log) and says
what may be lost, and :func:`write_quorum` writes the directory of every new voter: ``meta.properties``
(the cluster's id, the voter's node id, a new directory id), a snapshot of the chosen log's image at
its end, and a ``quorum-state`` whose epoch is the highest any survivor saw, so that the new quorum's
first leader is elected above every epoch a broker may hold and brokers whose logs went further
truncate to it. Real Kafka controllers and ``kraftkit controller run`` start from such directories.

What may be lost, said by :meth:`RecoveryPlan.report`:

* whatever the lost controllers held past the chosen log's end (no survivor knows how much);
* each other survivor's entries that the chosen log does not have (found as Raft finds a follower's
  divergence: by the end offset of each epoch in the chosen log);
* the chosen log's own entries past the last offset known to be committed (the newest snapshot any
  survivor took: Kafka persists no high watermark) were perhaps never committed; they are now.

A static quorum's (kraft.version 0) voters are its controllers' ``controller.quorum.voters``; a dynamic
quorum's (kraft.version 1, KIP-853) live in the log, so the snapshot written for it holds the new
voter set: each voter with the directory id of its new ``meta.properties`` and its endpoint.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftkit._core import Segment
from kraftkit._fs import check_input, error_text, read_small
from kraftkit.errors import KraftkitError
from kraftkit.features.registry import KRAFT_VERSION_FEATURE, registry
from kraftkit.features.storage.format import fsync_dir, write_file_atomic
from kraftkit.features.storage.properties import META_PROPERTIES, MetaProperties
from kraftkit.features.storage.uuids import generate_directory_id
from kraftkit.features.storage.voters import DynamicVoter, voters_record
from kraftkit.log.log import list_segments, segment_name
from kraftkit.metadata.snapshot import BOOTSTRAP_FILE, SnapshotId, list_snapshots
from kraftkit.metadata.source import METADATA_PARTITION, metadata_dir
from kraftkit.raft.quorum_state import ElectionState, QuorumStateError, parse_quorum_state, render_quorum_state

__all__ = ["RecoveryError", "RecoveryInputError", "Survivor", "RecoveryPlan", "survey", "plan", "write_quorum"]

QUORUM_STATE = "quorum-state"


class RecoveryError(KraftkitError):
    """The survivors cannot be recovered as they are (another cluster's log among them, a dynamic
    quorum, damage inside a log)."""


class RecoveryInputError(RecoveryError):
    """A survivor that cannot be read (no metadata there, a missing directory), or an output that
    exists already."""


@dataclass
class Survivor:
    """What one surviving replica of ``__cluster_metadata`` holds."""

    path: str
    directory: Path
    cluster_id: str | None
    node_id: int | None
    #: the end (exclusive) of its whole, CRC-valid batches, and the epoch of the last one
    end_offset: int
    last_epoch: int
    #: (epoch, first offset) of each epoch in its segments, ascending; the newest snapshot's last
    #: entry stands first when the log part does not reach below it
    epochs: list[tuple[int, int]]
    snapshot: SnapshotId | None
    #: the epoch its quorum-state file holds (controllers), None without one
    state_epoch: int | None = None
    #: what was cut at the end of its log (a torn or damaged tail), None when nothing
    damage: str | None = None
    #: the damaged segment and the bytes of it that hold whole, valid batches
    cut: tuple[Path, int] | None = None

    def describe(self) -> str:
        who = f"node {self.node_id}" if self.node_id is not None else "no meta.properties"
        snap = f", newest snapshot {self.snapshot}" if self.snapshot else ""
        state = f", quorum-state epoch {self.state_epoch}" if self.state_epoch is not None else ""
        cut = f"; {self.damage}" if self.damage else ""
        return f"{self.path} ({who}): log ends at offset {self.end_offset} in epoch {self.last_epoch}{snap}{state}{cut}"

    def end_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's ``endOffsetForEpoch``: (the largest epoch of this log not above ``epoch``, the
        offset where the entries of epochs up to it end); (-1, -1) when every epoch is above it."""
        found = -1
        end = -1
        for i, (e, _start) in enumerate(self.epochs):
            if e > epoch:
                break
            found = e
            end = self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.end_offset
        return found, end

    def agrees_with(self, chosen: Survivor) -> int:
        """The offset up to which this log holds the same entries as ``chosen`` (Raft's log
        matching: two logs that hold an entry of the same epoch at the same offset agree up to it)."""
        for i in range(len(self.epochs) - 1, -1, -1):
            epoch, start = self.epochs[i]
            end = self.epochs[i + 1][1] if i + 1 < len(self.epochs) else self.end_offset
            if end <= start:
                continue
            theirs, their_end = chosen.end_for_epoch(epoch)
            if theirs == epoch:
                return min(end, their_end)
            # none of this epoch's entries is in the chosen log; look at the epoch before
        return 0


@dataclass
class RecoveryPlan:
    """The chosen survivor, the others, the new quorum's epoch and what may be lost."""

    chosen: Survivor
    survivors: list[Survivor]
    voters: dict[int, tuple[str, int]]
    epoch: int
    #: the end of the newest snapshot any survivor took: committed for certain up to there
    committed: int
    cluster_id: str
    #: the chosen log's image at its end (a ``MetadataImage``)
    image: Any = field(repr=False)
    #: survivor path -> (first offset it holds that the chosen log does not, its end)
    diverging: dict[str, tuple[int, int]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    #: voter id -> the directory id written (a dynamic quorum's voter set names them)
    directory_ids: dict[int, str] = field(default_factory=dict)

    @property
    def kraft_version(self) -> int:
        return int(self.image.kraft_version or 0)

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.chosen.end_offset, self.chosen.last_epoch)

    def report(self) -> list[str]:
        c = self.chosen
        lines = ["survivors:"] + [f"  {s.describe()}" for s in self.survivors]
        lines.append(f"recovering from {c.path}: the metadata up to offset {c.end_offset} (epoch {c.last_epoch})")
        lines.append(
            f"committed for certain: up to offset {self.committed} (the newest snapshot a survivor took; "
            "Kafka keeps no high watermark on disk)"
        )
        if c.end_offset > self.committed:
            lines.append(
                f"  offsets {self.committed}..{c.end_offset - 1} of {c.path} may not have been committed "
                "before the loss: they are committed now"
            )
        lines.append(f"may be lost: whatever the lost controllers held past offset {c.end_offset} (no survivor has it)")
        for path, (start, end) in self.diverging.items():
            lines.append(f"  {path}: offsets {start}..{end - 1} ({end - start} entries) are not in the recovered log")
        ids = ",".join(str(v) for v in sorted(self.voters))
        kind = (
            "a dynamic quorum (kraft.version 1): the new voter set is in the snapshot"
            if self.kraft_version
            else "a static quorum (kraft.version 0)"
        )
        lines.append(
            f"new quorum: voters {ids}, {kind}, starting at epoch {self.epoch} (its first leader is elected "
            f"in {self.epoch + 1}), from snapshot {self.snapshot_id}"
        )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "clusterId": self.cluster_id,
            "chosen": self.chosen.path,
            "endOffset": self.chosen.end_offset,
            "lastEpoch": self.chosen.last_epoch,
            "committedOffset": self.committed,
            "epoch": self.epoch,
            "voters": sorted(self.voters),
            "snapshot": str(self.snapshot_id),
            "kraftVersion": self.kraft_version,
            "survivors": [
                {
                    "path": s.path,
                    "nodeId": s.node_id,
                    "clusterId": s.cluster_id,
                    "endOffset": s.end_offset,
                    "lastEpoch": s.last_epoch,
                    "snapshot": str(s.snapshot) if s.snapshot else None,
                    "quorumStateEpoch": s.state_epoch,
                    "damage": s.damage,
                }
                for s in self.survivors
            ],
            "diverging": [{"path": p, "startOffset": a, "endOffset": b} for p, (a, b) in self.diverging.items()],
            "written": self.written,
            "directoryIds": {str(k): v for k, v in sorted(self.directory_ids.items())},
        }


def survey(path: str | os.PathLike[str]) -> Survivor:
    """What the replica of ``__cluster_metadata`` in ``path`` (a log directory or the partition
    directory) holds. A damaged tail is cut where its whole batches end, and said so; damage with
    whole batches after it is refused (the log cannot be trusted past it)."""
    p = Path(path)
    if not p.is_dir():
        raise RecoveryInputError(f"{path}: not a directory" if p.exists() else f"{path}: no such directory")
    d = metadata_dir(p)
    if not d.is_dir():
        raise RecoveryInputError(f"{path}: no {METADATA_PARTITION} directory in it")
    cluster_id = node_id = None
    meta = d.parent / META_PROPERTIES
    if meta.exists():
        try:
            m = MetaProperties.read(meta)
        except OSError as e:
            raise RecoveryInputError(f"{meta}: {error_text(e)}") from None
        except KraftkitError as e:
            raise RecoveryInputError(str(e)) from None
        cluster_id, node_id = m.cluster_id, m.node_id
    snaps = list_snapshots(d)
    snap = snaps[-1] if snaps else None
    reports = []
    for base in list_segments(d):
        seg = d / segment_name(base)
        try:
            check_input(seg)  # a FIFO, a directory, a link loop: said as what it is
        except OSError as e:
            raise RecoveryInputError(error_text(e)) from None
        reports.append(Segment(seg).scan(verify_crc=True, dense=True))
    epochs: list[tuple[int, int]] = []
    end = snap.end_offset if snap else 0
    last_epoch = snap.epoch if snap else 0
    damage = None
    cut = None
    for i, rep in enumerate(reports):
        if rep["last_offset"] is not None and rep["last_offset"] + 1 > end:
            for epoch, start in rep["epochs"]:
                if not epochs or epochs[-1][0] != epoch:
                    epochs.append((epoch, start))
            end = rep["last_offset"] + 1
            last_epoch = epochs[-1][0] if epochs else last_epoch
        if rep["error"]:
            later = [r for r in reports[i + 1 :] if r["batches"]]
            if later:
                raise RecoveryError(
                    f"{rep['file']}: damaged at byte {rep['valid_bytes']} ({rep['error']}) with more of the log "
                    f"after it in {later[0]['file']}: this log cannot be trusted past offset {end}; leave it out "
                    "(recover from the other survivors) or cut it there first"
                )
            damage = f"its tail in {Path(rep['file']).name} from byte {rep['valid_bytes']} is cut ({rep['error']})"
            cut = (Path(rep["file"]), int(rep["valid_bytes"]))
            break
    if snap is None and not epochs:
        raise RecoveryInputError(f"{d}: no metadata log segments or snapshots")
    if snap is not None and snap.end_offset > 0 and (not epochs or epochs[0][1] > snap.end_offset - 1):
        # the snapshot's last entry: the one epoch known of the entries it holds
        epochs.insert(0, (snap.epoch, snap.end_offset - 1))
    epochs = [x for i, x in enumerate(epochs) if i == 0 or x[0] > epochs[i - 1][0]]
    state_epoch = None
    qs = d / QUORUM_STATE
    if qs.exists():
        try:
            state, _ = parse_quorum_state(read_small(qs, what="a quorum-state file").decode("utf-8"))
        except (OSError, UnicodeDecodeError, QuorumStateError) as e:
            reason = error_text(e) if isinstance(e, OSError) else str(e)
            raise RecoveryInputError(f"{qs}: {reason}") from None
        state_epoch = state.epoch
    return Survivor(str(path), d, cluster_id, node_id, end, last_epoch, epochs, snap, state_epoch, damage, cut)


def _image_of(s: Survivor) -> Any:
    """The image at the end of ``s``'s whole batches. A log with a damaged tail is read from a copy
    of its files without that tail (the engine reads a batch's header before it knows the batch is
    past the end asked for)."""
    import tempfile

    from kraftkit.metadata.image import load_image

    if s.cut is None:
        return load_image(s.directory, at=s.end_offset)
    damaged, valid = s.cut
    with tempfile.TemporaryDirectory(prefix="kraftkit-recover-") as tmp:
        copy = Path(tmp) / METADATA_PARTITION
        copy.mkdir()
        for f in s.directory.iterdir():
            if f == damaged:
                with open(f, "rb") as src, open(copy / f.name, "wb") as dst:
                    shutil.copyfileobj(_Limited(src, valid), dst)
            elif f.is_file() and (f.suffix in (".log", ".checkpoint") or f.name == "leader-epoch-checkpoint"):
                try:
                    os.link(f, copy / f.name)
                except OSError:
                    shutil.copy2(f, copy / f.name)
        return load_image(copy, at=s.end_offset)


class _Limited:
    """The first ``n`` bytes of a binary file, for ``shutil.copyfileobj``."""

    def __init__(self, f: Any, n: int) -> None:
        self.f, self.left = f, n

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        data = self.f.read(size)
        self.left -= len(data)
        return data


def plan(
    survivors: Sequence[Survivor], voters: Mapping[int, tuple[str, int]], cluster_id: str | None = None
) -> RecoveryPlan:
    """Chooses the survivor to recover from and says what may be lost (see the module docstring).
    ``cluster_id`` is the new quorum's when no survivor's meta.properties names one (and must match
    theirs when they do)."""
    if not survivors:
        raise RecoveryInputError("no survivor given")
    if not voters:
        raise RecoveryInputError("no voters given")
    ids = {s.cluster_id for s in survivors if s.cluster_id is not None}
    if cluster_id is not None and ids and ids != {cluster_id}:
        raise RecoveryError(f"the survivors' cluster.id is {sorted(ids)[0]}, not {cluster_id}")
    if cluster_id is not None:
        ids = {cluster_id}
    if len(ids) > 1:
        named = ", ".join(f"{s.path}: {s.cluster_id}" for s in survivors if s.cluster_id is not None)
        raise RecoveryError(f"the survivors belong to different clusters ({named})")
    if not ids:
        raise RecoveryError(
            "no survivor has a meta.properties naming its cluster: give the cluster's id with --cluster-id"
        )
    chosen = max(survivors, key=lambda s: (s.last_epoch, s.end_offset))
    epoch = max(max(s.last_epoch, s.state_epoch or 0) for s in survivors)
    if epoch >= 2**31 - 1:
        raise RecoveryError(f"a survivor is at epoch {epoch}: no leader epoch can be above it")
    committed = max((s.snapshot.end_offset for s in survivors if s.snapshot), default=0)
    image = _image_of(chosen)
    out = RecoveryPlan(
        chosen, list(survivors), dict(voters), epoch, min(committed, chosen.end_offset), ids.pop(), image
    )
    for s in survivors:
        if s is chosen:
            continue
        agree = s.agrees_with(chosen)
        if agree < s.end_offset:
            out.diverging[s.path] = (agree, s.end_offset)
    return out


def write_quorum(
    recovery: RecoveryPlan, out_dir: str | os.PathLike[str], *, listener_name: str = "CONTROLLER"
) -> list[Path]:
    """Writes ``out_dir/<voter id>/`` for every voter: ``meta.properties``, the snapshot of the
    chosen log's image at its end in ``__cluster_metadata-0``, and its ``quorum-state``. A dynamic
    quorum's snapshot holds the new voter set (each voter's directory id, and its endpoint on
    ``listener_name``); a static one's holds none (``controller.quorum.voters`` says it). Each
    directory is built beside its final name and renamed into place (fsynced); an existing one is
    refused before anything is written."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RecoveryInputError(f"{out}: exists and is not a directory")
    targets = {vid: out / str(vid) for vid in sorted(recovery.voters)}
    for t in targets.values():
        if t.exists() or t.is_symlink():
            raise RecoveryInputError(f"{t}: exists already (never overwritten)")
    c = recovery.chosen
    image = recovery.image
    ids: dict[int, str] = {}
    for vid in targets:
        ids[vid] = generate_directory_id(ids.values())
    voters_arg: dict[str, Any] | None = None
    if recovery.kraft_version:
        dynamic = [DynamicVoter(vid, host, port, ids[vid]) for vid, (host, port) in sorted(recovery.voters.items())]
        voters_arg = voters_record(dynamic, listener_name)
    reg = registry()
    kraft1 = reg.features[KRAFT_VERSION_FEATURE].level(1).bootstrap_metadata_version
    mv = image.metadata_version
    data_version = 1 if recovery.kraft_version or (mv is not None and mv >= kraft1) else 0
    voter_ids = None if recovery.kraft_version else tuple(sorted(recovery.voters))
    state = render_quorum_state(ElectionState(recovery.epoch, voters=voter_ids), data_version)
    bootstrap = c.directory.parent / BOOTSTRAP_FILE
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for vid, target in targets.items():
        tmp = out / f".{vid}.kraftkit-recover"
        if tmp.exists():
            shutil.rmtree(tmp)
        part = tmp / METADATA_PARTITION
        part.mkdir(parents=True)
        meta = MetaProperties(1, recovery.cluster_id, vid, ids[vid])
        write_file_atomic(tmp / META_PROPERTIES, meta.to_text().encode("utf-8"))
        image.write_snapshot(part, recovery.snapshot_id, voters=voters_arg)
        write_file_atomic(part / QUORUM_STATE, state.encode("utf-8"))
        if bootstrap.is_file():
            write_file_atomic(tmp / BOOTSTRAP_FILE, bootstrap.read_bytes())
        fsync_dir(part)
        fsync_dir(tmp)
        os.rename(tmp, target)
        fsync_dir(out)
        written.append(target)
    recovery.written = [str(p) for p in written]
    recovery.directory_ids = ids
    return written
