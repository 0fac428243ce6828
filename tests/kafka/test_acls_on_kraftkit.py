"""ACLs made with Kafka 4.4.0's own ``kafka-acls`` through a real broker on a ``kraftkit controller
run`` quorum, and enforced by that broker.

The broker runs Kafka's ``StandardAuthorizer`` with a SASL_PLAINTEXT listener (PLAIN: its users are
in the broker's JAAS config, the controller plays no part in authenticating them) and
``super.users=User:admin``. A producer authenticated as ``User:alice`` is refused
(TOPIC_AUTHORIZATION_FAILED) on a topic without an ACL; ``kafka-acls --add`` (CreateAcls, forwarded
by the broker to the controller inside an Envelope) commits an AccessControlEntryRecord, the broker's
authorizer loads it from the metadata log (``--list``, which the broker answers from its own image,
shows it) and the producer succeeds; ``kafka-acls --remove`` (DeleteAcls) commits a
RemoveAccessControlEntryRecord of the same id and the producer is refused again."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit._core import decode_metadata_record
from kraftkit._kafka import ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY
from kraftkit.errors import KraftkitError
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from kraftkit.log import Segment
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.jars import HarnessError
from tests.harness.node import free_port, random_cluster_id
from tests.kafka.test_broker_on_kraftkit import BrokerOnly

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(400)]

V = jars.KAFKA_NEWEST
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule required"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
#: how kafka-acls prints the entry (AccessControlEntry.toString)
ALICE_WRITE = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
# the codes of Kafka's enums: ResourceType TOPIC, PatternType LITERAL, AclOperation WRITE, AclPermissionType ALLOW
TOPIC, LITERAL, WRITE, ALLOW = 2, 3, 4, 3


class AclBroker(BrokerOnly):
    """A broker with the StandardAuthorizer and a SASL_PLAINTEXT (PLAIN) listener beside PLAINTEXT."""

    sasl_port = 0

    def _ensure_ports(self) -> None:
        super()._ensure_ports()
        if not self.sasl_port:
            self.sasl_port = free_port()

    def properties(self) -> dict[str, object]:
        props = super().properties()
        b, s = self.broker_port, self.sasl_port
        users = " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items())
        props.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                f'{PLAIN} username="admin" password="{PASSWORDS["admin"]}" {users};',
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "allow.everyone.if.no.acl.found": "false",
        })  # fmt: skip
        return props


def client_props(user: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'{PLAIN} username="{user}" password="{PASSWORDS[user]}";'}


def acl_records(metadata_dir: Path) -> list[tuple[int, dict]]:
    """(api key, fields) of the ACL records of a controller's log ([] while its last batch is half written)."""
    out = []
    try:
        for seg in sorted(metadata_dir.glob("*.log")):
            for batch in Segment(seg).read_batches(verify_crc=True):
                if batch.is_control:
                    continue
                for r in batch.records():
                    key, _version, data = decode_metadata_record(r.value)
                    if key in (ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY):
                        out.append((key, data))
    except KraftkitError:
        return []
    return out


def test_kafka_acls_through_a_real_broker_on_kraftkit_and_the_broker_enforces_them(kafka_jars, tmp_path):
    jars.ensure_kafka(V)
    cid = random_cluster_id()
    port = free_port()
    voters = f"1@127.0.0.1:{port}"
    cdir = tmp_path / "c1"
    subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id", "1",
                    "-d", str(cdir), "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    broker = AclBroker(tmp_path / "broker", voters, cluster_id=cid, start_timeout=120, stop_timeout=60)
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text("".join(f"{k}={v}\n" for k, v in client_props("admin").items()))
    acl_command = tools.find_class(V, "org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand")
    procs: list[KraftkitProcess] = []

    def tails() -> str:
        return "\n".join([broker.log_tail(80), *(p.log_tail() for p in procs)])

    def acls(*args: str) -> str:
        bootstrap = f"127.0.0.1:{broker.sasl_port}"
        return tools.run_tool(V, acl_command, ["--bootstrap-server", bootstrap, "--command-config", admin_config,
                                               *args], timeout=120).stdout

    def listed_until(present: bool) -> str:
        """``--list --topic t`` until it shows alice's ACL (or no longer does): the broker's authorizer has it."""
        deadline = time.monotonic() + 30
        while True:
            out = acls("--list", "--topic", "t")
            if (ALICE_WRITE in out) == present:
                return out
            assert time.monotonic() < deadline, (out, tails())
            time.sleep(0.5)

    def alice_produces(value: bytes) -> list[dict]:
        props = {**client_props("alice"), "enable.idempotence": "false", "acks": "1", "max.block.ms": "30000"}
        return tools.produce(V, f"127.0.0.1:{broker.sasl_port}", [{"topic": "t", "props": props,
                                                                   "records": [{"value": value, "partition": 0}]}])

    def alice_refused() -> None:
        with pytest.raises(HarnessError) as e:
            alice_produces(b"refused")
        assert "TopicAuthorizationException: Not authorized to access topics: [t]" in str(e.value), str(e.value)

    try:
        procs.append(KraftkitProcess(["controller", "run"], ["--node-id", "1", "--voters", voters, "--log-dir",
                                                             str(cdir)], tmp_path / "c1.log"))
        broker.start()
        out = tools.run_tool(V, tools.topic_command_class(V), [
            "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}", "--command-config", admin_config, "--create",
            "--topic", "t", "--partitions", "1", "--replication-factor", "1"], timeout=120).stdout
        assert "Created topic t." in out, (out, tails())

        alice_refused()

        out = acls("--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "t")
        assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`" in out
        assert ALICE_WRITE in out, out
        listed = listed_until(True)
        assert listed.count("principal=") == 1, listed  # only alice's, nothing else on t
        (ack,) = alice_produces(b"allowed")
        assert (ack["topic"], ack["partition"], ack["offset"]) == ("t", 0, 0)

        acls("--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "t", "--force")
        listed_until(False)
        alice_refused()
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0], tails()
    assert " ERROR " not in broker.server_log.read_text(errors="replace"), tails()

    # the controller committed one AccessControlEntryRecord with alice's ACL, then its removal by id
    (added, entry), (removed, gone) = acl_records(cdir / CLUSTER_METADATA_DIR)
    assert (added, removed) == (ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY)
    assert {k: v for k, v in entry.items() if k != "Id"} == {
        "ResourceType": TOPIC, "ResourceName": "t", "PatternType": LITERAL, "Principal": "User:alice", "Host": "*",
        "Operation": WRITE, "PermissionType": ALLOW}
    assert gone == {"Id": entry["Id"]}
