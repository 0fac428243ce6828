"""Man pages generated from the CLI's own parser: a page for kraftkit and for every command and
subcommand, naming every option with its metavar and help, rendered by groff without a warning,
committed in docs/man exactly as the generator makes them, and printed by ``kraftkit man``."""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kraftkit.cli.exits import EXIT_CODES, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kraftkit.cli.main import COMMANDS, build_parser
from kraftkit.cli.man import esc, pages

REPO = Path(__file__).resolve().parents[2]
MAN = REPO / "docs" / "man"


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("kraftkit",)):
    """(path, parser) of kraftkit and every command below it (a walk of the test's own)."""
    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _walk(sp, (*path, name))


PARSERS = list(_walk(build_parser(["--help"])))
PAGES = pages()


def _groff() -> str:
    groff = shutil.which("groff")
    if groff is None:
        pytest.fail("groff is not installed: the man pages cannot be checked (apt-get install groff-base)")
    return groff


def render(roff: str) -> str:
    """The page as `man` shows it on an 80-column terminal (plain text); groff's warnings fail."""
    p = subprocess.run([_groff(), "-man", "-Tutf8", "-ww", "-P-cbou"], input=roff, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    return p.stdout.replace("\u2212", "-").replace("\u2010", "-")


def squeezed(text: str) -> str:
    """``text`` without whitespace: a phrase is found however groff filled and broke it."""
    return "".join(text.split())


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return {name: render(text) for name, text in PAGES.items()}


def test_every_command_and_subcommand_has_a_page():
    names = {"-".join(path) for path, _ in PARSERS}
    assert {path[1] for path, _ in PARSERS if len(path) > 1} == set(COMMANDS)
    assert {"kraftkit", "kraftkit-dump-log", "kraftkit-storage-format", "kraftkit-man"} <= names
    assert set(PAGES) == names


def test_every_page_renders_without_warnings_and_has_the_sections(rendered):
    for name, text in rendered.items():
        for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "SEE ALSO"):
            assert re.search(rf"^{section}$", text, re.M), (name, section)
        # the header line: TITLE(1) twice, not run into itself (a title too long for that is shortened)
        head = text.splitlines()[0]
        title = head.split("(1)")[0]
        assert head.endswith(f"{title}(1)") and len(head) <= 78 and head.count("(1)") == 2, head
        assert title == name.upper() or (title.endswith("\u2026") and name.upper().startswith(title[:-1])), head


def test_every_option_appears_in_its_page_with_its_metavar_and_help(rendered):
    for path, parser in PARSERS:
        text = rendered["-".join(path)]
        options = text[text.index("\nOPTIONS\n"):text.index("\nEXIT STATUS\n")]
        for a in parser._actions:
            if a.help == argparse.SUPPRESS or isinstance(a, argparse._SubParsersAction):
                continue
            where = options if a.option_strings else text
            for option in a.option_strings:
                assert re.search(rf"(^|[\s,\[]){re.escape(option)}([\s,\]]|$)", where, re.M), (path, option)
            if a.metavar is not None:
                assert str(a.metavar) in where, (path, a.dest, a.metavar)
            if a.help:
                assert squeezed(a.help % {"default": a.default, "prog": parser.prog}) in squeezed(where), (path, a.dest)
        if parser.description:
            assert squeezed(parser.description) in squeezed(text), path


def test_exit_status_is_the_shared_table(rendered):
    assert {EXIT_OK: 0, EXIT_PROBLEMS: 1, EXIT_USAGE: 2} == {0: 0, 1: 1, 2: 2}
    assert {0, 1, 2} <= set(EXIT_CODES)
    for name, text in rendered.items():
        status = text[text.index("\nEXIT STATUS\n"):text.index("\nSEE ALSO\n")]
        for code, meaning in EXIT_CODES.items():
            assert re.search(rf"^\s+{code}\s", status, re.M), (name, code)
            assert squeezed(meaning) in squeezed(status), (name, code)


def test_kraftkit_lists_every_command_and_every_reference_is_a_page(rendered):
    top = squeezed(rendered["kraftkit"])
    for path, _ in PARSERS[1:]:
        assert squeezed(" ".join(path[1:])) + "" in top and squeezed("-".join(path)) + "(1)" in top, path
    for name, text in rendered.items():
        refs = re.findall(r"\b(kraftkit[a-z0-9-]*)\(1\)", text)
        assert refs, name
        assert set(refs) <= set(PAGES), (name, set(refs) - set(PAGES))


def test_roff_escaping():
    assert esc(".TH x") == "\\&.TH x"
    assert esc("'quoted' and `ticks`") == "\\(aqquoted\\(aq and \\(gaticks\\(ga"
    assert esc("a\\b --opt -x") == "a\\eb \\-\\-opt \\-x"
    assert esc("caf\u00e9  \n  next") == "caf\\[u00E9] next"
    assert esc("a,b/c, d", breaks=False) == "a,b/c, d"


def test_hostile_help_text_renders_literally():
    """Help that starts with roff's control characters, or holds backslashes, quotes and non-ASCII
    letters, is printed as written and gives groff nothing to warn about."""
    p = argparse.ArgumentParser(prog="kraftkit", description=".TH not a macro")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    odd = sub.add_parser("odd", help="'starts with a quote", description="\\fB not bold \\\\ na\u00efve --flag")
    odd.add_argument("--x-y", metavar="A\\B", help=".br is text here (default %(default)s)", default="d")
    text = {name: render(roff) for name, roff in pages(p).items()}
    assert ".TH not a macro" in text["kraftkit"] and "'starts with a quote" in text["kraftkit-odd"]
    assert "\\fB not bold \\\\ na\u00efve --flag" in text["kraftkit-odd"]
    assert "--x-y A\\B" in text["kraftkit-odd"] and ".br is text here (default d)" in text["kraftkit-odd"]


# ------------------------------------------------------------------ docs/man and the generator


def test_the_committed_pages_are_what_the_generator_makes_now():
    committed = {p.stem: p.read_text() for p in MAN.glob("*.1")}
    assert set(committed) == set(PAGES), "run python scripts/gen_manpages.py"
    for name, text in PAGES.items():
        assert committed[name] == text, f"docs/man/{name}.1 is out of date: run python scripts/gen_manpages.py"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_manpages.py"), "--check"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_generator_writes_checks_and_removes_pages(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("gen_manpages", REPO / "scripts" / "gen_manpages.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.REPO, gen.OUT = tmp_path, tmp_path / "docs" / "man"
    assert gen.main(["--check"]) == 1  # nothing written yet
    assert gen.main([]) == 0
    assert {p.stem for p in gen.OUT.glob("*.1")} == set(PAGES)
    assert gen.main(["--check"]) == 0
    page = gen.OUT / "kraftkit-dump-log.1"
    page.write_text(page.read_text().replace("\\-\\-deep", "\\-\\-shallow"))
    (gen.OUT / "kraftkit-gone.1").write_text(".TH GONE 1\n")
    capsys.readouterr()
    assert gen.main(["--check"]) == 1
    out, err = capsys.readouterr()
    assert "+\\fB\\-\\-deep\\fR" in out and "docs/man/kraftkit-dump-log.1 is out of date" in err
    assert "docs/man/kraftkit-gone.1 is no command's page any more" in err
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
    assert page.read_text() == PAGES["kraftkit-dump-log"] and not (gen.OUT / "kraftkit-gone.1").exists()


# ------------------------------------------------------------------ kraftkit man


def kraftkit_man(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "man", *words], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("words,page", [
    (("dump-log",), "kraftkit-dump-log"),
    (("storage", "format"), "kraftkit-storage-format"),
    (("kraftkit-storage-format",), "kraftkit-storage-format"),
    ((), "kraftkit"),
])
def test_kraftkit_man_prints_the_page(words, page):
    p = kraftkit_man(*words)
    assert p.returncode == 0 and p.stderr == ""
    assert p.stdout == (MAN / f"{page}.1").read_text()
    assert f'.TH "{page.upper().replace("-", chr(92) + "-")}" 1' in p.stdout


@pytest.mark.parametrize("words", [("no-such",), ("storage", "nope"), ("--nope",)])
def test_kraftkit_man_of_an_unknown_command_is_a_usage_error(words):
    p = kraftkit_man(*words)
    assert p.returncode == 2 and p.stdout == ""
    if words[0].startswith("--"):
        assert "kraftkit man: error: unrecognized arguments: --nope" in p.stderr
    else:
        assert p.stderr.startswith(f"kraftkit man: no manual page for {' '.join(words)!r}: not a kraftkit command")
        assert "dump-log" in p.stderr
