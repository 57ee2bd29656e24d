"""Network partitions between live processes of a ``tiered-cluster up --loopback-hosts`` cluster,
cut with nftables in the test's own network namespace (``tests.support.network``).

Active controller <-> one broker, mid-DISABLING, in both metadata modes: the broker goes on
accepting records into its partitions, the disable waits (``tiered-cluster status`` marks the broker
unreachable) and completes after the heal, and the broker's journal holds the stop at the
disable's epoch for each of its partitions, acked no earlier than it was applied. During the cut
an idempotent producer, a consumer and a consumer group's member that know the cut broker alone
produce to its partitions, read the records back and commit: the broker answers its clients from
the last view of the cluster it knows (``broker/cluster_view.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from broker.assignment_journal import read_entries
from broker.groups.placement import OFFSETS_TOPIC, partition_for
from system_tests.partitions import (
    broker_id,
    client_address,
    cluster_status,
    kafka_address,
    partitioned_cluster,
)
from tests.support.polling import poll_until
from tiered.admin import AdminClient
from tiered.cluster.model import TieredState

pytestmark = [pytest.mark.netns, pytest.mark.timeout(600)]

REQUEST_TIMEOUT_MS = 3000
TOPIC = "orders"
PARTITIONS = 4


def _produce(bootstrap: str, partitions: list[int], tag: str) -> dict[int, int]:
    """One record into each of ``partitions`` by an idempotent producer (acks=all), all
    acknowledged: their offsets by partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
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


def _group_led_by(admin: AdminClient, broker: int) -> str:
    """A group id whose coordinator is ``broker`` (it leads the group's partition of
    ``__consumer_offsets``)."""
    offsets = admin.describe_topic(OFFSETS_TOPIC).partitions
    leaders = {p.partition: p.leader for p in offsets}
    return next(
        group
        for group in (f"members-{i}" for i in range(10_000))
        if leaders[partition_for(group, len(offsets))] == broker
    )


def _read_in_group(bootstrap: str, group: str, delivered: dict[int, int], tag: str) -> None:
    """Reads the records ``delivered`` as the member of the new consumer group ``group``
    (FindCoordinator, JoinGroup, SyncGroup, OffsetFetch, Fetch) and commits past them
    (OffsetCommit)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    wanted = {partition: f"{tag}-{partition}".encode() for partition in delivered}
    seen: set[int] = set()

    def read_them() -> bool:
        message = consumer.poll(1)
        if message is not None and wanted.get(message.partition()) == message.value():
            seen.add(message.partition())
        return seen == set(wanted)

    try:
        consumer.subscribe([TOPIC])
        poll_until(read_them, timeout=90, what=f"a group member reading the {tag!r} records")
        past = {partition: offset + 1 for partition, offset in delivered.items()}
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, o) for p, o in past.items()], asynchronous=False
        )
        committed = consumer.committed([TopicPartition(TOPIC, p) for p in past], timeout=30)
        assert {c.partition: c.offset for c in committed} == past
    finally:
        consumer.close()


@pytest.mark.parametrize("metadata", ["kraft", "zookeeper"])
def test_a_broker_cut_off_from_the_active_controller_mid_disabling(
    tmp_path: Path, metadata: str
) -> None:
    data = tmp_path / "cluster"
    up_args = (
        "--brokers", "2", "--metadata", metadata,
        "--controller-config", f"controller.request.timeout.ms={REQUEST_TIMEOUT_MS}",
        "--broker-config", "broker.heartbeat.interval.ms=500",
    )  # fmt: skip
    with partitioned_cluster(data, *up_args) as (network, layout):
        code, status = cluster_status(data)
        assert code == 0, status
        active = status["active_controller"]
        admin = AdminClient(client_address(status, active))
        admin.create_topic(TOPIC, PARTITIONS, {"remote.storage.enable": "true"})
        topic = admin.describe_topic(TOPIC)
        victim = "broker-2"
        cut_off = [p.partition for p in topic.partitions if p.leader == broker_id(victim)]
        assert cut_off and len(cut_off) < PARTITIONS, topic.partitions
        kafka = layout["kafka_bootstrap_servers"]
        before = _produce(kafka, cut_off, "before")
        _read_back(kafka, before, "before")
        _read_in_group(kafka, "members-before", before, "before")  # creates __consumer_offsets
        cut_group = _group_led_by(admin, broker_id(victim))  # coordinated by the cut broker

        network.cut(active, victim, both_ways=True)
        admin.alter_configs(TOPIC, {"remote.storage.enable": "false"})

        def only_the_victim_owes() -> bool:
            seen = admin.describe_topic(TOPIC, include_partition_state=False)
            return seen.disable_acks_owed == len(cut_off)

        poll_until(only_the_victim_owes, timeout=60, what="every broker but the cut one acked")

        def victim_unreachable() -> bool:
            code, status = cluster_status(data)
            entry = next(p for p in status["processes"] if p["name"] == victim)
            return code == 1 and entry["alive"] and entry["reachable"] is False

        poll_until(victim_unreachable, timeout=60, what=f"status marking {victim} unreachable")
        # Past the request timeout the disable still waits for the cut broker, which still
        # serves its partitions to clients.
        waiting = admin.describe_topic(TOPIC, include_partition_state=False)
        assert waiting.tiered_state is TieredState.DISABLING and waiting.tiered_epoch == 1
        assert waiting.disable_acks_owed == len(cut_off)
        # Through the cut broker alone: it answers Metadata and FindCoordinator from the last
        # view it knows, and hands out producer ids of its own.
        through_victim = kafka_address(layout, victim)
        during = _produce(through_victim, cut_off, "during")
        _read_back(through_victim, during, "during")
        if metadata == "zookeeper":
            # The cut broker stays registered (its ZooKeeper session lives), so every broker
            # names it coordinator. In KRaft mode the controller fences it once its heartbeats
            # lapse, and the other broker, which a group member also asks, rightly answers its
            # coordinators unavailable, as Kafka answers for a fenced broker's partitions.
            _read_in_group(through_victim, cut_group, during, "during")
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
        poll_until(
            lambda: cluster_status(data)[0] == 0, timeout=60, what="status all reachable again"
        )
