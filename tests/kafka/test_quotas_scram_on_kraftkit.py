"""Client quotas and SCRAM users set with Kafka's own ``kafka-configs`` through a real Kafka 4.4.0 broker
on a quorum of three ``kraftkit controller run`` processes: the broker forwards AlterClientQuotas and
AlterUserScramCredentials to the active controller inside Envelopes, every controller's log holds the
ClientQuotaRecords and (Remove)UserScramCredentialRecords, ``--describe`` through the broker shows
what the broker read from the metadata log, and a client authenticates on the broker's SASL_PLAINTEXT
(SCRAM) listener with the credential just created, is refused with a wrong password, and is refused
once the credential is deleted."""

from __future__ import annotations

import hashlib
import hmac
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraftkit._kafka import CLIENT_QUOTA, REMOVE_USER_SCRAM_CREDENTIAL, USER_SCRAM_CREDENTIAL
from kraftkit.features.storage.format import CLUSTER_METADATA_DIR
from tests._procs import KraftkitProcess
from tests.harness import jars, tools
from tests.harness.node import free_port, random_cluster_id
from tests.kafka.test_broker_on_kraftkit import BrokerOnly
from tests.kafka.test_topics_on_kraftkit import topic_records

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(500)]

V = jars.KAFKA_NEWEST
KEYS = (CLIENT_QUOTA, USER_SCRAM_CREDENTIAL, REMOVE_USER_SCRAM_CREDENTIAL)


class ScramBroker(BrokerOnly):
    """A broker of the kraftkit quorum with a SASL_PLAINTEXT listener taking SCRAM-SHA-256 and -512."""

    sasl_port = 0

    def _ensure_ports(self) -> None:
        super()._ensure_ports()
        if not self.sasl_port:
            self.sasl_port = free_port()

    def properties(self) -> dict[str, object]:
        props = super().properties()
        b, s = self.broker_port, self.sasl_port
        jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        props.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": jaas,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": jaas,
        })
        return props


def client_config(path: Path, user: str, password: str) -> Path:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                    f'username="{user}" password="{password}";\n'
                    "request.timeout.ms=20000\ndefault.api.timeout.ms=30000\n", encoding="utf-8")
    return path


def test_kafka_configs_sets_quotas_and_scram_users_on_kraftkit_and_the_broker_authenticates_with_them(
        kafka_jars, tmp_path):
    jars.ensure_kafka(V)
    configs = tools.find_class(V, "org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand")
    cid = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    dirs = {i: tmp_path / f"c{i}" for i in ports}
    for i, d in dirs.items():
        subprocess.run([sys.executable, "-m", "kraftkit.cli.main", "storage", "format", "-t", cid, "--node-id",
                        str(i), "-d", str(d), "--no-initial-controllers"], check=True, capture_output=True, timeout=60)
    broker = ScramBroker(tmp_path / "broker", voters, cluster_id=cid, start_timeout=120, stop_timeout=60)
    procs: list[KraftkitProcess] = []

    def tails() -> str:
        return "\n".join([broker.log_tail(80), *(p.log_tail() for p in procs)])

    def kafka_configs(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        return tools.run_tool(V, configs, ["--bootstrap-server", broker.bootstrap, *args], check=check, timeout=120)

    def describe_until(args: list[str], want: str) -> str:
        """``kafka-configs --describe`` until its output has ``want`` (the broker may lag the commit)."""
        deadline = time.monotonic() + 30
        while True:
            out = kafka_configs("--describe", *args).stdout
            if want in out:
                return out
            assert time.monotonic() < deadline, (out, tails())
            time.sleep(0.5)

    def list_topics_as(user: str, password: str) -> subprocess.CompletedProcess:
        conf = client_config(tmp_path / f"{user}-{password}.properties", user, password)
        return tools.run_tool(V, tools.topic_command_class(V), [
            "--bootstrap-server", f"127.0.0.1:{broker.sasl_port}", "--command-config", str(conf), "--list"],
            check=False, timeout=120)

    try:
        for i, d in dirs.items():
            procs.append(KraftkitProcess(["controller", "run"], ["--node-id", str(i), "--voters", voters,
                                                                 "--log-dir", str(d)], tmp_path / f"c{i}.log"))
        broker.start()

        # client quotas: a client id, the default client id, a user; then one removed
        out = kafka_configs("--alter", "--add-config", "producer_byte_rate=1024", "--entity-type", "clients",
                            "--entity-name", "c1").stdout
        assert "Completed updating config for client c1." in out, out
        kafka_configs("--alter", "--add-config", "consumer_byte_rate=2048,request_percentage=50",
                      "--entity-type", "clients", "--entity-default")
        kafka_configs("--alter", "--add-config", "producer_byte_rate=4096,consumer_byte_rate=8192",
                      "--entity-type", "users", "--entity-name", "bob")
        kafka_configs("--alter", "--delete-config", "consumer_byte_rate", "--entity-type", "users", "--entity-name",
                      "bob")
        desc = describe_until(["--entity-type", "clients", "--entity-name", "c1"], "producer_byte_rate=1024")
        assert "Quota configs for client-id 'c1' are producer_byte_rate=1024.0" in desc, desc
        desc = describe_until(["--entity-type", "clients", "--entity-default"], "consumer_byte_rate")
        assert re.search(r"default client-id are (consumer_byte_rate=2048.0, request_percentage=50.0|"
                         r"request_percentage=50.0, consumer_byte_rate=2048.0)", desc), desc
        desc = describe_until(["--entity-type", "users", "--entity-name", "bob"], "producer_byte_rate=4096")
        assert "consumer_byte_rate" not in desc, desc

        # a value the controller refuses: the tool fails with the controller's message
        bad = kafka_configs("--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "clients",
                            "--entity-name", "c2", check=False)
        assert bad.returncode != 0 and "producer_byte_rate cannot be a fractional value." in bad.stdout + bad.stderr, \
            bad

        # a SCRAM user: the client authenticates with its password, not with another
        out = kafka_configs("--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=pw]",
                            "--entity-type", "users", "--entity-name", "alice").stdout
        assert "Completed updating config for user alice." in out, out
        desc = describe_until(["--entity-type", "users", "--entity-name", "alice"], "SCRAM-SHA-256=iterations=8192")
        assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in desc, desc
        ok = list_topics_as("alice", "pw")
        assert ok.returncode == 0, (ok.stdout, ok.stderr, tails())
        wrong = list_topics_as("alice", "not-pw")
        assert wrong.returncode != 0 and "invalid credentials" in wrong.stdout + wrong.stderr, wrong

        # too many iterations (the tool itself refuses too few), and a deletion of a credential that does
        # not exist: the controller's refusals
        many = kafka_configs("--alter", "--add-config", "SCRAM-SHA-512=[iterations=16385,password=pw]",
                             "--entity-type", "users", "--entity-name", "carol", check=False)
        assert many.returncode != 0 and "Too many iterations" in many.stdout + many.stderr, many
        gone = kafka_configs("--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                             "--entity-name", "alice", check=False)
        assert gone.returncode != 0 and "Attempt to delete a user credential that does not exist" in \
            gone.stdout + gone.stderr, gone

        # deleted: the client is refused
        kafka_configs("--alter", "--delete-config", "SCRAM-SHA-256", "--entity-type", "users", "--entity-name",
                      "alice")
        deadline = time.monotonic() + 30
        while True:
            after = list_topics_as("alice", "pw")
            if after.returncode != 0:
                break
            assert time.monotonic() < deadline, tails()
            time.sleep(0.5)
        assert "invalid credentials" in after.stdout + after.stderr, after

        deadline = time.monotonic() + 30
        while not all(any(k == REMOVE_USER_SCRAM_CREDENTIAL for k, _v, _d in topic_records(d / CLUSTER_METADATA_DIR,
                                                                                              KEYS))
                      for d in dirs.values()):
            assert time.monotonic() < deadline, tails()
            time.sleep(0.2)
    finally:
        broker.stop()
        codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], tails()
    assert " ERROR " not in broker.server_log.read_text(errors="replace"), tails()

    # every controller holds the same records: quotas set and removed, alice's credential and its removal
    seqs = [topic_records(d / CLUSTER_METADATA_DIR, KEYS) for d in dirs.values()]
    assert seqs[0] == seqs[1] == seqs[2]
    quotas = [({e["EntityType"]: e["EntityName"] for e in d["Entity"]}, d["Key"], d["Value"], d["Remove"])
              for k, _v, d in seqs[0] if k == CLIENT_QUOTA]
    assert sorted(quotas, key=repr) == sorted([
        ({"client-id": "c1"}, "producer_byte_rate", 1024.0, False),
        ({"client-id": None}, "consumer_byte_rate", 2048.0, False),
        ({"client-id": None}, "request_percentage", 50.0, False),
        ({"user": "bob"}, "producer_byte_rate", 4096.0, False),
        ({"user": "bob"}, "consumer_byte_rate", 8192.0, False),
        ({"user": "bob"}, "consumer_byte_rate", 0.0, True),
    ], key=repr)
    scram = [(k, d) for k, _v, d in seqs[0] if k != CLIENT_QUOTA]
    assert [(k, d["Name"], d["Mechanism"]) for k, d in scram] == [(USER_SCRAM_CREDENTIAL, "alice", 1),
                                                                  (REMOVE_USER_SCRAM_CREDENTIAL, "alice", 1)]
    cred = scram[0][1]
    # the keys are RFC 5802's of the password "pw" with the salt and iterations the tool chose
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", cred["Salt"], cred["Iterations"])
    assert cred["Iterations"] == 8192
    assert cred["StoredKey"] == hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    assert cred["ServerKey"] == hmac.digest(salted, b"Server Key", "sha256")
    logs = "".join((tmp_path / f"c{i}.log").read_text(errors="replace") for i in ports)
    assert "AlterClientQuotas refused" not in logs and "AlterUserScramCredentials refused" not in logs
