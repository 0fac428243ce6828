"""A stopped ZooKeeper's data directory as a :class:`~kraftkit.migration.zk_reader.ZkSource`:
its newest snapshot (``version-2/snapshot.<zxid>``) with the transaction logs after it
(``version-2/log.<zxid>``) replayed, as ZooKeeper's ``FileTxnSnapLog.restore`` does, so the
converter reads a cluster's metadata without a running ZooKeeper.

The formats are ZooKeeper's (jute, big-endian): a snapshot is a ``FileHeader`` (``ZKSN``), the
sessions, the ACL cache, then ``(path, DataNode)`` pairs until the path ``/``
(``DataTree.serialize``); a log is a ``FileHeader`` (``ZKLG``) then entries ``crc (Adler-32),
length, TxnHeader + txn [+ TxnDigest], 0x42``, zero-filled after the last one (preallocation).
Transactions at or below the snapshot's zxid are skipped; a create of a znode that exists or a
delete of one that does not is skipped too (a snapshot is fuzzy). A torn last entry ends its log,
as ZooKeeper ends it; a CRC mismatch, a bad header or a length past the bounds is an error naming
the file and the byte. Compressed snapshots (``.gz``, ``.snappy``) are refused.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from kraftkit.migration.zk_reader import ZkConnectError, ZkInputError

SNAP_MAGIC = int.from_bytes(b"ZKSN", "big")
LOG_MAGIC = int.from_bytes(b"ZKLG", "big")
#: the largest jute buffer, string or vector length taken (ZooKeeper's jute.maxbuffer is 1 MiB by
#: default; a multi transaction's may be larger)
MAX_LENGTH = 64 * 1024 * 1024
#: the most znodes a data tree may hold here
MAX_NODES = 10_000_000

# ZooDefs.OpCode
CREATE, DELETE, SET_DATA, SET_ACL, CHECK, MULTI, CREATE2, RECONFIG = 1, 2, 5, 7, 13, 14, 15, 16
CREATE_CONTAINER, DELETE_CONTAINER, CREATE_TTL = 19, 20, 21
CREATE_SESSION, CLOSE_SESSION, ERROR = -10, -11, -1


@dataclass
class Node:
    data: bytes
    version: int
    #: the session owning an ephemeral znode (0: not ephemeral)
    owner: int = 0
    children: set[str] = field(default_factory=set)


class _In:
    """Jute's ``BinaryInputArchive`` over bytes, every length bounded."""

    def __init__(self, data: bytes | memoryview, file: Path, base: int = 0) -> None:
        self.b = memoryview(data)
        self.pos = 0
        self.file = file
        self.base = base

    def fail(self, what: str) -> ZkInputError:
        return ZkInputError(f"{self.file}: byte {self.base + self.pos}: {what}")

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.b):
            raise self.fail("ends inside a record")
        v = self.b[self.pos : self.pos + n]
        self.pos += n
        return v

    def i32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def i64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def boolean(self) -> bool:
        return self._take(1)[0] != 0

    def buffer(self) -> bytes:
        n = self.i32()
        if n == -1:
            return b""
        if n < -1 or n > MAX_LENGTH:
            raise self.fail(f"a length of {n} bytes")
        return bytes(self._take(n))

    def string(self) -> str:
        raw = self.buffer()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("a string that is not UTF-8") from None

    def count(self) -> int:
        n = self.i32()
        if n == -1:
            return 0
        if n < -1 or n > MAX_LENGTH:
            raise self.fail(f"a count of {n}")
        return n

    def acls(self) -> None:
        for _ in range(self.count()):
            self.i32()  # perms
            self.string()  # scheme
            self.string()  # id

    @property
    def left(self) -> int:
        return len(self.b) - self.pos


def _zxid(name: str, prefix: str) -> int | None:
    m = re.fullmatch(re.escape(prefix) + r"\.([0-9a-fA-F]{1,16})", name)
    return int(m.group(1), 16) if m else None


class DataDirSource:
    """The data tree of a stopped ZooKeeper's data directory (``dataDir``, or its ``version-2``)."""

    def __init__(
        self, directory: str | os.PathLike[str], *, chroot: str = "", max_file_bytes: int = 8 * 1024**3
    ) -> None:
        self.chroot = _key(chroot) if chroot else ""
        d = Path(directory)
        if (d / "version-2").is_dir():
            d = d / "version-2"
        if not d.is_dir():
            raise ZkConnectError(f"{d}: not a directory")
        self.directory = d
        self.max_file_bytes = max_file_bytes
        self.nodes: dict[str, Node] = {"": Node(b"", 0)}
        names = os.listdir(d)
        compressed = [n for n in names if n.startswith("snapshot.") and n.endswith((".gz", ".snappy"))]
        if compressed:
            raise ZkInputError(f"{d / compressed[0]}: a compressed snapshot (not read)")
        snaps = sorted((z, n) for n in names if (z := _zxid(n, "snapshot")) is not None)
        logs = sorted((z, n) for n in names if (z := _zxid(n, "log")) is not None)
        if not snaps and not logs:
            raise ZkConnectError(f"{d}: no ZooKeeper snapshot or transaction log (snapshot.<zxid>, log.<zxid>)")
        self.snapshot_zxid = 0
        if snaps:
            self.snapshot_zxid, name = snaps[-1]
            self._load_snapshot(d / name)
        # the log holding the first transaction after the snapshot, and every later one
        start = 0
        for i, (z, _n) in enumerate(logs):
            if z <= self.snapshot_zxid + 1:
                start = i
        self.last_zxid = self.snapshot_zxid
        for _z, name in logs[start:]:
            self._replay_log(d / name)

    # ------------------------------------------------------------------ ZkSource
    def get(self, path: str) -> tuple[bytes, int] | None:
        n = self.nodes.get(_key(self.chroot + path))
        return None if n is None else (n.data, n.version)

    def children(self, path: str) -> list[str] | None:
        n = self.nodes.get(_key(self.chroot + path))
        return None if n is None else sorted(n.children)

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ reading
    def _read(self, path: Path) -> bytes:
        from kraftkit._fs import read_small

        return read_small(path, limit=self.max_file_bytes, what="a ZooKeeper file")

    def _load_snapshot(self, path: Path) -> None:
        ia = _In(self._read(path), path)
        if ia.i32() != SNAP_MAGIC:
            raise ZkInputError(f"{path}: not a ZooKeeper snapshot (no ZKSN header)")
        ia.i32()  # version
        ia.i64()  # dbid
        for _ in range(ia.count()):  # sessions
            ia.i64()
            ia.i32()
        for _ in range(ia.count()):  # the ACL cache: id -> ACLs
            ia.i64()
            ia.acls()
        self.nodes = {}
        while True:
            p = ia.string()
            if p == "/":
                break
            data = ia.buffer()
            ia.i64()  # acl
            ia.i64(), ia.i64(), ia.i64(), ia.i64()  # czxid, mzxid, ctime, mtime
            version = ia.i32()
            ia.i32(), ia.i32()  # cversion, aversion
            owner = ia.i64()
            ia.i64()  # pzxid
            if len(self.nodes) >= MAX_NODES:
                raise ia.fail(f"more than {MAX_NODES} znodes")
            node = Node(data, version, owner)
            if p:
                slash = p.rfind("/")
                parent = self.nodes.get(p[:slash])
                if slash < 0 or parent is None:
                    raise ia.fail(f"znode {p!r} comes before its parent")
                parent.children.add(p[slash + 1 :])
            self.nodes[p] = node
        if "" not in self.nodes:
            raise ZkInputError(f"{path}: the snapshot has no root znode")

    def _replay_log(self, path: Path) -> None:
        raw = self._read(path)
        ia = _In(raw, path)
        if ia.left < 16 or ia.i32() != LOG_MAGIC:
            raise ZkInputError(f"{path}: not a ZooKeeper transaction log (no ZKLG header)")
        ia.i32()
        ia.i64()
        while ia.left >= 12:
            at = ia.pos
            crc = ia.i64() & 0xFFFFFFFFFFFFFFFF
            n = ia.i32()
            if n == 0:
                break  # preallocated zeros: the end
            if n < 0 or n > MAX_LENGTH:
                raise ZkInputError(f"{path}: byte {at}: an entry of {n} bytes")
            if ia.left < n + 1:
                break  # a torn last entry: ZooKeeper ends the log there
            body = bytes(ia._take(n))
            if ia._take(1)[0] != 0x42:
                break
            if zlib.adler32(body) != crc:
                raise ZkInputError(f"{path}: byte {at}: CRC mismatch (the entry is damaged)")
            self._apply(_In(body, path, at + 12))

    def _apply(self, t: _In) -> None:
        client, _cxid, zxid, _time, kind = t.i64(), t.i32(), t.i64(), t.i64(), t.i32()
        if zxid <= self.snapshot_zxid:
            return
        self.last_zxid = max(self.last_zxid, zxid)
        self._txn(kind, t, client)

    def _txn(self, kind: int, t: _In, client: int) -> None:
        if kind in (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL):
            p, data = t.string(), t.buffer()
            t.acls()
            ephemeral = t.boolean() if kind in (CREATE, CREATE2) else False
            self._create(t, p, data, client if ephemeral else 0)
        elif kind in (DELETE, DELETE_CONTAINER):
            self._delete(t.string())
        elif kind in (SET_DATA, RECONFIG):
            p, data, version = t.string(), t.buffer(), t.i32()
            node = self.nodes.get(_key(p))
            if node is not None:
                node.data, node.version = data, version
        elif kind == MULTI:
            for _ in range(t.count()):
                sub, body = t.i32(), t.buffer()
                if sub != ERROR:
                    self._txn(sub, _In(body, t.file, t.base), client)
        elif kind == CLOSE_SESSION:
            for p in [p for p, n in self.nodes.items() if n.owner == client and client != 0]:
                self._delete(p or "/")
        elif kind in (SET_ACL, CHECK, CREATE_SESSION, ERROR):
            pass
        else:
            raise t.fail(f"a transaction of unknown type {kind}")

    def _create(self, t: _In, p: str, data: bytes, owner: int) -> None:
        k = _key(p)
        if k in self.nodes:
            return
        slash = k.rfind("/")
        parent = self.nodes.get(k[:slash]) if slash >= 0 else None
        if parent is None:
            return  # (its parent went first: a fuzzy snapshot)
        if len(self.nodes) >= MAX_NODES:
            raise t.fail(f"more than {MAX_NODES} znodes")
        parent.children.add(k[slash + 1 :])
        self.nodes[k] = Node(data, 0, owner)

    def _delete(self, p: str) -> None:
        k = _key(p)
        if k not in self.nodes or not k:
            return
        for child in list(self.nodes[k].children):
            self._delete(f"{k}/{child}")
        del self.nodes[k]
        slash = k.rfind("/")
        parent = self.nodes.get(k[:slash])
        if parent is not None:
            parent.children.discard(k[slash + 1 :])


def _key(path: str) -> str:
    """The data tree's key of a path: the root is ""."""
    return "" if path == "/" else path.rstrip("/")
