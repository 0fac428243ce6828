"""The metadata image as kafka-metadata-shell shows it: a tree of directories and leaves.

The layout mirrors Kafka's ``org.apache.kafka.image.node`` (the shell's ``/image``):

    /provenance
    /features/{metadataVersion, zkMigrationState, finalized_<feature>}
    /cluster/brokers/<id>                /cluster/controllers/<id>
    /topics/byName/<topic>/{name, id, <partition>}      /topics/byId/<topic id>/...
    /configs/<TYPE>[:<name>]/<key>       (TYPE alone for the default resource, e.g. BROKER)
    /clientQuotas/<clientId(..)_ip(..)_user(..)>/<key>
    /producerIds/nextProducerId
    /acls/byId/<acl id>
    /scram/<mechanism>/<user>
    /delegationToken/<token id>

A leading ``/image`` is accepted, and ``/topics/<topic>`` is short for ``/topics/byName/<topic>``.
Leaves hold JSON values; directories are dicts.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

from kraftkit.errors import KraftkitError
from kraftkit.metadata.image import (
    CONFIG_TYPES,
    SCRAM_MECHANISMS,
    ZK_MIGRATION_STATES,
    MetadataImage,
    _config_node,
    _entity_node,
    _jsonable,
    _quota_sort,
    mv_name,
    uuid_text,
)


class ShellPathError(KraftkitError):
    """A path that is not in the tree."""


class Leaf(dict[str, Any]):
    """A leaf whose value is a JSON object (a broker, a partition...), not a directory."""


def _leaf(v: Any) -> Leaf:
    return Leaf(_jsonable(v))


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def time_text(ms: int) -> str | None:
    """A record timestamp (ms since the epoch) as ISO 8601 UTC; None for none (negative, as
    Kafka's -1). A timestamp past what a date can hold (after year 9999: any long can be
    written) is shown as the number, as Kafka's tools print the long, and said to be so."""
    if ms < 0:
        return None
    try:
        return (_EPOCH + datetime.timedelta(milliseconds=ms)).isoformat()
    except OverflowError:
        return f"{ms} (out of range for a date: later than year 9999)"


def tree(image: MetadataImage) -> dict[str, Any]:
    """The whole tree as nested dicts (directories) and JSON values (leaves)."""
    prov = image.provenance
    when = time_text(prov.timestamp)
    features: dict[str, Any] = {
        "metadataVersion": mv_name(image.metadata_version),
        "zkMigrationState": ZK_MIGRATION_STATES.get(image.zk_migration_state, str(image.zk_migration_state)),
    }
    for name, level in sorted(image.features.items()):
        features[f"finalized_{name}"] = level

    def topic_node(t) -> dict[str, Any]:
        node: dict[str, Any] = {"name": t.name, "id": uuid_text(t.id)}
        for pid, p in sorted(t.partitions.items()):
            node[str(pid)] = _leaf(p)
        return node

    topics = sorted(image.topics.values(), key=lambda t: t.name)
    scram: dict[str, dict[str, Any]] = {}
    for (mech, user), cred in sorted(image.scram.items()):
        scram.setdefault(SCRAM_MECHANISMS.get(mech, str(mech)), {})[user] = _leaf(cred)
    return {
        "provenance": Leaf({"offset": prov.offset, "epoch": prov.epoch, "timestamp": prov.timestamp, "time": when}),
        "features": features,
        "cluster": {
            "brokers": {str(k): _leaf(v) for k, v in sorted(image.brokers.items())},
            "controllers": {str(k): _leaf(v) for k, v in sorted(image.controllers.items())},
        },
        "topics": {
            "byName": {t.name: topic_node(t) for t in topics},
            "byId": {uuid_text(t.id): topic_node(t) for t in sorted(topics, key=lambda t: uuid_text(t.id))},
        },
        "configs": {_config_node(k): dict(sorted(v.items())) for k, v in sorted(image.configs.items())},
        "clientQuotas": {
            _entity_node(k): dict(sorted(v.items())) for k, v in sorted(image.client_quotas.items(), key=_quota_sort)
        },
        "producerIds": {"nextProducerId": image.next_producer_id},
        "acls": {
            "byId": {uuid_text(k): _leaf(v) for k, v in sorted(image.acls.items(), key=lambda kv: uuid_text(kv[0]))}
        },
        "scram": scram,
        "delegationToken": {k: _leaf(v) for k, v in sorted(image.delegation_tokens.items())},
    }


def lookup(image: MetadataImage, path: str) -> tuple[str, Any]:
    """(normalized path, node) for a shell path."""
    parts = [p for p in path.split("/") if p and p != "."]
    if parts and parts[0] == "image":
        parts = parts[1:]
    if len(parts) >= 2 and parts[0] == "topics" and parts[1] not in ("byName", "byId"):
        parts.insert(1, "byName")
    node: Any = tree(image)
    walked: list[str] = []
    for part in parts:
        if not isinstance(node, dict) or isinstance(node, Leaf) or part not in node:
            raise ShellPathError(f"/{'/'.join([*walked, part])}: no such node")
        node = node[part]
        walked.append(part)
    return "/" + "/".join(walked), node


def render(image: MetadataImage, path: str = "/", *, as_json: bool = False) -> str:
    """``ls`` of a directory (child names, one a line) or ``cat`` of a leaf (JSON); with
    ``as_json`` the node as JSON (a directory's whole subtree)."""
    _, node = lookup(image, path)
    if as_json:
        return json.dumps(node, indent=2) + "\n"
    if isinstance(node, dict) and not isinstance(node, Leaf):
        return "".join(f"{k}\n" for k in node)
    return json.dumps(node, indent=2) + "\n"


__all__ = ["ShellPathError", "lookup", "render", "time_text", "tree", "CONFIG_TYPES"]
