"""Two more independent Kafka client implementations against a real cluster's Kafka listeners,
in both metadata modes.

KafkaJS (Node, its own protocol code; tests/js): admin createTopics with a tiered config,
describeConfigs (the read-only ``remote.log.tiered.state``), legacy AlterConfigs disabling a topic
whose early offsets are in remote storage only (retain and delete) until DISABLED, a bad disable
policy refused with INVALID_REQUEST and nothing changed, describeCluster, fetchTopicMetadata,
fetchTopicOffsets (by time too); an idempotent producer (none and gzip, the codecs KafkaJS has
built in) whose records confluent-kafka and kcat read back byte for byte. Its group consumer
is in groups/test_groups_clients.py.

kcat (librdkafka's command-line tool): produce with keys, null keys, headers and every codec,
consume by assignment byte-exact, ``-L -J`` metadata, ``-Q`` offsets by time, and a tiered topic
read from offset 0 where remote storage alone holds the early offsets."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest

from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    CODECS,
    EARLIEST,
    EARLIEST_LOCAL,
    T0,
    Message,
    confluent_produce,
    consume,
    create_topic,
    in_partition_order,
    offset_of,
    sample,
    tiered_with_remote_only_prefix,
    without_offsets,
)
from tests.support.kafka_cluster import connected, kafka_bootstrap, module_cluster
from tests.support.kafka_requests import by_partition, fetch
from tests.support.kafkajs import config_values, kafkajs, produce_step
from tests.support.kcat import (
    as_printed,
    kcat,
    kcat_consume,
    kcat_metadata,
    kcat_produce,
    kcat_sample,
)
from tiered.cluster.model import TieredState
from tiered.kafka.record_batch import BatchHeader, iter_batches

pytestmark = pytest.mark.processes

TIERED = {"remote.storage.enable": "true"}
STATE = "remote.log.tiered.state"

cluster = module_cluster("kafka-more")


@pytest.fixture
def topic() -> str:
    return f"m-{uuid.uuid4().hex[:8]}"


def leaders_of(cluster: Cluster, topic: str) -> dict[int, int]:
    described = cluster.admin.describe_topic(topic, include_partition_state=False)
    return {p: placement.leader for p, placement in enumerate(described.partitions)}


def stored_batches(cluster: Cluster, topic: str, partition: int) -> list[BatchHeader]:
    """The batches a raw Fetch from offset 0 returns, as stored."""
    with connected(cluster, leaders_of(cluster, topic)[partition]) as wire:
        answer = by_partition(wire.call(fetch({(topic, partition): 0})))[(topic, partition)]
    return list(iter_batches(answer.records))


def kafka_endpoints(cluster: Cluster) -> dict[int, str]:
    return {broker_id: kafka_bootstrap(cluster, broker_id) for broker_id in cluster.brokers}


# ------------------------------------------------------------------------------------ KafkaJS


def test_kafkajs_admin_creates_describes_and_lists_a_tiered_topic(
    cluster: Cluster, topic: str
) -> None:
    created, again, configs, described, metadata, offsets = kafkajs(
        cluster,
        {"op": "createTopics", "topics": [{"topic": topic, "partitions": 2, "configs": TIERED}]},
        {"op": "createTopics", "topics": [{"topic": topic, "partitions": 2}]},
        {"op": "describeConfigs", "topic": topic},
        {"op": "describeCluster"},
        {"op": "fetchTopicMetadata", "topics": [topic]},
        {"op": "fetchTopicOffsets", "topic": topic},
    )
    assert created.ok() is True
    assert again.ok() is False  # TOPIC_ALREADY_EXISTS: KafkaJS answers "not created"
    entries = configs.ok()["entries"]
    assert entries["remote.storage.enable"]["value"] == "true"
    assert entries["remote.storage.enable"]["isDefault"] is False
    assert entries["remote.log.disable.policy"]["value"] == "retain"
    assert (entries[STATE]["value"], entries[STATE]["readOnly"]) == ("ENABLED", True)
    assert entries["remote.log.tiered.epoch"]["value"] == "0"

    info = described.ok()
    assert {b["nodeId"]: f"{b['host']}:{b['port']}" for b in info["brokers"]} == (
        kafka_endpoints(cluster)
    )
    assert info["controller"] == min(cluster.brokers)
    assert info["clusterId"]

    leaders = leaders_of(cluster, topic)
    [listed] = metadata.ok()["topics"]
    assert listed["name"] == topic
    partitions = {p["partitionId"]: p for p in listed["partitions"]}
    assert {p: partitions[p]["leader"] for p in partitions} == leaders
    for p, partition in partitions.items():
        assert partition["partitionErrorCode"] == 0
        assert partition["replicas"] == partition["isr"] == [leaders[p]]
    assert sorted((o["partition"], o["low"], o["high"]) for o in offsets.ok()) == [
        (0, "0", "0"),
        (1, "0", "0"),
    ]


def kafkajs_sample(count: int, tag: str) -> list[Message]:
    """``sample``'s records over 2 partitions, some values null, each header name once or
    repeated in a row (KafkaJS takes headers as an object of name -> value or values)."""
    return [
        Message(
            m.partition,
            m.key,
            None if i % 7 == 3 else m.value,
            tuple(sorted(m.headers, key=lambda h: h[0] != "trace")),  # stable: trace, trace, empty
            m.timestamp_ms,
        )
        for i, m in enumerate(sample(count, partitions=2, tag=tag))
    ]


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_kafkajs_idempotent_producer_is_read_back_byte_exact(
    cluster: Cluster, topic: str, codec: str
) -> None:
    create_topic(cluster, topic, partitions=2)
    messages = kafkajs_sample(40, tag=f"js-{codec}-")
    first, second = messages[:24], messages[24:]  # 12 then 8 records to each partition
    sent, offsets, by_time = kafkajs(
        cluster,
        produce_step(topic, [first, second], compression=codec),
        {"op": "fetchTopicOffsets", "topic": topic},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": topic, "timestamp": T0 + 10},
    )
    answers = sent.ok()
    assert [
        sorted((r["partition"], r["errorCode"], r["baseOffset"]) for r in a) for a in answers
    ] == [
        [(0, 0, "0"), (1, 0, "0")],
        [(0, 0, "12"), (1, 0, "12")],
    ]
    assert sorted((o["partition"], o["low"], o["high"]) for o in offsets.ok()) == [
        (0, "0", "20"),
        (1, "0", "20"),
    ]
    # T0 + 10 is record 10 (partition 0's sixth); T0 + 11 is record 11 (partition 1's sixth).
    assert sorted((o["partition"], o["offset"]) for o in by_time.ok()) == [(0, "5"), (1, "5")]

    # On the wire: one batch a send, compressed, of one producer id with contiguous sequences.
    batches = stored_batches(cluster, topic, 0)
    assert [(b.base_offset, b.base_sequence, b.records_count, b.codec.name) for b in batches] == [
        (0, 0, 12, codec.upper()),
        (12, 12, 8, codec.upper()),
    ]
    [producer_id] = {b.producer_id for b in batches}
    assert producer_id >> 32 in cluster.brokers and {b.producer_epoch for b in batches} == {0}

    got = in_partition_order(consume(cluster, topic, {0: 0, 1: 0}, len(messages)))
    assert without_offsets(got) == sorted(messages, key=lambda m: m.partition)
    assert [(m.partition, m.offset) for m in got] == [(p, o) for p in (0, 1) for o in range(20)]
    assert in_partition_order(kcat_consume(cluster, topic)) == as_printed(got)


@pytest.mark.parametrize("policy", ["retain", "delete"])
def test_kafkajs_legacy_alter_configs_disables_a_tiered_topic(
    cluster: Cluster, topic: str, policy: str
) -> None:
    """On a topic whose early offsets are in remote storage only; delete drops them, so the log
    start KafkaJS lists moves up to the local log start."""
    count = 120
    tiered_with_remote_only_prefix(cluster, topic, count)
    altered, disabled, offsets = kafkajs(
        cluster,
        {
            "op": "alterConfigs",
            "topic": topic,
            "configs": {"remote.storage.enable": "false", "remote.log.disable.policy": policy},
        },
        {
            "op": "describeConfigs",
            "topic": topic,
            "until": {"name": STATE, "values": ["DISABLED"], "timeout_ms": 30_000},
        },
        {"op": "fetchTopicOffsets", "topic": topic},
    )
    [resource] = altered.ok()["resources"]
    assert (resource["errorCode"], resource["resourceName"]) == (0, topic)
    found = disabled.ok()
    assert found["seen"] in (["DISABLING", "DISABLED"], ["DISABLED"])
    values = config_values(found)
    assert values["remote.storage.enable"] == "false"
    assert values["remote.log.disable.policy"] == policy
    assert values["remote.log.tiered.epoch"] == "1"
    assert values["segment.bytes"] == "1073741824"  # legacy AlterConfigs replaces the whole set
    assert cluster.admin.describe_topic(topic).tiered_state is TieredState.DISABLED

    start = offset_of(cluster, topic, EARLIEST)
    if policy == "delete":
        assert start == offset_of(cluster, topic, EARLIEST_LOCAL) > 0
    else:
        assert start == 0
    [listed] = offsets.ok()
    assert (listed["low"], listed["high"]) == (str(start), str(count))


def test_kafkajs_alter_configs_with_a_bad_disable_policy_changes_nothing(
    cluster: Cluster, topic: str
) -> None:
    create_topic(cluster, topic, **TIERED, **{"retention.ms": "86400000"})
    bad = {"remote.storage.enable": "false", "remote.log.disable.policy": "purge"}
    refused, after = kafkajs(
        cluster,
        {"op": "alterConfigs", "topic": topic, "configs": bad},
        {"op": "describeConfigs", "topic": topic},
    )
    assert refused.error is not None, refused
    # KafkaJS throws its own text for the code and drops the broker's message ...
    assert (refused.error["name"], refused.error["type"], refused.error["code"]) == (
        "KafkaJSProtocolError",
        "INVALID_REQUEST",
        42,
    )
    assert refused.error["retriable"] is False
    # ... which was in the answer it decoded: the key, the bad value, the valid values.
    [answer] = refused.error["broker_answers"]
    [resource] = answer["resources"]
    assert (resource["errorCode"], resource["resourceName"]) == (42, topic)
    assert resource["errorMessage"] == (
        "remote.log.disable.policy='purge' is not valid; valid values: retain, delete"
    )
    values = config_values(after.ok())
    assert values["remote.storage.enable"] == "true"
    assert values["remote.log.disable.policy"] == "retain"
    assert values["retention.ms"] == "86400000"
    assert (values[STATE], values["remote.log.tiered.epoch"]) == ("ENABLED", "0")
    assert cluster.admin.describe_topic(topic).tiered_state is TieredState.ENABLED


# --------------------------------------------------------------------------------------- kcat


# kcat 1.7.1 bundles librdkafka 2.0.2, which sends a gzip, snappy or lz4 batch uncompressed to a
# broker whose lowest Produce version is above 0 (ours is 3, as Kafka 4.0's: KIP-896); later
# librdkafka versions compress (librdkafka issue 4956). zstd it compresses.
KCAT_STORES = {"none": "NONE", "gzip": "NONE", "snappy": "NONE", "lz4": "NONE", "zstd": "ZSTD"}


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produces_and_consumes_byte_exact(cluster: Cluster, topic: str, codec: str) -> None:
    """kcat produces to partition 0; confluent-kafka produces compressed to partition 1; kcat
    reads both, confluent-kafka reads what kcat produced."""
    create_topic(cluster, topic, partitions=2)
    headers = (("h", "1"), ("empty", ""), ("h", "again"))
    records = kcat_sample(12, tag=f"{codec}-")
    before = int(time.time() * 1000)
    kcat_produce(cluster, topic, 0, records, headers, codec)
    after = int(time.time() * 1000)
    assert {b.codec.name for b in stored_batches(cluster, topic, 0)} == {KCAT_STORES[codec]}
    messages = [replace(m, partition=1) for m in sample(12, tag=f"{codec}-", size=100)]
    confluent_produce(cluster, topic, messages, **{"compression.type": codec, "linger.ms": 20})
    # librdkafka sends a batch uncompressed when compressing would not make it smaller (a batch
    # that linger.ms closed with one small record): the codec is used, and nothing else.
    codecs = {b.codec.name for b in stored_batches(cluster, topic, 1)}
    assert codec.upper() in codecs and codecs <= {codec.upper(), "NONE"}

    got = kcat_consume(cluster, topic)
    mine = [m for m in got if m.partition == 0]
    assert [(m.key, m.value) for m in mine] == records
    assert [m.offset for m in mine] == list(range(len(records)))
    assert {m.headers for m in mine} == {(("h", b"1"), ("empty", b""), ("h", b"again"))}
    assert all(before <= m.timestamp_ms <= after for m in mine)
    theirs = [m for m in got if m.partition == 1]
    assert without_offsets(theirs) == as_printed(messages)
    assert [m.offset for m in theirs] == list(range(len(messages)))
    assert kcat_consume(cluster, topic, partition=1, offset="5") == theirs[5:]
    assert consume(cluster, topic, {0: 0}, len(records)) == mine


def test_kcat_lists_brokers_topics_and_offsets_by_time(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=3)
    leaders = leaders_of(cluster, topic)
    everything = kcat_metadata(cluster)
    assert {b["id"]: b["name"] for b in everything["brokers"]} == kafka_endpoints(cluster)
    assert everything["controllerid"] == min(cluster.brokers)
    listed = {t["topic"]: t for t in everything["topics"]}
    [alone] = kcat_metadata(cluster, topic)["topics"]
    for found in (listed[topic], alone):
        assert "error" not in found
        assert {p["partition"]: p["leader"] for p in found["partitions"]} == leaders
        for p in found["partitions"]:
            assert p["replicas"] == p["isrs"] == [{"id": leaders[p["partition"]]}]
    # kcat's producer handle asks for a missing topic to be created, and it is (Kafka's
    # auto.create.topics.enable, num.partitions 1).
    kcat_metadata(cluster, f"{topic}-missing")
    assert len(cluster.admin.describe_topic(f"{topic}-missing", False).partitions) == 1

    kcat_produce(cluster, topic, 2, [(None, b"a"), (None, b"b")])
    out = kcat(cluster, "-Q", "-t", f"{topic}:2:0", "-t", f"{topic}:1:0")
    # None at or after time 0 in the empty partition: -1, as Kafka answers.
    assert sorted(out.decode().splitlines()) == [f"{topic} [1] offset -1", f"{topic} [2] offset 0"]


def test_kcat_reads_a_tiered_topic_across_both_tiers(cluster: Cluster, topic: str) -> None:
    messages = tiered_with_remote_only_prefix(cluster, topic, 120)
    got = kcat_consume(cluster, topic, partition=0)
    assert without_offsets(got) == as_printed(messages)
    assert [m.offset for m in got] == list(range(len(messages)))
    assert kcat_consume(cluster, topic, partition=0, offset="7") == got[7:]
    out = kcat(cluster, "-Q", "-t", f"{topic}:0:{T0 + 7}")  # in remote storage only
    assert out.decode().split() == [topic, "[0]", "offset", "7"]
