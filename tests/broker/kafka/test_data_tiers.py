"""Kafka clients reading across both tiers of a real cluster, in both metadata modes: a topic
whose early offsets are only in remote storage is read from offset 0 byte-exact; a delete-policy
disable (IncrementalAlterConfigs through confluent-kafka's AdminClient) makes reads below the
new log start OFFSET_OUT_OF_RANGE for both clients; a retain disable then a re-enable keeps
offsets contiguous and everything readable (docs/design.md §2.6 and docs/kafka-compatibility.md)."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import TopicPartition as PythonPartition
from kafka.errors import OffsetOutOfRangeError

from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    EARLIEST,
    EARLIEST_LOCAL,
    SMALL_BATCHES,
    alter_topic,
    confluent_consumer,
    confluent_produce,
    consume,
    offset_of,
    python_consumer,
    sample,
    tiered_with_remote_only_prefix,
    without_offsets,
)
from tests.support.kafka_cluster import module_cluster
from tiered.cluster.model import TieredState

pytestmark = pytest.mark.processes

cluster = module_cluster("kafka-tiers")


@pytest.fixture
def topic() -> str:
    return f"r-{uuid.uuid4().hex[:8]}"


def test_early_offsets_in_remote_storage_only_are_read_byte_exact(
    cluster: Cluster, topic: str
) -> None:
    messages = tiered_with_remote_only_prefix(cluster, topic, 300)
    assert offset_of(cluster, topic, EARLIEST) == 0
    from_confluent = consume(cluster, topic, {0: 0}, len(messages))
    assert without_offsets(from_confluent) == messages
    assert [m.offset for m in from_confluent] == list(range(len(messages)))
    from_python = consume(cluster, topic, {0: 0}, len(messages), client="python")
    assert without_offsets(from_python) == messages


def test_a_delete_disable_makes_reads_below_the_new_log_start_out_of_range(
    cluster: Cluster, topic: str
) -> None:
    messages = tiered_with_remote_only_prefix(cluster, topic, 200)
    alter_topic(
        cluster, topic, **{"remote.log.disable.policy": "delete", "remote.storage.enable": "false"}
    )
    cluster.wait_for_state(topic, TieredState.DISABLED)
    start = offset_of(cluster, topic, EARLIEST)
    assert start == offset_of(cluster, topic, EARLIEST_LOCAL) > 0

    consumer = confluent_consumer(cluster, **{"auto.offset.reset": "error"})
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        error = None
        while error is None:
            message = consumer.poll(30)
            assert message is not None, "no answer to a read below the log start"
            error = message.error()
        assert error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)
        assert "out of range" in error.str().lower()
    finally:
        consumer.close()
    python = python_consumer(cluster, auto_offset_reset="none")
    try:
        tp = PythonPartition(topic, 0)
        python.assign([tp])
        python.seek(tp, 0)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(60):
                python.poll(timeout_ms=500)
    finally:
        python.close()
    rest = consume(cluster, topic, {0: start}, len(messages) - start)
    assert without_offsets(rest) == messages[start:]


def test_a_retain_disable_then_reenable_keeps_offsets_contiguous(
    cluster: Cluster, topic: str
) -> None:
    before = tiered_with_remote_only_prefix(cluster, topic, 150)
    alter_topic(cluster, topic, **{"remote.storage.enable": "false"})  # retain: the default
    cluster.wait_for_state(topic, TieredState.DISABLED)
    while_disabled = sample(50, tag="off", size=100)
    confluent_produce(cluster, topic, while_disabled, **SMALL_BATCHES)
    alter_topic(cluster, topic, **{"remote.storage.enable": "true"})
    cluster.wait_for_state(topic, TieredState.ENABLED)
    after = sample(50, tag="on", size=100)
    confluent_produce(cluster, topic, after, **SMALL_BATCHES)
    everything = before + while_disabled + after
    assert offset_of(cluster, topic, EARLIEST) == 0
    got = consume(cluster, topic, {0: 0}, len(everything))
    assert [m.offset for m in got] == list(range(len(everything)))
    assert without_offsets(got) == everything
