"""The one progress helper (stderr, a terminal only, off with --quiet, erased when done) on every
command that can run long, and ``kraftkit completion bash|zsh`` generated from the parser."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.cli import progress as P
from kraftkit.cli.main import COMMANDS, build_parser, main

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "kafka-4.4.0" / "data"


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def at_once(monkeypatch):
    """The line shows from the start and redraws on every update (no waiting in tests)."""
    monkeypatch.setattr(P, "DELAY", 0.0)
    monkeypatch.setattr(P, "INTERVAL", 0.0)


def test_the_line_is_drawn_on_a_terminal_and_erased_at_the_end(at_once):
    term = Terminal()
    with P.Progress("checked", total=4, unit="files", stream=term) as p:
        p.advance(1)
        p.advance(3)
    text = term.getvalue()
    assert "\r[#######.......................] 1/4 files checked\x1b[K" in text
    assert "4/4 files checked" in text and text.endswith("\r\x1b[K")  # nothing left on the line


@pytest.mark.parametrize("kw", [{"quiet": True}, {"stream": "plain"}, {"stdout_busy": True}])
def test_no_line_when_quiet_not_a_terminal_or_the_output_goes_to_the_terminal(at_once, monkeypatch, kw):
    term = Terminal()
    monkeypatch.setattr(sys, "stdout", Terminal())  # (a terminal: stdout_busy turns the line off)
    stream = io.StringIO() if kw.get("stream") == "plain" else term
    with P.Progress("x", total=2, stream=stream, **{k: v for k, v in kw.items() if k != "stream"}) as p:
        p.advance(2)
    assert term.getvalue() == "" and (kw.get("stream") != "plain" or stream.getvalue() == "")


def test_verify_log_draws_it_on_a_terminal_and_not_with_quiet(at_once, monkeypatch, capsys):
    term = Terminal()
    monkeypatch.setattr(P.sys, "stderr", term)
    assert main(["verify-log", str(DATA)]) == 0
    files = len([f for f in DATA.rglob("*") if f.suffix in (".log", ".checkpoint")])
    assert f"{files}/{files} files checked" in term.getvalue() and term.getvalue().endswith("\r\x1b[K")
    quiet = Terminal()
    monkeypatch.setattr(P.sys, "stderr", quiet)
    assert main(["verify-log", "--quiet", str(DATA)]) == 0
    assert quiet.getvalue() == ""
    capsys.readouterr()


def test_a_replay_shows_what_it_does_while_it_runs(at_once, monkeypatch, capsys, tmp_path):
    term = Terminal()
    monkeypatch.setattr(P.sys, "stderr", term)
    (tmp_path / "out").mkdir()
    assert main(["snapshot", "create", str(DATA), "--at", "80", "--out", str(tmp_path / "out")]) == 0
    assert "\rreplaying " in term.getvalue() and "\rwriting the snapshot at 80 to " in term.getvalue()
    assert term.getvalue().endswith("\r\x1b[K")
    capsys.readouterr()


def test_metadata_records_draws_the_bytes_read_and_not_with_quiet(at_once, monkeypatch, capsys):
    """``metadata records`` of a large log runs for seconds: the line counts the bytes of the files it
    reads (snapshots, then segments), and ``--quiet`` turns it off."""
    term = Terminal()
    monkeypatch.setattr(P.sys, "stderr", term)
    assert main(["metadata", "records", "--json", str(DATA)]) == 0
    out = capsys.readouterr().out
    files = [f for f in (DATA / "__cluster_metadata-0").iterdir() if f.suffix in (".log", ".checkpoint")]
    total = sum(f.stat().st_size for f in files)
    text = term.getvalue()
    assert f"/{total} bytes read" in text and text.endswith("\r\x1b[K"), text
    # the line of the last record's batch: the bytes of the files before its own, then its position
    last = json.loads(out.splitlines()[-1])
    before = sum(f.stat().st_size for f in files if str(f) != last["file"] and (
        f.suffix == ".checkpoint" or f.name < Path(last["file"]).name))
    assert f" {before + last['position']}/{total} bytes read" in text, text
    quiet = Terminal()
    monkeypatch.setattr(P.sys, "stderr", quiet)
    assert main(["metadata", "records", "--quiet", str(DATA)]) == 0
    assert quiet.getvalue() == ""
    capsys.readouterr()


def test_quorum_append_draws_the_records_committed_and_not_with_quiet(at_once, monkeypatch, capsys):
    """``quorum append --count N`` sends N/--batch requests and waits for each commit: the line counts
    the records committed (here against a stand-in for the quorum that commits each request at once)."""
    import kraftkit.raft.admin
    from kraftkit.cli import quorum

    class Quorum:
        end = 0

        def __init__(self, address: str, timeout: float) -> None:
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def append(self, values: list[bytes]) -> tuple[int, int]:
            base, Quorum.end = Quorum.end, Quorum.end + len(values)
            return base, Quorum.end - 1

    monkeypatch.setattr(kraftkit.raft.admin, "QuorumAdmin", Quorum)
    monkeypatch.setattr(quorum, "_reachable", lambda *a: None)
    term = Terminal()
    monkeypatch.setattr(P.sys, "stderr", term)
    assert main(["quorum", "append", "--bootstrap", "127.0.0.1:9093", "--count", "2500", "--batch", "1000"]) == 0
    drawn = [x.split(" records")[0].rsplit(" ", 1)[1] for x in term.getvalue().split("\r") if " records " in x]
    # each commit redraws it (the timer thread may draw the count before, or again, too)
    assert {"1000/2500", "2000/2500", "2500/2500"} <= set(drawn) <= {"0/2500", "1000/2500", "2000/2500", "2500/2500"}
    assert term.getvalue().endswith("\r\x1b[K")
    assert capsys.readouterr().out == "committed 2500 NoOpRecord(s) in 3 request(s): offsets 0..2499\n"
    quiet = Terminal()
    monkeypatch.setattr(P.sys, "stderr", quiet)
    assert main(["quorum", "append", "--bootstrap", "127.0.0.1:9093", "--count", "2500", "--quiet"]) == 0
    assert quiet.getvalue() == ""
    capsys.readouterr()


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield (*path, name), sp
                yield from _subcommands(sp, (*path, name))


def test_every_command_that_reads_much_takes_quiet():
    parser = build_parser(["--help"])
    long_running = {
        ("dump-log",), ("verify-log",), ("metadata", "dump"), ("metadata", "image"), ("metadata", "records"),
        ("quorum", "append"), ("snapshot", "create"), ("snapshot", "rewrite"), ("features", "describe"),
        ("features", "upgrade"), ("features", "downgrade"), ("features", "disable"),
        *(("spark", job) for job in ("audit", "verify", "rewrite", "scan", "generate")),
    }
    found = {path for path, sp in _subcommands(parser) if any("--quiet" in a.option_strings for a in sp._actions)}
    assert long_running <= found


# ------------------------------------------------------------------ completion


def completion(shell: str) -> str:
    p = subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "completion", shell], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_the_bash_script_names_every_command_and_subcommand():
    script = completion("bash")
    every = [path for path, _ in _subcommands(build_parser(["--help"]))]
    assert {p[0] for p in every} == set(COMMANDS)
    for path in every:
        assert f"'kraftkit {' '.join(path)}'" in script, path


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")
@pytest.mark.parametrize("words,want", [
    (["kraftkit", "feat"], ["features"]),
    (["kraftkit", "features", ""],
     ["describe", "disable", "downgrade", "feature-dependencies", "upgrade", "version-mapping"]),
    (["kraftkit", "storage", "format", "--layout", ""], ["checkpoint", "bootstrap-file"]),
    (["kraftkit", "dump-log", "--de"], ["--deep", "--deep-iteration"]),
    (["kraftkit", "completion", ""], ["bash", "zsh"]),
])
def test_bash_completes_with_the_script(tmp_path, words, want):
    script = tmp_path / "kraftkit.bash"
    script.write_text(completion("bash"))
    quoted = " ".join(f"'{w}'" for w in words)
    shell = (f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _kraftkit; "
             'printf "%s\\n" "${COMPREPLY[@]}"')
    p = subprocess.run(["bash", "--norc", "-c", shell], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == want


def test_the_zsh_script_runs_the_bash_function_through_bashcompinit():
    script = completion("zsh")
    assert script.startswith("#compdef kraftkit\n") and "bashcompinit" in script
    assert script.endswith(completion("bash"))


def test_spark_generate_draws_the_same_line(at_once, monkeypatch, capsys, tmp_path):
    """``spark generate`` uses the one helper too, and ``--quiet`` turns it off as everywhere (``--no-progress``,
    the name it had first, too)."""
    term = Terminal()
    monkeypatch.setattr(P.sys, "stderr", term)
    assert main(["spark", "generate", str(tmp_path / "f"), "--clusters", "2", "--topics", "2:3"]) == 0
    assert "2/2 clusters generated" in term.getvalue() and term.getvalue().endswith("\r\x1b[K")
    quiet = Terminal()
    monkeypatch.setattr(P.sys, "stderr", quiet)
    for n, flag in enumerate(("--quiet", "-q", "--no-progress")):
        assert main(["spark", "generate", str(tmp_path / f"g{n}"), "--clusters", "2", "--topics", "2:3", flag]) == 0
    assert quiet.getvalue() == ""
    capsys.readouterr()
