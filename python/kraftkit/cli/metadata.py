"""``kraftkit metadata``: decoded KRaft metadata records and the metadata image.

* ``dump PATH...``: every record of metadata log segments and snapshots, decoded.
* ``image PATH``: the metadata image (what kafka-metadata-shell shows) after replaying a
  snapshot and the log after it.
"""

from __future__ import annotations

import argparse
import json
import sys

from kraftkit.cli.main import add_max_batch_bytes
from kraftkit.errors import KraftkitError
from kraftkit.log.control import control_type_name

HELP = "KRaft metadata records and the metadata image"



def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metadata", help=HELP, description=HELP + ".")
    msub = p.add_subparsers(dest="metadata_command", metavar="SUBCOMMAND", required=True)
    d = msub.add_parser("dump", help="print every metadata record of log segments and snapshots",
                        description="Print every record of __cluster_metadata log segments and snapshots (files, "
                                    "partition directories or log directories): offset, record type, version and "
                                    "fields. Exits 1 on corrupt data, 2 on unreadable input.")
    d.add_argument("paths", nargs="+", metavar="PATH", help=".log segments, .checkpoint snapshots or directories")
    d.add_argument("--json", action="store_true",
                   help='JSON lines: {"offset":N,"type":"TOPIC_RECORD","version":0,"data":{...}} per record')
    add_max_batch_bytes(d)
    d.set_defaults(func=run_dump)

    i = msub.add_parser("image", help="the metadata image: ls/cat of the kafka-metadata-shell tree",
                        description="Replay the newest snapshot at or below --at and the log after it into a metadata "
                                    "image, then list a directory of its tree (/features, /cluster/brokers, "
                                    "/topics/byName/<topic>/<partition>, /configs, ...) or print a leaf.")
    i.add_argument("path", metavar="PATH", help="a log directory, __cluster_metadata-0, a snapshot or a segment")
    i.add_argument("--at", type=int, default=None, metavar="OFFSET",
                   help="replay only records below this offset (exclusive end offset, as a snapshot id's)")
    i.add_argument("--path", dest="node", default="/", metavar="NODE", help="node of the tree to show (default /)")
    i.add_argument("--json", action="store_true", help="print the node (a whole subtree for directories) as JSON")
    add_max_batch_bytes(i)
    i.set_defaults(func=run_image)


def _err(msg: str) -> None:
    print(f"kraftkit metadata: {msg}", file=sys.stderr)


def run_dump(args: argparse.Namespace) -> int:
    from kraftkit.metadata.source import MetadataSourceError, batches, expand
    from kraftkit.metadata.records import decode_metadata_batch

    try:
        files = expand(args.paths)
    except MetadataSourceError as e:
        _err(str(e))
        return 2
    out = sys.stdout
    status = 0
    for f in files:
        if args.json:
            out.write(json.dumps({"type": "file", "file": str(f.path), "kind": f.kind}) + "\n")
        else:
            out.write(f"Dumping {f.path}\n")
        n = 0
        try:
            for batch in batches(f.path):
                lines = []
                for offset, api_key, ver, text in decode_metadata_batch(batch, json=True):
                    if api_key is None:
                        name = control_type_name(ver, unknown=f"CONTROL_{ver}")
                        body = text if text is not None else "null"
                        cver = json.loads(body).get("version", 0) if text is not None else 0
                        if args.json:
                            lines.append(f'{{"offset":{offset},"control":true,"type":"{name}","version":{cver},"data":{body}}}')
                        else:
                            lines.append(f"{offset}  {name} v{cver}  {body}")
                    elif args.json:
                        lines.append(f'{{"offset":{offset},{text[1:]}')
                    else:
                        # text is {"type":"X","version":N,"data":{...}}
                        cut = text.index(',"data":')
                        name = text[9:text.index('"', 9)]
                        lines.append(f"{offset}  {name} v{ver}  {text[cut + 8:-1]}")
                n += len(lines)
                out.write("\n".join(lines) + "\n" if lines else "")
        except KraftkitError as e:
            out.flush()
            _err(str(e) if str(f.path) in str(e) else f"{f.path}: {e}")
            status = max(status, 1)
        except BrokenPipeError:
            raise
        except OSError as e:
            out.flush()
            _err(f"{f.path}: {e}")
            status = max(status, 2)
        if args.json:
            out.write(json.dumps({"type": "summary", "file": str(f.path), "records": n}) + "\n")
    out.flush()
    return status


def run_image(args: argparse.Namespace) -> int:
    from kraftkit.metadata.image import load_image
    from kraftkit.metadata.shell import ShellPathError, render
    from kraftkit.metadata.source import MetadataSourceError

    try:
        image = load_image(args.path, at=args.at)
    except MetadataSourceError as e:
        _err(str(e))
        return 2
    except OSError as e:
        _err(str(e))
        return 2
    except KraftkitError as e:
        _err(str(e))
        return 1
    try:
        text = render(image, args.node, as_json=args.json)
    except ShellPathError as e:
        _err(str(e))
        return 2
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0
