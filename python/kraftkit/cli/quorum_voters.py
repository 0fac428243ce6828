"""``kraftkit quorum add-voter`` and ``remove-voter``: KIP-853 voter changes of a dynamic quorum
(kraftkit's or Kafka's), as ``kafka-metadata-quorum.sh add-controller`` / ``remove-controller`` make
them: AddRaftVoter / RemoveRaftVoter to the leader, which commits the new voter set before it answers."""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Callable
from typing import Any

from kraftkit.cli.exits import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, fail
from kraftkit.cli.jsonout import emit

__all__ = ["add_parsers"]

ADD = "quorum add-voter"
REMOVE = "quorum remove-voter"


def _directory_id(text: str) -> uuid.UUID:
    """An argparse type: a Kafka Uuid (22 characters of URL-safe base64)."""
    from kraftkit.features.storage.uuids import parse_uuid

    try:
        return uuid.UUID(bytes=parse_uuid(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _endpoint(text: str) -> tuple[str, str, int]:
    """An argparse type: ``NAME://HOST:PORT``."""
    name, sep, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    if not sep or not name or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"bad listener {text!r}: expected NAME://HOST:PORT")
    return name, host.strip("[]"), int(port)


def add_parsers(
    qsub: argparse._SubParsersAction,
    add_bootstrap: Callable[[argparse.ArgumentParser], None],
    seconds: Callable[[str], float],
) -> None:
    a = qsub.add_parser(
        "add-voter",
        help="add a controller to a dynamic quorum (AddRaftVoter), as kafka-metadata-quorum.sh add-controller",
        description="Make a running controller a voter of a dynamic quorum (KIP-853, kraft.version 1: "
        "formatted with --standalone, --initial-controllers or --no-initial-controllers). The controller "
        "must be running and caught up as an observer (it fetches from controller.quorum.bootstrap.servers). "
        "Give its server.properties (--config, Kafka's --command-config: node.id, the metadata log "
        "directory's meta.properties for its directory id, and its controller listener), or --voter-id, "
        "--directory-id and --listener. The leader asks it for its kraft.version range, appends the new "
        "voter set and answers once it is committed; one change at a time. Exit 0 added, 1 the quorum "
        "refused (the reason is Kafka's error, e.g. DUPLICATE_VOTER, REQUEST_TIMED_OUT while another change "
        "or the new voter's catch-up is pending), 2 bad arguments or no node of the quorum answered.",
    )
    add_bootstrap(a)
    a.add_argument(
        "--config",
        "--command-config",
        dest="config",
        metavar="FILE",
        help="the new controller's server.properties (as kafka-metadata-quorum.sh add-controller --command-config)",
    )
    a.add_argument("--voter-id", "--controller-id", dest="voter_id", type=int, metavar="N", help="its node.id")
    a.add_argument(
        "--directory-id",
        "--controller-directory-id",
        dest="directory_id",
        type=_directory_id,
        metavar="ID",
        help="the directory.id of its metadata log directory's meta.properties",
    )
    a.add_argument(
        "--listener",
        action="append",
        type=_endpoint,
        default=[],
        metavar="NAME://HOST:PORT",
        help="its controller listener (repeatable)",
    )
    a.add_argument("--timeout", type=seconds, default=30.0, metavar="SECONDS", help="bound on the change (30)")
    a.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    a.set_defaults(func=run_add_voter)

    r = qsub.add_parser(
        "remove-voter",
        help="remove a voter from a dynamic quorum (RemoveRaftVoter), as kafka-metadata-quorum.sh remove-controller",
        description="Remove a voter, named by its id and its metadata log's directory id, from a dynamic "
        "quorum. The leader appends the voter set without it and answers once that is committed; a leader "
        "that removed itself then resigns and the others elect a leader. Exit 0 removed, 1 the quorum "
        "refused (e.g. VOTER_NOT_FOUND: no such voter, or the directory id is another one's), 2 bad "
        "arguments or no node of the quorum answered.",
    )
    add_bootstrap(r)
    r.add_argument(
        "--voter-id", "--controller-id", dest="voter_id", type=int, required=True, metavar="N", help="its node.id"
    )
    r.add_argument(
        "--directory-id",
        "--controller-directory-id",
        dest="directory_id",
        type=_directory_id,
        required=True,
        metavar="ID",
        help="its metadata log's directory id (quorum describe --replication shows it)",
    )
    r.add_argument("--timeout", type=seconds, default=30.0, metavar="SECONDS", help="bound on the change (30)")
    r.add_argument("--json", action="store_true", help="one JSON document (fields: docs/json.md)")
    r.set_defaults(func=run_remove_voter)


def _from_config(args: argparse.Namespace) -> str | None:
    """Fills the voter id, directory id and listener from ``--config`` (None), or says why not."""
    from kraftkit.controller.config import ControllerConfigError, read_controller_config
    from kraftkit.features.storage import MetaProperties, StorageError

    try:
        file = read_controller_config(args.config)
    except ControllerConfigError as e:
        return str(e)
    if args.voter_id is None:
        if file.node_id is None:
            return f"{args.config}: node.id is not set"
        args.voter_id = file.node_id
    if args.directory_id is None:
        props = f"{file.metadata_log_dir}/meta.properties"
        try:
            meta = MetaProperties.read(props)
        except (OSError, StorageError) as e:
            return f"cannot read the directory id: {e}"
        if not meta.directory_id:
            return f"{props}: no directory.id (format the directory with kraftkit storage format)"
        args.directory_id = _directory_id(meta.directory_id)
    if not args.listener:
        if file.listener is None or file.listen is None:
            return f"{args.config}: controller.listener.names is not set"
        host, port = file.listen
        args.listener = [(file.listener, host or "localhost", port)]
    return None


def _answer(command: str, args: argparse.Namespace, resp: dict, done: str) -> int:
    from kraftkit.protocol.messages import Errors
    from kraftkit.raft.quorum_state import uuid_to_kafka

    code = resp.get("ErrorCode", 0)
    name = Errors(code).name if code in Errors._value2member_map_ else str(code)
    body = {
        "voterId": args.voter_id,
        "directoryId": uuid_to_kafka(args.directory_id),
        "errorCode": code,
        "error": None if code == 0 else name,
        "errorMessage": resp.get("ErrorMessage"),
    }
    if command == ADD:
        body["endpoints"] = [f"{n}://{h}:{p}" for n, h, p in args.listener]
    if args.json:
        emit(body)
    if code:
        return fail(command, f"{args.bootstrap}: {name}: {resp.get('ErrorMessage') or 'refused'}", EXIT_PROBLEMS)
    if not args.json:
        print(done)
    return EXIT_OK


def _change(command: str, args: argparse.Namespace, send: Callable[[Any], dict], done: str) -> int:
    """Sends the change (``send(admin)``) to the quorum at ``--bootstrap-controller`` and reports
    the answer: 0 done, 1 refused, 2 no node answered."""
    from kraftkit.cli.quorum import _reachable
    from kraftkit.errors import KraftkitError
    from kraftkit.raft.admin import QuorumAdmin

    code = _reachable(args.bootstrap, args.timeout, command)
    if code is not None:
        return code
    try:
        with QuorumAdmin(args.bootstrap, timeout=args.timeout) as admin:
            resp = send(admin)
    except (KraftkitError, ValueError) as e:
        return fail(command, f"{args.bootstrap}: {e}", EXIT_USAGE)
    return _answer(command, args, resp, done)


def run_add_voter(args: argparse.Namespace) -> int:
    from kraftkit.raft.quorum_state import uuid_to_kafka

    if args.config is not None:
        why = _from_config(args)
        if why is not None:
            return fail(ADD, why, EXIT_USAGE)
    missing = [o for o, v in (("--voter-id", args.voter_id), ("--directory-id", args.directory_id)) if v is None]
    if not args.listener:
        missing.append("--listener")
    if missing:
        return fail(ADD, f"give --config FILE, or {', '.join(missing)}", EXIT_USAGE)
    eps = ", ".join(f"{n}://{h}:{p}" for n, h, p in args.listener)
    done = f"added voter {args.voter_id} (directory id {uuid_to_kafka(args.directory_id)}) with endpoints {eps}"
    timeout_ms = int(args.timeout * 1000)
    return _change(
        ADD, args, lambda a: a.add_voter(args.voter_id, args.directory_id, args.listener, timeout_ms=timeout_ms), done
    )


def run_remove_voter(args: argparse.Namespace) -> int:
    from kraftkit.raft.quorum_state import uuid_to_kafka

    if args.voter_id < 0:
        return fail(REMOVE, f"--voter-id {args.voter_id}: a node id is not negative", EXIT_USAGE)
    done = f"removed voter {args.voter_id} (directory id {uuid_to_kafka(args.directory_id)})"
    return _change(REMOVE, args, lambda a: a.remove_voter(args.voter_id, args.directory_id), done)
