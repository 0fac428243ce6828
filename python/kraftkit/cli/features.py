"""``kraftkit features``: finalized feature levels of a node's metadata, and offline
upgrades, downgrades and disabling (KIP-584, KIP-778)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE
from kraftkit.cli.main import add_max_batch_bytes

HELP = "finalized features and metadata.version: describe, upgrade, downgrade, disable (offline)"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("features", help=HELP, description=HELP + ".")
    fsub = p.add_subparsers(dest="features_command", metavar="SUBCOMMAND", required=True)
    d = fsub.add_parser(
        "describe",
        help="finalized levels, what every registered node supports, what kraftkit supports",
        description="Read the finalized feature levels at the end of a metadata log directory, a "
        "snapshot or a bootstrap.checkpoint, with level names, the ranges every registered "
        "broker and controller advertises, and the ranges this software supports. A level newer "
        "than kraftkit's tables (a newer Kafka's) is shown as unknown, never named (--json: "
        "metadataVersion null, the level in metadataVersionLevel and unknownLevels). Exit "
        "codes: 0 done, 1 damaged metadata or a record type or version kraftkit does not "
        "know (refused with Kafka's message), 2 unreadable input or no metadata there.",
    )
    d.add_argument("path", metavar="PATH")
    d.add_argument("--json", action="store_true")
    add_max_batch_bytes(d)
    d.set_defaults(func=run_describe)
    for name, text in (
        ("upgrade", "raise feature levels"),
        ("downgrade", "lower feature levels"),
        ("disable", "set features to level 0"),
    ):
        c = fsub.add_parser(
            name,
            help=f"{text} in a stopped node's metadata log",
            description=f"{text.capitalize()} offline: validate the change as a controller would "
            "(every registered node must support the new levels, dependencies must hold, "
            "a metadata.version downgrade across a metadata change needs --unsafe), then "
            "write its effect as a new snapshot at the end of the metadata log, rewritten at "
            "the new levels, so the node reloads from it when it starts. Metadata at a level "
            "newer than kraftkit's tables is refused, nothing written. Exit codes: 0 done, "
            "1 the change is invalid, 2 bad input (or a level, record type or version newer "
            "than kraftkit knows).",
        )
        c.add_argument("path", metavar="PATH", help="a log directory holding __cluster_metadata-0, or that directory")
        if name != "disable":
            c.add_argument(
                "--release-version",
                "--metadata",
                dest="release_version",
                metavar="V",
                help="metadata.version V (3.9, 3.9-IV0 or 21) and every other feature at V's default",
            )
        c.add_argument(
            "--feature",
            action="append",
            default=[],
            metavar="NAME=LEVEL" if name != "disable" else "NAME",
            help="one feature (repeatable)",
        )
        if name == "downgrade":
            c.add_argument("--unsafe", action="store_true", help="allow a lossy metadata.version downgrade")
        c.add_argument("--dry-run", action="store_true", help="validate and print what would be lost; write nothing")
        c.add_argument(
            "--backup", metavar="DIR", help="where to keep a snapshot this replaces (one Kafka wrote at the log end)"
        )
        c.add_argument("--json", action="store_true")
        add_max_batch_bytes(c)
        c.set_defaults(func=run_change, mode=name)


def _state_text(st) -> str:
    from kraftkit.features import registry
    from kraftkit.metadata.versions import level_known, mv_name, unknown_label

    reg = registry()
    lines = [f"{st.source}: metadata at offset {st.end_offset}"]
    for name, level in sorted(st.finalized.items()):
        if not level_known(name, level):  # shown as what it is: a level kraftkit cannot name
            label = unknown_label(name, level)
        else:
            label = f"{level} ({mv_name(level)})" if name == "metadata.version" and level >= 1 else str(level)
        sup = reg.supported_ranges().get(name)
        lines.append(f"  {name:<36} finalized {label:<20} kraftkit supports " + (f"{sup[0]}..{sup[1]}" if sup else "-"))
    for n in st.nodes:
        ranges = ", ".join(f"{k} {lo}..{hi}" for k, (lo, hi) in sorted(n.supported.items()))
        lines.append(f"  {n}: {ranges}")
    return "\n".join(lines)


def _unreadable(path: str) -> str | None:
    """Why ``path`` is neither a directory nor a readable regular file (a FIFO, a device, a
    symbolic link loop...: refused without being read), or None."""
    from kraftkit._fs import check_input

    if os.path.isdir(path):
        return None
    try:
        check_input(path)
    except FileNotFoundError as e:
        return "no such file or directory" if e.strerror == "No such file or directory" else e.strerror
    except OSError as e:
        return getattr(e, "reason", None) or e.strerror or str(e)
    return None


def _error_text(e: Exception) -> str:
    """``<path>: <reason>``: an OSError's path and reason, or a kraftkit error's text with the
    file it carries in front (a record's decoding error names it only as an attribute)."""
    from kraftkit._fs import error_text

    if isinstance(e, OSError):
        return error_text(e)
    text, file = str(e), getattr(e, "file", None)
    return f"{file}: {text}" if file and not text.startswith(f"{file}: ") else text


def run_describe(args: argparse.Namespace) -> int:
    from kraftkit.errors import KraftkitError
    from kraftkit.features.offline import describe

    why = _unreadable(args.path)
    if why is not None:
        print(f"kraftkit features describe: {args.path}: {why}", file=sys.stderr)
        return EXIT_USAGE
    from kraftkit.metadata.snapshot import SnapshotError
    from kraftkit.metadata.source import MetadataSourceError

    try:
        st = describe(args.path)
    except (KraftkitError, OSError) as e:
        print(f"kraftkit features describe: {_error_text(e)}", file=sys.stderr)
        # unreadable input or a path that holds no metadata: 2; damaged metadata: 1
        return EXIT_USAGE if isinstance(e, (OSError, MetadataSourceError, SnapshotError)) else EXIT_PROBLEMS
    print(json.dumps(st.to_json()) if args.json else _state_text(st))
    return EXIT_OK


def run_change(args: argparse.Namespace) -> int:
    from kraftkit.errors import KraftkitError
    from kraftkit.features.offline import FeatureChangeError, change, requested_updates, state_of
    from kraftkit.features.validation import UpgradeType
    from kraftkit.metadata.image import load_image
    from kraftkit.metadata.source import metadata_dir

    prog = f"kraftkit features {args.mode}"
    try:
        feats: dict[str, int] = {}
        for spec in args.feature:
            if args.mode == "disable":
                feats[spec] = 0
                continue
            name, sep, level = spec.partition("=")
            digits = level.strip().removeprefix("-")
            if not sep or not (digits.isascii() and digits.isdigit()):
                raise FeatureChangeError(f"--feature {spec[:80]!r}: expected NAME=LEVEL")
            if len(digits) > 5 or not -(2**15) <= int(level) < 2**15:  # a FeatureLevel is an int16
                raise FeatureChangeError(f"--feature {spec[:80]!r}: the level must be from -32768 to 32767")
            feats[name.strip()] = int(level)
        release = getattr(args, "release_version", None)
        if release is None and not feats:
            raise FeatureChangeError("give --release-version or --feature")
        utype = {"upgrade": UpgradeType.UPGRADE, "disable": UpgradeType.SAFE_DOWNGRADE}.get(
            args.mode, UpgradeType.UNSAFE_DOWNGRADE if getattr(args, "unsafe", False) else UpgradeType.SAFE_DOWNGRADE
        )
        d = metadata_dir(args.path)
        if not d.is_dir():
            why = _unreadable(args.path)
            raise FeatureChangeError(f"{args.path}: not a metadata log directory" + (f": {why}" if why else ""))
        image = load_image(d)
        updates = requested_updates(
            state_of(image, str(d)), release_version=release, features=feats, upgrade_type=utype
        )
        res = change(d, updates, dry_run=args.dry_run, backup=args.backup, image=image)
    except FeatureChangeError as e:
        if args.json:
            print(json.dumps({"ok": False, "error": str(e), "results": [str(r) for r in e.results]}))
        else:
            print(f"{prog}: {e}", file=sys.stderr)
            for r in e.results:
                if not r.cascaded:
                    print(f"  {r}", file=sys.stderr)
            held = [r.update.feature for r in e.results if r.cascaded]
            if held:
                print(f"  not applied either (one request is all or nothing): {', '.join(held)}", file=sys.stderr)
        return EXIT_PROBLEMS if e.results else EXIT_USAGE
    except (KraftkitError, OSError) as e:
        print(f"{prog}: {_error_text(e)}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(
            json.dumps(
                {
                    "ok": True,
                    "dryRun": args.dry_run,
                    "results": [str(r) for r in res.results],
                    "snapshot": res.snapshot,
                    "backup": res.backup,
                    "moved": res.moved,
                    "bootstrapRewritten": res.bootstrap_rewritten,
                    "report": res.report.to_json() if res.report else None,
                }
            )
        )
        return EXIT_OK
    for r in res.results:
        print(str(r))
    if res.report is not None:
        print(res.report.text())
    if res.moved:
        print(f"moved {len(res.moved)} file(s) of the log below the new snapshot to {res.backup}")
    if res.snapshot:
        print(f"wrote {res.snapshot}" + (f" (previous kept in {res.backup})" if res.backup and not res.moved else ""))
    for b in res.bootstrap_rewritten:
        print(f"rewrote {b}")
    return EXIT_OK
