"""``kraftkit features``: finalized feature levels of a node's metadata, and offline
upgrades, downgrades and disabling (KIP-584, KIP-778)."""

from __future__ import annotations

import argparse
import os
import sys

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, error_code, fail
from kraftkit.cli.jsonout import emit
from kraftkit.cli.main import add_max_batch_bytes
from kraftkit.cli.progress import Progress, add_quiet
from kraftkit.cli.versions import add_parsers as add_version_parsers

HELP = (
    "finalized features and metadata.version: describe, upgrade, downgrade, disable (offline or live); "
    "version-mapping, feature-dependencies"
)


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
        "know (refused with Kafka's message), 2 unreadable input or no metadata there. With "
        "--bootstrap-controller instead of PATH, ask a running controller quorum (kraftkit's or "
        "Kafka's): ApiVersions of every controller DescribeCluster names; the finalized levels and "
        "epoch of the newest answer, each node's supported ranges, and per feature the nodes that "
        "block its next level (exit 2 if no controller answered).",
    )
    d.add_argument(
        "path",
        metavar="PATH",
        nargs="?",
        help="a log directory, __cluster_metadata-0, a snapshot or a bootstrap.checkpoint",
    )
    d.add_argument(
        "--bootstrap-controller",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="ask these running controllers instead of reading PATH",
    )
    d.add_argument("--timeout", type=float, default=30.0, help="bound on the whole survey, seconds (default 30)")
    d.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    add_quiet(d)
    add_max_batch_bytes(d)
    d.set_defaults(func=run_describe)
    for name, text in (
        ("upgrade", "raise feature levels"),
        ("downgrade", "lower feature levels"),
        ("disable", "set features to level 0"),
    ):
        c = fsub.add_parser(
            name,
            help=f"{text} in a stopped node's metadata log, or live with --bootstrap-controller",
            description=f"{text.capitalize()} offline: validate the change as a controller would "
            "(every registered node must support the new levels, dependencies must hold"
            + (", a metadata.version downgrade across a metadata change needs --unsafe" if name == "downgrade" else "")
            + "), then "
            "write its effect as a new snapshot at the end of the metadata log, rewritten at "
            "the new levels, so the node reloads from it when it starts. Metadata at a level "
            "newer than kraftkit's tables is refused, nothing written. With --bootstrap-controller "
            "instead of PATH, ask the active controller of a running quorum (UpdateFeatures; a "
            "kraftkit quorum also takes the lossy downgrade and says what it lost; --dry-run is "
            "validate-only). Exit codes: 0 done, 1 the change is invalid (or refused by the "
            "controller), 2 bad input (or a level, record type or version newer than kraftkit "
            "knows, or no controller answered).",
        )
        c.add_argument(
            "path", metavar="PATH", nargs="?", help="a log directory holding __cluster_metadata-0, or that directory"
        )
        c.add_argument(
            "--bootstrap-controller", metavar="HOST:PORT", help="change a running quorum's features instead of PATH"
        )
        c.add_argument(
            "--timeout", type=float, default=60.0, help="with --bootstrap-controller: bound in seconds (default 60)"
        )
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
        c.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
        add_quiet(c)
        add_max_batch_bytes(c)
        c.set_defaults(func=run_change, mode=name)
    add_version_parsers(fsub, "features")


def _level_label(name: str, level: int) -> str:
    from kraftkit.metadata.versions import level_known, mv_name, unknown_label

    if not level_known(name, level):  # shown as what it is: a level kraftkit cannot name
        return unknown_label(name, level)
    return f"{level} ({mv_name(level)})" if name == "metadata.version" and level >= 1 else str(level)


def _state_text(st) -> str:
    from kraftkit.features import registry

    reg = registry()
    lines = [f"{st.source}: metadata at offset {st.end_offset}"]
    for name, level in sorted(st.finalized.items()):
        label = _level_label(name, level)
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

    if args.bootstrap_controller is not None or args.path is None:
        return _describe_live(args)
    why = _unreadable(args.path)
    if why is not None:
        print(f"kraftkit features describe: {args.path}: {why}", file=sys.stderr)
        return EXIT_USAGE
    from kraftkit.metadata.snapshot import SnapshotError
    from kraftkit.metadata.source import MetadataSourceError

    note = None
    try:
        try:
            with Progress(f"replaying {args.path}", quiet=args.quiet):
                st = describe(args.path)
        except MetadataSourceError:
            if _bootstrap_file(args.path) is None or not _never_ran(args.path):
                raise
            st = None  # a formatted node that never ran: no metadata log yet
        boot = _bootstrap_file(args.path) if st is None or "metadata.version" not in st.finalized else None
        if boot is not None:
            st, note = _with_bootstrap(args.path, st, describe(boot)), boot
    except (KraftkitError, OSError) as e:
        print(f"kraftkit features describe: {_error_text(e)}", file=sys.stderr)
        # unreadable input or a path that holds no metadata: 2; damaged metadata: 1
        return EXIT_USAGE if isinstance(e, (OSError, MetadataSourceError, SnapshotError)) else EXIT_PROBLEMS
    assert st is not None  # (no metadata log: the bootstrap file's levels, else the error above)
    if args.json:
        emit(st.to_json())
    else:
        print(_state_text(st))
        if note is not None:
            print(f"  (no metadata.version in the log yet: the levels of {note}, which the node bootstraps from)")
    return EXIT_OK


def _bootstrap_file(path: str):
    """The ``bootstrap.checkpoint`` of a log directory (or of the one holding a metadata
    partition directory), or None."""
    from pathlib import Path

    from kraftkit.metadata.source import metadata_dir

    p = Path(path)
    if not p.is_dir():
        return None
    for d in (p, metadata_dir(p).parent):
        f = d / "bootstrap.checkpoint"
        if f.is_file():
            return f
    return None


def _never_ran(path: str) -> bool:
    """No segment or snapshot by name in the metadata directory (whatever its type: a FIFO or a
    broken link named like a segment is the error it is, not a node that never ran)."""
    import os

    from kraftkit.metadata.source import metadata_dir

    d = metadata_dir(path)
    try:
        names = os.listdir(d)
    except OSError:
        return False
    return not any(n.endswith((".log", ".checkpoint")) and n != "bootstrap.checkpoint" for n in names)


def _with_bootstrap(path: str, log, boot):
    """What a node that never ran starts from: the bootstrap file's levels, with what its log
    already holds (kraft.version and the voters of a bootstrap snapshot) on top."""
    from kraftkit.features.offline import FeatureState

    if log is None:
        return FeatureState(path, dict(boot.finalized), [], 0, boot.epoch)
    return FeatureState(path, {**boot.finalized, **log.finalized}, log.nodes, log.end_offset, log.epoch)


def run_change(args: argparse.Namespace) -> int:
    from kraftkit.cli.snapshot import rewrite_json
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
        if (args.path is None) == (args.bootstrap_controller is None):
            raise FeatureChangeError(
                "give PATH (a stopped node's log directory) or --bootstrap-controller, one of them"
            )
        if args.bootstrap_controller is not None:
            if args.backup is not None:
                raise FeatureChangeError("--backup is for PATH: a running quorum keeps its own log")
            return _change_live(args, prog, release, feats, utype)
        d = metadata_dir(args.path)
        if not d.is_dir():
            why = _unreadable(args.path)
            raise FeatureChangeError(f"{args.path}: not a metadata log directory" + (f": {why}" if why else ""))
        with Progress(f"replaying {d}", quiet=args.quiet) as progress:
            image = load_image(d)
            updates = requested_updates(
                state_of(image, str(d)), release_version=release, features=feats, upgrade_type=utype
            )
            progress.update(0, "validating" if args.dry_run else "writing the new snapshot")
            res = change(d, updates, dry_run=args.dry_run, backup=args.backup, image=image)
    except FeatureChangeError as e:
        if args.json:
            emit({"ok": False, "error": str(e), "results": [str(r) for r in e.results]})
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
        return error_code(e)  # damaged metadata: 1, as every command; bad input: 2
    if args.json:
        emit(
            {
                "ok": True,
                "dryRun": args.dry_run,
                "results": [str(r) for r in res.results],
                "snapshot": res.snapshot,
                "backup": res.backup,
                "moved": res.moved,
                "bootstrapRewritten": res.bootstrap_rewritten,
                "report": rewrite_json(res.report) if res.report else None,
            }
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


def _change_live(args: argparse.Namespace, prog: str, release: str | None, feats: dict[str, int], utype) -> int:
    """``features upgrade|downgrade|disable --bootstrap-controller``: UpdateFeatures at the active
    controller, the levels asked for computed from the finalized ones its ApiVersions reports."""
    from kraftkit.features.offline import FeatureState, requested_updates
    from kraftkit.protocol.messages import Errors
    from kraftkit.raft.admin import QuorumAdmin, QuorumError

    addr = args.bootstrap_controller
    try:
        with QuorumAdmin(addr, timeout=args.timeout) as admin:
            epoch, finalized = admin.finalized_features()
            state = FeatureState(addr, finalized, [], -1, epoch)
            updates = requested_updates(state, release_version=release, features=feats, upgrade_type=utype)
            if not updates:
                return fail(f"features {args.mode}", f"{addr}: nothing to change (the finalized levels already are)")
            asked = [(u.feature, u.level, int(u.upgrade_type)) for u in updates]
            answer = admin.update_features(asked, validate_only=args.dry_run, timeout_ms=int(args.timeout * 1000))
    except QuorumError as e:
        return fail(f"features {args.mode}", f"{addr}: {e}")
    except ValueError as e:  # a bad address
        return fail(f"features {args.mode}", f"--bootstrap-controller: {e}")
    ok = answer["ErrorCode"] == Errors.NONE
    message = answer.get("ErrorMessage")
    changes = [{"feature": f, "from": finalized.get(f, 0), "to": lv, "upgradeType": utype.name} for f, lv, _t in asked]
    if args.json:
        emit(
            {
                "ok": ok,
                "dryRun": args.dry_run,
                "controller": addr,
                "changes": changes,
                "errorCode": answer["ErrorCode"],
                "message": message,
            }
        )
    elif ok:
        verb = "would change" if args.dry_run else "changed"
        for c in changes:
            print(
                f"{c['feature']}: {verb} {_level_label(c['feature'], c['from'])} -> {_level_label(c['feature'], c['to'])}"
            )
        if message:
            print(message)
    else:
        name = Errors(answer["ErrorCode"]).name if answer["ErrorCode"] in Errors._value2member_map_ else "?"
        print(f"{prog}: {addr}: refused ({name}): {message or ''}", file=sys.stderr)
    return EXIT_OK if ok else EXIT_PROBLEMS


def _printable(name: str) -> str:
    """A name a peer sent (a feature, a host) as text: quoted when it holds anything but printable characters."""
    return name if name.isprintable() else repr(name)


def _range_text(r: tuple[int, int] | None) -> str:
    return "-" if r is None else f"{r[0]}..{r[1]}"


def _describe_live(args: argparse.Namespace) -> int:
    """``features describe --bootstrap-controller``: the survey of a running quorum."""
    from kraftkit.features import registry
    from kraftkit.metadata.versions import level_known, unknown_levels
    from kraftkit.raft.admin import parse_address, survey_features

    cmd = "features describe"
    if args.path is not None:
        return fail(cmd, "give PATH or --bootstrap-controller, not both")
    if not args.bootstrap_controller:
        return fail(cmd, "give PATH (a log directory, snapshot or bootstrap.checkpoint) or --bootstrap-controller")
    if not 0 < args.timeout <= 3600:
        return fail(cmd, f"--timeout {args.timeout}: expected seconds in (0, 3600]")
    bootstrap = [a.strip() for a in args.bootstrap_controller.split(",") if a.strip()]
    try:
        for a in bootstrap or [args.bootstrap_controller]:
            parse_address(a)
    except ValueError as e:
        return fail(cmd, f"--bootstrap-controller: {e}")
    cache, nodes = survey_features(bootstrap, timeout=args.timeout)
    answered = [n for n in nodes if n.answer is not None]
    if not answered:
        why = "; ".join(_printable(f"{n.address}: {n.error}") for n in nodes) or "no controller found"
        return fail(cmd, f"{args.bootstrap_controller}: no controller answered: {why}")
    epoch, finalized, newest = cache.snapshot()
    names = sorted(set(finalized).union(*(n.answer.supported for n in answered if n.answer)))
    blocking: dict[str, dict] = {}  # name -> the next level (None above 32767) and the nodes that lack it
    for name in names:
        up = finalized.get(name, 0) + 1
        level = up if up <= 32767 else None  # a FeatureLevel is an int16: none above 32767
        blocked = []
        for n in answered:
            assert n.answer is not None
            lo, hi = n.answer.supported.get(name, (0, 0))
            if level is not None and not lo <= level <= hi:
                blocked.append(n)
        blocking[name] = {"level": level, "blockedBy": blocked}

    def node_name(n) -> str:
        return f"controller {n.node_id}" if n.node_id is not None else _printable(n.address)

    reg = registry()
    if args.json:
        mv = finalized.get("metadata.version")
        emit(
            {
                "source": args.bootstrap_controller,
                "metadataVersion": None
                if mv is None or not level_known("metadata.version", mv)
                else reg.by_level(mv).name,
                "metadataVersionLevel": mv,
                "finalized": dict(sorted(finalized.items())),
                "unknownLevels": unknown_levels(finalized),
                "finalizedFeaturesEpoch": epoch,
                "finalizedFrom": newest.address if newest else None,
                "nodes": [
                    {
                        "id": n.node_id,
                        "role": "controller",
                        "address": n.address,
                        "supported": {k: list(v) for k, v in sorted(n.answer.supported.items())} if n.answer else None,
                        "finalizedFeaturesEpoch": n.answer.epoch if n.answer else None,
                        "error": n.error,
                    }
                    for n in nodes
                ],
                "nextLevels": {
                    name: {
                        "level": b["level"],
                        "blockedBy": [n.node_id if n.node_id is not None else n.address for n in b["blockedBy"]],
                    }
                    for name, b in blocking.items()
                },
                "kraftkitSupports": {k: list(v) for k, v in reg.supported_ranges().items()},
            }
        )
        return EXIT_OK
    src = f" (newest answer: {_printable(newest.address)})" if newest else " (none finalized yet)"
    lines = [f"{args.bootstrap_controller}: finalized features epoch {epoch}{src}"]
    for name in names:
        label = _level_label(name, finalized.get(name, 0))  # not listed: disabled, level 0
        ranges = ", ".join(
            f"{n.node_id if n.node_id is not None else _printable(n.address)}: "
            f"{_range_text(n.answer.supported.get(name) if n.answer else None)}"
            for n in answered
        )
        b = blocking[name]
        why = ", ".join(
            f"{node_name(n)} ({_range_text(n.answer.supported.get(name) if n.answer else None)})"
            for n in b["blockedBy"]
        )
        nxt = f"level {b['level']} blocked by {why}" if why else f"level {b['level']} supported by every node"
        if b["level"] is None:
            nxt = "no level above"
        lines.append(f"  {_printable(name):<36} finalized {label:<20} supported {ranges}; {nxt}")
    for n in nodes:
        at = f"{node_name(n)} at {_printable(n.address)}" if n.node_id is not None else _printable(n.address)
        if n.answer is None:
            lines.append(f"  {at}: no answer: {_printable(n.error or '')}")
        else:
            lines.append(f"  {at}: finalized features epoch {n.answer.epoch}")
    print("\n".join(lines))
    return EXIT_OK
