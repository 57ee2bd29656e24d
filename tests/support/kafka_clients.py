"""Unmodified Kafka clients (confluent-kafka, kafka-python, aiokafka) producing to and consuming from a
real cluster, and the records they exchange, compared byte for byte: partition, offset, key,
value, headers, timestamp."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioPartition
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as PythonPartition
from kio.schema.errors import ErrorCode

from tests.support.cluster import Cluster
from tests.support.kafka_cluster import (
    QUIET,
    confluent_admin,
    connected,
    kafka_bootstrap,
    result_error,
)
from tests.support.kafka_requests import by_partition, list_offsets
from tests.support.polling import poll_until

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# An hour ago, fixed for the run: recent enough that retention.ms (7 days) keeps every record.
T0 = int(time.time() * 1000) - 3_600_000
# Small segments, two of them kept locally: most of the log soon lives in remote storage only.
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000", "local.retention.bytes": "4000"}
# One record per batch, so that segments roll every few records.
SMALL_BATCHES = {"linger.ms": 0, "batch.num.messages": 1}
EARLIEST, EARLIEST_LOCAL = -2, -4


@dataclass(frozen=True)
class Message:
    """A record as a client sends it and reads it back (``offset`` -1 until it is read)."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int
    offset: int = -1


def sample(count: int, partitions: int = 1, tag: str = "", size: int = 40) -> list[Message]:
    """Keys, null keys, empty values, no headers, several headers (an empty one among them),
    distinct timestamps, spread over ``partitions``."""
    messages = []
    for i in range(count):
        headers: tuple[tuple[str, bytes], ...] = ()
        if i % 3 == 1:
            headers = (("trace", f"t{i}".encode()), ("empty", b""), ("trace", b"\x00\xff"))
        messages.append(
            Message(
                partition=i % partitions,
                key=None if i % 4 == 0 else f"key-{i}".encode(),
                value=b"" if i % 5 == 0 else f"{tag}{i:06d}".encode().ljust(size, b"."),
                headers=headers,
                timestamp_ms=T0 + i,
            )
        )
    return messages


def without_offsets(messages: list[Message]) -> list[Message]:
    return [replace(m, offset=-1) for m in messages]


def create_topic(cluster: Cluster, name: str, partitions: int = 1, **configs: str) -> None:
    """Creates a topic and waits until its leaders host every partition."""
    admin = confluent_admin(cluster)
    [future] = admin.create_topics([NewTopic(name, partitions, 1, config=configs)]).values()
    assert future.result(30) is None
    wait_hosted(cluster, name)


def wait_hosted(cluster: Cluster, name: str) -> None:
    """Waits until the leaders of topic ``name`` host every partition."""
    topic = cluster.admin.describe_topic(name, include_partition_state=False)
    for p, placement in enumerate(topic.partitions):
        poll_until(
            lambda p=p, leader=placement.leader: (topic.topic_id, p) in cluster.log_dirs(leader),
            timeout=30,
            what=f"partition {p} of {name} to be hosted",
        )


def offset_of(cluster: Cluster, topic: str, timestamp: int) -> int:
    """ListOffsets of partition 0 for ``timestamp`` (or -1, -2, -3, -4), on the wire."""
    leader = cluster.admin.describe_topic(topic, include_partition_state=False)
    with connected(cluster, leader.partitions[0].leader) as wire:
        answer = by_partition(wire.call(list_offsets({(topic, 0): timestamp})))[(topic, 0)]
    assert answer.error_code is ErrorCode.none
    return int(answer.offset)


def tiered_with_remote_only_prefix(cluster: Cluster, topic: str, count: int) -> list[Message]:
    """A tiered topic of ``count`` records (one partition, produced by confluent-kafka) whose
    first offsets have left the local log: only remote storage has them."""
    create_topic(cluster, topic, **TIERED)
    messages = sample(count, size=100)
    confluent_produce(cluster, topic, messages, **SMALL_BATCHES)
    poll_until(
        lambda: offset_of(cluster, topic, EARLIEST_LOCAL) > count // 2,
        timeout=60,
        what=f"the local log start of {topic} to pass offset {count // 2}",
    )
    return messages


def alter_topic(cluster: Cluster, name: str, **configs: str) -> None:
    """IncrementalAlterConfigs SET through confluent-kafka's AdminClient."""
    resource = ConfigResource(
        "topic",
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in configs.items()
        ],
    )
    admin = confluent_admin(cluster)
    [future] = admin.incremental_alter_configs([resource]).values()
    assert result_error(future) is None


# ------------------------------------------------------------------------------ confluent-kafka


def confluent_produce(
    cluster: Cluster,
    topic: str,
    messages: list[Message],
    producer: Producer | None = None,
    **config: Any,
) -> Producer:
    """Produces every message (each to its partition) with ``producer`` or a new one of
    ``config`` and waits for every delivery; returns the producer (flushed) for more."""
    if producer is None:
        producer = Producer({"bootstrap.servers": kafka_bootstrap(cluster), **QUIET, **config})
    failures: list[Any] = []

    def delivered(error: KafkaError | None, _: Any) -> None:
        if error is not None:
            failures.append(error)

    for m in messages:
        producer.produce(
            topic,
            value=m.value,
            key=m.key,
            partition=m.partition,
            headers=list(m.headers) or None,
            timestamp=m.timestamp_ms,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []
    return producer


def confluent_consumer(cluster: Cluster, **config: Any) -> Consumer:
    """A consumer with a group.id that only assign()s (no group membership, no commits)."""
    return Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "assigned-only",
            "enable.auto.commit": False,
            **QUIET,
            **config,
        }
    )


# -------------------------------------------------------------------------------- kafka-python


def python_produce(cluster: Cluster, topic: str, messages: list[Message], **config: Any) -> None:
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), **config)
    try:
        futures = [
            producer.send(
                topic,
                value=m.value,
                key=m.key,
                headers=list(m.headers),
                partition=m.partition,
                timestamp_ms=m.timestamp_ms,
            )
            for m in messages
        ]
        producer.flush(60)
        for future in futures:
            future.get(30)
    finally:
        producer.close(10)


def python_consumer(cluster: Cluster, **config: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster),
        enable_auto_commit=False,
        group_id=None,
        **config,
    )


# ------------------------------------------------------------------------------- either client


def consume(
    cluster: Cluster,
    topic: str,
    start: dict[int, int],
    count: int,
    *,
    client: str = "confluent",
    timeout_s: float = 30.0,
    **config: Any,
) -> list[Message]:
    """Up to ``count`` messages read from ``start`` (partition -> offset) by ``client``
    (confluent, python or aiokafka) assigning the partitions itself, within ``timeout_s``; a consumer
    error raises (confluent-kafka: AssertionError, kafka-python: its exception)."""
    if client == "aiokafka":
        return asyncio.run(_aiokafka_consume(cluster, topic, start, count, timeout_s, config))
    poll, close = (_confluent_reader if client == "confluent" else _python_reader)(
        cluster, topic, start, config
    )
    try:
        found: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while len(found) < count and time.monotonic() < deadline:
            found.extend(poll())
        return found
    finally:
        close()


_Reader = tuple[Callable[[], list[Message]], Callable[[], None]]


def _confluent_reader(
    cluster: Cluster, topic: str, start: dict[int, int], config: dict[str, Any]
) -> _Reader:
    consumer = confluent_consumer(cluster, **config)
    consumer.assign([ConfluentPartition(topic, p, o) for p, o in start.items()])

    def poll() -> list[Message]:
        message = consumer.poll(0.5)
        if message is None:
            return []
        error = message.error()
        if error is not None:
            raise AssertionError(f"consumer error: {error}")
        headers = tuple(message.headers() or ())
        _, timestamp = message.timestamp()
        return [
            Message(
                message.partition(),
                message.key(),
                message.value(),
                headers,
                timestamp,
                message.offset(),
            )
        ]

    return poll, consumer.close


def _python_reader(
    cluster: Cluster, topic: str, start: dict[int, int], config: dict[str, Any]
) -> _Reader:
    consumer = python_consumer(cluster, **config)
    partitions = {p: PythonPartition(topic, p) for p in start}
    consumer.assign(list(partitions.values()))
    for p, offset in start.items():
        consumer.seek(partitions[p], offset)

    def poll() -> list[Message]:
        return [
            Message(r.partition, r.key, r.value, tuple(r.headers), r.timestamp, r.offset)
            for records in consumer.poll(timeout_ms=500).values()
            for r in records
        ]

    return poll, consumer.close


# ---------------------------------------------------------------------------------- aiokafka


def aiokafka_produce(cluster: Cluster, topic: str, messages: list[Message], **config: Any) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), **config)
        await producer.start()
        try:
            sent = [
                await producer.send(
                    topic,
                    value=m.value,
                    key=m.key,
                    partition=m.partition,
                    timestamp_ms=m.timestamp_ms,
                    headers=list(m.headers),
                )
                for m in messages
            ]
            await producer.flush()
            for delivery in sent:
                await asyncio.wait_for(delivery, 30)
        finally:
            await producer.stop()

    asyncio.run(run())


async def _aiokafka_consume(
    cluster: Cluster,
    topic: str,
    start: dict[int, int],
    count: int,
    timeout_s: float,
    config: dict[str, Any],
) -> list[Message]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster), enable_auto_commit=False, **config
    )
    await consumer.start()
    try:
        partitions = {p: AioPartition(topic, p) for p in start}
        consumer.assign(list(partitions.values()))
        for p, offset in start.items():
            consumer.seek(partitions[p], offset)
        found: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while len(found) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            found.extend(
                Message(r.partition, r.key, r.value, tuple(r.headers), r.timestamp, r.offset)
                for records in batches.values()
                for r in records
            )
        return found
    finally:
        await consumer.stop()


def in_partition_order(messages: list[Message]) -> list[Message]:
    return sorted(messages, key=lambda m: (m.partition, m.offset))
