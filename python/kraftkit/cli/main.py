"""The ``kraftkit`` command. Exit codes (:mod:`kraftkit.cli.exits`): 0 all good, 1 problems
found in the data, 2 usage error or unreadable input."""

from __future__ import annotations

import argparse
import importlib
import sys

from kraftkit.cli.argtypes import int_arg
from kraftkit.cli.exits import EXIT_INTERRUPTED, EXIT_OK

#: command name -> module under kraftkit.cli. Only the module of the command being run is
#: imported (all of them for --help, none for --version), so each command starts fast.
COMMANDS = {
    "dump-log": "dump_log",
    "verify-log": "verify_log",
    "snapshot": "snapshot",
    "metadata": "metadata",
    "features": "features",
    "storage": "storage",
    "quorum": "quorum",
    "controller": "controller",
    "migrate": "migrate",
    "demo": "demo",
    "spark": "spark",
    "completion": "completion",
    "man": "man",
}


#: The largest value of a Java long (offsets, timestamps, byte counts).
LONG_MAX = 2**63 - 1


#: Kafka's socket.request.max.bytes default, the core's default limit on a decompressed batch
#: (kraftkit._core.DEFAULT_MAX_UNCOMPRESSED_BYTES; not imported here, to keep start-up lean)
DEFAULT_MAX_BATCH_BYTES = 100 * 1024 * 1024


def add_max_batch_bytes(p: argparse.ArgumentParser) -> None:
    """``--max-batch-bytes N`` for a command that reads record batches (applied by :func:`main`)."""
    p.add_argument(
        "--max-batch-bytes",
        type=int_arg(1, LONG_MAX, " bytes"),
        default=None,
        metavar="N",
        help="the most a compressed batch's records may inflate to; a larger batch is an error, "
        f"as a decompression bomb is (default {DEFAULT_MAX_BATCH_BYTES}, 100 MiB, Kafka's "
        "socket.request.max.bytes)",
    )


def _version() -> str:
    from kraftkit import __version__

    return f"kraftkit {__version__}"


class _CommandParser(argparse.ArgumentParser):
    """A (sub)command's parser: an argument it does not know is its usage error, shown with its own
    usage line (argparse would hand it up to ``kraftkit``'s, which lists only the commands)."""

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kraftkit", description="Tools for Apache Kafka's KRaft metadata layer.")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser)
    chosen = next((a for a in argv if a in COMMANDS), None)
    # every command's options are only needed for the full --help
    everything = chosen is None and any(a in ("-h", "--help") for a in argv)
    for name, module in COMMANDS.items():
        if everything or name == chosen:
            importlib.import_module(f"kraftkit.cli.{module}").add_parser(sub)
        else:
            sub.add_parser(name)
    return p


def main(argv: list[str] | None = None, namespace: argparse.Namespace | None = None) -> int:
    """Runs one command; ``namespace`` holds settings of the caller's that are no option of the
    command line (``kraftkit.cli.spark_submit`` sets ``ambient_session``)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv, namespace)
    if getattr(args, "max_batch_bytes", None) is not None:
        from kraftkit._core import set_max_uncompressed_bytes

        set_max_uncompressed_bytes(args.max_batch_bytes)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error of ours.
        sys.stdout = None
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
