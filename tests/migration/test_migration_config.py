"""``kraftkit controller run --config`` with Kafka 3.9's ZooKeeper migration keys: what is read
(``zookeeper.connect`` with a chroot, the session and connection timeouts, the batch size, with
Kafka's defaults) and what is refused, each refusal naming the file, the key=value and the reason;
``controller run`` exits 2 with that message, and with a bootstrap metadata.version that cannot
migrate (Kafka 3.9: metadata transactions are needed)."""

from __future__ import annotations

import pytest

from kraftkit.controller.config import ControllerConfigError, read_controller_config
from kraftkit.features.storage.format import format_storage
from tests.controller.test_config import CONTROLLER, write
from tests.raft._cluster import CLUSTER_ID, free_ports
from tests.raft.test_quorum_cli import run_cli

pytestmark = pytest.mark.timeout(120)


def test_the_migration_keys_are_read_with_kafkas_defaults(tmp_path):
    cfg = read_controller_config(write(tmp_path, CONTROLLER))
    assert cfg.zk_migration is None  # off by default
    cfg = read_controller_config(write(tmp_path, CONTROLLER + "zookeeper.metadata.migration.enable=false\n"
                                       "zookeeper.connect=bad::\n"))
    assert cfg.zk_migration is None  # zookeeper.connect is not read then
    cfg = read_controller_config(write(tmp_path, CONTROLLER + "zookeeper.metadata.migration.enable= TRUE \n"
                                       "zookeeper.connect=zk1:2181, zk2:2182,zk3/kafka/prod\n"))
    m = cfg.zk_migration
    assert m is not None
    assert (m.servers, m.chroot) == ((("zk1", 2181), ("zk2", 2182), ("zk3", 2181)), "/kafka/prod")
    assert (m.session_timeout_ms, m.connection_timeout_ms, m.batch_size) == (18000, 18000, 200)
    assert "zookeeper.connect" not in cfg.ignored
    cfg = read_controller_config(write(tmp_path, CONTROLLER + "zookeeper.metadata.migration.enable=true\n"
                                       "zookeeper.connect=127.0.0.1:2181/\nzookeeper.session.timeout.ms=6000\n"
                                       "zookeeper.connection.timeout.ms=3000\n"
                                       "zookeeper.metadata.migration.min.batch.size=50\n"))
    m = cfg.zk_migration
    assert m is not None
    assert (m.chroot, m.session_timeout_ms, m.connection_timeout_ms, m.batch_size) == ("", 6000, 3000, 50)


@pytest.mark.parametrize(("lines", "message"), [
    ("zookeeper.metadata.migration.enable=yes\n",
     "zookeeper.metadata.migration.enable=yes: expected value to be either true or false"),
    ("zookeeper.metadata.migration.enable=true\n",
     "zookeeper.connect: not set: zookeeper.metadata.migration.enable=true needs the ZooKeeper"),
    ("zookeeper.metadata.migration.enable=true\nzookeeper.connect=zk:2181/kafka/\n",
     "zookeeper.connect=zk:2181/kafka/: chroot '/kafka/' ends with '/'"),
    ("zookeeper.metadata.migration.enable=true\nzookeeper.connect=zk:2181/a//b\n",
     "zookeeper.connect=zk:2181/a//b: chroot '/a//b': an empty, '.' or '..' path element"),
    ("zookeeper.metadata.migration.enable=true\nzookeeper.connect=zk:99999\n",
     "zookeeper.connect=zk:99999: bad server 'zk:99999': expected HOST:PORT"),
    ("zookeeper.metadata.migration.enable=true\nzookeeper.connect=zk:2181,\n",
     "zookeeper.connect=zk:2181,: bad server '': expected HOST:PORT"),
    ("zookeeper.metadata.migration.enable=true\nzookeeper.connect=zk:2181\nzookeeper.session.timeout.ms=0\n",
     "zookeeper.session.timeout.ms=0: 0 is outside 1..2147483647"),
    ("zookeeper.metadata.migration.enable=true\nzookeeper.connect=zk:2181\nzookeeper.set.acl=true\n",
     "zookeeper.set.acl=true: kraftkit's migration reaches ZooKeeper over plain TCP without znode ACLs only"),
])
def test_bad_migration_settings_are_refused_naming_the_key_the_value_and_the_reason(tmp_path, lines, message):
    path = write(tmp_path, CONTROLLER + lines)
    with pytest.raises(ControllerConfigError) as e:
        read_controller_config(path)
    assert str(e.value).startswith(f"{path}: ")
    assert message in str(e.value)


def test_a_dynamic_quorum_cannot_migrate(tmp_path):
    text = CONTROLLER.replace("controller.quorum.voters=1@127.0.0.1:19093",
                              "controller.quorum.bootstrap.servers=127.0.0.1:19093")
    with pytest.raises(ControllerConfigError, match="needs a static quorum"):
        read_controller_config(write(tmp_path, text + "zookeeper.metadata.migration.enable=true\n"
                                     "zookeeper.connect=zk:2181\n"))


def test_controller_run_refuses_a_bootstrap_that_cannot_migrate_and_a_bad_setting(tmp_path, capsys):
    (port,) = free_ports(1)
    d = tmp_path / "meta"
    format_storage([d], cluster_id=CLUSTER_ID, node_id=1, no_initial_controllers=True, release_version="3.5")
    text = CONTROLLER.replace("19093", str(port)) + f"metadata.log.dir={d}\n"
    path = write(tmp_path, text + "zookeeper.metadata.migration.enable=true\nzookeeper.connect=127.0.0.1:1\n")
    code, err = run_cli(["controller", "run", "--config", str(path)], capsys)
    assert code == 2, err
    assert "does not support ZK migrations (metadata transactions, 3.6-IV1 and later, are needed)" in err
    path = write(tmp_path, text + "zookeeper.metadata.migration.enable=true\n")
    code, err = run_cli(["controller", "run", "--config", str(path)], capsys)
    assert code == 2 and f"{path}: zookeeper.connect: not set" in err, err


def test_migrate_status_without_a_zookeeper_says_so_and_exits_2(capsys):
    (port,) = free_ports(1)  # (nothing listens there)
    code, err = run_cli(["migrate", "status", "--zookeeper", f"127.0.0.1:{port}", "--zookeeper-timeout", "2"], capsys)
    assert code == 2, err
    assert f"127.0.0.1:{port}: no ZooKeeper answered within 2 s" in err


def test_migrate_rollback_without_a_zookeeper_or_with_a_bad_controller_address_exits_2(capsys):
    (port,) = free_ports(1)  # (nothing listens there)
    code, err = run_cli(["migrate", "rollback", "--zookeeper", f"127.0.0.1:{port}", "--zookeeper-timeout", "2"],
                        capsys)
    assert code == 2, err
    assert f"kraftkit migrate rollback: 127.0.0.1:{port}: no ZooKeeper answered within 2 s" in err
    code, err = run_cli(["migrate", "rollback", "--zookeeper", f"127.0.0.1:{port}", "--bootstrap-controller",
                         "no-port-here"], capsys)
    assert code == 2 and "--bootstrap-controller no-port-here: " in err, err


def test_migrate_rollback_goes_on_when_the_named_controller_is_down(capsys):
    # a stopped controller (nothing listens) does not hold the rollback back: ZooKeeper is asked next
    zk_port, controller_port = free_ports(2)
    code, err = run_cli(["migrate", "rollback", "--zookeeper", f"127.0.0.1:{zk_port}", "--zookeeper-timeout", "2",
                         "--bootstrap-controller", f"127.0.0.1:{controller_port}"], capsys)
    assert code == 2 and "no ZooKeeper answered" in err and "still answers" not in err, err
