"""Parse the text output of Kafka's ``kafka-dump-log`` (DumpLogSegments) into plain dicts.

``parse(stdout, stderr="") -> {path: FileDump}`` where each FileDump is::

    {"path": str, "kind": "log"|"checkpoint"|"index"|"timeindex"|"snapshot"|"txnindex"|"unknown",
     "start_offset": int|None,            # "Log starting offset: N"
     "snapshot_end_offset": int|None, "snapshot_epoch": int|None,   # "<offset>-<epoch>.checkpoint"
     "bootstrap": bool,                   # "KRaft bootstrap snapshot" (bootstrap.checkpoint)
     "batches": [Batch],                  # .log / .checkpoint
     "entries": [dict],                   # index / timeindex / producer snapshot / txn index lines
     "empty": bool,                       # "<file> is empty."  (index files)
     "sanity_ok": bool|None,              # "<file> passed sanity check."
     "invalid_trailing_bytes": int|None,  # "Found N invalid bytes at the end of F"
     "unparsed": [str],                   # lines the parser did not recognise
     "errors": [str],                     # the tool's stderr reports about this file
     "quirks": [str]}                     # known false positives moved out of "errors"

Batch (magic 2): the printed fields under their printed names -- ``baseOffset lastOffset
count baseSequence lastSequence producerId producerEpoch partitionLeaderEpoch
isTransactional isControl deleteHorizonMs position size magic compresscodec crc
isvalid`` -- plus ``timestampType`` ("CreateTime"/"LogAppendTime"/"NoTimestampType")
and ``maxTimestamp``; ints/bools converted, ``deleteHorizonMs`` -> int or None.
Legacy batches (magic 0/1) print only ``offset`` (-> ``lastOffset``).
``records`` (with --deep-iteration / --print-data-log): ``offset timestampType timestamp
keySize valueSize sequence headerKeys`` (list of str), ``control`` (None or a dict:
``{"type": "endTxnMarker", "marker": "COMMIT", "coordinatorEpoch": 0}``,
``{"type": "SnapshotHeader"|"SnapshotFooter"|"KRaftVersion"|"KRaftVoters"|"LeaderChange",
"json": {...}}`` or ``{"type": "controlType", "name": "X", "id": n}``), ``key`` and
``payload`` (str, only when printed), ``payload_json`` (payload parsed as JSON when it
is JSON, e.g. with --cluster-metadata-decoder).

Errors the tool reports on stderr (index mismatches, non-consecutive offsets, ...) go
to ``FileDump["errors"]`` (list of lines) of the file they name (unattributed: all files).

Format facts (checked against Kafka 3.9.2 ``kafka.tools.DumpLogSegments`` and 4.3.1
``org.apache.kafka.tools.DumpLogSegments``): 4.3 prints LEADER_CHANGE control records as
``LeaderChange: {json}`` (3.9: ``controlType: LEADER_CHANGE(2)``); everything else matches.
Payloads are decoded with a UTF-8 StringDecoder, so a payload containing a newline
continues on the next output line(s); the parser re-joins such lines.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath

_BATCH_RE = re.compile(r"^baseOffset: -?\d+ ")
_LEGACY_BATCH_RE = re.compile(r"^offset: (-?\d+) position: (\d+) (\w+): (-?\d+) size: ")
_TOKEN_RE = re.compile(r"(\w+): (\S+)")
_RECORD_RE = re.compile(
    r"^\| offset: (?P<offset>-?\d+) (?P<tstype>\w+): (?P<ts>-?\d+) "
    r"keySize: (?P<keySize>-?\d+) valueSize: (?P<valueSize>-?\d+)"
    r"(?: sequence: (?P<sequence>-?\d+) headerKeys: \[(?P<headerKeys>[^\]]*)\])?"
    r"(?: isValid: (?P<isValid>\w+) crc: (?P<crc>\d+)\}?)?"
)
_CONTROL_JSON_RE = re.compile(
    r"^ (?P<type>SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters|LeaderChange):? (?P<json>\{.*?\})"
    r"(?= key: | payload: |$)"
)
_END_TXN_RE = re.compile(r"^ endTxnMarker: (?P<marker>\w+) coordinatorEpoch: (?P<epoch>-?\d+)")
_CONTROL_TYPE_RE = re.compile(r"^ controlType: (?P<name>\w+)\((?P<id>-?\d+)\)")
_INDEX_RE = re.compile(r"^offset: (-?\d+) position: (-?\d+)$")
_TIMEINDEX_RE = re.compile(r"^timestamp: (-?\d+) offset: (-?\d+)$")
_TRAILING_RE = re.compile(r"^Found (\d+) invalid bytes at the end of (.*)$")
_SNAPSHOT_RE = re.compile(r"^Snapshot end offset: (-?\d+), epoch: (-?\d+)$")

_KINDS = {".log": "log", ".checkpoint": "checkpoint", ".index": "index", ".timeindex": "timeindex",
          ".snapshot": "snapshot", ".txnindex": "txnindex"}


def _value(text: str):
    if text == "true":
        return True
    if text == "false":
        return False
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    m = re.fullmatch(r"OptionalLong\[(-?\d+)\]", text)
    if m:
        return int(m.group(1))
    if text in ("OptionalLong.empty", "None"):
        return None
    return text


def _tokens(line: str) -> dict:
    return {k: _value(v) for k, v in _TOKEN_RE.findall(line)}


def _new_file(path: str) -> dict:
    suffix = PurePath(path).suffix
    return {"path": path, "kind": _KINDS.get(suffix, "unknown"), "start_offset": None,
            "snapshot_end_offset": None, "snapshot_epoch": None, "bootstrap": False,
            "batches": [], "entries": [], "empty": False, "sanity_ok": None,
            "invalid_trailing_bytes": None, "unparsed": []}


def parse_batch_line(line: str) -> dict:
    """One batch header line (magic 2 or legacy) -> dict (``records`` empty)."""
    if line.startswith("baseOffset: "):
        head, _, tail = line.partition(" position: ")
        batch = _tokens(head)
        if "deleteHorizonMs" not in batch:
            batch["deleteHorizonMs"] = None
        tail = "position: " + tail
    else:
        m = _LEGACY_BATCH_RE.match(line)
        if not m:
            raise ValueError(f"not a batch line: {line!r}")
        batch = {"lastOffset": int(m.group(1))}
        tail = line[len("offset: ") + len(m.group(1)) + 1:]
    toks = _TOKEN_RE.findall(tail)
    for i, (k, v) in enumerate(toks):
        if i == 1:  # "<TimestampType>: <maxTimestamp>" always follows position
            batch["timestampType"] = k
            batch["maxTimestamp"] = _value(v)
        else:
            batch[k] = _value(v)
    batch["records"] = []
    return batch


def _split_key_payload(rest: str, rec: dict) -> None:
    if rest.startswith(" key: ") or rest.startswith("key: "):
        body = rest.split("key: ", 1)[1]
        if " payload: " in body:
            key, payload = body.split(" payload: ", 1)
            rec["key"] = key
            rec["payload"] = payload
        else:
            rec["key"] = body
    elif rest.startswith(" payload: ") or rest.startswith("payload: "):
        rec["payload"] = rest.split("payload: ", 1)[1]
    elif rest.strip():
        rec["unparsed"] = rest


def parse_record_line(line: str) -> dict:
    """One ``| offset: ...`` record line -> dict."""
    m = _RECORD_RE.match(line)
    if not m:
        # --skip-record-metadata: "| key: K payload: P" / "| payload: P"
        rec: dict = {"control": None}
        _split_key_payload(line[1:], rec)
        return rec
    rec = {
        "offset": int(m["offset"]),
        "timestampType": m["tstype"],
        "timestamp": int(m["ts"]),
        "keySize": int(m["keySize"]),
        "valueSize": int(m["valueSize"]),
        "sequence": int(m["sequence"]) if m["sequence"] is not None else None,
        "headerKeys": ([k for k in m["headerKeys"].split(",")] if m["headerKeys"] else []),
        "control": None,
    }
    if m["isValid"] is not None:
        rec["isValid"] = m["isValid"] == "true"
        rec["crc"] = int(m["crc"])
    rest = line[m.end():]
    cm = _CONTROL_JSON_RE.match(rest)
    if cm:
        try:
            js = json.loads(cm["json"])
        except ValueError:
            js = cm["json"]
        rec["control"] = {"type": cm["type"], "json": js}
        rest = rest[cm.end():]
    else:
        em = _END_TXN_RE.match(rest)
        if em:
            rec["control"] = {"type": "endTxnMarker", "marker": em["marker"],
                              "coordinatorEpoch": int(em["epoch"])}
            rest = rest[em.end():]
        else:
            tm = _CONTROL_TYPE_RE.match(rest)
            if tm:
                rec["control"] = {"type": "controlType", "name": tm["name"], "id": int(tm["id"])}
                rest = rest[tm.end():]
    _split_key_payload(rest, rec)
    return rec


def _finish_record(rec: dict | None) -> None:
    if rec is None or "payload" not in rec:
        return
    p = rec["payload"]
    if p[:1] in ("{", "["):
        try:
            rec["payload_json"] = json.loads(p)
        except ValueError:
            pass


def parse(stdout: str, stderr: str = "") -> dict:
    """Parse a whole dump-log run (any mix of files) -> ``{path: FileDump}``."""
    files: dict = {}
    cur: dict | None = None
    batch: dict | None = None
    rec: dict | None = None
    if stdout.endswith("\n"):
        stdout = stdout[:-1]
    for line in stdout.split("\n") if stdout else []:
        if line.startswith("Dumping "):
            _finish_record(rec)
            cur = _new_file(line[len("Dumping "):])
            files[cur["path"]] = cur
            batch = rec = None
            continue
        if cur is None:
            continue
        kind = cur["kind"]
        if kind in ("log", "checkpoint"):
            if line.startswith("| "):
                _finish_record(rec)
                rec = parse_record_line(line)
                if batch is None:
                    cur["unparsed"].append(line)
                else:
                    batch["records"].append(rec)
                continue
            if _BATCH_RE.match(line) or _LEGACY_BATCH_RE.match(line):
                _finish_record(rec)
                rec = None
                batch = parse_batch_line(line)
                cur["batches"].append(batch)
                continue
            if line.startswith("Log starting offset: "):
                cur["start_offset"] = int(line.split(": ", 1)[1])
                continue
            m = _SNAPSHOT_RE.match(line)
            if m:
                cur["snapshot_end_offset"], cur["snapshot_epoch"] = int(m[1]), int(m[2])
                continue
            if line == "KRaft bootstrap snapshot":
                cur["bootstrap"] = True
                continue
            m = _TRAILING_RE.match(line)
            if m:
                cur["invalid_trailing_bytes"] = int(m[1])
                continue
            if rec is not None and ("payload" in rec or "key" in rec):
                # continuation of a payload that contained a newline
                field = "payload" if "payload" in rec else "key"
                rec[field] += "\n" + line
                continue
            cur["unparsed"].append(line)
            continue
        if line.endswith(" is empty."):
            cur["empty"] = True
        elif line.endswith(" passed sanity check."):
            cur["sanity_ok"] = True
        elif kind == "index" and (m := _INDEX_RE.match(line)):
            cur["entries"].append({"offset": int(m[1]), "position": int(m[2])})
        elif kind == "timeindex" and (m := _TIMEINDEX_RE.match(line)):
            cur["entries"].append({"timestamp": int(m[1]), "offset": int(m[2])})
        elif kind in ("snapshot", "txnindex") and line.strip():
            cur["entries"].append(_tokens(line))
        elif line.strip():
            cur["unparsed"].append(line)
    _finish_record(rec)
    _attach_errors(files, stderr)
    return files


_ERR_HEAD_RE = re.compile(
    r"^(?:Mismatches in :|Non-consecutive offsets in |Found timestamp mismatch in :|"
    r"Found out of order timestamp in :|The following indexed offsets are not found in :?)(.*)$")


def _attach_errors(files: dict, stderr: str) -> None:
    """Put the tool's stderr error reports into ``files[path]["errors"]``."""
    for fd in files.values():
        fd["errors"] = []
    target = None
    for ln in stderr.splitlines():
        if not ln.strip() or re.match(r"^\[\d{4}-\d\d-\d\d ", ln):
            continue  # blank or a log4j line
        m = _ERR_HEAD_RE.match(ln)
        if m:
            target = files.get(m.group(1).strip())
        if target is not None:
            target["errors"].append(ln)
        else:
            for fd in files.values():
                fd["errors"].append(ln)
    for fd in files.values():
        _drop_known_quirks(fd)


_QUIRK_RE = re.compile(r"^\s+-1 is followed by (-?\d+)$")


def _drop_known_quirks(fd: dict) -> None:
    """Kafka 4.3's Java DumpLogSegments reports ``Non-consecutive offsets in F / -1 is
    followed by N`` for every segment whose first offset N is not 0 (3.9's Scala tool
    does not); move that false positive from ``errors`` to ``quirks``."""
    fd["quirks"] = []
    errs = fd["errors"]
    for i, ln in enumerate(errs):
        m = _QUIRK_RE.match(ln)
        if m and i > 0 and errs[i - 1].startswith("Non-consecutive offsets in "):
            first = next((r.get("offset") for b in fd["batches"] for r in b["records"]), None)
            if first is not None and int(m.group(1)) == first:
                fd["quirks"] += [errs[i - 1], ln]
                nxt = errs[i + 1] if i + 1 < len(errs) else ""
                # keep the header only if more pairs follow it
                errs[i - 1:i + 1] = [errs[i - 1]] if nxt.startswith("  ") else []
                return


def all_records(filedump: dict) -> list[dict]:
    """Flatten the records of every batch of one parsed file."""
    return [r for b in filedump["batches"] for r in b["records"]]
