"""Produce and consume through a real cluster's Kafka listeners with unmodified clients, in both
metadata modes: every codec each way between confluent-kafka and kafka-python (keys, null keys,
empty values, headers, timestamps byte-exact) and between confluent-kafka and aiokafka, acks
0/1/all, a consumer with a group.id that assign()s explicit offsets, ListOffsets, long polls,
errors on the wire, and an idempotent producer whose connection is cut after its request was
written but before the answer came.

Broker 1 is advertised at a proxy's port, so every client reaches it through ``CuttingProxy``."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import TopicPartition as ConfluentPartition
from kafka import TopicPartition as PythonPartition
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.response import FetchResponse

from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    CODECS,
    T0,
    Message,
    aiokafka_produce,
    confluent_consumer,
    confluent_produce,
    consume,
    create_topic,
    in_partition_order,
    python_consumer,
    python_produce,
    sample,
    without_offsets,
)
from tests.support.kafka_cluster import MODES, connected, shared_cluster
from tests.support.kafka_proxy import CuttingProxy
from tests.support.kafka_requests import (
    by_partition,
    fetch,
    init_producer_id,
    list_offsets,
    produce,
)
from tiered.kafka.records import Record, build_batch

pytestmark = pytest.mark.processes

PRODUCE_KEY = 0


@pytest.fixture(scope="module")
def proxy() -> Iterator[CuttingProxy]:
    p = CuttingProxy()
    yield p
    p.close()


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    proxy: CuttingProxy,
) -> Iterator[Cluster]:
    behind_proxy = {1: {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}}
    root = tmp_path_factory.mktemp(f"kafka-data-{request.param}")
    with shared_cluster(request, root, behind_proxy) as c:
        listener = c.brokers[1].properties["listeners"].split("PLAINTEXT://")[1]
        host, _, port = listener.rpartition(":")
        proxy.forward_to(host, int(port))
        yield c


@pytest.fixture
def topic() -> str:
    return f"d-{uuid.uuid4().hex[:8]}"


def sent_order(messages: list[Message]) -> list[Message]:
    return sorted(messages, key=lambda m: m.partition)  # stable: send order in each partition


def partitions_of(cluster: Cluster, topic: str, leader: int) -> list[int]:
    described = cluster.admin.describe_topic(topic, include_partition_state=False)
    return [p for p, placement in enumerate(described.partitions) if placement.leader == leader]


# ----------------------------------------------------------------------------- byte-exact codecs


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_produces_kafka_python_reads(cluster: Cluster, topic: str, codec: str) -> None:
    create_topic(cluster, topic, partitions=2)
    messages = sample(60, partitions=2, tag=codec)
    confluent_produce(cluster, topic, messages, **{"compression.type": codec, "linger.ms": 20})
    got = consume(cluster, topic, {0: 0, 1: 0}, len(messages), client="python")
    assert without_offsets(in_partition_order(got)) == sent_order(messages)
    assert sorted(m.offset for m in got if m.partition == 0) == list(range(30))


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produces_confluent_reads(cluster: Cluster, topic: str, codec: str) -> None:
    create_topic(cluster, topic, partitions=2)
    messages = sample(60, partitions=2, tag=codec)
    python_produce(cluster, topic, messages, compression_type=None if codec == "none" else codec)
    got = consume(cluster, topic, {0: 0, 1: 0}, len(messages))
    assert without_offsets(in_partition_order(got)) == sent_order(messages)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_both_ways(cluster: Cluster, topic: str, codec: str) -> None:
    """A third client implementation (its own protocol code, asyncio), idempotent."""
    create_topic(cluster, topic, partitions=2)
    messages = sample(40, partitions=2, tag=f"aio-{codec}")
    aiokafka_produce(
        cluster,
        topic,
        messages,
        compression_type=None if codec == "none" else codec,
        enable_idempotence=True,
    )
    got = consume(cluster, topic, {0: 0, 1: 0}, len(messages))
    assert without_offsets(in_partition_order(got)) == sent_order(messages)
    back = consume(cluster, topic, {0: 0, 1: 0}, len(messages), client="aiokafka")
    assert without_offsets(in_partition_order(back)) == sent_order(messages)


def test_acks_zero_one_and_all(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=2)
    for acks in ("0", "1", "all"):
        confluent_produce(cluster, topic, sample(20, 2, tag=f"acks{acks}-"), acks=acks)
    got = consume(cluster, topic, {0: 0, 1: 0}, 60)
    assert len(got) == 60
    assert sorted(m.value for m in got) == sorted(
        m.value for acks in ("0", "1", "all") for m in sample(20, 2, tag=f"acks{acks}-")
    )


def test_an_assigning_consumer_with_a_group_reads_from_explicit_offsets(
    cluster: Cluster, topic: str
) -> None:
    create_topic(cluster, topic, partitions=2)
    messages = sample(40, partitions=2)
    confluent_produce(cluster, topic, messages)
    got = consume(cluster, topic, {0: 15, 1: 3}, 5 + 17)
    assert {(m.partition, m.offset) for m in got} == {(0, o) for o in range(15, 20)} | {
        (1, o) for o in range(3, 20)
    }
    assert without_offsets(in_partition_order(got)) == [
        *[m for m in messages if m.partition == 0][15:],
        *[m for m in messages if m.partition == 1][3:],
    ]


# -------------------------------------------------------------------------------- list offsets


def test_list_offsets_through_both_clients_and_on_the_wire(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=2)
    messages = sample(30, partitions=2)  # timestamps T0, T0 + 1, ...
    confluent_produce(cluster, topic, messages)
    consumer = confluent_consumer(cluster)
    try:
        assert consumer.get_watermark_offsets(ConfluentPartition(topic, 0), 10) == (0, 15)
        found = consumer.offsets_for_times([ConfluentPartition(topic, 1, T0 + 10)], 10)
        assert [(p.partition, p.offset) for p in found] == [(1, 5)]  # T0 + 11 is the 6th
        late = consumer.offsets_for_times([ConfluentPartition(topic, 1, T0 + 1000)], 10)
        assert late[0].offset == -1  # none that late: the end, as librdkafka reports it
    finally:
        consumer.close()
    python = python_consumer(cluster)
    try:
        tp0, tp1 = PythonPartition(topic, 0), PythonPartition(topic, 1)
        assert python.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert python.end_offsets([tp0, tp1]) == {tp0: 15, tp1: 15}
        at = python.offsets_for_times({tp0: T0 + 4})[tp0]
        assert at is not None and (at.offset, at.timestamp) == (2, T0 + 4)
    finally:
        python.close()
    [leader] = {cluster.admin.describe_topic(topic).partitions[0].leader}
    with connected(cluster, leader) as wire:
        answer = by_partition(wire.call(list_offsets({(topic, 0): -4})))[(topic, 0)]
        assert (answer.error_code, answer.offset, answer.leader_epoch) == (ErrorCode.none, 0, 0)
        newest = by_partition(wire.call(list_offsets({(topic, 0): -3})))[(topic, 0)]
        assert (newest.offset, newest.timestamp) == (14, T0 + 28)


# ------------------------------------------------------------------------- the wire, directly


def test_errors_and_producer_ids_on_the_wire(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=2)
    [theirs] = partitions_of(cluster, topic, leader=2)
    [mine] = partitions_of(cluster, topic, leader=1)
    one = build_batch([Record(b"k", b"v", timestamp=T0)])
    with connected(cluster, 1) as wire:
        answer = by_partition(
            wire.call(produce({(topic, mine): one, (topic, theirs): one, ("no-such", 0): one}))
        )
        assert answer[(topic, mine)].error_code is ErrorCode.none
        assert answer[(topic, theirs)].error_code is ErrorCode.not_leader_or_follower
        assert answer[("no-such", 0)].error_code is ErrorCode.unknown_topic_or_partition
        past_end = by_partition(wire.call(fetch({(topic, mine): 5})))[(topic, mine)]
        assert past_end.error_code is ErrorCode.offset_out_of_range
        ids = {wire.call(init_producer_id()).producer_id for _ in range(2)}
    with connected(cluster, 2) as wire:
        ids.add(wire.call(init_producer_id()).producer_id)
    assert len(ids) == 3 and {i >> 32 for i in ids} == {1, 2}


def test_a_long_poll_is_answered_by_a_grpc_produce(cluster: Cluster, topic: str) -> None:
    """The waiting fetch is woken by any append, here one through the broker's gRPC API."""
    create_topic(cluster, topic)
    described = cluster.admin.describe_topic(topic)
    leader = described.partitions[0].leader
    with connected(cluster, leader) as wire:
        wire.send(fetch({(topic, 0): 0}, max_wait_ms=25_000), 1)
        started = time.monotonic()
        threading.Timer(0.3, lambda: cluster.produce(described, 0, 1)).start()
        _, answer = wire.receive(FetchResponse)
        elapsed = time.monotonic() - started
    record = by_partition(answer)[(topic, 0)]
    assert record.high_watermark == 1 and len(record.records) > 0
    assert elapsed < 15, elapsed


# -------------------------------------------------------------------------------- idempotence


def test_an_idempotent_producer_whose_connection_is_cut_writes_each_record_once(
    cluster: Cluster, proxy: CuttingProxy, topic: str
) -> None:
    create_topic(cluster, topic, partitions=2)
    [through_proxy] = partitions_of(cluster, topic, leader=1)
    count, cuts_before = 3000, proxy.cuts
    messages = [Message(through_proxy, None, f"{i:06d}".encode(), (), T0 + i) for i in range(count)]
    config = {"enable.idempotence": True, "linger.ms": 5, "batch.num.messages": 100}
    producer = None
    for start in range(0, count, 500):
        proxy.cut_after_answer(PRODUCE_KEY)  # the next Produce is written, its answer lost
        chunk = messages[start : start + 500]
        producer = confluent_produce(cluster, topic, chunk, producer, **config)
    assert proxy.cuts - cuts_before == count // 500
    got = consume(cluster, topic, {through_proxy: 0}, count)
    assert [m.value for m in got] == [m.value for m in messages]  # each once, in order
    consumer = confluent_consumer(cluster)
    try:  # and nothing after them
        watermarks = consumer.get_watermark_offsets(ConfluentPartition(topic, through_proxy), 10)
        assert watermarks == (0, count)
    finally:
        consumer.close()
