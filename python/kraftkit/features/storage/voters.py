"""KIP-853 dynamic voters: ``--initial-controllers``, ``--controller-listener`` and the
``VotersRecord`` of the bootstrap snapshot."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraftkit.features.storage.errors import StorageInputError
from kraftkit.features.storage.properties import _parse_int
from kraftkit.features.storage.uuids import parse_uuid, uuid_to_str

DEFAULT_CONTROLLER_LISTENER = "CONTROLLER"


@dataclass(frozen=True)
class DynamicVoter:
    """One ``id@host:port:directoryId`` of ``--initial-controllers`` (``DynamicVoter``)."""

    node_id: int
    host: str
    port: int
    directory_id: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{self.directory_id}"

    def endpoint_host(self) -> str:
        """The host Kafka stores in the Voters record: ``InetSocketAddress.getHostString()``,
        which turns IP literals into Java's text form (``::1`` -> ``0:0:0:0:0:0:0:1``)."""
        try:
            ip = ipaddress.ip_address(self.host)
        except ValueError:
            return self.host
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:  # Java turns ::ffff:a.b.c.d into an Inet4Address
                return str(ip.ipv4_mapped)
            return ":".join(f"{int(g, 16):x}" for g in ip.exploded.split(":"))
        return str(ip)


def parse_voter(text: str) -> DynamicVoter:
    """``DynamicVoter.parse``, with Kafka's messages."""
    s = text.strip()
    at = s.find("@")
    if at < 0:
        raise StorageInputError(f"{text!r}: No @ found in dynamic voter string.")
    if at == 0:
        raise StorageInputError(f"{text!r}: Invalid @ at beginning of dynamic voter string.")
    try:
        node_id = _parse_int(s[:at])
    except ValueError:
        raise StorageInputError(f"{text!r}: Failed to parse node id in dynamic voter string.") from None
    if node_id < 0:
        raise StorageInputError(f"{text!r}: Invalid negative node id {node_id} in dynamic voter string.")
    s = s[at + 1 :]
    if not s:
        raise StorageInputError(f"{text!r}: No hostname found after node id.")
    if s.startswith("["):
        end = s.find("]")
        if end < 0:
            raise StorageInputError(f"{text!r}: Hostname began with left bracket, but no right bracket was found.")
        host, s = s[1:end], s[end + 1 :]
    else:
        colon = s.find(":")
        if colon < 0:
            raise StorageInputError(f"{text!r}: No colon following hostname could be found.")
        host, s = s[:colon], s[colon:]
    if not s.startswith(":"):
        raise StorageInputError(f"{text!r}: Port section must start with a colon.")
    s = s[1:]
    colon = s.find(":")
    if colon < 0:
        raise StorageInputError(f"{text!r}: No colon following port could be found.")
    try:
        port = _parse_int(s[:colon])
    except ValueError:
        raise StorageInputError(f"{text!r}: Failed to parse port in dynamic voter string.") from None
    if not 0 <= port <= 65535:
        raise StorageInputError(f"{text!r}: Invalid port {port} in dynamic voter string.")
    try:
        directory_id = uuid_to_str(parse_uuid(s[colon + 1 :]))
    except ValueError:
        raise StorageInputError(f"{text!r}: Failed to parse directory ID in dynamic voter string.") from None
    return DynamicVoter(node_id, host, port, directory_id)


def parse_voters(text: str) -> dict[int, DynamicVoter]:
    """``DynamicVoters.parse``: comma-separated voters, by node id (ascending)."""
    voters: dict[int, DynamicVoter] = {}
    for part in text.strip().split(","):
        if not part:
            continue
        v = parse_voter(part)
        if v.node_id in voters:
            raise StorageInputError(f"Node id {v.node_id} was specified more than once.")
        voters[v.node_id] = v
    if not voters:
        raise StorageInputError("No voters given.")
    return dict(sorted(voters.items()))


@dataclass(frozen=True)
class ControllerListener:
    """``NAME`` or ``NAME://HOST:PORT`` (``--controller-listener``)."""

    name: str
    host: str | None = None
    port: int | None = None


def parse_controller_listener(text: str) -> ControllerListener:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:://(\[[^\]]*\]|[^:/\[\]]*):([0-9]{1,20}))?", text.strip())
    if not m:
        raise StorageInputError(
            f"invalid controller listener {text!r} (expected NAME or NAME://HOST:PORT, "
            f"e.g. CONTROLLER://127.0.0.1:9093)"
        )
    name, host, port = m.group(1), m.group(2), m.group(3)
    if port is None:
        return ControllerListener(name.upper())
    p = int(port)
    if p > 65535:
        raise StorageInputError(f"invalid controller listener {text!r}: port {p} out of range")
    if host and host.startswith("["):
        host = host[1:-1]
    # Kafka: a listener without a host advertises "localhost" (StorageTool.createStandaloneDynamicVoters)
    return ControllerListener(name.upper(), host or "localhost", p)


def voters_record(voters: Iterable[DynamicVoter], listener_name: str) -> dict[str, Any]:
    """The ``VotersRecord`` ``DynamicVoters.toVoterSet`` makes: one endpoint per voter on the
    controller listener, kraft.version range 0-1, ascending node id."""
    return {
        "Version": 0,
        "Voters": [
            {
                "VoterId": v.node_id,
                "VoterDirectoryId": v.directory_id,
                "Endpoints": [{"Name": listener_name, "Host": v.endpoint_host(), "Port": v.port}],
                "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
            }
            for v in sorted(voters, key=lambda v: v.node_id)
        ],
    }
