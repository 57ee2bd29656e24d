"""Unmodified Kafka clients (confluent-kafka/librdkafka, kafka-python) against the listener.

The handler is a tiny in-test one (one broker, one topic); these tests pin what the clients
need from the codec layer: ApiVersions negotiation, Metadata in the version they choose, and
Produce batches in every codec librdkafka writes, decoded byte-exact.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaConsumer
from kafka.admin import ConfigResource as PythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kio.schema.errors import ErrorCode

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import RequestContext
from tests.support.kafka_wire import NO_THROTTLE, OneTopicHandler, serving
from tiered.kafka.messages import build, nested, response_type_for
from tiered.kafka.records import Record

# librdkafka derives features from ApiVersions: record batches v2 need Fetch v4+ advertised
# and lz4 needs FindCoordinator, so both are listed even though these tests never call them.
# DescribeConfigs is advertised from v1 (kio has no v0): both clients must still use it.
CLIENT_REGISTRY = ApiVersionRegistry(
    {18: (0, 4), 3: (0, 12), 0: (3, 11), 1: (4, 12), 10: (0, 6), 32: (1, 4)}
)
QUIET = {"log_level": 3}


class ProducerFacingHandler(OneTopicHandler):
    def __init__(self) -> None:
        super().__init__()
        self.describe_versions: list[int] = []

    def fetch(self, request: Any, context: RequestContext) -> Any:
        raise NotImplementedError("no consumer in these tests")

    find_coordinator = fetch

    def describe_configs(self, request: Any, context: RequestContext) -> Any:
        response_type = response_type_for(request)
        self.describe_versions.append(context.api_version)
        entry = build(
            nested(response_type, "DescribeConfigsResourceResult"),
            name="retention.ms",
            value="604800000",
            read_only=False,
            is_default=False,
            config_source=1,  # dynamic topic config
            is_sensitive=False,
            synonyms=(),
            config_type=5,  # LONG
            documentation=None,
        )
        results = tuple(
            build(
                nested(response_type, "DescribeConfigsResult"),
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=(entry,),
            )
            for resource in request.resources
        )
        return build(response_type, throttle_time=NO_THROTTLE, results=results)


@pytest.fixture
def handler() -> Iterator[ProducerFacingHandler]:
    handler = ProducerFacingHandler()
    with serving(handler, CLIENT_REGISTRY):
        yield handler


def bootstrap(handler: OneTopicHandler) -> str:
    return f"127.0.0.1:{handler.port}"


def test_confluent_admin_client_lists_the_topic(handler: ProducerFacingHandler) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(handler), **QUIET})
    metadata = admin.list_topics(timeout=20)
    assert list(metadata.topics) == ["orders"]
    assert metadata.topics["orders"].partitions[0].leader == 1
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        1: ("127.0.0.1", handler.port)
    }


def test_kafka_python_consumer_and_admin_see_the_topic(handler: ProducerFacingHandler) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(handler), request_timeout_ms=20000)
    try:
        assert consumer.topics() == {"orders"}
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap(handler), request_timeout_ms=20000)
    try:
        assert admin.list_topics() == ["orders"]
    finally:
        admin.close()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_batches_decode_byte_exact_in_every_codec(
    handler: ProducerFacingHandler, codec: str
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap(handler),
            "compression.codec": codec,
            "linger.ms": 50,
            **QUIET,
        }
    )
    sent = [
        Record(
            key=None if i % 3 == 0 else b"key-%d" % i,
            value=b"" if i % 5 == 0 else bytes(range(256)) * (i % 4 + 1),
            headers=(("trace", b"\x00\xff%d" % i), ("empty", None)),
            timestamp=1_700_000_000_000 + i,
        )
        for i in range(30)
    ]
    for record in sent:
        producer.produce(
            "orders",
            key=record.key,
            value=record.value,
            headers=list(record.headers),
            timestamp=record.timestamp,
            partition=0,
        )
    assert producer.flush(20) == 0
    received = [consumed.record for _, batch in handler.produced for consumed in batch]
    assert received == sent


def test_librdkafka_acks_zero_is_accepted_without_an_answer(
    handler: ProducerFacingHandler,
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap(handler), "acks": 0, **QUIET})
    producer.produce("orders", value=b"fire and forget", partition=0)
    assert producer.flush(20) == 0  # returns once sent: nothing comes back for acks=0
    deadline = time.monotonic() + 20
    while not handler.produced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(acks, [c.record.value for c in batch]) for acks, batch in handler.produced] == [
        (0, [b"fire and forget"])
    ]


def test_both_clients_describe_configs_with_versions_from_v1(
    handler: ProducerFacingHandler,
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap(handler), **QUIET})
    [future] = admin.describe_configs([ConfigResource("topic", "orders")]).values()
    assert {k: v.value for k, v in future.result(20).items()} == {"retention.ms": "604800000"}
    python_admin = KafkaAdminClient(bootstrap_servers=bootstrap(handler), request_timeout_ms=20000)
    try:
        described = python_admin.describe_configs(
            [PythonConfigResource(ConfigResourceType.TOPIC, "orders")]
        )
    finally:
        python_admin.close()
    assert described["topic"]["orders"]["retention.ms"]["value"] == "604800000"
    assert handler.describe_versions == [1, 4]  # librdkafka uses v1, kafka-python v4
