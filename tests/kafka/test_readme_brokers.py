"""The README's "Real Kafka brokers on a kraftkit quorum" block, run as a newcomer would run it: the
shell block is taken from README.md as it is written and run by ``bash -e``, with only its fixed
ports (19091-19093, 9092) and its ``/tmp/kq`` directory swapped for free ones. ``kraftkit`` is the
installed command; Kafka's distribution is stood in for by a ``kafka_2.13-4.4.0/bin`` whose scripts
run the classes Kafka's own scripts run (``kafka-run-class.sh`` does the same: ``java -cp libs/*
CLASS``), from the Kafka 4.4.0 jars of Maven Central.

What the block's commands print is then checked: the topic is created, the consumer reads back what
the console producer wrote, ``quorum describe`` lists broker 101 as an observer, and the partition in
the controllers' metadata image is led by it."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests._procs import readme_block, stop_group
from tests.harness import jars, tools
from tests.harness.node import SERVER_JVM_OPTS, free_port, log4j_files, tool_log4j_files

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(420)]

SECTION = "### Real Kafka brokers on a kraftkit quorum"
V = jars.KAFKA_NEWEST
HOME = f"kafka_2.13-{V}"




def fake_distribution(where: Path) -> Path:
    """``HOME/bin/*.sh`` running the same main classes as Kafka's scripts, on the Maven jars."""
    java = jars.require_java()
    cp = jars.classpath(V)
    tool_logs = " ".join(map(shlex.quote, tool_log4j_files(where / "tool-config")))
    opts = " ".join(tools.TOOL_JVM_OPTS)
    classes = {
        "kafka-storage.sh": tools.find_class(V, "org.apache.kafka.tools.StorageTool", "kafka.tools.StorageTool"),
        "kafka-topics.sh": tools.topic_command_class(V),
        "kafka-console-producer.sh": tools.find_class(V, "org.apache.kafka.tools.ConsoleProducer",
                                                      "kafka.tools.ConsoleProducer"),
        "kafka-console-consumer.sh": tools.find_class(V, "org.apache.kafka.tools.consumer.ConsoleConsumer",
                                                      "kafka.tools.ConsoleConsumer"),
    }
    bin_dir = where / HOME / "bin"
    bin_dir.mkdir(parents=True)
    for name, cls in classes.items():
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {java} {opts} {tool_logs} -cp "{cp}" {cls} "$@"\n')
    # the server, -daemon as Kafka's script takes it: in the background, its output to a log
    server_log = where / "broker-server.log"
    server_logs = " ".join(map(shlex.quote, log4j_files(where, server_log)))
    (bin_dir / "kafka-server-start.sh").write_text(
        "#!/bin/sh\n"
        f'run() {{ exec {java} {" ".join(SERVER_JVM_OPTS)} {server_logs} -cp "{cp}" kafka.Kafka "$@"; }}\n'
        'if [ "$1" = -daemon ]; then\n'
        f'  shift; run "$@" > {where / "broker-stdout.log"} 2>&1 < /dev/null &\n'
        'else run "$@"; fi\n')
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    return server_log


def test_the_readme_runs_a_real_broker_on_a_kraftkit_quorum(kafka_jars, tmp_path):
    jars.ensure_kafka(V)
    block = readme_block(SECTION)
    ports = {old: str(free_port()) for old in ("19091", "19092", "19093", "9092")}
    for old in ports:
        assert re.search(rf"\b{old}\b", block), f"the README block no longer uses port {old}"
    for old, new in ports.items():
        block = re.sub(rf"\b{old}\b", new, block)
    assert "/tmp/kq" in block
    kq = tmp_path / "kq"
    block = block.replace("/tmp/kq", str(kq))
    server_log = fake_distribution(tmp_path)

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", "-e", "-c", block], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)

    def logs() -> str:
        parts = [p.read_text(errors="replace")[-3000:] for p in sorted(kq.glob("c*.log"))]
        if server_log.exists():
            parts.append(server_log.read_text(errors="replace")[-4000:])
        return "\n----\n".join(parts)

    try:
        try:
            out, err = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the README block did not finish in 300 s\nstdout: {out}\nstderr: {err[-3000:]}\n{logs()}")
        assert proc.returncode == 0, f"exit {proc.returncode}\nstdout: {out}\nstderr: {err[-3000:]}\n{logs()}"
        lines = out.splitlines()
        assert "Created topic orders." in lines, out
        assert "hello" in lines, out  # what the console consumer read back
        # quorum describe --replication: a row per replica, broker 101 among them as an observer
        observers = [ln for ln in lines if re.match(r"\s*101\b", ln)]
        assert observers and "Observer" in observers[0], out
        # metadata image --path /topics/byName/orders/0: the partition, led by broker 101
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("{"))
        partition = json.loads("\n".join(lines[start:]))
        assert partition["leader"] == 101 and partition["replicas"] == [101] and partition["isr"] == [101], partition
    finally:
        # everything the block started in the background shares its process group
        stop_group(proc)
