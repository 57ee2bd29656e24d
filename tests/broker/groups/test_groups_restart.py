"""A consumer group across a SIGKILL of its coordinator, with a real client (confluent-kafka): the
group's record in ``__consumer_offsets`` brings it back on the restarted broker, so its members
carry on in the same generation with the same member ids and assignments (no rebalance callback,
a commit of that generation is accepted) and its committed offsets are intact.

One broker, the coordinator of every group, in KRaft mode (the record is the broker's own: the
metadata mode does not change it)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition

from tests.support.cluster import Cluster
from tests.support.kafka_clients import Message, confluent_produce, create_topic
from tests.support.kafka_cluster import QUIET, confluent_admin, shared_cluster
from tests.support.polling import poll_until

pytestmark = pytest.mark.processes

PARTITIONS = 2
RECORDS = 5  # per partition, before the restart and again after it
# The members' sessions outlast the broker's restart: their coordinator keeps them, not
# their clients' patience.
SESSION_MS = 45_000
SETTINGS = {
    "group.initial.rebalance.delay.ms": "200",
    "offsets.topic.num.partitions": "2",
}


@pytest.fixture(scope="module", params=["kraft"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("groups-restart")
    with shared_cluster(request, root, {1: SETTINGS}, brokers=1) as started:
        yield started


class Member:
    """A confluent-kafka member polling on its own thread: what it holds and read, how often it
    lost partitions, its member id, and its commits (made on its thread when asked)."""

    def __init__(self, cluster: Cluster, topic: str, group: str) -> None:
        self.assignment: frozenset[int] = frozenset()
        self.revocations = 0
        self.read: dict[int, int] = {}  # partition -> the next offset to read
        self.member_id = ""
        self.commits: list[KafkaException | None] = []
        self.error: BaseException | None = None
        self._commit = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._guarded, args=(cluster, topic, group), daemon=True
        )
        self._thread.start()

    def _guarded(self, cluster: Cluster, topic: str, group: str) -> None:
        try:
            self._run(cluster, topic, group)
        except BaseException as e:  # reported by the test's next check
            self.error = e

    def _run(self, cluster: Cluster, topic: str, group: str) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
                **QUIET,
            }
        )

        def on_assign(_: Any, partitions: list[ConfluentPartition]) -> None:
            self.assignment = frozenset(p.partition for p in partitions)

        def on_revoke(_: Any, partitions: list[ConfluentPartition]) -> None:
            self.revocations += int(bool(partitions))  # also called for lost partitions
            self.assignment = frozenset()

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not self._stop.is_set():
                message = consumer.poll(0.1)
                if message is not None and message.error() is None:
                    self.read[message.partition()] = message.offset() + 1
                self.member_id = consumer.memberid() or ""
                if self._commit.is_set():
                    self._commit.clear()
                    try:
                        consumer.commit(asynchronous=False)
                        self.commits.append(None)
                    except KafkaException as e:
                        self.commits.append(e)
        finally:
            consumer.close()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def commit(self) -> None:
        """Commits what it read, as of its generation; raises what the commit failed with."""
        done = len(self.commits) + 1
        self._commit.set()
        poll_until(lambda: (self.check(), len(self.commits) >= done)[1], what="a commit")
        if self.commits[-1] is not None:
            raise self.commits[-1]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the consumer did not close"
        self.check()


def produce(cluster: Cluster, topic: str, tag: str) -> None:
    confluent_produce(
        cluster,
        topic,
        [
            Message(partition=p, key=None, value=f"{tag}{i}".encode(), headers=(), timestamp_ms=0)
            for p in range(PARTITIONS)
            for i in range(RECORDS)
        ],
    )


def committed(cluster: Cluster, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, read by a consumer that does not join it."""
    reader = Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": group, **QUIET})
    try:
        found = reader.committed([ConfluentPartition(topic, p) for p in range(PARTITIONS)], 30)
        return {p.partition: p.offset for p in found}
    finally:
        reader.close()


def test_members_carry_on_across_a_sigkill_of_their_coordinator(cluster: Cluster) -> None:
    topic, group = f"r-{uuid.uuid4().hex[:8]}", f"restart-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, PARTITIONS)
    produce(cluster, topic, "before")
    members = [Member(cluster, topic, group), Member(cluster, topic, group)]
    try:

        def each_read(count: int) -> bool:
            for m in members:
                m.check()
            return all(
                len(m.assignment) == 1 and all(m.read.get(p) == count for p in m.assignment)
                for m in members
            )

        poll_until(lambda: each_read(RECORDS), timeout=60, what="each member to read its half")
        for m in members:
            m.commit()
        before = [(m.member_id, m.assignment, m.revocations) for m in members]
        assert all(member_id for member_id, _, _ in before)

        broker = cluster.brokers[1]
        broker.kill()
        broker.start()
        cluster.wait_for_live_brokers({1}, timeout_s=60)
        assert committed(cluster, group, topic) == dict.fromkeys(range(PARTITIONS), RECORDS)

        produce(cluster, topic, "after")
        poll_until(lambda: each_read(2 * RECORDS), timeout=60, what="the members to read on")
        for m in members:
            m.commit()  # in the generation they had: the group was not rebalanced
        assert [(m.member_id, m.assignment, m.revocations) for m in members] == before
        admin = confluent_admin(cluster)  # held: a collected admin drops its futures
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert str(described.state).endswith("STABLE")
        assert {m.member_id for m in described.members} == {member_id for member_id, _, _ in before}
        assert committed(cluster, group, topic) == dict.fromkeys(range(PARTITIONS), 2 * RECORDS)
        assert f"group {group} loaded: Stable" in "".join(broker.output_since_start())
    finally:
        for m in members:
            m.close()
