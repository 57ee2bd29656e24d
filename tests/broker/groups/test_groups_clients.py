"""Consumer groups with real clients against a real cluster, in both metadata modes: two members
(confluent-kafka, kafka-python, aiokafka) split a topic's partitions, a leaver's partitions move
to the other at once (long before its session would expire), a restarted static member
(``group.instance.id``) gets its partitions back without a rebalance, kcat's balanced consumer
(``-G``) and KafkaJS's group consumer read a topic, and the admin APIs of confluent-kafka and
KafkaJS list and describe groups (ListGroups, DescribeGroups).

A member played on the wire is described by confluent-kafka's admin too. One broker, the
coordinator of every group (groups placed across brokers and their committed offsets:
``groups/test_committed_offsets.py``)."""

from __future__ import annotations

import asyncio
import base64
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import ConsumerRebalanceListener as AioRebalanceListener
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import ConsumerRebalanceListener, KafkaConsumer
from kio.schema.errors import ErrorCode
from kio.schema.leave_group.v3.request import MemberIdentity

from tests.support.cluster import Cluster
from tests.support.group_requests import (
    HEARTBEAT,
    LEAVE,
    SYNC,
    assignment,
    group_request,
    join_member,
    serving_coordinator,
    subscription,
)
from tests.support.kafka_clients import confluent_produce, create_topic, sample
from tests.support.kafka_cluster import MODES, QUIET, confluent_admin, connected, shared_cluster
from tests.support.kafkajs import kafkajs
from tests.support.kcat import kcat
from tests.support.polling import poll_until

pytestmark = pytest.mark.processes

PARTITIONS = 4
# Long sessions: a partition that moves within this test's deadlines moved because its member
# left, not because its session expired.
SESSION_MS = 45_000
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "200"}


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"kafka-groups-{request.param}")
    with shared_cluster(request, root, {1: GROUP_SETTINGS}, brokers=1) as started:
        yield started


@pytest.fixture
def topic(cluster: Cluster) -> str:
    name = f"g-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, name, PARTITIONS)
    return name


class Member:
    """A consumer polling on its own thread (clients are not shared between threads), with the
    partitions it holds now and how often it lost some."""

    def __init__(self, run: Callable[[Member], None]) -> None:
        self.assignment: frozenset[int] = frozenset()
        self.revocations = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._guarded, args=(run,), daemon=True)
        self._thread.start()

    def _guarded(self, run: Callable[[Member], None]) -> None:
        try:
            run(self)
        except BaseException as e:  # reported by the test's next check
            self.error = e

    def assigned(self, revoked: bool) -> None:
        self.revocations += int(revoked)

    def close(self) -> None:
        self.stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the consumer did not close"
        if self.error is not None:
            raise self.error


def confluent_member(cluster: Cluster, topic: str, group: str, **config: Any) -> Member:
    def run(member: Member) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 200,
                "partition.assignment.strategy": "range",
                **QUIET,
                **config,
            }
        )

        def on_assign(_: Any, partitions: list[ConfluentPartition]) -> None:
            member.assignment = frozenset(p.partition for p in partitions)

        def on_revoke(_: Any, partitions: list[ConfluentPartition]) -> None:
            member.assigned(bool(partitions))
            member.assignment = frozenset()

        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        try:
            while not member.stop.is_set():
                consumer.poll(0.1)
        finally:
            consumer.close()

    return Member(run)


def python_member(cluster: Cluster, topic: str, group: str) -> Member:
    def run(member: Member) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=cluster.kafka_bootstrap,
            group_id=group,
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=200,
        )

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assignment = frozenset(p.partition for p in assigned)

            def on_partitions_revoked(self, revoked: Any) -> None:
                member.assigned(bool(revoked))
                member.assignment = frozenset()

        consumer.subscribe([topic], listener=Listener())
        try:
            while not member.stop.is_set():
                consumer.poll(100)
        finally:
            consumer.close(autocommit=False)

    return Member(run)


def aiokafka_member(cluster: Cluster, topic: str, group: str) -> Member:
    def run(member: Member) -> None:
        class Listener(AioRebalanceListener):  # type: ignore[misc]
            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assignment = frozenset(p.partition for p in assigned)

            def on_partitions_revoked(self, revoked: Any) -> None:
                member.assigned(bool(revoked))
                member.assignment = frozenset()

        async def consume() -> None:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=cluster.kafka_bootstrap,
                group_id=group,
                enable_auto_commit=False,
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=200,
            )
            consumer.subscribe([topic], listener=Listener())
            await consumer.start()
            try:
                while not member.stop.is_set():
                    await consumer.getmany(timeout_ms=100)
            finally:
                await consumer.stop()

        asyncio.run(consume())

    return Member(run)


MEMBERS = {
    "confluent": confluent_member,
    "kafka-python": python_member,
    "aiokafka": aiokafka_member,
}


def split_between(*members: Member) -> Callable[[], bool]:
    def split() -> bool:
        for member in members:
            if member.error is not None:
                raise member.error
        held = [m.assignment for m in members]
        return (
            all(held)
            and sum(map(len, held)) == PARTITIONS
            and len(frozenset().union(*held)) == PARTITIONS
        )

    return split


@pytest.mark.parametrize("client", sorted(MEMBERS))
def test_two_members_split_and_a_leaver_hands_over_at_once(
    cluster: Cluster, topic: str, client: str
) -> None:
    make = MEMBERS[client]
    group = f"split-{uuid.uuid4().hex[:6]}"
    first, second = make(cluster, topic, group), make(cluster, topic, group)
    try:
        poll_until(split_between(first, second), timeout=60, what="the members to split the topic")
        second.close()  # LeaveGroup
        poll_until(
            lambda: first.assignment == frozenset(range(PARTITIONS)),
            timeout=SESSION_MS / 1000 / 2,
            what="the survivor to take the leaver's partitions",
        )
    finally:
        first.close()
        second.stop.set()


def test_restarted_static_member_gets_its_partitions_back_without_a_rebalance(
    cluster: Cluster, topic: str
) -> None:
    group = f"static-{uuid.uuid4().hex[:6]}"
    stays = confluent_member(cluster, topic, group, **{"group.instance.id": "stays"})
    restarts = confluent_member(cluster, topic, group, **{"group.instance.id": "restarts"})
    try:
        poll_until(split_between(stays, restarts), timeout=60, what="the members to split")
        held, revocations = restarts.assignment, stays.revocations
        admin = confluent_admin(cluster)
        listed = admin.list_consumer_groups().result(30)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert str(described.state).endswith("STABLE")
        assert {m.group_instance_id for m in described.members} == {"stays", "restarts"}
        restarts.close()  # a static member sends no LeaveGroup: its session keeps its place
        back = confluent_member(cluster, topic, group, **{"group.instance.id": "restarts"})
        try:
            poll_until(lambda: bool(back.assignment), timeout=60, what="the restarted member")
            assert back.assignment == held
            assert stays.revocations == revocations  # the other member saw no rebalance
        finally:
            back.close()
    finally:
        stays.close()
        restarts.stop.set()


def test_kcat_balanced_consumer_reads_a_topic(cluster: Cluster, topic: str) -> None:
    messages = sample(12, PARTITIONS, tag="kcat")
    confluent_produce(cluster, topic, messages)
    group = f"kcat-{uuid.uuid4().hex[:6]}"
    out = kcat(
        cluster, "-G", group, "-X", "enable.auto.commit=false", "-o", "beginning", "-e", topic
    )
    assert sorted(out.split(b"\n")[:-1]) == sorted(m.value or b"" for m in messages)


def test_kafkajs_group_consumer_and_admin(cluster: Cluster, topic: str) -> None:
    messages = sample(12, PARTITIONS, tag="js")
    confluent_produce(cluster, topic, messages)
    group = f"js-{uuid.uuid4().hex[:6]}"
    consumed, listed, described = kafkajs(
        cluster,
        {"op": "consume", "group": group, "topic": topic, "count": len(messages)},
        {"op": "listGroups"},
        {"op": "describeGroups", "groups": [group]},
    )
    read = consumed.ok()
    assert read["assigned"] == list(range(PARTITIONS))
    values = sorted(base64.b64decode(r["value"]) for r in read["records"])
    assert values == sorted(m.value or b"" for m in messages)
    assert group in {g["groupId"] for g in listed.ok()["groups"]}
    (state,) = described.ok()["groups"]
    assert (state["groupId"], state["state"], state["members"]) == (group, "Empty", [])


def test_a_member_on_the_wire_seen_by_the_admin_api(cluster: Cluster, topic: str) -> None:
    group = f"wire-{uuid.uuid4().hex[:6]}"
    plan = assignment({topic: list(range(PARTITIONS))})
    assert serving_coordinator(cluster, group) == 1  # the one broker
    with connected(cluster, 1) as wire:
        joined = join_member(
            wire, 5, group, protocols=(("range", subscription([topic])),), group_instance_id="w"
        )
        assert joined.error_code == ErrorCode.none and joined.leader == joined.member_id
        member = {"group_id": group, "generation_id": joined.generation_id}
        member |= {"member_id": joined.member_id, "group_instance_id": "w"}
        synced = wire.call(
            group_request(SYNC, 3, **member, assignments=((joined.member_id, plan),))
        )
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, plan)
        assert wire.call(group_request(HEARTBEAT, 3, **member)).error_code == ErrorCode.none
        admin = confluent_admin(cluster)
        listed = admin.list_consumer_groups().result(30)
        assert group in {g.group_id for g in listed.valid}
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert str(described.state).endswith("STABLE")
        (seen,) = described.members
        assert (seen.member_id, seen.group_instance_id, seen.client_id) == (
            joined.member_id,
            "w",
            "wire-test",
        )
        held = {(p.topic, p.partition) for p in seen.assignment.topic_partitions}
        assert held == {(topic, p) for p in range(PARTITIONS)}
        left = wire.call(
            group_request(LEAVE, 3, group_id=group, members=(_leaving(joined.member_id),))
        )
        assert [m.error_code for m in left.members] == [ErrorCode.none]
    described = admin.describe_consumer_groups([group])[group].result(30)
    assert str(described.state).endswith("EMPTY") and not described.members


def _leaving(member_id: str) -> Any:
    return MemberIdentity(member_id=member_id, group_instance_id="w")
