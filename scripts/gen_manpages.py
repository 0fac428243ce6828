#!/usr/bin/env python3
"""Generates ``docs/man/*.1``: the manual pages of kraftkit and of every command and subcommand
(``kraftkit.1``, ``kraftkit-dump-log.1``, ``kraftkit-storage-format.1``, ...), from the CLI's own
argparse parser, by the code ``kraftkit man`` prints them with (``kraftkit.cli.man``).

Usage::

    python scripts/gen_manpages.py            # (re)write docs/man/ (and remove pages of commands gone)
    python scripts/gen_manpages.py --check    # exit 1 with a diff if a committed page differs (CI)

Output is deterministic (no date; the version is kraftkit's), so a change to a command's options or
help, or to the exit codes, shows as a difference until the pages are regenerated.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "man"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail if a committed page is out of date")
    args = ap.parse_args(argv)
    from kraftkit._core import write_atomic
    from kraftkit.cli.man import pages

    outputs = {OUT / f"{name}.1": text for name, text in pages().items()}
    stale = sorted(p for p in OUT.glob("*.1") if p not in outputs) if OUT.is_dir() else []
    if args.check:
        bad = False
        for path, new in outputs.items():
            old = path.read_text() if path.exists() else ""
            if old != new:
                bad = True
                sys.stdout.writelines(
                    difflib.unified_diff(
                        old.splitlines(True), new.splitlines(True), str(path.relative_to(REPO)), "regenerated"
                    )
                )
                print(f"gen_manpages: {path.relative_to(REPO)} is out of date", file=sys.stderr)
        for path in stale:
            bad = True
            print(f"gen_manpages: {path.relative_to(REPO)} is no command's page any more", file=sys.stderr)
        if bad:
            print("gen_manpages: run python scripts/gen_manpages.py", file=sys.stderr)
            return 1
        print(f"gen_manpages: the {len(outputs)} pages in {OUT.relative_to(REPO)} are up to date")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for path, new in outputs.items():
        if not path.exists() or path.read_text() != new:
            write_atomic(path, new.encode())
            print(f"gen_manpages: wrote {path.relative_to(REPO)}")
    for path in stale:
        path.unlink()
        print(f"gen_manpages: removed {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
