"""The ``kraftkit`` command. Exit codes: 0 all good, 1 problems found in the data,
2 usage error or unreadable input."""

from __future__ import annotations

import argparse
import sys

from kraftkit import __version__
from kraftkit.cli import demo, dump_log, verify_log

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

COMMANDS = (dump_log, verify_log, demo)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kraftkit", description="Tools for Apache Kafka's KRaft metadata layer.")
    p.add_argument("--version", action="version", version=f"kraftkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for mod in COMMANDS:
        mod.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error of ours.
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
