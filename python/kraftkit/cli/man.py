"""``kraftkit man [COMMAND...]``: the manual page of kraftkit or of one of its commands, in roff,
generated from kraftkit's own argparse parser (the tree ``kraftkit completion`` walks), so it
cannot fall behind the commands and needs nothing but the installed package:
``kraftkit man storage format | man -l -``. ``scripts/gen_manpages.py`` writes every page to
``docs/man/`` (``kraftkit.1``, ``kraftkit-storage-format.1``, ...).

A page has NAME, SYNOPSIS, DESCRIPTION (the parser's description), COMMANDS (of a command that
has subcommands), ARGUMENTS, OPTIONS (every option with its metavar and help), EXIT STATUS (from
:mod:`kraftkit.cli.exits`) and SEE ALSO. Text is escaped for roff: backslashes, every hyphen as
``\\-`` (options copy and paste as typed), quotes and non-ASCII characters by name, and a line never
starts with a control character."""

from __future__ import annotations

import argparse

from kraftkit.cli.exits import EXIT_CODES, EXIT_CODES_NOTE, EXIT_OK, EXIT_USAGE, fail

HELP = "print the manual page of kraftkit or of a command, in roff (kraftkit man storage format | man -l -)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "man",
        help=HELP,
        description="Print the manual page of kraftkit, or of the command named, in roff on stdout: "
        "read it with `kraftkit man dump-log | man -l -`. The pages are generated from the commands' own "
        "options and help, as the installed kraftkit has them.",
    )
    p.add_argument(
        "command",
        nargs="*",
        metavar="COMMAND",
        help="a command and its subcommand (storage format), or a page's name (kraftkit-storage-format); "
        "none: the kraftkit page, which lists every command",
    )
    p.set_defaults(func=run)


# ------------------------------------------------------------------ roff

_SPECIAL = {"\\": "\\e", "-": "\\-", "'": "\\(aq", "`": "\\(ga"}


def esc(text: str, breaks: bool = True) -> str:
    """``text`` as one roff text line: whitespace runs made one space (argparse fills help text the
    same way), backslashes, hyphens and quotes escaped, non-ASCII characters named (``\\[u00E9]``), and
    a leading ``.`` made literal (a quote is escaped anyway). With ``breaks`` a line may also break
    after a ``,`` or ``/`` inside a word (``\\:``, invisible), so that a long JSON example or path fits."""
    out = []
    text = " ".join(text.split())
    for i, ch in enumerate(text):
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif not 32 <= ord(ch) <= 126:
            out.append(f"\\[u{ord(ch):04X}]")
        else:
            out.append(ch)
        if breaks and ch in ",/" and text[i + 1 : i + 2] not in ("", " "):
            out.append("\\:")
    line = "".join(out)
    return "\\&" + line if line.startswith(".") else line


def _bold(text: str) -> str:
    return f"\\fB{esc(text, breaks=False)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{esc(text, breaks=False)}\\fR"


#: The width a page's header line is laid out for (groff's default for a terminal, 80 columns less 2).
WIDTH = 78


def _header(name: str, version: str) -> tuple[str, str, str]:
    """(title, version, centre) of the header line ``TITLE(1)  kraftkit manual  TITLE(1)``: the
    centre left out when it does not fit, and a title too long to be printed twice shortened with an
    ellipsis (as groff 1.23 does), so that the line never runs into itself."""
    title, centre = name.upper(), "kraftkit manual"
    if 2 * len(f"{title}(1)") + len(centre) + 4 > WIDTH:
        centre = ""
    longest = (WIDTH - 2) // 2 - len("(1)")
    if len(title) > longest:
        title = title[: longest - 1] + "\u2026"
    return title, version, centre


def _ref(path: tuple[str, ...]) -> str:
    return f"{_bold(page_name(path))}(1)"


# ------------------------------------------------------------------ pages


def page_name(path: tuple[str, ...]) -> str:
    """``("kraftkit", "storage", "format")`` -> ``kraftkit-storage-format``."""
    return "-".join(path)


def tree(parser: argparse.ArgumentParser | None = None) -> list[tuple[tuple[str, ...], argparse.ArgumentParser, str]]:
    """(path, parser, one-line help) of kraftkit and every command and subcommand, depth first."""
    from kraftkit.cli.completion import commands
    from kraftkit.cli.main import build_parser

    parser = parser or build_parser(["--help"])
    return [(path, p, help or p.description or "") for path, p, help in commands(parser)]


def _args(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    """What an action takes, as argparse's help shows it (``FILE [FILE ...]``, ``{bash,zsh}``)."""
    fmt = p._get_formatter()
    return fmt._format_args(a, a.dest.upper() if a.option_strings else a.dest)


def _synopsis_token(p: argparse.ArgumentParser, a: argparse.Action, room: int) -> str:
    """An option with what it takes (``--files FILE[,FILE...]``), or a positional argument, its words
    held together by unbreakable spaces when it fits in ``room`` columns (with its brackets)."""
    args = _args(p, a) if not a.option_strings or a.nargs != 0 else ""
    words = list(a.option_strings[:1]) + ([args] if args else [])
    glue = "\\ " if len(" ".join(words)) + 2 <= room else " "
    parts = [_bold(o) for o in a.option_strings[:1]] + ([_italic(args).replace(" ", glue)] if args else [])
    return glue.join(parts)


def _synopsis(path: tuple[str, ...], p: argparse.ArgumentParser) -> list[str]:
    """``.SY`` ... ``.YS``: one token a line (unbreakable inside where it fits); optional ones in brackets, the
    options of a mutually exclusive group as ``[a | b]``, as argparse's usage line has them."""
    groups = {id(a): g for g in p._mutually_exclusive_groups for a in g._group_actions}
    lines = [f'.SY "{esc(" ".join(path), breaks=False)}"']
    room = WIDTH - len("       ") - len(" ".join(path)) - 1  # the page's indent, the command, a space
    done: set[int] = set()
    # options first, then the positional arguments, as argparse's usage line has them
    for a in sorted(p._actions, key=lambda a: not a.option_strings):
        if a.help == argparse.SUPPRESS or id(a) in done:
            continue
        group = groups.get(id(a))
        if group is not None:
            members = [m for m in group._group_actions if m.help != argparse.SUPPRESS]
            done.update(id(m) for m in members)
            inner = " | ".join(_synopsis_token(p, m, room) for m in members)
            lines.append(f"({inner})" if group.required else f"[{inner}]")
        elif a.option_strings and not a.required:
            lines.append(f"[{_synopsis_token(p, a, room)}]")
        else:
            lines.append(_synopsis_token(p, a, room))
    return [*lines, ".YS"]


def _option_tag(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    if a.nargs == 0:
        return ", ".join(_bold(o) for o in a.option_strings)
    args = _italic(_args(p, a))
    return ", ".join(f"{_bold(o)} {args}" for o in a.option_strings)


def _help(p: argparse.ArgumentParser, a: argparse.Action) -> str:
    """The action's help as ``--help`` prints it (``%(default)s`` filled in), with its choices when
    its metavar hides them."""
    text = p._get_formatter()._expand_help(a) if a.help else ""
    if a.choices is not None and a.metavar is not None and not isinstance(a, argparse._SubParsersAction):
        text = f"{text} (one of: {', '.join(str(c) for c in a.choices)})".strip()
    return text


def _items(rows: list[tuple[str, str]]) -> list[str]:
    out = []
    for tag, text in rows:
        out += [".TP", tag]
        if text:
            out.append(esc(text))
    return out


def render(
    path: tuple[str, ...],
    p: argparse.ArgumentParser,
    help: str,
    children: list[tuple[str, ...]],
    helps: dict[tuple[str, ...], str],
) -> str:
    """The roff text of one page: ``path`` the command's words, ``help`` its one-line help,
    ``children`` the paths of its subcommands (one level down), ``helps`` every command's help."""
    from kraftkit import __version__

    name = page_name(path)
    lines = [
        ".\\\" Generated from kraftkit's argparse parser by `kraftkit man` (scripts/gen_manpages.py); do not edit.",
        ".nr HY 0",  # no hyphenation: an option or a file name breaks at a hyphen it has, or not at all
        '.TH "{}" 1 "" "kraftkit {}" "{}"'.format(*(esc(t, False) for t in _header(name, __version__))),
        ".ad l",
        ".SH NAME",
        f"{esc(name, False)} \\- {esc(help.rstrip('.'))}",
        ".SH SYNOPSIS",
        *_synopsis(path, p),
        ".SH DESCRIPTION",
        esc(p.description or help),
    ]
    if len(path) == 1:
        lines += [
            ".PP",
            esc(
                "Each command has its own page: kraftkit man COMMAND [SUBCOMMAND] prints it "
                "(kraftkit man storage format | man -l -)."
            ),
        ]
    everything = [q for q in helps if q[: len(path)] == path and len(q) > len(path)]
    if everything:
        lines += [".SH COMMANDS"]
        for q in everything:
            lines += [".TP", _bold(" ".join(q[1:])), esc(helps[q].rstrip(".") + "."), f"See {_ref(q)}."]
    positionals = [a for a in p._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    if positionals:
        lines += [".SH ARGUMENTS", *_items([(_italic(_args(p, a)), _help(p, a)) for a in positionals])]
    options = [a for a in p._actions if a.option_strings and a.help != argparse.SUPPRESS]
    lines += [".SH OPTIONS", *_items([(_option_tag(p, a), _help(p, a)) for a in options])]
    lines += [
        ".SH EXIT STATUS",
        *_items([(_bold(str(code)), meaning) for code, meaning in EXIT_CODES.items()]),
        ".PP",
        esc(EXIT_CODES_NOTE),
    ]
    see = [path[:i] for i in range(1, len(path))] + children  # up the tree, then one level down
    lines += [".SH SEE ALSO", ", ".join(_ref(q) for q in see)]
    return "\n".join(lines) + "\n"


def pages(parser: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """Page name -> roff text, for kraftkit and every command and subcommand of ``parser`` (kraftkit's
    whole parser when None)."""
    nodes = tree(parser)
    helps = {path: help for path, _, help in nodes}
    out = {}
    for path, p, help in nodes:
        children = [q for q, _, _ in nodes if len(q) == len(path) + 1 and q[: len(path)] == path]
        out[page_name(path)] = render(path, p, help, children, helps)
    return out


def find(words: list[str], names: list[str]) -> str | None:
    """The page ``words`` name: command words (``storage format``), or one page's name with or without
    ``kraftkit-`` (``storage-format``, ``kraftkit-storage-format``); no words: ``kraftkit``."""
    if not words:
        return "kraftkit"
    name = page_name(("kraftkit", *words))
    if name in names:
        return name
    return words[0] if len(words) == 1 and words[0] in names else None


def run(args: argparse.Namespace) -> int:
    from kraftkit.cli.main import build_parser

    parser = build_parser(["--help"])
    nodes = tree(parser)
    every = pages(parser)
    name = find(args.command, list(every))
    if name is None:
        commands = ", ".join(path[1] for path, _, _ in nodes if len(path) == 2)
        return fail(
            "man",
            f"no manual page for {' '.join(args.command)!r}: not a kraftkit command ({commands}; "
            "kraftkit man lists their subcommands)",
            EXIT_USAGE,
        )
    print(every[name], end="")
    return EXIT_OK


__all__ = ["esc", "find", "page_name", "pages", "render", "tree"]
