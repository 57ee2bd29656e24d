"""Committed offsets against a real cluster, in both metadata modes, through every client family:
confluent-kafka (assign() and commit(); a subscribed member's commit), kafka-python (its admin's
alter/list/delete of group offsets, kept for the topics a member consumes; a subscribed consumer
resuming), aiokafka (a consumer's commit()), KafkaJS (admin setOffsets, through a group member,
fetchOffsets, deleteGroups) and kcat (``-o stored``); each reads back what another wrote, and a
group resumes across both tiers.

``__consumer_offsets`` is created on the first FindCoordinator, marked internal and never
tiered; a broker that is not the coordinator answers NOT_COORDINATOR, a coordinator that is down
COORDINATOR_NOT_AVAILABLE until it is back; committed offsets survive SIGKILL of every broker
and controller, and a controller failover; offsets of a deleted topic go; DeleteGroups and
OffsetDelete remove them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioPartition
from confluent_kafka import OFFSET_INVALID, Consumer, ConsumerGroupTopicPartitions
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as PythonPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_v4
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.schema.offset_fetch.v8 import request as fetch_v8

from broker.groups.placement import OFFSETS_TOPIC, partition_for
from tests.support.cluster import Cluster
from tests.support.group_requests import serving_coordinator
from tests.support.kafka_clients import create_topic, tiered_with_remote_only_prefix
from tests.support.kafka_cluster import (
    QUIET,
    confluent_admin,
    connected,
    kafka_bootstrap,
    shared_cluster,
)
from tests.support.kafka_requests import by_partition, produce
from tests.support.kafkajs import kafkajs
from tests.support.kcat import kcat, kcat_produce, kcat_sample
from tests.support.polling import poll_until
from tiered.kafka.records import Record, build_batch

pytestmark = pytest.mark.processes

PARTITIONS = 4  # of __consumer_offsets here (Kafka's default 50 costs the tests time)
BROKER_SETTINGS = {
    "offsets.topic.num.partitions": str(PARTITIONS),
    "offsets.retention.check.interval.ms": "300",
    "group.initial.rebalance.delay.ms": "200",
}


@pytest.fixture(scope="module", params=("kraft", "zookeeper"))
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root: Path = tmp_path_factory.mktemp(f"group-offsets-{request.param}")
    with shared_cluster(
        request, root, broker_overrides={1: BROKER_SETTINGS, 2: BROKER_SETTINGS}
    ) as c:
        yield c


@pytest.fixture
def topic(cluster: Cluster) -> str:
    name = f"o-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, name, partitions=2)
    return name


def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def confluent_commit(cluster: Cluster, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": group_id,
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    try:
        partitions = [ConfluentPartition(t, p, o) for (t, p), o in offsets.items()]
        consumer.assign(partitions)
        answered = consumer.commit(offsets=partitions, asynchronous=False)
        assert answered is not None and all(p.error is None for p in answered), answered
    finally:
        consumer.close()


def confluent_committed(
    cluster: Cluster, group_id: str, wanted: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "group.id": group_id, **QUIET}
    )
    try:
        found = consumer.committed([ConfluentPartition(t, p) for t, p in wanted], timeout=30)
        return {(p.topic, p.partition): p.offset for p in found}
    finally:
        consumer.close()


def python_admin(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster), request_timeout_ms=30_000)


def python_committed(cluster: Cluster, group_id: str) -> dict[tuple[str, int], int]:
    admin = python_admin(cluster)
    try:
        found = admin.list_group_offsets({group_id: None})[group_id]
        return {(tp.topic, tp.partition): meta.offset for tp, meta in found.items()}
    finally:
        admin.close()


def aiokafka_commit(cluster: Cluster, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    async def run() -> None:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap(cluster), group_id=group_id, enable_auto_commit=False
        )
        await consumer.start()
        try:
            partitions = {AioPartition(t, p): o for (t, p), o in offsets.items()}
            consumer.assign(list(partitions))
            await consumer.commit(partitions)
        finally:
            await consumer.stop()

    asyncio.run(run())


def leader_of_partition_of(cluster: Cluster, group_id: str) -> int:
    """The leader of the group's __consumer_offsets partition, as the controller placed it."""
    described = cluster.admin.describe_topic(OFFSETS_TOPIC, include_partition_state=False)
    return described.partitions[partition_for(group_id, len(described.partitions))].leader


def commit_request(group_id: str, topic: str, offset: int) -> commit_v8.OffsetCommitRequest:
    """A standalone commit of partition 0, on the wire."""
    return commit_v8.OffsetCommitRequest(
        group_id=group_id,
        member_id="",
        topics=(
            commit_v8.OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    commit_v8.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_metadata=None
                    ),
                ),
            ),
        ),
    )


# ------------------------------------------------------------------------------------- tests


def test_confluent_commits_are_read_by_kafka_python_and_kafkajs(
    cluster: Cluster, topic: str
) -> None:
    g = group()
    confluent_commit(cluster, g, {(topic, 0): 5, (topic, 1): 7})
    assert python_committed(cluster, g) == {(topic, 0): 5, (topic, 1): 7}
    [fetched] = kafkajs(cluster, {"op": "fetchOffsets", "group": g, "topic": topic})
    [answer] = fetched.ok()
    assert sorted((p["partition"], p["offset"]) for p in answer["partitions"]) == [
        (0, "5"),
        (1, "7"),
    ]


def test_kafkajs_set_offsets_are_read_by_kafka_python(cluster: Cluster, topic: str) -> None:
    g = group()
    partitions = [{"partition": 0, "offset": "3"}, {"partition": 1, "offset": "4"}]
    [done] = kafkajs(
        cluster, {"op": "setOffsets", "group": g, "topic": topic, "partitions": partitions}
    )
    done.ok()  # KafkaJS joins the group as a member, seeks and commits
    assert python_committed(cluster, g) == {(topic, 0): 3, (topic, 1): 4}


def test_aiokafka_and_kafka_python_commits_are_read_by_confluent(
    cluster: Cluster, topic: str
) -> None:
    g, h = group(), group()
    aiokafka_commit(cluster, g, {(topic, 0): 11, (topic, 1): 12})
    admin = python_admin(cluster)
    try:
        admin.alter_group_offsets(h, {PythonPartition(topic, 1): OffsetAndMetadata(3, "meta", -1)})
    finally:
        admin.close()
    assert confluent_committed(cluster, g, [(topic, 0), (topic, 1)]) == {
        (topic, 0): 11,
        (topic, 1): 12,
    }
    assert confluent_committed(cluster, h, [(topic, 0), (topic, 1)]) == {
        (topic, 0): -1001,
        (topic, 1): 3,
    }
    admin_ = confluent_admin(cluster)  # kept: its futures die with it
    listed = admin_.list_consumer_group_offsets([ConsumerGroupTopicPartitions(h)])
    found = listed[h].result(30)
    assert [(p.topic, p.partition, p.offset) for p in found.topic_partitions] == [(topic, 1, 3)]
    admin = python_admin(cluster)
    try:
        [(_, committed)] = admin.list_group_offsets({h: None})[h].items()
        assert committed.metadata == "meta"
    finally:
        admin.close()


def test_kcat_reads_from_the_offset_kafka_python_committed(cluster: Cluster, topic: str) -> None:
    kcat_produce(cluster, topic, 0, kcat_sample(6))
    g = group()
    confluent_commit(cluster, group(), {(topic, 0): 0})  # coordinators loaded: the admin
    admin = python_admin(cluster)  # below does not retry
    try:
        admin.alter_group_offsets(g, {PythonPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
    finally:
        admin.close()
    stored = ("-C", "-t", topic, "-p", "0", "-o", "stored", "-X", f"group.id={g}")
    assert kcat(cluster, *stored, "-e", "-f", "%o\n") == b"4\n5\n"


def test_a_group_resumes_from_its_committed_offset_across_both_tiers(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    messages = tiered_with_remote_only_prefix(cluster, topic, 150)  # 0..75+: remote storage only
    g = group()
    first = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": g,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **QUIET,
        }
    )
    try:
        first.subscribe([topic])
        read: list[Any] = []
        deadline = time.monotonic() + 60
        while len(read) < 10 and time.monotonic() < deadline:
            message = first.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message)
        assert [m.offset() for m in read[:10]] == list(range(10))  # from remote storage
        first.commit(message=read[9], asynchronous=False)  # offset 10
    finally:
        first.close()  # leaves the group
    second = KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap(cluster),
        group_id=g,
        enable_auto_commit=False,
        auto_offset_reset="latest",  # only the committed offset makes it start at 10
    )
    try:
        resumed: list[Any] = []
        deadline = time.monotonic() + 60
        while len(resumed) < 140 and time.monotonic() < deadline:
            for records in second.poll(timeout_ms=500).values():
                resumed.extend(records)
    finally:
        second.close(autocommit=False)
    assert [r.offset for r in resumed] == list(range(10, 150))  # remote, then local
    assert [r.value for r in resumed] == [m.value for m in messages[10:]]


def test_offsets_topic_is_internal_compacted_and_never_tiered(cluster: Cluster, topic: str) -> None:
    confluent_commit(cluster, group(), {(topic, 0): 1})
    confluent = confluent_admin(cluster)  # kept: its futures die with it
    metadata = confluent.list_topics(timeout=30)
    assert len(metadata.topics[OFFSETS_TOPIC].partitions) == PARTITIONS
    described = cluster.admin.describe_topic(OFFSETS_TOPIC, include_partition_state=False)
    assert described.configs["cleanup.policy"] == "compact"
    assert described.configs["remote.storage.enable"] == "false"
    admin = python_admin(cluster)
    try:
        [internal] = list(admin.describe_topics([OFFSETS_TOPIC]))
        assert internal["is_internal"] is True
    finally:
        admin.close()
    deleted = confluent.delete_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC]
    assert "INVALID_REQUEST" in str(deleted.exception(30))
    assert OFFSETS_TOPIC in confluent.list_topics(timeout=30).topics
    tiering = ConfigResource(
        "topic",
        OFFSETS_TOPIC,
        incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in (("cleanup.policy", "delete"), ("remote.storage.enable", "true"))
        ],
    )
    leader = described.partitions[0].leader
    with connected(cluster, leader) as wire:  # only the coordinator writes there
        produced = wire.call(produce({(OFFSETS_TOPIC, 0): build_batch([Record(b"k", b"v")])}))
        answer = by_partition(produced)[(OFFSETS_TOPIC, 0)]
        assert answer.error_code is ErrorCode.invalid_topic_exception
    [refused] = confluent.incremental_alter_configs([tiering]).values()
    assert "INVALID_CONFIG" in str(refused.exception(30))
    assert cluster.admin.describe_topic(OFFSETS_TOPIC).configs["remote.storage.enable"] == "false"


def test_only_the_coordinator_serves_a_group(cluster: Cluster, topic: str) -> None:
    g = group()
    confluent_commit(cluster, g, {(topic, 0): 2})
    coordinator = serving_coordinator(cluster, g)
    assert coordinator == leader_of_partition_of(cluster, g)
    other = next(b for b in cluster.brokers if b != coordinator)
    commit = commit_request(g, topic, 9)
    fetch = fetch_v8.OffsetFetchRequest(
        groups=(fetch_v8.OffsetFetchRequestGroup(group_id=g, topics=None),)
    )
    with connected(cluster, other) as wire:
        [answer] = wire.call(commit).topics
        assert answer.partitions[0].error_code is ErrorCode.not_coordinator
        assert wire.call(fetch).groups[0].error_code is ErrorCode.not_coordinator
    with connected(cluster, coordinator) as wire:
        fetched = wire.call(fetch).groups[0]
        assert fetched.error_code is ErrorCode.none
        assert [
            (t.name, p.partition_index, p.committed_offset)
            for t in fetched.topics
            for p in t.partitions
        ] == [(topic, 0, 2)]


def test_delete_groups_and_offsets(cluster: Cluster, topic: str) -> None:
    g, h = group(), group()
    confluent_commit(cluster, g, {(topic, 0): 4, (topic, 1): 5})
    confluent_commit(cluster, h, {(topic, 0): 6})
    admin = python_admin(cluster)
    try:
        deleted = admin.delete_group_offsets(g, [PythonPartition(topic, 1)])
        assert all(
            error is None or getattr(error, "errno", 0) == 0 for error in deleted.values()
        ), deleted
    finally:
        admin.close()
    assert python_committed(cluster, g) == {(topic, 0): 4}
    [answer] = kafkajs(cluster, {"op": "deleteGroups", "groups": [h]})
    assert answer.ok()[0]["errorCode"] == 0
    assert python_committed(cluster, h) == {}
    confluent = confluent_admin(cluster)  # kept: its futures die with it
    result = confluent.delete_consumer_groups([h])[h]
    assert "GROUP_ID_NOT_FOUND" in str(result.exception(30))


def test_offset_delete_keeps_the_offsets_of_topics_a_member_consumes(
    cluster: Cluster, topic: str
) -> None:
    g = group()
    other = f"o-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, other)
    confluent_commit(cluster, g, {(topic, 0): 3, (other, 0): 4})
    member = KafkaConsumer(
        topic, bootstrap_servers=kafka_bootstrap(cluster), group_id=g, enable_auto_commit=False
    )
    try:

        def assigned() -> bool:
            member.poll(timeout_ms=200)
            return bool(member.assignment())

        poll_until(assigned, timeout=60, what="the member's assignment")
        admin = python_admin(cluster)
        try:
            answered = admin.delete_group_offsets(
                g, [PythonPartition(topic, 0), PythonPartition(other, 0)]
            )
        finally:
            admin.close()
        assert {tp.topic: error.message for tp, error in answered.items()} == {
            topic: "GROUP_SUBSCRIBED_TO_TOPIC",
            other: "NO_ERROR",
        }
    finally:
        member.close(autocommit=False)
    assert python_committed(cluster, g) == {(topic, 0): 3}


def test_offsets_of_a_deleted_topic_go(cluster: Cluster, topic: str) -> None:
    g = group()
    other = f"o-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, other)
    confluent_commit(cluster, g, {(topic, 0): 1, (other, 0): 2})
    cluster.admin.delete_topic(other)
    poll_until(
        lambda: python_committed(cluster, g) == {(topic, 0): 1},
        timeout=30,
        what="offsets of the deleted topic to go",
    )


def test_a_topic_created_again_under_a_deleted_ones_name_has_no_offsets(cluster: Cluster) -> None:
    """Kafka removes a topic's committed offsets when it is deleted: a group must not resume the
    new topic from the old one's positions (once the coordinator learns of the new topic, a
    moment late as Kafka's brokers do)."""
    g, name = group(), f"o-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, name)
    confluent_commit(cluster, g, {(name, 0): 500})
    cluster.admin.delete_topic(name)
    create_topic(cluster, name)
    poll_until(
        lambda: confluent_committed(cluster, g, [(name, 0)]) == {(name, 0): OFFSET_INVALID},
        timeout=30,
        what="the deleted topic's offset to be left out",
    )
    confluent_commit(cluster, g, {(name, 0): 2})  # the new topic's own
    assert confluent_committed(cluster, g, [(name, 0)]) == {(name, 0): 2}


# A broker's cluster view keeps an answer about a topic 1 s (ClusterView's max_age_s), and the
# retention check runs every offsets.retention.check.interval.ms: a commit stamped with a stale
# topic id would be left out of OffsetFetch, and removed, within this.
VIEW_AND_RETENTION_S = 3.0


def test_a_commit_right_after_a_delete_and_re_create_elsewhere_is_kept(cluster: Cluster) -> None:
    """The topic is deleted and created again through the controller (no broker's cached view
    is dropped), and the group commits at once: the coordinator, whose view still has the
    deleted topic, stamps the commit with the new topic's id, so it is answered, and stays,
    once the view is refreshed and the retention check has run."""
    g, name = group(), f"o-{uuid.uuid4().hex[:8]}"
    cluster.admin.create_topic(name, 1, {}, wait_hosted=True)
    confluent_commit(cluster, g, {(name, 0): 5})
    assert confluent_committed(cluster, g, [(name, 0)]) == {(name, 0): 5}  # the view has it
    cluster.admin.delete_topic(name)
    cluster.admin.create_topic(name, 1, {}, wait_hosted=True)
    confluent_commit(cluster, g, {(name, 0): 11})
    assert confluent_committed(cluster, g, [(name, 0)]) == {(name, 0): 11}
    until = time.monotonic() + VIEW_AND_RETENTION_S
    while time.monotonic() < until:  # it holds, not a wait for something to happen
        assert confluent_committed(cluster, g, [(name, 0)]) == {(name, 0): 11}
    assert python_committed(cluster, g) == {(name, 0): 11}


def test_a_topic_created_again_keeps_its_records_across_a_broker_restart(
    cluster: Cluster,
) -> None:
    """A restarted broker starts from the cluster's metadata as it is now: what it replays must
    not make the old topic's partition replace the new topic's log."""
    name = f"o-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, name)
    kcat(cluster, "-P", "-t", name, "-p", "0", stdin=b"old-1\nold-2\n")
    cluster.admin.delete_topic(name)
    create_topic(cluster, name)
    kcat(cluster, "-P", "-t", name, "-p", "0", stdin=b"new-1\nnew-2\nnew-3\n")
    leader = cluster.admin.describe_topic(name, include_partition_state=False).partitions[0]
    broker = cluster.brokers[leader.leader]
    broker.kill()
    broker.start()
    cluster.wait_for_live_brokers(set(cluster.brokers), timeout_s=60)
    poll_until(
        lambda: (
            kcat(cluster, "-C", "-t", name, "-p", "0", "-o", "beginning", "-e").split()
            == [b"new-1", b"new-2", b"new-3"]
        ),
        timeout=30,
        what="the new topic's records after the restart",
    )


def test_committed_offsets_survive_sigkill_of_every_process(cluster: Cluster, topic: str) -> None:
    g = group()
    confluent_commit(cluster, g, {(topic, 0): 21, (topic, 1): 22})
    for process in [*cluster.brokers.values(), *cluster.controllers]:
        process.kill()
    for controller in cluster.controllers:
        controller.start()
    for broker in cluster.brokers.values():
        broker.start()
    cluster.wait_for_live_brokers(set(cluster.brokers), timeout_s=60)
    assert confluent_committed(cluster, g, [(topic, 0), (topic, 1)]) == {
        (topic, 0): 21,
        (topic, 1): 22,
    }


def test_a_group_whose_coordinator_is_down_carries_on_when_it_is_back(
    cluster: Cluster, topic: str
) -> None:
    g = group()
    confluent_commit(cluster, g, {(topic, 0): 41})
    coordinator = serving_coordinator(cluster, g)
    other = next(b for b in cluster.brokers if b != coordinator)
    find = find_v4.FindCoordinatorRequest(key_type=0, coordinator_keys=(g,))
    cluster.brokers[coordinator].kill()
    try:
        with connected(cluster, other) as wire:
            poll_until(
                lambda: (
                    wire.call(find).coordinators[0].error_code
                    is ErrorCode.coordinator_not_available
                ),
                timeout=30,
                what="the coordinator's broker to be fenced",
            )
            [answer] = wire.call(commit_request(g, topic, 42)).topics
            assert answer.partitions[0].error_code is ErrorCode.not_coordinator
    finally:
        cluster.brokers[coordinator].start()
        cluster.wait_for_live_brokers(set(cluster.brokers), timeout_s=60)
    confluent_commit(cluster, g, {(topic, 0): 43})
    assert confluent_committed(cluster, g, [(topic, 0)]) == {(topic, 0): 43}


def test_committed_offsets_survive_a_controller_failover(cluster: Cluster, topic: str) -> None:
    g = group()
    confluent_commit(cluster, g, {(topic, 0): 51})
    active = cluster.active_controller()
    active.kill()
    try:
        poll_until(
            lambda: cluster.active_controller() is not active,
            timeout=60,
            what="the standby controller to take over",
        )
        assert confluent_committed(cluster, g, [(topic, 0)]) == {(topic, 0): 51}
        other = f"o-{uuid.uuid4().hex[:8]}"
        create_topic(cluster, other)  # the new controller serves what offsets need
        confluent_commit(cluster, g, {(other, 0): 52})
        assert python_committed(cluster, g) == {(topic, 0): 51, (other, 0): 52}
    finally:
        active.start()
