#!/usr/bin/env python
"""Metadata-layer benchmarks: decode, dump, replay into an image, write a snapshot.

    .venv/bin/python benches/run.py --suites metadata        # through the main runner (table + JSON)
    .venv/bin/python benches/metadata.py [--records N] [--json out.json]   # this suite alone

Data: a ``__cluster_metadata``-style log of ``--records`` (default 5 M) records written with
kraftkit (``encode_metadata_record`` + ``encode_batch`` + ``Log.append``) by a small simulated
controller (30 brokers, ~100k partitions, ISR flaps, leader elections, rolling broker restarts,
topic creations, config changes, NoOps, a LeaderChange control batch per epoch), cached in
``.cache/bench/metadata-5m/``. Every record replays cleanly into a ``MetadataImage``.

Rows (see benches/README.md, section 5):

* decode every record: ``decode_metadata_batch`` (dicts / JSON text) per batch, the per-record
  Python path (``decode_metadata_record`` in a loop over ``batch.records()``), and the Rust-only
  record walk as the ceiling. In-process, pinned to one core.
* whole process, stdout to /dev/null: ``kraftkit metadata dump`` vs
  ``kafka-dump-log --cluster-metadata-decoder`` on the same segment files.
* replay: ``kraftkit.metadata.image.load_image(dir)`` (the Rust engine; target >= 2 M records/s)
  against the pure-Python image it replaced (``tests/image/reference_image.py``, the test
  oracle) on the same log, and ``MetadataImage.replay(api_key, version, dict)`` per record
  against the oracle's on a prefix of already-decoded records.
* snapshot: an image with 1 M partitions (20k topics x 50), ``write_snapshot`` (target < 2 s on
  one core) against the oracle's ``write_snapshot`` of the same image (the files must be byte
  for byte identical), and reading the snapshot back with both.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import benchlib  # noqa: E402
import datasets  # noqa: E402
from benchlib import Row, Timing, measure, row  # noqa: E402

from kraftkit import _kafka as api  # noqa: E402
from kraftkit._core import control_record_key, metadata_dump, metadata_record_types  # noqa: E402
from kraftkit.log import Log, Segment, encode_batch  # noqa: E402
from kraftkit.log.control import ControlType  # noqa: E402
from kraftkit.metadata.mv_levels import MV_4_0_IV3  # noqa: E402
from kraftkit.metadata.records import (  # noqa: E402
    decode_control_record,
    decode_metadata_batch,
    decode_metadata_record,
    encode_control_record,
    encode_metadata_record,
)

#: Bump when the generator changes, so cached logs are rebuilt.
GEN_VERSION = 1
TS0 = 1_700_000_000_000
MV_LEVEL = MV_4_0_IV3  # PartitionRecord/PartitionChangeRecord v2, RegisterBrokerRecord v3
LEADER_CHANGE_KEY = control_record_key(ControlType.LEADER_CHANGE)
MAX_BATCH = 1000  # records per batch at most (a big controller event spans several batches)

# apiKey, version
REGISTER_BROKER = (api.REGISTER_BROKER, 3)
TOPIC = (api.TOPIC, 0)
PARTITION = (api.PARTITION, 2)
CONFIG = (api.CONFIG, 0)
PARTITION_CHANGE = (api.PARTITION_CHANGE, 2)
FENCE = (api.FENCE_BROKER, 0)
UNFENCE = (api.UNFENCE_BROKER, 0)
FEATURE = (api.FEATURE_LEVEL, 0)
BROKER_CHANGE = (api.BROKER_REGISTRATION_CHANGE, 2)
NOOP = (api.NO_OP, 0)
#: record type name by apiKey (-1: the LeaderChange control records)
NAMES = {k: name.removesuffix("Record") for k, name, _, _ in metadata_record_types()} | {-1: "LeaderChange (control)"}


# =============================================================================== generation

class _Controller:
    """A simulated KRaft controller: keeps the cluster state so every record it emits is valid
    for replay, and yields *appends* (the records of one controller event)."""

    def __init__(self, rng: random.Random, brokers: int, topics: int, partitions: int) -> None:
        self.rng = rng
        self.brokers = list(range(1, brokers + 1))
        self.dirs = {b: uuid.UUID(int=rng.getrandbits(128)) for b in self.brokers}
        self.epoch_of: dict[int, int] = {}
        self.topic_ids: list[uuid.UUID] = []
        self.topic_names: list[str] = []
        # per partition (index): topic index, partition id, replicas, leader, isr
        self.p_topic: list[int] = []
        self.p_id: list[int] = []
        self.p_replicas: list[tuple[int, ...]] = []
        self.p_leader: list[int] = []
        self.p_isr: list[list[int]] = []
        self.by_broker: dict[int, list[int]] = {b: [] for b in self.brokers}
        self.offset = 0  # next log offset (broker epochs are offsets, as in Kafka)
        self.n_topics0, self.n_parts0 = topics, partitions

    # -- records
    def register(self, b: int, fenced: bool) -> tuple[int, int, dict]:
        self.epoch_of[b] = max(self.offset, self.epoch_of.get(b, -1) + 1)
        return (*REGISTER_BROKER, {
            "BrokerId": b, "IncarnationId": uuid.UUID(int=self.rng.getrandbits(128)), "BrokerEpoch": self.epoch_of[b],
            "EndPoints": [{"Name": "PLAINTEXT", "Host": f"broker-{b}.kafka.svc", "Port": 9092, "SecurityProtocol": 0},
                          {"Name": "SSL", "Host": f"broker-{b}.kafka.svc", "Port": 9093, "SecurityProtocol": 1}],
            "Features": [{"Name": "metadata.version", "MinSupportedVersion": 7, "MaxSupportedVersion": MV_LEVEL},
                         {"Name": "group.version", "MinSupportedVersion": 0, "MaxSupportedVersion": 1}],
            "Rack": f"rack-{b % 3}", "Fenced": fenced, "InControlledShutdown": False, "LogDirs": [self.dirs[b]]})

    def create_topic(self, n_parts: int) -> list[tuple[int, int, dict]]:
        rng = self.rng
        t = len(self.topic_ids)
        tid = uuid.UUID(int=rng.getrandbits(128))
        name = f"{rng.choice(('orders', 'payments', 'clicks', 'events', 'audit', 'metrics'))}-{t:05d}"
        self.topic_ids.append(tid)
        self.topic_names.append(name)
        out = [(*TOPIC, {"Name": name, "TopicId": tid})]
        for p in range(n_parts):
            reps = tuple(rng.sample(self.brokers, 3))
            i = len(self.p_id)
            self.p_topic.append(t)
            self.p_id.append(p)
            self.p_replicas.append(reps)
            self.p_leader.append(reps[0])
            self.p_isr.append(list(reps))
            for b in reps:
                self.by_broker[b].append(i)
            out.append((*PARTITION, {"PartitionId": p, "TopicId": tid, "Replicas": list(reps), "Isr": list(reps),
                                     "RemovingReplicas": [], "AddingReplicas": [], "Leader": reps[0],
                                     "LeaderRecoveryState": 0, "LeaderEpoch": 0, "PartitionEpoch": 0,
                                     "Directories": [self.dirs[b] for b in reps]}))
        out.append((*CONFIG, {"ResourceType": 2, "ResourceName": name, "Name": "retention.ms",
                              "Value": str(rng.choice((3600000, 86400000, 604800000)))}))
        if rng.random() < 0.3:
            out.append((*CONFIG, {"ResourceType": 2, "ResourceName": name, "Name": "cleanup.policy", "Value": "compact"}))
        return out

    def change(self, i: int, *, isr: list[int] | None = None, leader: int | None = None) -> tuple[int, int, dict]:
        d = {"PartitionId": self.p_id[i], "TopicId": self.topic_ids[self.p_topic[i]]}
        if isr is not None:
            self.p_isr[i] = isr
            d["Isr"] = list(isr)
        if leader is not None:
            self.p_leader[i] = leader
            d["Leader"] = leader
        return (*PARTITION_CHANGE, d)

    # -- events: each yields one or more appends (lists of records)
    def bootstrap(self):
        yield [(*FEATURE, {"Name": "metadata.version", "FeatureLevel": MV_LEVEL}),
               (*FEATURE, {"Name": "group.version", "FeatureLevel": 1}),
               (*FEATURE, {"Name": "transaction.version", "FeatureLevel": 2})]
        for b in self.brokers:
            yield [self.register(b, fenced=True)]
        for b in self.brokers:
            yield [(*UNFENCE, {"Id": b, "Epoch": self.epoch_of[b]})]
        yield [(*CONFIG, {"ResourceType": 4, "ResourceName": "", "Name": "log.retention.hours", "Value": "168"})]
        for _ in range(self.n_topics0):
            yield self.create_topic(self.n_parts0)

    def isr_flap(self):
        """A slow follower: some of its partitions drop it from the ISR, then take it back."""
        rng = self.rng
        b = rng.choice(self.brokers)
        parts = [i for i in rng.sample(self.by_broker[b], min(len(self.by_broker[b]), rng.randint(1, 40)))
                 if self.p_leader[i] != b and b in self.p_isr[i]]
        if parts:
            yield [self.change(i, isr=[x for x in self.p_isr[i] if x != b]) for i in parts]
            yield [self.change(i, isr=self.p_isr[i] + [b]) for i in parts]

    def elections(self):
        """Leader elections (preferred leader / reassignment of leadership) for a few partitions."""
        rng = self.rng
        recs = []
        for i in rng.sample(range(len(self.p_id)), rng.randint(1, 20)):
            cands = [x for x in self.p_isr[i] if x != self.p_leader[i]]
            if cands:
                recs.append(self.change(i, leader=rng.choice(cands)))
        if recs:
            yield recs

    def restart(self):
        """A rolling restart of one broker: controlled shutdown moves leadership and ISR off it,
        it is fenced, registers again (new epoch), is unfenced, rejoins the ISRs and takes
        back its preferred leaderships."""
        b = self.rng.choice(self.brokers)
        yield [(*BROKER_CHANGE, {"BrokerId": b, "BrokerEpoch": self.epoch_of[b], "InControlledShutdown": 1})]
        mine = self.by_broker[b]
        recs = []
        for i in mine:
            if b not in self.p_isr[i]:
                continue
            isr = [x for x in self.p_isr[i] if x != b]
            if not isr:
                continue
            recs.append(self.change(i, isr=isr, leader=isr[0] if self.p_leader[i] == b else None))
        yield from _chunks(recs)
        yield [(*FENCE, {"Id": b, "Epoch": self.epoch_of[b]})]
        yield [self.register(b, fenced=True)]
        yield [(*UNFENCE, {"Id": b, "Epoch": self.epoch_of[b]})]
        yield from _chunks([self.change(i, isr=self.p_isr[i] + [b]) for i in mine if b not in self.p_isr[i]])
        yield from _chunks([self.change(i, leader=b) for i in mine
                            if self.p_replicas[i][0] == b and self.p_leader[i] != b])

    def config_change(self):
        rng = self.rng
        t = rng.randrange(len(self.topic_names))
        name = rng.choice(("retention.ms", "max.message.bytes", "min.insync.replicas", "segment.bytes"))
        value = None if rng.random() < 0.2 else str(rng.randint(1, 10**9))
        yield [(*CONFIG, {"ResourceType": 2, "ResourceName": self.topic_names[t], "Name": name, "Value": value})]

    def steady(self):
        rng = self.rng
        while True:
            r = rng.random()
            if r < 0.45:
                yield from self.isr_flap()
            elif r < 0.80:
                yield from self.elections()
            elif r < 0.93:
                yield [(*NOOP, {})]
            elif r < 0.985:
                yield from self.config_change()
            elif r < 0.995:
                yield self.create_topic(rng.choice((1, 3, 6, 12, 24, 50)))
            else:
                yield from self.restart()


def _chunks(recs: list, n: int = MAX_BATCH):
    for i in range(0, len(recs), n):
        yield recs[i:i + n]


@dataclass
class MetaLog:
    dataset: datasets.Dataset
    mix: dict[str, int]
    params: dict

    @property
    def name(self) -> str:
        return self.dataset.name

    @property
    def segments(self) -> list[str]:
        return self.dataset.segments

    @property
    def data_records(self) -> int:
        return self.dataset.records - self.mix.get(NAMES[-1], 0)


def log_name(records: int) -> str:
    return f"metadata-{records // 1_000_000}m" if records % 1_000_000 == 0 else f"metadata-{records // 1000}k"


def ensure_metadata_log(root: Path, *, records: int = 5_000_000, brokers: int = 30, topics: int = 2000,
                        partitions: int = 50, epoch_records: int = 250_000, segment_mb: int = 64, seed: int = 11,
                        regen: bool = False, log=print) -> MetaLog:
    """The metadata log under ``root/metadata-<N>m`` (generated if missing or stale)."""
    params = {"gen": GEN_VERSION, "records": records, "brokers": brokers, "topics": topics, "partitions": partitions,
              "epoch_records": epoch_records, "segment_mb": segment_mb, "seed": seed}
    name = log_name(records)
    directory = root / name
    if not regen:
        ds = datasets._load(directory, params)
        if ds is not None:
            meta = json.loads((directory / "meta.json").read_text())
            return MetaLog(ds, meta.get("mix", {}), params)
    log(f"  generating {name} ({records:,} metadata records) in {directory} ...")
    t0 = time.perf_counter()
    if directory.exists():
        shutil.rmtree(directory)
    rng = random.Random(seed)
    ctl = _Controller(rng, brokers, topics, partitions)
    mix: dict[str, int] = {}
    voters = [3000, 3001, 3002]
    n_batches = 0
    ts = TS0
    epoch = 0
    next_epoch_at = 0

    def appends():
        yield from ctl.bootstrap()
        yield from ctl.steady()

    with Log(directory, create=True, segment_bytes=segment_mb << 20) as lg:
        for recs in appends():
            if ctl.offset >= records:
                break
            if ctl.offset >= next_epoch_at:  # a new controller leader: LeaderChange control batch
                epoch += 1
                next_epoch_at += epoch_records
                leader = voters[epoch % 3]
                value = encode_control_record(2, {"Version": 0, "LeaderId": leader,
                                                  "Voters": [{"VoterId": v} for v in voters],
                                                  "GrantingVoters": [{"VoterId": v} for v in voters if v != leader][:1]
                                                  + [{"VoterId": leader}]})
                lg.append(encode_batch([(ts, LEADER_CHANGE_KEY, value, ())], base_offset=ctl.offset,
                                       partition_leader_epoch=epoch, control=True))
                ctl.offset += 1
                n_batches += 1
                mix[NAMES[-1]] = mix.get(NAMES[-1], 0) + 1
            recs = recs[: records - ctl.offset]
            values = [encode_metadata_record(k, v, d) for k, v, d in recs]
            lg.append(encode_batch([(ts, None, v, ()) for v in values], base_offset=ctl.offset,
                                   partition_leader_epoch=epoch))
            ctl.offset += len(values)
            n_batches += 1
            for k, _, _ in recs:
                mix[NAMES[k]] = mix.get(NAMES[k], 0) + 1
            ts += rng.randint(1, 400)
        lg.flush()
    secs = time.perf_counter() - t0
    total = ctl.offset
    desc = (f"simulated controller: {brokers} brokers, {len(ctl.topic_ids)} topics / {len(ctl.p_id)} partitions at the end, "
            f"metadata.version {MV_LEVEL}, null keys, timestamp delta 0, <= {MAX_BATCH} records/batch, "
            f"LeaderChange batch every {epoch_records} records")
    ds = datasets._finish(name, directory, "none", total, n_batches, desc, params, secs)
    meta = json.loads((directory / "meta.json").read_text())
    meta["mix"] = mix
    (directory / "meta.json").write_text(json.dumps(meta, indent=1))
    log(f"  generated {total:,} records in {n_batches:,} batches, {ds.bytes / 1e6:.0f} MB, in {secs:.1f} s "
        f"({total / secs / 1e3:.0f} k records/s)")
    return MetaLog(ds, mix, params)


# =============================================================================== measurements

S = "metadata"
M_DICT = "decode every record -> dict"
M_JSON = "decode every record -> JSON text"
M_PY = "decode every record -> dict"
M_PROC = "whole process, stdout -> /dev/null"
M_REPLAY = "replay log -> MetadataImage"
M_SNAP = "write a snapshot of the image"
M_SNAP_READ = "read back: snapshot -> MetadataImage"
M_REPLAY_DICTS = "replay decoded dicts -> MetadataImage"


def _all_batches(ml: MetaLog, verify_crc: bool = False):
    for p in ml.segments:
        yield from Segment(p).batches(verify_crc=verify_crc)


def run_decode(ml: MetaLog, *, warmup: int, repeat: int, max_seconds: float | None = None, log=print) -> list[Row]:
    rows: list[Row] = []
    n, nb = ml.dataset.records, ml.dataset.bytes

    def add(mode, impl, t: Timing, *, ref=False, note="", nrec=n):
        rows.append(row(S, ml.name, mode, impl, nrec, nb, t, is_ref=ref, note=note))
        log(f"    {impl:<58} {t.best * 1e3:9.1f} ms  {nrec / t.best / 1e6:6.2f} M rec/s")

    def bulk(js: bool):
        def f():
            c = 0
            for b in _all_batches(ml):
                c += len(decode_metadata_batch(b, json=js))
            return c
        return f

    def python_path():
        c = 0
        for b in _all_batches(ml):
            if b.is_control:
                for r in b.records():
                    decode_control_record(r.control_type, r.value)
                    c += 1
            else:
                for r in b.records():
                    decode_metadata_record(r.value)
                    c += 1
        return c

    def rust_only():
        c = 0
        for p in ml.segments:
            rep = Segment(p).scan(deep=True, verify_crc=False)
            if rep["error"] is not None:
                raise RuntimeError(rep["error"])
            c += rep["records"]
        return c

    t = measure(bulk(False), warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    assert t.result == n, (t.result, n)
    add(M_DICT, "kraftkit decode_metadata_batch(batch)", t, ref=True,
        note="per batch, in Rust: list of (offset, api_key, version, dict)")
    t = measure(python_path, warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    assert t.result == n
    add(M_DICT, "kraftkit decode_metadata_record(r.value), Python loop", t,
        note="the Python path: for r in batch.records(): decode_metadata_record(r.value) (control records: "
             "decode_control_record)")
    t = measure(rust_only, warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    assert t.result == n
    add(M_DICT, "reference: Segment.scan(deep=True), records framed only", t,
        note="every record framed in Rust, values NOT decoded, no Python objects: the log layer alone")
    t = measure(bulk(True), warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    assert t.result == n
    add(M_JSON, "kraftkit decode_metadata_batch(batch, json=True)", t, ref=True,
        note="per batch: list of (offset, api_key, version, str), kafka-dump-log's JSON")

    def dump_lines():
        c = 0
        for p in ml.segments:
            it = metadata_dump(p, json=True)
            for _ in it:
                pass
            c += it.records
        return c

    t = measure(dump_lines, warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    assert t.result == n
    add(M_JSON, DUMP_LINES, t,
        note="metadata dump --json's lines in bytes, each record's JSON written straight from its bytes in Rust "
             "(CRC checked, GIL released), not written anywhere")
    return rows


#: The in-process row of metadata dump's own renderer (the JSON target's row).
DUMP_LINES = "kraftkit _core.metadata_dump(FILE, json=True), in-process"
KK_DUMP = "kraftkit metadata dump FILES"
KAFKA_DUMP = "kafka-dump-log --cluster-metadata-decoder (JVM)"


def kraftkit_metadata_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("kraftkit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kraftkit.cli.main"]


def check_outputs(ml: MetaLog, kk: list[str], java: list[str] | None, log=print) -> dict:
    """Line counts of both tools on the first segment: one line per record for kraftkit, one per
    record plus one per batch for kafka-dump-log."""
    seg = min(ml.segments, key=os.path.getsize)  # the smallest file: the check is not timed
    res: dict = {"file": seg}
    a = subprocess.run([*kk, "metadata", "dump", seg], capture_output=True, check=True).stdout
    res["kraftkit_lines"] = a.count(b"\n")
    rep = Segment(seg).scan(deep=True, verify_crc=False)
    res["records"], res["batches"] = rep["records"], rep["batches"]
    if java is not None:
        b = subprocess.run([*java, "--files", seg, "--cluster-metadata-decoder"], capture_output=True, check=True).stdout
        res["kafka_lines"] = b.count(b"\n")
        res["kafka_payload_lines"] = b.count(b" payload: ")
    log(f"    output check ({Path(seg).name}: {res['records']} records, {res['batches']} batches): kraftkit "
        f"{res['kraftkit_lines']} lines" + (f", kafka-dump-log {res['kafka_lines']} lines "
                                            f"({res['kafka_payload_lines']} with a payload)" if java else ""))
    return res


def run_processes(ml: MetaLog, kk: list[str], java: list[str] | None, *, repeat_kk: int, repeat_java: int,
                  log=print) -> list[Row]:
    import suites

    rows: list[Row] = []
    files = ml.segments
    runs = [(KK_DUMP, [*kk, "metadata", "dump", *files], repeat_kk, True,
             "whole process incl. interpreter start: offset, type, version, JSON data per record"),
            ("kraftkit metadata dump --json FILES", [*kk, "metadata", "dump", "--json", *files], repeat_kk, False,
             "JSON lines")]
    if java is not None:
        runs.append((KAFKA_DUMP,
                     [*java, "--files", ",".join(files), "--cluster-metadata-decoder"], repeat_java, False,
                     "whole process incl. JVM start, kafka-run-class.sh JVM options; batch line + record line with "
                     "the decoded JSON payload"))
    for impl, argv, rep, ref, note in runs:
        try:
            t = suites.measure_proc(argv, repeat=rep)
        except Exception as e:  # a failing tool must not lose the rest of the run
            log(f"    {impl}: FAILED: {e}")
            continue
        rows.append(row(S, ml.name, M_PROC, impl, ml.dataset.records, ml.dataset.bytes, t, is_ref=ref, note=note))
        log(f"    {impl:<58} {t.best:7.2f} s  (runs {', '.join(f'{x:.2f}' for x in t.runs)})  "
            f"{ml.dataset.records / t.best / 1e6:.2f} M rec/s")
    return rows


def reference_image():
    """The pure-Python metadata image (``tests/image/reference_image.py``): kraftkit's original
    implementation, kept as the test oracle of the Rust engine and measured here as its peer."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.image import reference_image as ref

    return ref


PY_IMAGE = "pure-Python image (tests/image/reference_image.py)"


def run_replay(ml: MetaLog, *, warmup: int, repeat: int, max_seconds: float | None = None, handler_records: int = 300_000, log=print) -> tuple[list[Row], dict]:
    from kraftkit.metadata.image import MetadataImage, load_image

    ref = reference_image()
    rows: list[Row] = []
    n, nb = ml.dataset.records, ml.dataset.bytes
    d = ml.dataset.dir

    def add(impl, t: Timing, *, ref=False, note="", nrec=n, nbytes=nb, mode=M_REPLAY):
        rows.append(row(S, ml.name, mode, impl, nrec, nbytes, t, is_ref=ref, note=note))
        log(f"    {impl:<58} {t.best * 1e3:9.1f} ms  {nrec / t.best / 1e6:6.2f} M rec/s")

    t = measure(lambda: load_image(d), warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    img = t.result
    assert img.provenance.end_offset == n, (img.provenance, n)
    assert img.records_replayed == ml.data_records, (img.records_replayed, ml.data_records)
    add("kraftkit load_image(dir)", t, ref=True,
        note="Rust engine: segments mmapped, every batch CRC checked, records decoded and applied in Rust, GIL released")
    info = {"topics": img.topic_count, "partitions": img.partition_count,
            "brokers": len(img.brokers), "configs": sum(len(v) for v in img.configs.values())}
    # The oracle takes ~40 s on 5 M records: one timed run, no warm-up (the files are in the page cache).
    t = measure(lambda: ref.load_image(d), warmup=0, repeat=1)
    assert t.result.records_replayed == ml.data_records and img.sections() == t.result.sections()
    del img
    t.result = None
    add(f"{PY_IMAGE} load_image(dir)", t,
        note="the Python implementation kraftkit had before: batches + decode_metadata_batch (Rust) + Python handlers; "
             "GC paused; same image (checked)")

    # The per-record API: replay of already-decoded dicts (a prefix from offset 0).
    pre = []
    for b in _all_batches(ml):
        for off, k, v, data in decode_metadata_batch(b):
            if k is not None:
                pre.append((k, v, data, off))
        if len(pre) >= handler_records:
            break

    def handlers(cls):
        def f():
            img = cls()
            rp = img.replay
            for k, v, data, off in pre:
                rp(k, v, data, off)
            return img
        return f

    nb_pre = int(nb * len(pre) / n)
    t = measure(handlers(MetadataImage), warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    add("kraftkit MetadataImage.replay(k, v, dict)", t, ref=True, nrec=len(pre), nbytes=nb_pre, mode=M_REPLAY_DICTS,
        note=f"first {len(pre)} data records already decoded; each dict is encoded and read back by the codec, then applied in Rust")
    t = measure(handlers(ref.MetadataImage), warmup=warmup, repeat=repeat, max_seconds=max_seconds)
    add(f"{PY_IMAGE} replay(k, v, dict)", t, nrec=len(pre), nbytes=nb_pre, mode=M_REPLAY_DICTS,
        note="the same dicts through the Python handlers")
    pre.clear()
    return rows, info


def snapshot_image(topics: int, partitions: int, brokers: int = 30, seed: int = 5):
    """A MetadataImage with topics x partitions partitions, built with the replay API."""
    from kraftkit.metadata.image import MetadataImage, Provenance

    rng = random.Random(seed)
    ctl = _Controller(rng, brokers, 0, 0)
    img = MetadataImage()
    boot = list(ctl.bootstrap())
    for recs in boot:
        for k, v, dct in recs:
            img.replay(k, v, dct)
    for _ in range(topics):
        for k, v, dct in ctl.create_topic(partitions):
            img.replay(k, v, dct)
    img.provenance = Provenance(10_000_000, 7, TS0)
    return img


def run_snapshot(*, topics: int, partitions: int, warmup: int, repeat: int, max_seconds: float | None = None, tmp_root: Path, log=print) -> tuple[list[Row], dict]:
    from kraftkit._core import validate_snapshot
    from kraftkit.metadata.image import load_snapshot

    ref = reference_image()
    rows: list[Row] = []
    ds_name = f"image-{topics * partitions / 1e6:g}M-partitions"
    t0 = time.perf_counter()
    import gc
    gc.disable()
    try:
        img = snapshot_image(topics, partitions)
    finally:
        gc.enable()
    build_s = time.perf_counter() - t0
    n_parts = img.partition_count
    log(f"    image built with MetadataImage.replay: {img.topic_count} topics, {n_parts:,} partitions in {build_s:.1f} s")
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="snap-", dir=tmp_root))
    counter = [0]

    def fresh_dir() -> Path:
        counter[0] += 1
        p = work / str(counter[0])
        p.mkdir()
        return p

    def timed(fn, *, rep=repeat, wu=warmup):
        """measure() of ``fn(new empty directory)``; the outputs are deleted after the row, untimed."""
        t = measure(lambda: fn(fresh_dir()), warmup=wu, repeat=rep, max_seconds=max_seconds)
        for old in sorted(work.iterdir(), key=lambda x: int(x.name))[:-1]:  # keep the last output (t.result)
            shutil.rmtree(old)
        return t

    try:
        t = timed(lambda d: img.write_snapshot(d))
        path = t.result
        size = os.path.getsize(path)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        v = validate_snapshot(path)
        assert v["error"] is None, v
        n_rec = v["data_records"]
        info = {"topics": img.topic_count, "partitions": n_parts, "snapshot_records": n_rec, "snapshot_bytes": size,
                "build_image_s": round(build_s, 2)}

        def add(impl, t: Timing, *, ref=False, note="", mode=M_SNAP):
            rows.append(row(S, ds_name, mode, impl, n_rec, size, t, is_ref=ref, note=note))
            log(f"    {impl:<58} {t.best * 1e3:9.1f} ms  {n_rec / t.best / 1e6:6.2f} M rec/s")

        add("kraftkit MetadataImage.write_snapshot(dir)", t, ref=True,
            note=f"{n_rec} records, {size / 1e6:.0f} MB: generated, encoded and written in Rust (GIL released), fsync included")
        # read back now, while the file of the last timed call exists
        t_load = measure(lambda: load_snapshot(path), warmup=0, repeat=max(1, repeat - 1), max_seconds=max_seconds)
        assert t_load.result.partition_count == n_parts
        t_load.result = None
        # The oracle reads the same file (one run: tens of seconds) and writes it back: the bytes must be equal.
        t_ref_load = measure(lambda: ref.load_snapshot(path), warmup=0, repeat=1)
        ref_img = t_ref_load.result
        t_ref_load.result = None
        t_ref = timed(lambda d: ref_img.write_snapshot(d), rep=1, wu=0)
        same = hashlib.sha256(Path(t_ref.result).read_bytes()).hexdigest() == digest
        assert same, "the pure-Python image wrote different bytes"
        t_ref.result = None
        ref_img = None
        add(f"{PY_IMAGE} write_snapshot(dir)", t_ref,
            note="the Python implementation kraftkit had before (snapshot_records + encode_metadata_record per record + "
                 "SnapshotWriter); byte-identical file (checked)")
        add("kraftkit load_snapshot(file) (replay of the snapshot)", t_load, ref=True, mode=M_SNAP_READ,
            note="PartitionRecord-heavy replay in Rust (generic codec path)")
        add(f"{PY_IMAGE} load_snapshot(file)", t_ref_load, mode=M_SNAP_READ, note="GC not paused (as before)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows, info


# =============================================================================== orchestration

def kafka_cmd(version: str | None, log=print):
    import suites

    try:
        return suites.kafka_dump_cmd(version)
    except Exception as e:
        log(f"  WARNING: real kafka-dump-log unavailable ({type(e).__name__}: {e}); kraftkit rows only")
        return None, None


PARTS = ("decode", "processes", "replay", "snapshot")


def run_all(root: Path, *, records: int, snap_topics: int, snap_partitions: int, warmup: int, repeat: int,
            dump_repeat: int, max_seconds: float | None, kafka_version: str | None, no_kafka: bool, regen: bool, log=print,
            parts: tuple[str, ...] = PARTS) -> tuple[list[Row], dict]:
    extra: dict = {}
    ml = ensure_metadata_log(root, records=records, regen=regen, log=log)
    extra["metadata_log"] = {**ml.dataset.to_json(), "mix": ml.mix}
    mix_s = ", ".join(f"{k} {v / ml.dataset.records * 100:.1f}%" for k, v in sorted(ml.mix.items(), key=lambda kv: -kv[1]))
    log(f"  {ml.name}: {ml.dataset.bytes / 1e6:.0f} MB, {ml.dataset.records:,} records, {ml.dataset.batches:,} batches, "
        f"{len(ml.segments)} segments (generated in {ml.dataset.gen_seconds} s); mix: {mix_s}")
    rows: list[Row] = []
    if "decode" in parts:
        log("  decode")
        rows += run_decode(ml, warmup=warmup, repeat=repeat, max_seconds=max_seconds, log=log)
    if "processes" in parts:
        rows += _processes(ml, dump_repeat=dump_repeat, kafka_version=kafka_version, no_kafka=no_kafka, extra=extra, log=log)
    if "replay" in parts:
        log("  replay")
        r, info = run_replay(ml, warmup=warmup, repeat=repeat, max_seconds=max_seconds, log=log)
        rows += r
        extra["replay_image"] = info
    if "snapshot" in parts:
        log("  snapshot")
        r, info = run_snapshot(topics=snap_topics, partitions=snap_partitions, warmup=warmup, repeat=repeat,
                               max_seconds=max_seconds, tmp_root=root / "tmp", log=log)
        rows += r
        extra["snapshot_image"] = info
    return rows, extra


def _processes(ml: MetaLog, *, dump_repeat: int, kafka_version: str | None, no_kafka: bool, extra: dict, log=print) -> list[Row]:
    log("  processes")
    kk = kraftkit_metadata_cmd()
    java, java_desc = (None, None) if no_kafka else kafka_cmd(kafka_version, log)
    extra["metadata_tools"] = {"kraftkit": " ".join(kk), "kafka": java_desc}
    try:
        extra["metadata_output_check"] = check_outputs(ml, kk, java, log=log)
    except Exception as e:
        log(f"    WARNING: output check failed: {e}")
    # the JVM takes minutes on millions of records: one run fewer than dump-log's (at least 1)
    return run_processes(ml, kk, java, repeat_kk=dump_repeat + 1, repeat_java=max(1, dump_repeat - 1), log=log)


def describe(extra: dict) -> str:
    """The metadata log and snapshot image, for the table's header."""
    m = extra["metadata_log"]
    mix = ", ".join(f"{k} {v:,} ({v / m['records'] * 100:.1f}%)" if v * 1000 >= m["records"] else f"{k} {v:,}"
                    for k, v in sorted(m["mix"].items(), key=lambda kv: -kv[1]))
    out = (f"metadata log: {m['name']} {m['bytes'] / 1e6:.0f} MB, {m['records']:,} records in {m['batches']:,} batches "
           f"({m['records'] / m['batches']:.0f}/batch), {len(m['segments'])} segments, generated in {m['gen_seconds']} s "
           f"(not in the table); mix: {mix}")
    if "replay_image" in extra:
        ri = extra["replay_image"]
        out += (f"\nimage after replay: {ri['topics']:,} topics, {ri['partitions']:,} partitions, {ri['brokers']} brokers, "
                f"{ri['configs']:,} config keys")
    if "snapshot_image" in extra:
        si = extra["snapshot_image"]
        out += (f"\nsnapshot image: {si['topics']:,} topics, {si['partitions']:,} partitions (built with "
                f"MetadataImage.replay in {si['build_image_s']} s, not in the table); snapshot "
                f"{si['snapshot_records']:,} records, {si['snapshot_bytes'] / 1e6:.0f} MB")
    return out


def ratio_cell(r: Row) -> str:
    if r.is_ref:
        return "ref"
    if r.ratio is None:
        return ""
    if r.impl.lstrip().startswith("of which"):  # a part of the ref row: its share of the time per record
        return f"{r.ratio:.0%} of ref"
    return f"{r.ratio:.2f}x"


def print_table(rows: list[Row]) -> str:
    rows = [r for r in rows if r.suite == S]
    if not rows:
        return ""
    out = ["== 5. Metadata layer ('vs ref' = the ref row's records/s / this row's; "
           "in-process rows on 1 core, process rows unpinned) =="]

    def time_cell(r: Row) -> str:
        return f"{r.best_s:.2f} s" if r.mode == M_PROC else f"{r.best_s * 1e3:.0f} ms"

    out.append(benchlib.table(rows, ["dataset", "measure", "implementation", "records", "best", "records/s", "MB/s", "vs ref"],
                              lambda r: [r.dataset, r.mode, r.impl, f"{r.records:,}", time_cell(r), fmt_rate(r.rec_per_s),
                                         f"{r.mb_per_s:.0f}", ratio_cell(r)]))
    out.append("")
    return "\n".join(out)


def fmt_rate(x: float) -> str:
    return benchlib.fmt_rate(x)


def targets(rows: list[Row]) -> list[dict]:
    res = []
    procs = {r.impl: r for r in rows if r.suite == S and r.mode == M_PROC}
    if KK_DUMP in procs and KAFKA_DUMP in procs:
        ratio = procs[KAFKA_DUMP].best_s / procs[KK_DUMP].best_s
        res.append({"target": "metadata dump >= 10x kafka-dump-log --cluster-metadata-decoder (whole process)",
                    "dataset": procs[KK_DUMP].dataset, "value": f"{ratio:.1f}x", "met": ratio >= 10})
    for r in rows:
        if r.suite == S and r.mode == M_JSON and r.impl == DUMP_LINES:
            res.append({"target": "record JSON straight from the codec >= 5 M records/s (1 core)", "dataset": r.dataset,
                        "value": f"{r.rec_per_s / 1e6:.2f} M rec/s", "met": r.rec_per_s >= 5e6})
        if r.suite == S and r.is_ref and r.mode == M_REPLAY:
            res.append({"target": "image replay >= 2 M records/s", "dataset": r.dataset,
                        "value": f"{r.rec_per_s / 1e6:.2f} M rec/s", "met": r.rec_per_s >= 2e6})
        if r.suite == S and r.is_ref and r.mode == M_SNAP and r.dataset.startswith("image-1M"):
            res.append({"target": "snapshot of a 1 M-partition image written in < 2 s (1 core)", "dataset": r.dataset,
                        "value": f"{r.best_s:.2f} s", "met": r.best_s < 2.0})
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=5_000_000, help="records in the metadata log (default 5 M)")
    p.add_argument("--snapshot-topics", type=int, default=20_000)
    p.add_argument("--snapshot-partitions", type=int, default=50)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dump-repeat", type=int, default=2, help="kraftkit process runs - 1 (JVM: this - 1, at least 1)")
    p.add_argument("--max-seconds", type=float, default=15.0,
                   help="stop repeating an in-process row once its timed runs took this long (>= 1 timed run)")
    p.add_argument("--kafka-version", default=None)
    p.add_argument("--no-kafka", action="store_true")
    p.add_argument("--data-dir", default=str(REPO / ".cache" / "bench"))
    p.add_argument("--regen", action="store_true")
    p.add_argument("--no-pin", action="store_true")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"comma list of the parts to run (default all: {','.join(PARTS)}); e.g. decode,processes for the "
                        "JSON and metadata dump rows alone")
    a = p.parse_args(argv)
    parts = tuple(x for x in a.parts.split(",") if x)
    if not set(parts) <= set(PARTS):
        p.error(f"--parts: choose from {', '.join(PARTS)}")
    t0 = time.perf_counter()
    pinned = None if a.no_pin else benchlib.pin_to_one_core()
    say = lambda m="": print(m, file=sys.stderr, flush=True)  # noqa: E731
    say(f"metadata benchmarks, pinned to CPU {pinned}")
    load0 = os.getloadavg()
    rows, extra = run_all(Path(a.data_dir), records=a.records, snap_topics=a.snapshot_topics,
                          snap_partitions=a.snapshot_partitions, warmup=a.warmup, repeat=a.repeat,
                          dump_repeat=a.dump_repeat, max_seconds=a.max_seconds, kafka_version=a.kafka_version, no_kafka=a.no_kafka,
                          regen=a.regen, log=say, parts=parts)
    benchlib.finalize(rows)
    print(f"best of {a.repeat} after {a.warmup} warm-up (processes: kraftkit best of {a.dump_repeat + 1}, "
          f"JVM {max(1, a.dump_repeat - 1)}); load average {load0[0]:.1f} at start, {os.getloadavg()[0]:.1f} at end")
    print(describe(extra))
    print()
    print(print_table(rows))
    benchlib.print_targets(rows, targets(rows), t0, a.json, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
