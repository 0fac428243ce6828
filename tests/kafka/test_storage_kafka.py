"""``kraftkit storage`` against the real ``kafka-storage`` (Kafka 4.4.0 and 4.3.1, ``kafka.tools.StorageTool``).

* Same arguments, same files, for each tool: Kafka 4.4.0 writes the bootstrap records into the
  bootstrap snapshot of the metadata directory (kraftkit's ``checkpoint`` layout), 4.3.1 a
  ``bootstrap.checkpoint`` in every directory (``bootstrap-file``); both tools format the same
  files; the ``bootstrap.checkpoint`` and snapshot bytes are equal once every batch's timestamps
  and the snapshot's LastContainedLogTimestamp are zeroed and the CRCs recomputed;
  ``meta.properties`` holds the same entries in the same order.
* Same refusals: inputs Kafka refuses, kraftkit refuses (and the other way round), checked
  case by case with both messages, and over a matrix of release versions and feature settings
  run in one JVM (``StorageTool.execute``).
* Kafka 3.9.2's and 3.5.2's own tools write the same bootstrap.checkpoint at their releases.
* ``kafka-storage info`` prints what ``kraftkit storage info`` prints (less kraftkit's
  bootstrap block).
* Real Kafka 4.3.1 (and 3.9.2) nodes boot from kraftkit-formatted directories, and Kafka's own
  ``kafka-features describe`` reports the requested metadata.version and feature levels.
"""

from __future__ import annotations

import concurrent.futures
import random
import re
import struct
from pathlib import Path

import pytest

from kraftkit._core import crc32c, decode_batches, decode_control_record, snapshot_header_value
from kraftkit.features import storage as S
from kraftkit.features.registry import registry
from kraftkit.features.storage import (
    BOOTSTRAP_FILE,
    BOOTSTRAP_SNAPSHOT,
    CLUSTER_METADATA_DIR,
    META_PROPERTIES,
    StorageError,
    format_storage,
    parse_feature_arg,
    parse_properties,
    random_uuid,
)
from kraftkit.log.control import ControlType
from tests.harness import jars, tools
from tests.harness.node import KafkaNode, free_port

pytestmark = pytest.mark.kafka

V = jars.KAFKA_4
NEW = jars.KAFKA_NEWEST
#: where each tool writes the bootstrap records (kraftkit's name for it)
LAYOUT = {NEW: S.LAYOUT_CHECKPOINT}
STORAGE_TOOL = "kafka.tools.StorageTool"
NODE_ID = 1


# ------------------------------------------------------------------ helpers

def kafka_config(path: Path, dirs: list[Path], meta_dir: Path, *, node_id: int = NODE_ID,
                 dynamic: bool = False, controller_port: int = 19093) -> Path:
    props = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "listeners": f"PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": ",".join(map(str, dirs)),
        "metadata.log.dir": str(meta_dir),
    }
    if dynamic:
        props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{controller_port}"
    else:
        props["controller.quorum.voters"] = f"{node_id}@127.0.0.1:{controller_port}"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def kafka_format(root: Path, cluster_id: str, args: list[str], *, ndirs: int = 2, dynamic: bool = False,
                 node_id: int = NODE_ID, check: bool = True, version: str = NEW):
    dirs = [root / f"log{i}" for i in range(ndirs)]
    meta = root / "meta"
    cfg = kafka_config(root / "server.properties", dirs, meta, node_id=node_id, dynamic=dynamic)
    proc = tools.run_tool(version, STORAGE_TOOL, ["format", "-c", str(cfg), "-t", cluster_id, *args],
                          timeout=120, check=False)
    if check and proc.returncode != 0:
        raise AssertionError(f"kafka-storage format {args} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc, dirs, meta


def kraftkit_format(root: Path, cluster_id: str, args: list[str], *, ndirs: int = 2, node_id: int = NODE_ID,
                    version: str = NEW):
    """The same request through the Python API (argument names as the CLI's), writing what
    Kafka ``version``'s tool writes: its layout, and its default release version."""
    dirs = [root / f"log{i}" for i in range(ndirs)]
    meta = root / "meta"
    kw: dict = {"features": [], "layout": LAYOUT.get(version, S.LAYOUT_BOOTSTRAP_FILE)}
    if version != NEW and "--release-version" not in args and not any(a.startswith("metadata.version=") for a in args):
        kw["release_version"] = ".".join(version.split(".")[:2])
    it = iter(args)
    for a in it:
        if a == "--release-version":
            kw["release_version"] = next(it)
        elif a == "--feature":
            kw["features"].append(parse_feature_arg(next(it)))
        elif a == "--initial-controllers":
            kw["initial_controllers"] = next(it)
        elif a == "--no-initial-controllers":
            kw["no_initial_controllers"] = True
        elif a == "--standalone":
            kw["standalone"] = True
            kw["controller_listener"] = "CONTROLLER://127.0.0.1:19093"
        elif a == "--ignore-formatted":
            kw["ignore_formatted"] = True
        else:
            raise ValueError(a)
    return format_storage(dirs, cluster_id=cluster_id, node_id=node_id, metadata_log_dir=meta, **kw), dirs, meta


def tree(root: Path) -> dict[str, int]:
    """relative path -> permission bits, of every file under the formatted directories."""
    return {str(p.relative_to(root)): p.stat().st_mode & 0o777 for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "server.properties"}


def normalised(data: bytes) -> bytes:
    """Every batch's base and max timestamps set to 0, a SnapshotHeader's
    LastContainedLogTimestamp set to 0, CRCs recomputed. Nothing else changes."""
    out = bytearray()
    for batch in decode_batches(data):
        raw = bytearray(batch.to_bytes())
        if batch.is_control:
            for rec in batch.records():
                if rec.control_type == ControlType.SNAPSHOT_HEADER:
                    ts = decode_control_record(ControlType.SNAPSHOT_HEADER, rec.value)["LastContainedLogTimestamp"]
                    if ts != 0:
                        old, new = snapshot_header_value(ts), snapshot_header_value(0)
                        assert len(old) == len(new) and raw[61:].count(old) == 1
                        raw[61:] = bytes(raw[61:]).replace(old, new)
        raw[27:43] = bytes(16)  # BaseTimestamp, MaxTimestamp
        raw[17:21] = struct.pack(">I", crc32c(bytes(raw[21:])))
        out += raw
    return bytes(out)


def meta_lines(path: Path) -> tuple[list[str], dict[str, str]]:
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0] == "#"
    assert re.fullmatch(r"#\w{3} \w{3} \d{2} \d{2}:\d{2}:\d{2} \S+ \d{4}", lines[1]), lines[1]
    return [line.split("=", 1)[0] for line in lines[2:]], parse_properties(text)


def compare_dirs(kafka_root: Path, kk_root: Path, *, fixed_directory_ids: set[str] = frozenset()) -> None:
    assert tree(kafka_root) == tree(kk_root)
    for rel in tree(kafka_root):
        a, b = kafka_root / rel, kk_root / rel
        if rel.endswith(".checkpoint"):
            assert normalised(a.read_bytes()) == normalised(b.read_bytes()), rel
        elif rel.endswith(META_PROPERTIES):
            ka, pa = meta_lines(a)
            kb, pb = meta_lines(b)
            assert ka == kb, rel  # same keys, same (Java hash) order
            if pa["directory.id"] in fixed_directory_ids or pb["directory.id"] in fixed_directory_ids:
                assert pa == pb, rel
            else:
                assert {k: v for k, v in pa.items() if k != "directory.id"} == \
                       {k: v for k, v in pb.items() if k != "directory.id"}
        else:
            raise AssertionError(f"unexpected file {rel}")


# ------------------------------------------------------------------ same files

VOTERS = "0@h0.example:9090:JEXY6aqzQY-32P5TStzaFg,1@[::1]:9093:MvDxzVmcRsaTz33bUuRU6A,2@10.0.0.3:9094:07R5amHmR32VDA6jHkGbTA"
CASES = [
    ("default", [], False),
    ("3.3-IV3", ["--release-version", "3.3-IV3"], False),
    ("3.5", ["--release-version", "3.5"], False),
    ("3.9", ["--release-version", "3.9"], False),
    ("3.9+tv2", ["--release-version", "3.9", "--feature", "transaction.version=2", "--feature", "group.version=1"], False),
    ("4.0", ["--release-version", "4.0-IV3"], False),
    ("4.3", ["--release-version", "4.3"], False),
    ("4.3-off", ["--release-version", "4.3", "--feature", "group.version=0", "--feature", "transaction.version=1"], False),
    ("mv-feature", ["--feature", "metadata.version=20"], False),
    ("voters", ["--release-version", "4.1", "--initial-controllers", VOTERS], True),
    ("voters-3.9", ["--release-version", "3.9", "--initial-controllers", VOTERS], True),
    ("no-initial", ["--release-version", "4.2", "--no-initial-controllers"], True),
]


def _run_kafka_case(tmp: Path, name: str, cid: str, args: list[str], dynamic: bool, version: str):
    root = tmp / "kafka" / name
    root.mkdir(parents=True)
    return kafka_format(root, cid, args, dynamic=dynamic, version=version)


@pytest.fixture(scope="module")
def kafka_formats(tmp_path_factory):
    """Every case formatted by each real tool (in parallel JVMs)."""
    out = {}
    cid = random_uuid()
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        for version in (NEW, V):
            tmp = tmp_path_factory.mktemp(f"storage-{version}")
            futs = {name: ex.submit(_run_kafka_case, tmp, name, cid, args, dyn, version) for name, args, dyn in CASES}
            out[version] = (tmp, cid, futs)
        return {v: (tmp, cid, {name: f.result() for name, f in futs.items()}) for v, (tmp, cid, futs) in out.items()}


@pytest.mark.parametrize("version", [NEW, V])
@pytest.mark.parametrize("name,args,dynamic", CASES, ids=[c[0] for c in CASES])
def test_format_same_files_as_kafka(kafka_formats, name, args, dynamic, version):
    tmp, cid, done = kafka_formats[version]
    proc, _, _ = done[name]
    kk_root = tmp / "kraftkit" / name
    kk_root.mkdir(parents=True)
    result, _, _ = kraftkit_format(kk_root, cid, args, version=version)
    compare_dirs(tmp / "kafka" / name, kk_root, fixed_directory_ids={"MvDxzVmcRsaTz33bUuRU6A"})
    # Kafka prints "Formatting <kind> <dir> with metadata.version <name>." per directory
    kafka_lines = sorted(line.replace(str(tmp / "kafka" / name), "ROOT")
                         for line in proc.stdout.splitlines() if line.startswith("Formatting"))
    kk_lines = sorted(line.replace(str(kk_root), "ROOT") for line in result.messages)
    assert kafka_lines == kk_lines


#: Runs many ``kafka-storage`` commands in one JVM (``StorageTool.execute``; ``Exit`` trapped).
BATCH_SOURCE = """
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

public class StorageBatch {
    public static void main(String[] a) throws Exception {
        org.apache.kafka.common.utils.Exit.setExitProcedure((code, msg) -> {
            throw new RuntimeException("exit " + code + ": " + msg);
        });
        List<String> out = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(a[0]))) {
            if (line.isEmpty()) continue;
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            PrintStream ps = new PrintStream(buf, true, "UTF-8");
            int rc;
            String err = "";
            try {
                rc = kafka.tools.StorageTool.execute(line.split("\\t"), ps);
            } catch (Throwable t) {
                rc = -1;
                err = String.valueOf(t);
            }
            out.add(rc + "\\t" + (buf.toString("UTF-8") + err).replace('\\n', ' '));
        }
        Files.write(Paths.get(a[1]), out);
    }
}
"""


def kafka_storage_batch(tmp: Path, commands: list[list[str]]) -> list[tuple[int, str]]:
    """``(exit code, output)`` of each ``kafka-storage`` command, all run in one JVM."""
    src_dir = tmp / "src"
    src_dir.mkdir(exist_ok=True)
    src = src_dir / "StorageBatch.java"
    src.write_text(tools.adapt_source(NEW, BATCH_SOURCE))  # the class names of that release
    classes = tools.compile_java(NEW, src, "storage-batch")
    spec, out = tmp / "commands.tsv", tmp / "results.tsv"
    spec.write_text("".join("\t".join(c) + "\n" for c in commands))
    if classes is None:
        tools.run_tool(NEW, src, [spec, out], timeout=300)
    else:
        tools.run_tool(NEW, "StorageBatch", [spec, out], timeout=300, extra_classpath=[classes])
    results = []
    for line in out.read_text().splitlines():
        rc, _, text = line.partition("\t")
        results.append((int(rc), text))
    assert len(results) == len(commands)
    return results


def test_feature_matrix_matches_kafka(tmp_path):
    """Every release version with its defaults, and release versions x single feature
    settings: Kafka 4.4.0 and kraftkit accept and refuse the same requests, and write the same
    files (the bootstrap snapshot holding the bootstrap records) when they accept."""
    from kraftkit.features.storage import bootstrap_metadata_versions

    cid = random_uuid()
    cases: list[tuple[str, str | None]] = [(m.name, None) for m in bootstrap_metadata_versions()]
    settings = ["eligible.leader.replicas.version=1", "group.version=1", "group.version=0", "share.version=1",
                "share.version=2", "streams.version=1", "transaction.version=2", "transaction.version=1",
                "kraft.version=0"]
    cases += [(mv, f) for mv in ("3.3-IV3", "3.5-IV2", "3.9-IV0", "4.0-IV0", "4.0-IV1", "4.1-IV0", "4.2-IV1",
                                 "4.3-IV0", "4.4-IV0", "4.4-IV1", "4.4-IV2") for f in settings]
    requests = [["--release-version", mv] + (["--feature", f] if f else []) for mv, f in cases]
    # and a fixed pseudo-random sample of several settings at once, some with a dynamic quorum
    rng = random.Random(20261121)
    names = [m.name for m in bootstrap_metadata_versions()] + ["3.5", "3.9", "4.0", "4.3", "4.4"]
    features = ["eligible.leader.replicas.version", "group.version", "share.version", "streams.version",
                "transaction.version", "kraft.version"]
    for _ in range(80):
        req = ["--release-version", rng.choice(names)]
        for name in rng.sample(features, rng.randint(1, 4)):
            req += ["--feature", f"{name}={rng.choice([0, 1, 1, 2, 3])}"]
        if rng.random() < 0.3:
            req.append("--no-initial-controllers")
        requests.append(req)
    commands = []
    for i, req in enumerate(requests):
        root = tmp_path / f"k{i}"
        root.mkdir()
        cfg = kafka_config(root / "server.properties", [root / "log0"], root / "meta",
                           dynamic="--no-initial-controllers" in req)
        commands.append(["format", "-c", str(cfg), "-t", cid, *req])
    results = kafka_storage_batch(tmp_path, commands)
    bad = []
    for i, (args, (rc, text)) in enumerate(zip(requests, results)):
        mv, feature = args[1], args[3:]
        (tmp_path / f"kk{i}").mkdir()
        try:
            _, _, kkmeta = kraftkit_format(tmp_path / f"kk{i}", cid, args, ndirs=1)
        except StorageError as e:
            if rc == 0:
                bad.append((mv, feature, "kraftkit refused what Kafka accepted", str(e)))
            continue
        if rc != 0:
            bad.append((mv, feature, "Kafka refused what kraftkit accepted", text[-300:]))
            continue
        if tree(tmp_path / f"k{i}") != tree(kkmeta.parent):
            bad.append((mv, feature, "not the same files", tree(tmp_path / f"k{i}"), tree(kkmeta.parent)))
            continue
        rel = Path("meta") / CLUSTER_METADATA_DIR / BOOTSTRAP_SNAPSHOT
        if normalised((tmp_path / f"k{i}" / rel).read_bytes()) != normalised((kkmeta.parent / rel).read_bytes()):
            bad.append((mv, feature, f"{rel} differs"))
    assert not bad, bad
    accepted = sum(rc == 0 for rc, _ in results)
    assert len(requests) // 3 < accepted < len(requests) - 20


OLDER = [("3.9.2", "3.9"), ("3.9.2", "3.5"), ("3.5.2", "3.5"), ("3.5.2", "3.4")]


@pytest.mark.parametrize("version,release", OLDER, ids=[f"{v}-at-{r}" for v, r in OLDER])
def test_older_kafka_tools_write_the_same_bootstrap(tmp_path, version, release):
    """Kafka 3.9.2's and 3.5.2's own kafka-storage, at a release version they support: the
    same bootstrap.checkpoint (timestamps aside). 3.9.2 writes the same meta.properties
    keys; 3.5.2 predates directory.id (KIP-858, 3.7) and writes none."""
    jars.ensure_kafka(version)
    cid = random_uuid()
    (tmp_path / "k").mkdir()
    dirs = [tmp_path / "k" / "log0", tmp_path / "k" / "log1"]
    cfg = kafka_config(tmp_path / "k" / "server.properties", dirs, tmp_path / "k" / "meta")
    tools.run_tool(version, STORAGE_TOOL, ["format", "-c", str(cfg), "-t", cid, "--release-version", release],
                   timeout=120)
    (tmp_path / "kk").mkdir()
    kraftkit_format(tmp_path / "kk", cid, ["--release-version", release], version=version)
    assert tree(tmp_path / "k") == tree(tmp_path / "kk")
    for rel in tree(tmp_path / "k"):
        a, b = tmp_path / "k" / rel, tmp_path / "kk" / rel
        if rel.endswith(BOOTSTRAP_FILE):
            assert normalised(a.read_bytes()) == normalised(b.read_bytes()), rel
        else:
            pa, pb = parse_properties(a.read_text()), parse_properties(b.read_text())
            if version.startswith("3.5"):
                assert "directory.id" not in pa
                pb.pop("directory.id")
            else:
                pa.pop("directory.id"), pb.pop("directory.id")
            assert pa == pb


@pytest.mark.parametrize("version", [NEW, V])
def test_standalone_like_kafka(tmp_path, version):
    """--standalone: a fresh voter directory id, shared by meta.properties and the snapshot."""
    cid = random_uuid()
    (tmp_path / "k").mkdir()
    (tmp_path / "kk").mkdir()
    kafka_format(tmp_path / "k", cid, ["--release-version", "4.0", "--standalone"], dynamic=True, version=version)
    kraftkit_format(tmp_path / "kk", cid, ["--release-version", "4.0", "--standalone"], version=version)
    assert tree(tmp_path / "k") == tree(tmp_path / "kk")
    for root in (tmp_path / "k", tmp_path / "kk"):
        snap = root / "meta" / CLUSTER_METADATA_DIR / BOOTSTRAP_SNAPSHOT
        header = decode_batches(snap.read_bytes())[0].records()
        voters = decode_control_record(ControlType.KRAFT_VOTERS, header[2].value)["Voters"]
        dir_id = parse_properties((root / "meta" / META_PROPERTIES).read_text())["directory.id"]
        assert [(v["VoterId"], v["Endpoints"]) for v in voters] == \
               [(NODE_ID, [{"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": 19093}])]
        assert str(voters[0]["VoterDirectoryId"]) != "" and _uuid_text(voters[0]["VoterDirectoryId"]) == dir_id
    if version == NEW:  # the bootstrap records follow the voters in the snapshot
        snaps = [decode_batches((root / "meta" / CLUSTER_METADATA_DIR / BOOTSTRAP_SNAPSHOT).read_bytes())
                 for root in (tmp_path / "k", tmp_path / "kk")]
        assert [[r.value for r in b.records()] for b in snaps[0][1:]] == \
               [[r.value for r in b.records()] for b in snaps[1][1:]]
    else:
        assert normalised((tmp_path / "k/meta/bootstrap.checkpoint").read_bytes()) == \
               normalised((tmp_path / "kk/meta/bootstrap.checkpoint").read_bytes())


def _uuid_text(u) -> str:
    import base64

    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


# ------------------------------------------------------------------ same refusals

#: the newest tool's newest metadata.version, not yet stable in it
_NEWEST_TESTING = registry().by_level(registry().newest_release.latest_testing)
# (name, arguments, dynamic quorum config, what Kafka 4.4.0 says, what kraftkit says)
REFUSED = [
    ("elr-needs-4.0", ["--release-version", "3.9", "--feature", "eligible.leader.replicas.version=1"], False,
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23",
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"),
    ("unknown-feature", ["--feature", "foo.version=1"], False,
     "Unsupported feature: foo.version. Supported features are: eligible.leader.replicas.version, group.version, "
     "kraft.version, share.version, streams.version, transaction.version",
     "Unsupported feature: foo.version. Supported features are: eligible.leader.replicas.version, group.version, "
     "kraft.version, share.version, streams.version, transaction.version"),
    ("test-feature", ["--feature", "test.feature.version=1"], False,
     "Unsupported feature: test.feature.version", "Unsupported feature: test.feature.version"),
    ("unknown-level", ["--release-version", "3.9", "--feature", "transaction.version=3"], False,
     "No feature:transaction.version with feature level 3", "No feature:transaction.version with feature level 3"),
    ("negative-level", ["--feature", "group.version=-1"], False,
     "No feature:group.version with feature level -1", "No feature:group.version with feature level -1"),
    ("too-old", ["--release-version", "3.2"], False, "Unknown metadata.version '3.2'", "3.2-IV0 is too old"),
    ("unknown-release", ["--release-version", "9.9"], False,
     "Unknown metadata.version '9.9'. Supported metadata.version are: 3.3-IV3, ",
     "Unknown metadata.version '9.9'. Supported metadata.version are: 3.3-IV3, "),
    ("unstable", ["--feature", f"metadata.version={_NEWEST_TESTING.level}"], False,
     f"metadata.version {_NEWEST_TESTING.name} is not yet stable.",
     f"metadata.version {_NEWEST_TESTING.name} is not yet stable."),
    ("ambiguous-mv", ["--release-version", "3.9", "--feature", "metadata.version=21"], False,
     "Use --release-version instead of --feature metadata.version=X to avoid ambiguity.",
     "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."),
    ("kraft1-static", ["--feature", "kraft.version=1"], False,
     "Cannot set kraft.version to 1 unless", "Cannot set kraft.version to 1 unless"),
    ("kraft0-dynamic", ["--standalone", "--feature", "kraft.version=0"], True,
     "Cannot set kraft.version to 0 if", "Cannot set kraft.version to 0 with --standalone"),
    ("dup-voter", ["--initial-controllers", "1@a:1:JEXY6aqzQY-32P5TStzaFg,1@b:2:MvDxzVmcRsaTz33bUuRU6A"], True,
     "Node id 1 was specified more than once.", "Node id 1 was specified more than once."),
    ("bad-voter", ["--initial-controllers", "1@a:1"], True,
     "No colon following port could be found.", "No colon following port could be found."),
    ("bad-voter-dir", ["--initial-controllers", "1@a:1:xyz"], True,
     "Failed to parse directory ID in dynamic voter string.", "Failed to parse directory ID in dynamic voter string."),
]


@pytest.mark.parametrize("name,args,dynamic,kafka_says,kraftkit_says", REFUSED, ids=[c[0] for c in REFUSED])
def test_refuses_what_kafka_refuses(tmp_path, name, args, dynamic, kafka_says, kraftkit_says):
    cid = random_uuid()
    (tmp_path / "k").mkdir()
    (tmp_path / "kk").mkdir()
    proc, _, _ = kafka_format(tmp_path / "k", cid, args, dynamic=dynamic, check=False)
    assert proc.returncode != 0
    assert kafka_says in proc.stdout + proc.stderr
    assert not list((tmp_path / "k").rglob(META_PROPERTIES))
    with pytest.raises(StorageError) as err:
        kraftkit_format(tmp_path / "kk", cid, args)
    assert kraftkit_says in str(err.value)
    assert not list((tmp_path / "kk").rglob(META_PROPERTIES))


def test_existing_directories_like_kafka(tmp_path):
    """Formatted directories: refused without --ignore-formatted, skipped with it; another
    node id or cluster id in an existing meta.properties is refused either way."""
    cid = random_uuid()
    for who in ("k", "kk"):
        (tmp_path / who).mkdir()
    kafka_format(tmp_path / "k", cid, ["--release-version", "3.9"], ndirs=1)
    kraftkit_format(tmp_path / "kk", cid, ["--release-version", "3.9"], ndirs=1)
    for who in ("k", "kk"):  # a new, empty log directory next to the formatted ones
        (tmp_path / who / "log1").mkdir()
    again = ["--release-version", "3.9"]
    proc, _, _ = kafka_format(tmp_path / "k", cid, again, check=False)
    assert proc.returncode != 0 and "is already formatted" in proc.stdout + proc.stderr
    with pytest.raises(StorageError, match="is already formatted"):
        kraftkit_format(tmp_path / "kk", cid, again)
    for args, kw in ((again, {"node_id": 2}), (again, {})):
        other = cid if kw else random_uuid()
        proc, _, _ = kafka_format(tmp_path / "k", other, [*args, "--ignore-formatted"], check=False, **kw)
        assert "doesn't match previous node id" in proc.stderr or "Invalid cluster.id" in proc.stderr
        with pytest.raises(StorageError, match="doesn't match previous node id|Invalid cluster.id"):
            kraftkit_format(tmp_path / "kk", other, [*args, "--ignore-formatted"], **kw)
    proc, _, _ = kafka_format(tmp_path / "k", cid, [*again, "--ignore-formatted"])
    res, _, _ = kraftkit_format(tmp_path / "kk", cid, [*again, "--ignore-formatted"])
    assert [line for line in proc.stdout.splitlines() if line.startswith("Formatting")] == \
           [f"Formatting data directory {tmp_path / 'k' / 'log1'} with metadata.version 3.9-IV0."]
    assert res.messages == [f"Formatting data directory {tmp_path / 'kk' / 'log1'} with metadata.version 3.9-IV0."]
    compare_dirs(tmp_path / "k", tmp_path / "kk")


def _without_bootstrap_block(text: str) -> str:
    """kraftkit's info text minus its own addition (the "Found bootstrap metadata:" block)."""
    return re.sub(r"Found bootstrap metadata:\n(  .*\n)*\n", "", text)


@pytest.mark.parametrize("version", [NEW, V])
def test_info_prints_what_kafka_info_prints(tmp_path, version):
    """Kafka's `kafka-storage info` on kraftkit-formatted directories (in the layout of that
    tool), one of them left unformatted and one missing: kraftkit's text is the same, plus its
    bootstrap block."""
    cid = random_uuid()
    _, dirs, meta = kraftkit_format(tmp_path, cid, ["--release-version", "3.9", "--feature", "group.version=1"],
                                    version=version)
    empty, missing = tmp_path / "empty", tmp_path / "missing"
    empty.mkdir()
    all_dirs = [*dirs, empty, missing]
    cfg = kafka_config(tmp_path / "server.properties", all_dirs, meta)
    proc = tools.run_tool(version, STORAGE_TOOL, ["info", "-c", str(cfg)], timeout=120, check=False)
    assert proc.returncode == 1
    ours = S.storage_info([*all_dirs, meta])
    text = S.info_text(ours)
    where = f" (in {CLUSTER_METADATA_DIR}/{BOOTSTRAP_SNAPSHOT})" if version == NEW else ""
    assert "  " + str(meta) + f": metadata.version=21 (3.9-IV0), group.version=1{where}\n" in text
    assert _without_bootstrap_block(text) == proc.stdout
    # and with every directory formatted: no problem, exit 0 for both
    cfg = kafka_config(tmp_path / "server.properties", dirs, meta)
    proc = tools.run_tool(version, STORAGE_TOOL, ["info", "-c", str(cfg)], timeout=120)
    ours = S.storage_info([*dirs, meta])
    assert ours["problems"] == [] and _without_bootstrap_block(S.info_text(ours)) == proc.stdout


# ------------------------------------------------------------------ a real node boots from it

def describe_features(bootstrap: str, version: str = V) -> dict[str, str]:
    """Kafka's ``kafka-features describe``: feature -> FinalizedVersionLevel text."""
    out = tools.run_tool(version, "org.apache.kafka.tools.FeatureCommand",
                         ["--bootstrap-server", bootstrap, "describe"], timeout=120).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"Feature:\s*(\S+)\s.*FinalizedVersionLevel:\s*(\S+)", line)
        if m:
            found[m.group(1)] = m.group(2)
    assert found, out
    return found


@pytest.mark.parametrize("version,release,features,standalone", [
    (NEW, None, {}, False),
    (NEW, "4.4", {"share.version": 1}, True),
    (V, "3.9", {"transaction.version": 2, "group.version": 1}, False),
    (V, "4.1", {"share.version": 1, "eligible.leader.replicas.version": 0}, True),
    (jars.KAFKA_3, "3.9", {}, False),
], ids=["4.4.0-static-default", "4.4.0-standalone-4.4", "4.3.1-static-3.9", "4.3.1-standalone-4.1", "3.9.2-static-3.9"])
def test_kafka_node_boots_from_kraftkit_format(tmp_path, version, release, features, standalone):
    node = KafkaNode(tmp_path / "node", version, dynamic_quorum=standalone, start_timeout=120)
    node.broker_port, node.controller_port = free_port(), free_port()
    while node.controller_port == node.broker_port:
        node.controller_port = free_port()
    result = format_storage(
        node.log_dirs, cluster_id=node.cluster_id, node_id=node.node_id, metadata_log_dir=node.metadata_dir,
        release_version=release, features=features, standalone=standalone,
        controller_listener=f"CONTROLLER://127.0.0.1:{node.controller_port}")
    expected = {name: level for name, level in result.features.levels.items()}
    assert expected["kraft.version"] == (1 if standalone else 0)
    with node:  # the harness formats only directories without meta.properties: it reuses ours
        assert not hasattr(node, "format_output")
        described = describe_features(node.bootstrap, version)
    # every feature the node supports is listed, at exactly the level kraftkit chose
    want = {**{n: str(lv) for n, lv in expected.items()}, "metadata.version": result.features.metadata_version.name}
    if version in (NEW, V):
        assert described == want
    else:  # 3.9 knows fewer features; the ones it does not know are at 0 in the bootstrap
        assert described == {n: lv for n, lv in want.items() if n in described}
        assert all(lv == "0" for n, lv in want.items() if n not in described)
    for name, level in features.items():
        assert expected[name] == level
