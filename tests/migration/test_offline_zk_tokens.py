"""Delegation tokens through ``kraftkit migrate from-zookeeper``, against real Kafka: a real
ZooKeeper (3.8.4, from the Kafka 3.9.2 jars) and a Kafka 3.9.2 ZooKeeper-mode broker with a
SASL_PLAINTEXT SCRAM listener and ``delegation.token.secret.key``; a SCRAM user made with
kafka-configs creates a token with Kafka's own ``kafka-delegation-tokens --create`` (renewer
``User:bob``), which authenticates a client (SCRAM with ``tokenauth=true``). ZooKeeper holds the
token without its HMAC (Kafka derives it from the token id and the secret key; the test computes it
too). The broker stopped, the cluster is converted; a Kafka 4.3.1 KRaft controller and broker (the
same secret key) booted from the written directories list the same token with
``kafka-delegation-tokens --describe`` (id, HMAC, owner, requester, renewers and dates as Kafka
3.9.2 listed them), and a client still authenticates with the token's id and HMAC, and not with
another HMAC."""

from __future__ import annotations

import base64
import hashlib
import hmac as hmac_lib
import json
import re
import time
from pathlib import Path

import pytest

from kraftkit.metadata.image import load_snapshot
from kraftkit.migration import zk_reader
from tests.harness import jars, tools
from tests.harness.node import free_port

from .test_offline_zk import KRaftNode, ZkBroker, ZooKeeper, kafka_configs, kraftkit

pytestmark = [pytest.mark.kafka, pytest.mark.zookeeper, pytest.mark.timeout(900)]

CONTROLLER_ID = 3000
BROKER = 1
SECRET = "kraftkit-token-secret-0123456789"
USER, PASSWORD = "alice", "alice-pw"
JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


class TokenZkBroker(ZkBroker):
    """A ZooKeeper-mode broker with a SASL_PLAINTEXT (SCRAM-SHA-256) listener and delegation tokens enabled."""

    sasl_port = 0

    def launch(self) -> TokenZkBroker:
        if not self.sasl_port:
            self.sasl_port = free_port()
        super().launch()
        return self

    def properties(self) -> dict[str, object]:
        props = super().properties()
        b, s = self.broker_port, self.sasl_port
        props.update(
            {
                "listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b},SASL_PLAINTEXT://127.0.0.1:{s}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{JAAS};",
                "delegation.token.secret.key": SECRET,
                "super.users": f"User:ANONYMOUS;User:{USER}",
                "default.replication.factor": 1,
                "offsets.topic.replication.factor": 1,
            }
        )
        return props


class TokenKRaftNode(KRaftNode):
    """A Kafka 4.3.1 KRaft node on a converted directory, with the same secret key."""

    def properties(self) -> dict[str, object]:
        props = super().properties()
        props.update({"delegation.token.secret.key": SECRET, "super.users": f"User:ANONYMOUS;User:{USER}"})
        if self.broker:
            props["offsets.topic.replication.factor"] = 1
        return props


def client_config(path: Path, username: str, password: str, *, token: bool = False) -> Path:
    extra = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        f'sasl.jaas.config={JAAS} username="{username}" password="{password}"{extra};\n'
        "request.timeout.ms=20000\ndefault.api.timeout.ms=30000\n",
        encoding="utf-8",
    )
    return path


def delegation_tokens(version: str, bootstrap: str, config: Path, *args: str) -> list[tuple[str, ...]]:
    """Runs kafka-delegation-tokens; the token rows it prints: (token id, HMAC, owner, requester,
    renewers, issue date, expiry date, max date)."""
    cls = tools.find_class(
        version, "org.apache.kafka.tools.DelegationTokenCommand", "kafka.admin.DelegationTokenCommand"
    )
    out = tools.run_tool(
        version, cls, ["--bootstrap-server", bootstrap, "--command-config", str(config), *args], timeout=120
    ).stdout
    rows = [tuple(line.split()) for line in out.splitlines() if line.strip() and not line.startswith("TOKENID")]
    return [r for r in rows if len(r) == 8 and r[2].startswith("User:")]


def alices_token(broker: TokenZkBroker, workdir: Path) -> tuple[str, Path, list[tuple[str, ...]]]:
    """On ``broker``: the SCRAM user alice made with kafka-configs, then, once she authenticates, a
    token created as her with kafka-delegation-tokens (renewer ``User:bob``, no max lifetime). The
    SASL listener's address, alice's client config, the token rows the command printed."""
    kafka_configs(
        jars.KAFKA_3,
        broker.bootstrap,
        "--alter",
        "--add-config",
        f"SCRAM-SHA-256=[iterations=8192,password={PASSWORD}]",
        "--entity-type",
        "users",
        "--entity-name",
        USER,
    )
    sasl = f"127.0.0.1:{broker.sasl_port}"
    alice = client_config(workdir / "alice.properties", USER, PASSWORD)
    deadline = time.monotonic() + 60  # (the broker takes the new credential from ZooKeeper's notification)
    while not token_login(jars.KAFKA_3, sasl, alice):
        assert time.monotonic() < deadline, "alice's SCRAM credential never worked"
        time.sleep(1)
    created = delegation_tokens(
        jars.KAFKA_3, sasl, alice, "--create", "--max-life-time-period", "-1", "--renewer-principal", "User:bob"
    )
    return sasl, alice, created


def token_login(version: str, bootstrap: str, config: Path) -> bool:
    """A client authenticated with ``config`` lists the topics."""
    got = tools.run_tool(
        version,
        tools.topic_command_class(version),
        ["--bootstrap-server", bootstrap, "--command-config", str(config), "--list"],
        check=False,
        timeout=120,
    )
    if got.returncode == 0:
        return True
    assert "Authentication failed" in got.stdout + got.stderr or "invalid credentials" in got.stdout + got.stderr, (
        got.stdout[-2000:],
        got.stderr[-2000:],
    )
    return False


def test_a_delegation_token_converted_offline_is_listed_and_authenticates_on_kafka_4(kafka_jars, tmp_path):
    zk = ZooKeeper(tmp_path / "zk")
    old = TokenZkBroker(tmp_path / "broker", BROKER, zk.connect)
    new: list[KRaftNode] = []
    try:
        zk.start()
        old.start()
        sasl, alice, created = alices_token(old, tmp_path)
        assert len(created) == 1, created
        token_id, hmac = created[0][0], created[0][1]
        # (Kafka's DelegationTokenManager.createHmac: HmacSHA512 of the token id under the secret key;
        # nothing of it is stored)
        derived = hmac_lib.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
        assert base64.b64encode(derived).decode() == hmac
        before = delegation_tokens(jars.KAFKA_3, sasl, alice, "--describe", "--owner-principal", "User:alice")
        assert before == created and before[0][2:5] == ("User:alice", "User:alice", "[User:bob]"), before
        assert token_login(jars.KAFKA_3, sasl, client_config(tmp_path / "token.properties", token_id, hmac, token=True))

        # ZooKeeper holds the token without its HMAC; kraftkit's reader reads it
        live = zk_reader.KazooSource(zk.connect)
        try:
            raw, _version = live.get(f"/delegation_token/tokens/{token_id}") or (b"", 0)
            cluster = zk_reader.read_cluster(live)
        finally:
            live.close()
        znode = json.loads(raw)
        assert znode["tokenId"] == token_id and znode["owner"] == "User%3Aalice" and hmac not in raw.decode()
        (tok,) = cluster.delegation_tokens
        assert (tok.token_id, tok.owner, tok.requester, tok.renewers) == (
            token_id,
            "User:alice",
            "User:alice",
            ["User:bob"],
        )
        assert tok.expiry_timestamp == znode["expiryTimestamp"] and tok.max_timestamp == znode["maxTimestamp"]
        old.stop()

        cport = free_port()
        voters = f"{CONTROLLER_ID}@127.0.0.1:{cport}"
        cdir = tmp_path / "controller" / "data"
        argv = [
            "migrate",
            "from-zookeeper",
            "--zookeeper",
            zk.connect,
            "--controller-dir",
            f"{CONTROLLER_ID}={cdir}",
            "--voters",
            voters,
            "--inter-broker-protocol-version",
            "3.9",
            "--broker-dir",
            old.log_dirs[0],
        ]
        dry = kraftkit(*argv, "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout)["delegationTokens"] == 1
        done = kraftkit(*argv)
        assert done.returncode == 0, done.stderr
        assert "1 delegation token(s)" in done.stdout, done.stdout
        (snap,) = (cdir / "__cluster_metadata-0").glob("*.checkpoint")
        assert load_snapshot(snap).delegation_tokens == {
            token_id: {
                "Owner": "User:alice",
                "Requester": "User:alice",
                "Renewers": ["User:bob"],
                "IssueTimestamp": tok.issue_timestamp,
                "MaxTimestamp": tok.max_timestamp,
                "ExpirationTimestamp": tok.expiry_timestamp,
                "TokenId": token_id,
            }
        }
        zk.stop()  # KRaft needs no ZooKeeper

        ctl = TokenKRaftNode(tmp_path / "controller", CONTROLLER_ID, broker=False, voters=voters, controller_port=cport)
        new.append(ctl)
        broker = TokenKRaftNode(old.workdir, BROKER, broker=True, voters=voters, controller_port=cport)
        new.append(broker)
        ctl.launch()
        broker.launch()
        ctl.wait_ready()
        broker.wait_ready()
        ksasl = f"127.0.0.1:{broker.sasl_port}"
        deadline = time.monotonic() + 60
        while True:
            after = delegation_tokens(jars.KAFKA_4, ksasl, alice, "--describe", "--owner-principal", "User:alice")
            if after or time.monotonic() > deadline:
                break
            time.sleep(1)
        # the same token: its id, the HMAC Kafka 4.3.1 derived from the secret key, owner, requester,
        # renewers and dates
        assert after == before, (after, before)
        assert token_login(
            jars.KAFKA_4, ksasl, client_config(tmp_path / "token4.properties", token_id, hmac, token=True)
        )
        wrong = re.sub(r"[A-Za-z]", lambda m: "A" if m.group() != "A" else "B", hmac, count=1)
        assert not token_login(
            jars.KAFKA_4, ksasl, client_config(tmp_path / "wrong.properties", token_id, wrong, token=True)
        )
    finally:
        for n in reversed(new):
            n.stop()
        old.stop()
        zk.stop()
