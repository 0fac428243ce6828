"""Benchmark data: partition logs written with kraftkit's own ``Log``, cached on disk.

Every dataset is a directory of Kafka segment files (``<base offset>.log`` + indexes +
``leader-epoch-checkpoint``) produced by ``kraftkit.log.Log.append`` of batches built by
``kraftkit.log.encode_batch``. Generation is deterministic (seeded), so a cached copy is
reused when its parameters match (``meta.json``); ``--regen`` forces a rebuild.

Datasets
--------
``meta``        KRaft ``__cluster_metadata``-like: null keys, 60-200 B binary values shaped like
                framed metadata records (frame version, api key, version, UUIDs, ints),
                batches of 100-500 records, leader epoch bumped now and then, no compression
                (the metadata log default).
``topic``       aiokafka's benchmark shape: 6 B key / 60 B JSON-ish value, 200 records per
                batch (~15 KB, close to the producer's 16 KB ``batch.size``), uncompressed.
``topic-lz4``   the very same records as ``topic`` (same count, same bytes per record),
``topic-zstd``  compressed per batch with that codec (also ``-gzip`` / ``-snappy`` on request).
``topic-1k``    6 B key / 1 KB value, 16 records per batch, uncompressed.

Sizes: ``meta``, ``topic`` and ``topic-1k`` are generated up to ``size_mb`` of segment
bytes on disk. The compressed variants hold as many records as ``topic`` (so they are
smaller on disk: the ratio is printed).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kraftkit.log import Log, encode_batch, list_segments, segment_name

#: Bump when the generator changes, so cached datasets are rebuilt.
GEN_VERSION = 2
TS0 = 1_700_000_000_000


@dataclass
class Dataset:
    name: str
    dir: str
    compression: str
    records: int
    batches: int
    bytes: int  # total size of the .log files
    segments: list[str] = field(default_factory=list)
    description: str = ""
    gen_seconds: float = 0.0

    @property
    def paths(self) -> list[str]:
        return self.segments

    def to_json(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- record shapes

def _meta_values(rng: random.Random, n: int) -> list[bytes]:
    """Binary values shaped like framed KRaft metadata records (ApiMessageAndVersion)."""
    out = []
    for _ in range(n):
        api_key = rng.choice((2, 3, 3, 3, 3, 17, 21, 0, 12))  # Topic, Partition (most), BrokerRegistrationChange, ...
        size = rng.randint(60, 200)
        body = bytearray([1, api_key, rng.choice((0, 1, 2))])  # frame version, api key, version
        body += rng.randbytes(16)  # a topic / directory UUID
        while len(body) < size:
            r = rng.random()
            if r < 0.4:
                body += rng.randint(0, 2**31 - 1).to_bytes(4, "big")  # int32 fields (partition, leader, epochs)
            elif r < 0.7:
                body += rng.randbytes(16)  # more UUIDs
            else:
                name = b"topic-%d" % rng.randint(0, 99999)
                body += bytes([len(name) + 1]) + name  # compact string
        out.append(bytes(body[:size]))
    return out


def _topic_values(rng: random.Random, n: int, size: int) -> list[bytes]:
    """JSON-ish event payloads of exactly ``size`` bytes (compress like real text payloads)."""
    events = (b"click", b"view", b"add_to_cart", b"purchase", b"search")
    out = []
    for _ in range(n):
        v = b'{"user":%d,"sku":"SKU-%05d","event":"%s","qty":%d,"price":%.2f,"s":"%s"' % (
            rng.randint(0, 999999), rng.randint(0, 99999), rng.choice(events), rng.randint(1, 9),
            rng.random() * 500, rng.randbytes(8).hex().encode())
        while len(v) < size - 1:
            v += b',"f%d":%d' % (len(v) % 10, rng.randint(0, 99999))
        out.append(v[: size - 1] + b"}")
    return out


# --------------------------------------------------------------------------- writers

def _write_log(directory: Path, batches_iter, segment_bytes: int) -> tuple[int, int]:
    if directory.exists():
        shutil.rmtree(directory)
    n_rec = n_batch = 0
    with Log(directory, create=True, segment_bytes=segment_bytes) as log:
        for data, count in batches_iter:
            log.append(data)
            n_rec += count
            n_batch += 1
        log.flush()
    return n_rec, n_batch


def _meta_batches(target_bytes: int, seed: int):
    rng = random.Random(seed)
    pool = _meta_values(rng, 8192)
    off, ts, total, epoch, nb = 0, TS0, 0, 1, 0
    while total < target_bytes:
        n = rng.randint(100, 500)
        j = rng.randrange(len(pool))
        recs = [(ts + i // 50, None, pool[(j + 7 * i) % len(pool)], ()) for i in range(n)]
        data = encode_batch(recs, base_offset=off, partition_leader_epoch=epoch)
        yield data, n
        off += n
        ts += 500
        total += len(data)
        nb += 1
        if nb % 997 == 0:
            epoch += 1


def _topic_batches(target_bytes: int | None, seed: int, *, value_size: int, per_batch: int,
                   compression: str = "none", max_records: int | None = None):
    rng = random.Random(seed)
    pool_n = 16384 if value_size < 256 else 1024
    keys = [b"k%05d" % i for i in range(100000)]
    pool = _topic_values(rng, pool_n, value_size)
    off, ts, total = 0, TS0, 0
    while True:
        if max_records is not None:
            if off >= max_records:
                break
            n = min(per_batch, max_records - off)
        else:
            if total >= target_bytes:
                break
            n = per_batch
        j = (off * 31) % pool_n
        recs = [(ts + i, keys[(off + i) % 100000], pool[(j + 13 * i) % pool_n], ()) for i in range(n)]
        data = encode_batch(recs, base_offset=off, compression=compression, partition_leader_epoch=0)
        yield data, n
        off += n
        ts += n
        total += len(data)


# --------------------------------------------------------------------------- cache

def _load(directory: Path, params: dict) -> Dataset | None:
    meta = directory / "meta.json"
    if not meta.is_file():
        return None
    try:
        d = json.loads(meta.read_text())
    except ValueError:
        return None
    if d.get("params") != params:
        return None
    ds = Dataset(**d["dataset"])
    if not all(Path(p).is_file() for p in ds.segments):
        return None
    return ds


def _finish(name: str, directory: Path, compression: str, n_rec: int, n_batch: int, desc: str,
            params: dict, secs: float) -> Dataset:
    segs = [str(directory / segment_name(b)) for b in list_segments(directory)]
    size = sum(os.path.getsize(p) for p in segs)
    ds = Dataset(name=name, dir=str(directory), compression=compression, records=n_rec, batches=n_batch,
                 bytes=size, segments=segs, description=desc, gen_seconds=round(secs, 2))
    (directory / "meta.json").write_text(json.dumps({"params": params, "dataset": ds.to_json()}, indent=1))
    return ds


def ensure_dataset(name: str, root: Path, *, size_mb: int, segment_mb: int, regen: bool = False,
                   topic_records: int | None = None, log=print) -> Dataset:
    """Returns the dataset ``name`` under ``root``, generating it if missing or stale."""
    params = {"gen": GEN_VERSION, "name": name, "size_mb": size_mb, "segment_mb": segment_mb}
    if name.startswith("topic-") and name[6:] in ("lz4", "zstd", "gzip", "snappy"):
        params["topic_records"] = topic_records
    directory = root / f"{name}-{size_mb}mb"
    if not regen:
        ds = _load(directory, params)
        if ds is not None:
            return ds
    target = size_mb << 20
    seg_bytes = segment_mb << 20
    t = time.perf_counter()
    log(f"  generating {name} ({size_mb} MB target) in {directory} ...")
    if name == "meta":
        desc = "KRaft metadata-like: null key, 60-200 B values, 100-500 records/batch, uncompressed"
        n_rec, n_b = _write_log(directory, _meta_batches(target, seed=1), seg_bytes)
        comp = "none"
    elif name == "topic":
        desc = "6 B key / 60 B value, 200 records/batch, uncompressed"
        n_rec, n_b = _write_log(directory, _topic_batches(target, 2, value_size=60, per_batch=200), seg_bytes)
        comp = "none"
    elif name == "topic-1k":
        desc = "6 B key / 1 KB value, 16 records/batch, uncompressed"
        n_rec, n_b = _write_log(directory, _topic_batches(target, 3, value_size=1024, per_batch=16), seg_bytes)
        comp = "none"
    elif name.startswith("topic-"):
        comp = name[6:]
        if topic_records is None:
            raise ValueError("compressed datasets need topic_records")
        desc = f"the 'topic' records (6 B key / 60 B value, 200/batch), {comp}-compressed"
        n_rec, n_b = _write_log(directory, _topic_batches(None, 2, value_size=60, per_batch=200, compression=comp,
                                                          max_records=topic_records), seg_bytes)
    else:
        raise ValueError(f"unknown dataset {name!r}")
    return _finish(name, directory, comp, n_rec, n_b, desc, params, time.perf_counter() - t)
