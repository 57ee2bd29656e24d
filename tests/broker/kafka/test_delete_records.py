"""DeleteRecords from unmodified Kafka clients on a real cluster, in both metadata modes
(docs/kafka-compatibility.md): confluent-kafka's ``AdminClient.delete_records`` into a tiered
topic's remote-only offsets, kafka-python's ``KafkaAdminClient.delete_records`` and KafkaJS's
``admin.deleteTopicRecords``. Reads below the new log start are OFFSET_OUT_OF_RANGE, ListOffsets'
earliest answers it, the remote segments wholly below it leave the RLMM and remote storage, and the
new start survives a SIGKILL of its broker."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as PythonPartition
from kafka.errors import OffsetOutOfRangeError

from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    EARLIEST,
    EARLIEST_LOCAL,
    alter_topic,
    confluent_produce,
    consume,
    create_topic,
    offset_of,
    python_consumer,
    sample,
    tiered_with_remote_only_prefix,
    without_offsets,
)
from tests.support.kafka_cluster import confluent_admin, kafka_bootstrap, module_cluster
from tests.support.kafkajs import kafkajs
from tests.support.polling import poll_until
from tiered.admin import TopicDescription
from tiered.api import RemoteLogSegmentMetadata, RemoteLogSegmentState
from tiered.cluster.model import TieredState

pytestmark = pytest.mark.processes

cluster = module_cluster("kafka-delete-records")


@pytest.fixture
def topic() -> str:
    return f"d-{uuid.uuid4().hex[:8]}"


def remote_only_segments(cluster: Cluster, topic: str) -> list[RemoteLogSegmentMetadata]:
    """Partition 0's copied segments that the local log no longer holds, oldest first."""
    described = cluster.admin.describe_topic(topic, include_partition_state=False)
    local_start = offset_of(cluster, topic, EARLIEST_LOCAL)
    return [
        m
        for m in cluster.remote_segments(described, 0)
        if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED and m.end_offset < local_start
    ]


def remote_object_names(cluster: Cluster, topic: TopicDescription) -> str:
    base = cluster.root / "remote" / f"{topic.name}-{topic.topic_id}"
    return " ".join(p.name for p in Path(base).rglob("*") if p.is_file())


def expired_below(cluster: Cluster, topic: str, start: int) -> TopicDescription:
    """Waits until no remote segment of partition 0 lies wholly below ``start``, in the RLMM and
    in remote storage (the objects of those it listed before are gone)."""
    described = cluster.admin.describe_topic(topic)
    before = [m for m in cluster.remote_segments(described, 0) if m.end_offset < start]

    def expired() -> bool:
        listed = cluster.remote_segments(described, 0)
        names = remote_object_names(cluster, described)
        return all(m.end_offset >= start for m in listed) and not any(
            str(m.remote_log_segment_id.id) in names for m in before
        )

    poll_until(expired, timeout=30, what=f"remote segments of {topic} below {start} to go")
    return cluster.admin.describe_topic(topic)


def assert_read_below_refused(cluster: Cluster, topic: str, offset: int) -> None:
    """kafka-python, resetting nothing, is told OFFSET_OUT_OF_RANGE at ``offset``."""
    consumer = python_consumer(cluster, auto_offset_reset="none")
    try:
        tp = PythonPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(60):
                consumer.poll(timeout_ms=500)
    finally:
        consumer.close()


def test_confluent_deletes_records_across_both_tiers(cluster: Cluster, topic: str) -> None:
    messages = tiered_with_remote_only_prefix(cluster, topic, 300)
    remote_only = remote_only_segments(cluster, topic)
    assert len(remote_only) >= 3
    new_start = remote_only[2].start_offset + 1  # inside a segment in remote storage only
    admin = confluent_admin(cluster)
    [future] = admin.delete_records([ConfluentPartition(topic, 0, new_start)]).values()
    assert future.result(30).low_watermark == new_start
    assert offset_of(cluster, topic, EARLIEST) == new_start
    assert_read_below_refused(cluster, topic, new_start - 1)
    rest = consume(cluster, topic, {0: new_start}, len(messages) - new_start)
    assert [m.offset for m in rest] == list(range(new_start, len(messages)))
    assert without_offsets(rest) == messages[new_start:]
    described = expired_below(cluster, topic, new_start)
    partition = described.partitions[0]
    assert partition.log_start_offset == new_start
    assert partition.remote_log_start_offset == remote_only[2].start_offset


@pytest.mark.parametrize("policy", ["retain", "delete"])
def test_delete_records_on_a_disabled_topic(cluster: Cluster, topic: str, policy: str) -> None:
    """Retain: the remote data is still expired, so DeleteRecords deletes what lies below it
    there. Delete: the log start already rose to the local log start, the bulk delete owns the
    remote data and DeleteRecords moves the start within the local log."""
    messages = tiered_with_remote_only_prefix(cluster, topic, 200)
    remote_only = remote_only_segments(cluster, topic)
    assert len(remote_only) >= 2
    alter_topic(
        cluster,
        topic,
        **{"remote.log.disable.policy": policy, "remote.storage.enable": "false"},
    )
    cluster.wait_for_state(topic, TieredState.DISABLED)
    admin = confluent_admin(cluster)

    def delete_below(offset: int) -> int:
        [future] = admin.delete_records([ConfluentPartition(topic, 0, offset)]).values()
        return int(future.result(30).low_watermark)

    inside_remote = remote_only[1].start_offset + 1
    if policy == "retain":
        new_start = inside_remote
        assert delete_below(new_start) == new_start
        expired_below(cluster, topic, new_start)
    else:
        local_start = offset_of(cluster, topic, EARLIEST)
        assert local_start > inside_remote
        assert delete_below(inside_remote) == local_start  # below the log start: no change
        new_start = local_start + 2
        assert delete_below(new_start) == new_start
        described = cluster.admin.describe_topic(topic, include_partition_state=False)
        poll_until(
            lambda: cluster.remote_segments(described, 0) == [],
            timeout=60,
            what=f"the bulk delete of {topic}",
        )
    assert offset_of(cluster, topic, EARLIEST) == new_start
    assert_read_below_refused(cluster, topic, new_start - 1)
    rest = consume(cluster, topic, {0: new_start}, len(messages) - new_start)
    assert without_offsets(rest) == messages[new_start:]


def test_kafka_python_and_kafkajs_delete_records(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=2)
    messages = sample(40, partitions=2)  # 20 a partition
    confluent_produce(cluster, topic, messages)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        deleted = admin.delete_records({PythonPartition(topic, 0): 5})
        assert deleted[PythonPartition(topic, 0)]["low_watermark"] == 5
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({PythonPartition(topic, 0): 21})  # past the high watermark
    finally:
        admin.close()
    # KafkaJS deletes on the leaders its metadata knows: it must have loaded the topic's.
    _, to_end, offsets, past_end = kafkajs(
        cluster,
        {"op": "fetchTopicMetadata", "topics": [topic]},
        {
            "op": "deleteTopicRecords",
            "topic": topic,
            "partitions": [{"partition": 1, "offset": "-1"}],
        },
        {"op": "fetchTopicOffsets", "topic": topic},
        {
            "op": "deleteTopicRecords",
            "topic": topic,
            "partitions": [{"partition": 0, "offset": "99"}],
        },
    )
    to_end.ok()
    lows = {o["partition"]: (o["low"], o["high"]) for o in offsets.ok()}
    assert lows == {0: ("5", "20"), 1: ("20", "20")}
    assert past_end.error is not None
    assert "KafkaJSDeleteTopicRecordsError" in (past_end.error["name"], past_end.error["cause"])
    assert [(p["partition"], p["type"]) for p in past_end.error["partitions"]] == [
        (0, "OFFSET_OUT_OF_RANGE")
    ]
    assert_read_below_refused(cluster, topic, 4)
    got = consume(cluster, topic, {0: 5}, 15, client="python")
    assert without_offsets(got) == [m for m in messages if m.partition == 0][5:]


def test_the_new_log_start_survives_a_sigkill_of_its_broker(cluster: Cluster, topic: str) -> None:
    messages = tiered_with_remote_only_prefix(cluster, topic, 200)
    new_start = offset_of(cluster, topic, EARLIEST_LOCAL) + 2  # every remote-only segment goes
    leader = cluster.admin.describe_topic(topic, include_partition_state=False).partitions[0]
    admin = confluent_admin(cluster)
    [future] = admin.delete_records([ConfluentPartition(topic, 0, new_start)]).values()
    assert future.result(30).low_watermark == new_start
    victim = cluster.brokers[leader.leader]
    victim.kill()  # at once: expiration may not have run yet
    try:
        victim.start()
    finally:
        if not victim.alive:
            victim.start()
        cluster.wait_for_live_brokers(set(cluster.brokers))
    poll_until(
        lambda: offset_of(cluster, topic, EARLIEST) == new_start,
        timeout=30,
        what="the restarted broker to answer ListOffsets",
    )
    assert_read_below_refused(cluster, topic, new_start - 1)
    described = expired_below(cluster, topic, new_start)
    assert described.partitions[0].log_start_offset == new_start
    rest = consume(cluster, topic, {0: new_start}, len(messages) - new_start)
    assert without_offsets(rest) == messages[new_start:]
