"""Every reading command against every hostile case, under the runner's limits (1 GiB address
space, a timeout, stdin /dev/null).

What a correct answer is, from README.md ("Exit codes: 0 all good, 1 the data has problems
(corrupt batch, CRC mismatch, bad index, torn tail), 2 usage error or unreadable input") and the
project's rule that bad input gets a precise error naming the file, the batch offset, the byte
position and the reason, never a crash, hang, traceback or exit 0 on damage:

* never a signal, never a timeout, no "Traceback" on stdout or stderr, and no failed allocation
  ("out of memory", MemoryError): hitting the runner's 1 GiB limit means the tool did not bound
  the work the input causes;
* damaged data: exit 1 from the checkers whose documentation says so (dump-log, verify-log,
  metadata dump, metadata records, snapshot verify); 1 or 2 from the commands that build an image from the input
  (metadata image, snapshot create, features describe: their exit code for damage is not
  spelled out); 2 from snapshot rewrite ("2 bad input"; 1 means refused for a loss);
* a special file named on the command line: exit 2 (unreadable input); found while scanning a
  directory: 1 or 2, or 0 where the case says skipping it loses nothing (Kafka's log loader
  skips what is not a regular file);
* on a non-zero exit, a line of stderr (for verify-log, snapshot verify and storage info, whose
  documented output is a report listing the problems, of stdout or stderr) names the file and a
  reason, and the batch offset and byte position where the case knows them; where the error
  names a special file, the reason says what it is (a FIFO, a symlink loop, a directory...);
* snapshot create and snapshot rewrite write nothing when they fail.

The valid log under the same runner exits 0 for every command (no false positives).
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from tests.hostile import corpus as C
from tests.hostile.runner import Result, run_kraftkit

PAIRS = [(name, command) for name, spec in C.REGISTRY.items() for command in spec.commands]
REPORTS = C.REPORTS
#: commands documented to exit 1 on damaged data
CHECKERS = {C.DUMP, C.DUMP_DEEP, C.DUMP_DATA, C.VERIFY, C.MDUMP, C.MRECORDS, C.SVERIFY}
#: commands that build a metadata image from their input
BUILDERS = {C.IMAGE, C.CREATE, C.DESCRIBE}
#: what a correct command needs is well under a second; a special file must be refused at once
TIMEOUT = {"special": 10.0}
DEFAULT_TIMEOUT = 30.0


def argv(case: C.Case, command: str, out: Path) -> list[str]:
    f, root = str(case.damage.file), str(case.root)
    return {
        C.DUMP: ["dump-log", f],
        C.DUMP_DEEP: ["dump-log", "--deep", f],
        C.DUMP_DATA: ["dump-log", "--deep", "--print-data", f],
        C.VERIFY: ["verify-log", "--deep", root],
        C.MDUMP: ["metadata", "dump", root],
        C.MRECORDS: ["metadata", "records", root],
        C.IMAGE: ["metadata", "image", root, "--json"],
        C.SVERIFY: ["snapshot", "verify", str(case.snapshot)],
        C.CREATE: ["snapshot", "create", root, "--at", str(case.at), "--out", str(out)],
        C.REWRITE: ["snapshot", "rewrite", str(case.snapshot), str(out), "--metadata-version", "3.9-IV0"],
        C.STORAGE: ["storage", "info", root],
        C.DESCRIBE: ["features", "describe", str(case.damage.describe or case.root)],
    }[command]


def expected_exits(case: C.Case, command: str) -> set[int]:
    spec = case.spec
    if spec.level == "benign":
        return {0, 1} if command in CHECKERS else {0, 1, 2}
    if spec.level == "special":
        if command in spec.direct:
            return {2}
        return {0, 1, 2} if command in spec.may_skip else {1, 2}
    # a rewrite given a damaged snapshot finds damaged data: 1, as every command does (README, exit codes)
    return {1, 2} if command in BUILDERS else {1}


#: an allocation that failed at the runner's limit: the input was not bounded by the tool
OUT_OF_MEMORY = re.compile(r"out of memory|MemoryError|memory allocation|cannot allocate memory", re.I)
_PREFIX = re.compile(r"^\s*(kraftkit [a-z -]+:|-)\s*")


def _without_names(line: str, names: tuple[str, ...]) -> str:
    """The line without its ``kraftkit <command>:`` prefix, paths and the names (the reason,
    offsets and positions are what is left)."""
    line = _PREFIX.sub("", line)
    return " ".join(tok for tok in line.split() if "/" not in tok and not any(n in tok for n in names))


def naming_problems(case: C.Case, command: str, res: Result) -> list[str]:
    """What the error output fails to name (file, reason, batch offset, byte position)."""
    d = case.damage
    where = "stdout or stderr" if command in REPORTS else "stderr"
    text = res.stderr + ("\n" + res.stdout if command in REPORTS else "")
    lines = [_without_names(line, d.names) for line in text.splitlines() if any(n in line for n in d.names)]
    if not lines:
        return [f"no line of {where} names {' or '.join(d.names)}"]
    problems = []
    if not any(len(re.findall(r"[A-Za-z]{3,}", line)) >= 2 for line in lines):
        problems.append(f"no reason next to the file name on {where}")
    about_file = [_without_names(line, d.names) for line in text.splitlines() if d.file.name in line]
    if d.reason and about_file and not any(re.search(d.reason, line, re.I) for line in about_file):
        problems.append(f"the reason given for {d.file.name} does not say what it is (/{d.reason}/)")
    for what, values in (("batch offset", d.offsets), ("byte position", d.positions)):
        if values and not any(re.search(rf"(?<!\d){v}(?!\d)", line) for line in lines for v in values):
            problems.append(f"the {what} ({' or '.join(map(str, values))}) is not named next to the file on {where}")
    return problems


def outcome_problems(case: C.Case, command: str, res: Result, out: Path) -> list[str]:
    problems = []
    if res.hang:
        return ["hang (killed at the timeout)"]
    if res.crash:
        problems.append(f"crash: {signal.Signals(-res.returncode).name}")
    if "Traceback" in res.stdout or "Traceback" in res.stderr:
        problems.append("traceback")
    if OUT_OF_MEMORY.search(res.stdout + res.stderr):
        problems.append("ran out of memory under the 1 GiB address-space limit instead of bounding the work")
    allowed = expected_exits(case, command)
    if not res.crash and res.returncode not in allowed:
        problems.append(f"exit {res.returncode}, expected {' or '.join(map(str, sorted(allowed)))}")
    if res.returncode not in (0, None) and not res.crash:
        problems += naming_problems(case, command, res)
    if command in (C.CREATE, C.REWRITE) and res.returncode != 0:
        written = sorted(p.name for p in out.iterdir())
        if written:
            problems.append(f"wrote {written} although it failed")
    return problems


def _id(command: str) -> str:
    return command.replace(" ", "")  # "-k" expressions take no spaces


@pytest.mark.parametrize(("name", "command"), PAIRS, ids=[f"{n}:{_id(c)}" for n, c in PAIRS])
def test_hostile_input(hostile_corpus: C.Corpus, tmp_path: Path, name: str, command: str) -> None:
    case = hostile_corpus.get(name)
    out = tmp_path / "out"
    out.mkdir()
    res = run_kraftkit(argv(case, command, out), timeout=TIMEOUT.get(case.spec.level, DEFAULT_TIMEOUT))
    problems = outcome_problems(case, command, res, out)
    assert not problems, f"{name} | {command}: " + "; ".join(problems) + "\n" + res.describe()


@pytest.mark.parametrize("command", C.ALL_COMMANDS, ids=_id)
def test_valid_log_passes(hostile_base: C.Base, tmp_path: Path, command: str) -> None:
    """The undamaged corpus exits 0 under the same limits, and the writers write."""
    case = C.valid_case(hostile_base, tmp_path / "case")
    out = tmp_path / "out"
    out.mkdir()
    res = run_kraftkit(argv(case, command, out))
    assert res.returncode == 0, res.describe()
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.describe()
    if command == C.CREATE:
        assert [p.name for p in out.iterdir()] == [C.snap_name(hostile_base.log_end, hostile_base.last_batch()[1].epoch)], res.describe()
    if command == C.REWRITE:
        assert [p.name for p in out.iterdir()] == [hostile_base.snapshot], res.describe()
