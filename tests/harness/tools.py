"""Run Apache Kafka's own Java tools (from the fetched jars) with bounded timeouts.

* ``dump_log`` / ``dump_log_parsed``: kafka-dump-log (``DumpLogSegments``; the class
  moved from ``kafka.tools`` (Scala, core jar) to ``org.apache.kafka.tools`` (Java,
  kafka-tools jar) in Kafka 4.3 -- detected from the jars, see ``dump_log_class``).
* ``create_topics`` / ``produce`` / ``consume``: Kafka's Java client library driven by
  ``java/HarnessClient.java`` (a single-file source program launched with ``java``).
* ``run_tool``: any main class, e.g. ``org.apache.kafka.tools.TopicCommand`` or
  ``org.apache.kafka.tools.ProducerPerformance``.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Iterable, Sequence

from . import dumplog, jars
from .jars import HarnessError
from .node import tool_log4j_files

HERE = Path(__file__).resolve().parent
CLIENT_SOURCE = HERE / "java" / "HarnessClient.java"

TOOL_JVM_OPTS = [
    "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8",
]


@functools.lru_cache(maxsize=None)
def find_class(version: str, *candidates: str) -> str:
    """The first of ``candidates`` (fully qualified class names) present in the jars."""
    libs = jars.ensure_kafka(version)
    for name in candidates:
        entry = name.replace(".", "/") + ".class"
        for jar in libs.glob("*.jar"):
            with zipfile.ZipFile(jar) as zf:
                if entry in zf.NameToInfo:
                    return name
    raise HarnessError(f"none of {candidates} found in Kafka {version} jars")


def dump_log_class(version: str) -> str:
    """``org.apache.kafka.tools.DumpLogSegments`` (4.3+) or ``kafka.tools.DumpLogSegments``."""
    return find_class(version, "org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments")


def topic_command_class(version: str) -> str:
    return find_class(version, "org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand")


def run_tool(
    version: str,
    main_class: str,
    args: Sequence[str],
    *,
    timeout: float = 300.0,
    check: bool = True,
    jvm_opts: Sequence[str] = (),
    cwd: Path | None = None,
    extra_classpath: Sequence[Path | str] = (),
    raw: bool = False,
    stdin: str | None = None,
) -> subprocess.CompletedProcess:
    """Run ``java -cp <kafka libs>/* main_class args...``; bounded by ``timeout`` seconds.

    ``main_class`` may also be a path to a ``.java`` single-file source program; ``stdin`` is
    the text the tool reads on its standard input.
    stdout/stderr are captured as text (UTF-8, newlines translated), or with ``raw`` as the
    bytes the tool wrote.  Raises ``HarnessError`` on timeout and (if ``check``) on a nonzero
    exit code, with the tool's output.
    """
    java = jars.require_java()
    jars.ensure_kafka(version)
    logcfg = tool_log4j_files(jars.kafka_home(version) / "tool-config")
    cp = os.pathsep.join([*map(str, extra_classpath), jars.classpath(version)])
    cmd = [java, *TOOL_JVM_OPTS, *logcfg, *jvm_opts, "-cp", cp,
           str(main_class), *map(str, args)]
    try:
        text = {} if raw else {"text": True, "encoding": "utf-8", "errors": "replace"}
        feed = None if stdin is None else stdin.encode() if raw else stdin
        proc = subprocess.run(cmd, input=feed, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                              cwd=cwd, **text)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"{main_class} timed out after {timeout:.0f}s: {' '.join(cmd[-6:])}\n"
                           f"stderr: {(e.stderr or '')[-2000:]}")
    if check and proc.returncode != 0:
        raise HarnessError(f"{main_class} exited {proc.returncode}\n"
                           f"args: {list(args)[:10]}\nstdout: {proc.stdout[-3000:]}\n"
                           f"stderr: {proc.stderr[-3000:]}")
    return proc


# ------------------------------------------------------------------ dump-log

def dump_log(
    version: str,
    files: Iterable[Path | str],
    *,
    deep: bool = False,
    print_data: bool = False,
    cluster_metadata: bool = False,
    index_sanity: bool = False,
    verify_index_only: bool = False,
    skip_record_metadata: bool = False,
    extra_args: Sequence[str] = (),
    timeout: float = 300.0,
    raw: bool = False,
    check: bool = True,
) -> subprocess.CompletedProcess:
    """Run kafka-dump-log on ``files`` (one JVM for all of them); return the process (its
    output as bytes with ``raw``; with ``check``, a non-zero exit is a HarnessError)."""
    files = [str(f) for f in files]
    if not files:
        raise ValueError("no files to dump")
    args = ["--files", ",".join(files)]
    if deep:
        args.append("--deep-iteration")
    if print_data:
        args.append("--print-data-log")
    if cluster_metadata:
        args.append("--cluster-metadata-decoder")
    if index_sanity:
        args.append("--index-sanity-check")
    if verify_index_only:
        args.append("--verify-index-only")
    if skip_record_metadata:
        args.append("--skip-record-metadata")
    args += list(extra_args)
    return run_tool(version, dump_log_class(version), args, timeout=timeout, raw=raw, check=check)


def dump_log_parsed(version: str, files: Iterable[Path | str], **kw) -> dict[str, dict]:
    """``dump_log`` + ``dumplog.parse``: ``{path: parsed file dict}``."""
    proc = dump_log(version, files, **kw)
    return dumplog.parse(proc.stdout, proc.stderr)


# ---------------------------------------------------------------- clients

#: Classes Kafka moved between releases: (old name, new name).
_MOVED_CLASSES = [("org.apache.kafka.common.utils.Exit", "org.apache.kafka.common.utils.internals.Exit")]


def adapt_source(version: str, text: str) -> str:
    """``text`` with the class names Kafka ``version`` moved replaced by their new names
    (4.4 moved ``Exit`` to ``common.utils.internals``)."""
    for old, new in _MOVED_CLASSES:
        if re.search(re.escape(old) + r"\b", text) and find_class(version, new, old) == new:
            text = re.sub(re.escape(old) + r"\b", new, text)
    return text


def compile_java(version: str, source: Path, subdir: str) -> Path | None:
    """Compiles ``source`` against the Kafka jars once per (version, source digest) into the
    Kafka cache and returns the classes directory; None without javac."""
    javac = shutil.which("javac")
    if javac is None:
        return None
    main_class = source.stem
    text = adapt_source(version, source.read_text())
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    out = jars.kafka_home(version) / subdir / digest
    if (out / f"{main_class}.class").is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with jars.file_lock(out.parent / f"{digest}.lock", timeout=300):
        if not (out / f"{main_class}.class").is_file():
            tmp = Path(tempfile.mkdtemp(prefix="classes-", dir=out.parent))
            try:
                src = Path(tmp) / "src" / source.name
                src.parent.mkdir()
                src.write_text(text)
                proc = subprocess.run([javac, "-nowarn", "-cp", jars.classpath(version), "-d", str(tmp),
                                       str(src)], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, timeout=180)
                if proc.returncode != 0:
                    raise HarnessError(f"javac {source.name} failed:\n{proc.stdout[-3000:]}")
                shutil.rmtree(src.parent)
                if out.exists():
                    shutil.rmtree(out)
                tmp.rename(out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return out


def client_classes(version: str) -> Path | None:
    """Compile HarnessClient.java once per (version, source) with javac; None without javac."""
    return compile_java(version, CLIENT_SOURCE, "harness-client")


def _client(version: str, args: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    jars.ensure_kafka(version)
    classes = client_classes(version)
    if classes is None:  # a JDK without javac still has the source launcher
        return run_tool(version, CLIENT_SOURCE, args, timeout=timeout)
    return run_tool(version, "HarnessClient", args, timeout=timeout, extra_classpath=[classes])


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def create_topics(version: str, bootstrap: str, topics: list[dict], *, timeout: float = 120.0) -> None:
    """Create topics: ``[{"name": str, "partitions": int=1, "configs": {str: str}}]``."""
    with tempfile.TemporaryDirectory(prefix="kk-topics-") as td:
        spec = Path(td) / "topics.json"
        spec.write_text(json.dumps(topics))
        _client(version, ["topics", bootstrap, spec], timeout)


def encode_record(rec: dict) -> dict:
    """Python record -> wire form for HarnessClient.

    ``rec``: ``{"key": bytes|None, "value": bytes|None, "headers": [(str, bytes|None)],
    "partition": int|None, "timestamp": int|None}``.
    """
    return {
        "k": b64(rec.get("key")),
        "v": b64(rec.get("value")),
        "h": [[k, b64(v)] for k, v in rec.get("headers", ())],
        "p": rec.get("partition"),
        "ts": rec.get("timestamp"),
    }


def produce(version: str, bootstrap: str, jobs: list[dict], *, timeout: float = 300.0) -> list[dict]:
    """Produce with Kafka's Java producer.  Each job::

        {"topic": str, "props": {producer config},            # e.g. compression.type
         "records": [record, ...]}                             # plain (idempotent by default)
        {"topic": str, "props": {...}, "transactional_id": str,
         "transactions": [{"commit": bool, "records": [...]}]}

    with records as in ``encode_record``.  Returns one ack per record, in send order:
    ``{"topic", "partition", "offset", "timestamp", "txn", "committed", "index"}``.
    """
    wire = []
    for job in jobs:
        w = {"topic": job["topic"], "props": {k: str(v) for k, v in job.get("props", {}).items()}}
        if job.get("transactional_id"):
            w["transactional_id"] = job["transactional_id"]
            w["transactions"] = [{"commit": bool(t["commit"]),
                                  "records": [encode_record(r) for r in t["records"]]}
                                 for t in job["transactions"]]
        else:
            w["records"] = [encode_record(r) for r in job["records"]]
        wire.append(w)
    with tempfile.TemporaryDirectory(prefix="kk-produce-") as td:
        spec, out = Path(td) / "jobs.jsonl", Path(td) / "acks.jsonl"
        spec.write_text("".join(json.dumps(w) + "\n" for w in wire))
        _client(version, ["produce", bootstrap, spec, out], timeout)
        return [json.loads(line) for line in out.read_text().splitlines() if line]


def consume(version: str, bootstrap: str, topic: str, *, isolation: str = "read_uncommitted",
            timeout: float = 180.0) -> list[dict]:
    """Every record of ``topic`` from the beginning to the current end offsets::

        {"topic", "partition", "offset", "timestamp", "timestamp_type",
         "key": bytes|None, "value": bytes|None, "headers": [(str, bytes|None)]}
    """
    with tempfile.TemporaryDirectory(prefix="kk-consume-") as td:
        out = Path(td) / "records.jsonl"
        _client(version, ["consume", bootstrap, topic, isolation, out], timeout)
        recs = []
        for line in out.read_text().splitlines():
            if not line:
                continue
            o = json.loads(line)
            recs.append({
                "topic": o["topic"], "partition": o["partition"], "offset": o["offset"],
                "timestamp": o["timestamp"], "timestamp_type": o["timestamp_type"],
                "key": unb64(o["k"]), "value": unb64(o["v"]),
                "headers": [(k, unb64(v)) for k, v in o["h"]],
            })
        return recs


def topic_command(version: str, bootstrap: str, args: Sequence[str], *, timeout: float = 120.0) -> str:
    """Kafka's kafka-topics tool, e.g. ``["--describe", "--topic", "t"]``; returns stdout."""
    return run_tool(version, topic_command_class(version),
                    ["--bootstrap-server", bootstrap, *args], timeout=timeout).stdout


def producer_perf(version: str, bootstrap: str, topic: str, *, num_records: int, record_size: int,
                  producer_props: dict[str, object] | None = None, throughput: int = -1,
                  timeout: float = 300.0) -> str:
    """Kafka's ProducerPerformance (random payloads); returns stdout."""
    props = {"bootstrap.servers": bootstrap, **(producer_props or {})}
    args = ["--topic", topic, "--num-records", num_records, "--record-size", record_size,
            "--throughput", throughput, "--producer-props", *[f"{k}={v}" for k, v in props.items()]]
    cls = find_class(version, "org.apache.kafka.tools.ProducerPerformance")
    return run_tool(version, cls, args, timeout=timeout).stdout
