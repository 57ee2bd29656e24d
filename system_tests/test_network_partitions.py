"""Network partitions between live processes of a ``tiered-cluster up --loopback-hosts`` cluster,
cut with nftables in the test's own network namespace (``tests.support.network``).

Active controller <-> one broker, mid-DISABLING, in both metadata modes: the broker goes on
accepting records into its partitions, the disable waits (``tiered-cluster status`` marks the broker
unreachable) and completes after the heal, and the broker's journal holds the stop at the
disable's epoch for each of its partitions, acked no earlier than it was applied."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.assignment_journal import read_entries
from cli.cluster import LocalCluster
from cli.launch.cgroups import CGROUP_ROOT_ENV
from tests.cli.test_cluster_cli import cluster_cli
from tests.support.network import Network
from tests.support.polling import poll_until
from tiered.admin import AdminClient
from tiered.cluster.model import TieredState

pytestmark = [pytest.mark.netns, pytest.mark.timeout(600)]

REQUEST_TIMEOUT_MS = 3000
TOPIC = "orders"
PARTITIONS = 4


@contextmanager
def partitioned_cluster(data: Path, metadata: str) -> Iterator[tuple[Network, dict[str, Any]]]:
    """A local cluster of two brokers, each process on its own address and in its own cgroup."""
    network = Network.create({})
    os.environ[CGROUP_ROOT_ENV] = str(network.cgroup_root)
    local = LocalCluster(data)
    try:
        up = cluster_cli(
            "up", "--data-dir", str(data), "--brokers", "2", "--metadata", metadata,
            "--loopback-hosts",
            "--controller-config", f"controller.request.timeout.ms={REQUEST_TIMEOUT_MS}",
            "--broker-config", "broker.heartbeat.interval.ms=500",
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        layout = json.loads((data / "cluster.json").read_text())
        network.hosts.update(layout["hosts"])
        yield network, layout
    finally:
        os.environ.pop(CGROUP_ROOT_ENV, None)
        local.down()
        network.close()


def _status(data: Path) -> tuple[int, dict[str, Any]]:
    result = cluster_cli("status", "--data-dir", str(data), "--format", "json")
    return result.returncode, json.loads(result.stdout)


def _broker_id(name: str) -> int:
    return int(name.rpartition("-")[2])


def _produce(bootstrap: str, partitions: list[int], tag: str) -> dict[int, int]:
    """One record into each of ``partitions`` (acks=all), all acknowledged: their offsets by
    partition. Not idempotent: a producer id comes from the controller, which a broker cut off
    from it cannot reach."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: dict[int, int] = {}

    def on_delivery(error: Any, message: Any) -> None:
        assert error is None, error
        delivered[message.partition()] = message.offset()

    for partition in partitions:
        producer.produce(TOPIC, value=f"{tag}-{partition}".encode(), partition=partition,
                         on_delivery=on_delivery)  # fmt: skip
    assert producer.flush(30) == 0
    assert sorted(delivered) == sorted(partitions)
    return delivered


def _read_back(bootstrap: str, delivered: dict[int, int], tag: str) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        for partition, offset in delivered.items():
            consumer.assign([TopicPartition(TOPIC, partition, offset)])
            message = consumer.poll(30)
            assert message is not None and message.error() is None, message
            assert message.value() == f"{tag}-{partition}".encode()
    finally:
        consumer.close()


@pytest.mark.parametrize("metadata", ["kraft", "zookeeper"])
def test_a_broker_cut_off_from_the_active_controller_mid_disabling(
    tmp_path: Path, metadata: str
) -> None:
    data = tmp_path / "cluster"
    with partitioned_cluster(data, metadata) as (network, layout):
        code, status = _status(data)
        assert code == 0, status
        active = status["active_controller"]
        bootstrap = next(
            f"{p['host']}:{p['ports']['client']}"
            for p in status["processes"]
            if p["name"] == active
        )
        admin = AdminClient(bootstrap)
        admin.create_topic(TOPIC, PARTITIONS, {"remote.storage.enable": "true"})
        topic = admin.describe_topic(TOPIC)
        victim = "broker-2"
        cut_off = [p.partition for p in topic.partitions if p.leader == _broker_id(victim)]
        assert cut_off and len(cut_off) < PARTITIONS, topic.partitions
        kafka = layout["kafka_bootstrap_servers"]
        _read_back(kafka, _produce(kafka, cut_off, "before"), "before")

        network.cut(active, victim, both_ways=True)
        admin.alter_configs(TOPIC, {"remote.storage.enable": "false"})

        def only_the_victim_owes() -> bool:
            seen = admin.describe_topic(TOPIC, include_partition_state=False)
            return seen.disable_acks_owed == len(cut_off)

        poll_until(only_the_victim_owes, timeout=60, what="every broker but the cut one acked")

        def victim_unreachable() -> bool:
            code, status = _status(data)
            entry = next(p for p in status["processes"] if p["name"] == victim)
            return code == 1 and entry["alive"] and entry["reachable"] is False

        poll_until(victim_unreachable, timeout=60, what=f"status marking {victim} unreachable")
        # Past the request timeout the disable still waits for the cut broker, which still
        # serves its partitions to clients.
        waiting = admin.describe_topic(TOPIC, include_partition_state=False)
        assert waiting.tiered_state is TieredState.DISABLING and waiting.tiered_epoch == 1
        assert waiting.disable_acks_owed == len(cut_off)
        # Bootstrapped from the other broker: the cut one answers Metadata only once the
        # controller does (its cluster view is the controller's), which is not Kafka's way.
        brokers = [f"broker-{i + 1}" for i in range(len(layout["kafka_brokers"]))]
        others = ",".join(
            f"{layout['hosts'][name]}:{port}"
            for name, port in zip(brokers, layout["kafka_brokers"], strict=True)
            if name != victim
        )
        during = _produce(others, cut_off, "during")
        journal = {e["partition"]: e for e in read_entries(data / victim) if e["topic"] == TOPIC}
        # Not told, not stopped: still copying at epoch 0.
        assert all(journal[p]["stopped_policy"] is None for p in cut_off), journal
        assert all(journal[p]["tiered_epoch"] == 0 for p in cut_off), journal

        network.heal()

        def disabled() -> bool:
            seen = admin.describe_topic(TOPIC, include_partition_state=False)
            return seen.tiered_state is TieredState.DISABLED

        poll_until(disabled, timeout=120, what="the disable to complete after the heal")
        _read_back(kafka, during, "during")
        done = admin.describe_topic(TOPIC)
        assert done.tiered_epoch == 1
        journal = {e["partition"]: e for e in read_entries(data / victim) if e["topic"] == TOPIC}
        for partition in cut_off:
            assert journal[partition]["tiered_epoch"] == 1, journal[partition]
            assert journal[partition]["stopped_policy"] == "retain", journal[partition]
        poll_until(lambda: _status(data)[0] == 0, timeout=60, what="status all reachable again")
