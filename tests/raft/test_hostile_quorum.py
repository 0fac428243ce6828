"""A live attack on a three-node ``kraftkit quorum run`` quorum (real processes on loopback): the
leader gets decompression bombs (zstd, gzip), a batch declaring 2^28 records, frames over
socket.request.max.bytes, many connections each holding a partial large frame, a slowloris frame,
more connections than one address may open, garbage bytes and a truncated header. Afterwards every
node is alive, the quorum has a leader, an ordinary ``quorum append`` commits, no node's memory
ever passed 1 GiB (VmHWM), and every log passes verify-log."""

from __future__ import annotations

import json
import resource
import socket
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import crc32c
import pytest
import zstandard

from kraftkit._core import encode_batch, encode_metadata_record
from kraftkit.metadata.records import record_type
from kraftkit.protocol import KafkaConnection
from kraftkit.protocol.messages import ApiKey
from kraftkit.raft import messages as m
from kraftkit.raft.admin import QuorumAdmin

from tests.hostile.batches import varint

from ._cluster import CLUSTER_ID, free_ports, verify_log_problems

pytestmark = pytest.mark.timeout(300)

GIB = 1024**3
MIB = 1024**2
NOOP = encode_metadata_record(record_type("NoOpRecord")[0], 0, {})
#: the nodes' own limits in this test (the defaults but a shorter frame deadline and address cap)
PER_IP = 40
READ_TIMEOUT_MS = 3000


# ---------------------------------------------------------------------------- hostile batches
def v2_batch(records_area: bytes, *, count: int, codec: int) -> bytes:
    """A record batch v2 around ``records_area`` as the format defines it (KIP-98), with a correct
    CRC-32C: what a client that means harm can send, built field by field here."""
    attributes = codec  # bits 0-2: 1 gzip, 4 zstd
    after_crc = struct.pack(">hiqqqhii", attributes, count - 1, 1000, 1000, -1, -1, -1, count) + records_area
    crc = crc32c.crc32c(after_crc)  # the independent crc32c package, not kraftkit's
    body = struct.pack(">ibI", 0, 2, crc) + after_crc  # partition leader epoch, magic, crc
    return struct.pack(">qi", 0, len(body)) + body


def zeros_compressed(total: int, compressor) -> bytes:
    chunk = bytes(MIB)
    return b"".join(compressor.compress(chunk) for _ in range(total // MIB)) + compressor.flush()


def zstd_bomb() -> bytes:
    """256 KiB-ish of zstd inflating to 8 GiB (the issue's report)."""
    area = zeros_compressed(8 * GIB, zstandard.ZstdCompressor(level=1).compressobj())
    assert len(area) < MIB
    return v2_batch(area, count=1, codec=4)


def gzip_bomb() -> bytes:
    """One record that says it is 1 GiB long, then zeros: only a limit stops it (the zeros of
    ``zstd_bomb`` are records of size 0, refused at the first)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip format
    area = c.compress(varint(GIB - 8)) + zeros_compressed(1 * GIB, c)
    assert len(area) < 2 * MIB
    return v2_batch(area, count=1, codec=1)


def lying_count_batch() -> bytes:
    """An uncompressed batch of one real record that declares 2^28 of them."""
    real = encode_batch([(1000, None, NOOP, [])])
    return v2_batch(real[61:], count=2**28, codec=0)


def produce(port: int, records: bytes) -> dict:
    with KafkaConnection("127.0.0.1", port, timeout=60) as conn:
        body = {"TransactionalId": None, "Acks": -1, "TimeoutMs": 5000, "TopicData": [{
            "Name": "__cluster_metadata", "TopicId": m.METADATA_TOPIC_ID,
            "PartitionData": [{"Index": 0, "Records": records}]}]}
        resp = conn.request(ApiKey.PRODUCE, conn.version_for(ApiKey.PRODUCE), body)
        return resp["Responses"][0]["PartitionResponses"][0]


def closed_by_node(s: socket.socket) -> bool:
    try:
        while True:
            got = s.recv(65536)
            if not got:
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def raw(port: int, data: bytes) -> bool:
    """Sends ``data`` on a new connection; True if the node closed it (without an answer, or after one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            return True
        return closed_by_node(s)


# ---------------------------------------------------------------------------- the processes
class Node:
    def __init__(self, node_id: int, voters: str, root: Path, port: int) -> None:
        self.node_id, self.port = node_id, port
        self.log_dir = root / f"node{node_id}"
        self.err = root / f"node{node_id}.stderr"
        with open(self.err, "wb") as errf:
            self.p = subprocess.Popen(
                [sys.executable, "-m", "kraftkit.cli.main", "quorum", "run", "--node-id", str(node_id),
                 "--voters", voters, "--log-dir", str(self.log_dir), "--cluster-id", CLUSTER_ID,
                 "--snapshot-every", "1000", "--max-connections-per-ip", str(PER_IP),
                 "--request-read-timeout-ms", str(READ_TIMEOUT_MS)],
                stdout=subprocess.PIPE, stderr=errf, text=True)
        # a safety net, not the measure: an allocation past 4 GiB of address space fails (the node
        # maps about 1 GiB at start); the measure is the peak resident size below
        resource.prlimit(self.p.pid, resource.RLIMIT_AS, (4 * GIB, 4 * GIB))
        line = self.p.stdout.readline()
        assert json.loads(line)["event"] == "listening", (line, self.err.read_text())

    def peak_rss(self) -> int:
        for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def stop(self) -> int | None:
        if self.p.poll() is None:
            self.p.terminate()
        try:
            return self.p.wait(20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)
            return None
        finally:
            self.p.stdout.close()


def describe(port: int) -> dict:
    with QuorumAdmin(f"127.0.0.1:{port}", timeout=30) as admin:
        return admin.describe()


def wait_until(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = cond()
        except Exception:  # a node between leaders
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def quorum_append(port: int, count: int) -> dict:
    p = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "quorum", "append", "--bootstrap",
                        f"127.0.0.1:{port}", "--count", str(count), "--batch", "5", "--json", "--timeout", "30"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_a_hostile_client_cannot_take_the_quorum_down(tmp_path):
    ports = dict(zip((1, 2, 3), free_ports(3)))
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    nodes: dict[int, Node] = {}
    held: list[socket.socket] = []
    try:
        for i, port in ports.items():
            nodes[i] = Node(i, voters, tmp_path, port)
        first = wait_until(lambda: (d := describe(ports[1]))["leader_id"] in ports and d, 60, "a leader")
        target = ports[first["leader_id"]]
        before = quorum_append(target, 20)["committed"]
        assert before

        # -- hostile batches: answered INVALID_RECORD, never inflated
        answers = {name: produce(target, make()) for name, make in
                   (("zstd bomb", zstd_bomb), ("gzip bomb", gzip_bomb), ("2^28 records", lying_count_batch))}
        for name, ans in answers.items():
            assert ans["ErrorCode"] == 87, (name, ans)  # INVALID_RECORD, with the reason
            assert ans["ErrorMessage"] and "metadata record batch" in ans["ErrorMessage"], (name, ans)
        # the batches are read record by record as they inflate: the zeros of the zstd bomb are a
        # record of size 0 at once, the gzip bomb's one huge record stops at KRaft's 8 MiB batch
        # size; the count is refused before any buffer is sized by it
        assert "record 0: invalid record size 0" in answers["zstd bomb"]["ErrorMessage"]
        assert "inflates to more than 8388608 bytes" in answers["gzip bomb"]["ErrorMessage"]
        assert str(2**28) in answers["2^28 records"]["ErrorMessage"]

        # -- frames: over the size limit, garbage, a truncated header, a body cut short
        assert raw(target, struct.pack(">i", 100 * MIB + 1) + b"\0" * 1000)
        assert raw(target, struct.pack(">i", 2**31 - 1))
        assert raw(target, bytes(range(256)) * 16)  # garbage: its first four bytes are a size of 66051
        assert raw(target, b"\xff\xfe\xfd\xfc" + b"junk" * 100)  # a negative size
        assert raw(target, struct.pack(">i", 3) + b"\x00\x12\x00")  # a header cut after 3 bytes
        assert raw(target, struct.pack(">i", 8) + struct.pack(">hhi", 0, 9, 1))  # Produce v9 with no body

        # -- many connections each holding a partial large frame (60 MiB of 100 MiB each: 1.2 GiB in
        # all, were they read): the first takes the node's budget (100 MiB), the others are closed at once
        partial = struct.pack(">i", 100 * MIB) + bytes(60 * MIB)
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", target), timeout=30)
            held.append(s)
            try:
                s.sendall(partial)
            except (BrokenPipeError, ConnectionResetError):
                pass  # refused while sending
        del partial
        # the node closes every one of them: at once over the budget, or at the frame deadline
        assert all(closed_by_node(s) for s in held)
        for s in held:
            s.close()
        held.clear()

        # -- more connections than one address may open: the ones past the cap are closed at once
        for _ in range(PER_IP + 10):
            held.append(socket.create_connection(("127.0.0.1", target), timeout=30))
        for s in held:
            s.setblocking(False)
        closed: set[int] = set()

        def refused() -> bool:
            for k, s in enumerate(held):
                try:
                    if s.recv(1) == b"":
                        closed.add(k)
                except BlockingIOError:
                    pass  # open
                except ConnectionResetError:
                    closed.add(k)
            return len(closed) >= 10

        wait_until(refused, 30, "the connections past max.connections.per.ip to be closed")
        assert len(closed) <= 10 + 2  # (the followers' connections count for 127.0.0.1 too)
        for s in held:
            s.close()
        held.clear()

        # -- the quorum goes on: every node alive, a leader (the same or a new one), appends commit
        assert all(n.p.poll() is None for n in nodes.values()), {i: n.err.read_text()[-2000:] for i, n in nodes.items()}
        after = wait_until(lambda: (d := describe(ports[1]))["leader_id"] in ports and d, 60, "a leader afterwards")
        assert after["leader_epoch"] >= first["leader_epoch"]
        committed = quorum_append(ports[after["leader_id"]], 50)["committed"]
        assert committed and committed[0][0] > before[-1][1]
        peaks = {i: n.peak_rss() for i, n in nodes.items()}
        assert all(p < GIB for p in peaks.values()), peaks
        leader_log = nodes[first["leader_id"]].err.read_text()
        assert "socket.request.max.bytes" in leader_log and "past the node-wide" in leader_log
        assert "max.connections.per.ip" in leader_log
    finally:
        for s in held:
            s.close()
        codes = {i: n.stop() for i, n in nodes.items()}
    assert all(c == 0 for c in codes.values()), codes
    assert verify_log_problems(*(n.log_dir for n in nodes.values())) == []
