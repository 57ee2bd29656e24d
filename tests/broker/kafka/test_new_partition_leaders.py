"""A partition is named with a leader only once that leader hosts it, in both metadata modes.

librdkafka, not idempotent and with several requests in flight, sends a partition's batches one
after another without waiting; a leader that refused the first ones (it did not host the
partition yet) and accepted the later ones would store them out of order, and the client reports
no error even with ``retries=0``. So, as Kafka does: CreateTopics and CreatePartitions answer once
every new partition is hosted by its leader (REQUEST_TIMED_OUT after the request's timeout, the
topic created all the same; at once with ``timeout_ms=0``), and until then Metadata answers the
partition LEADER_NOT_AVAILABLE with leader -1.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i32

from tests.support.cluster import Cluster
from tests.support.kafka_cluster import (
    QUIET,
    confluent_admin,
    connected,
    kafka_bootstrap,
    result_error,
    shared_cluster,
)
from tests.support.polling import poll_until

pytestmark = [pytest.mark.processes]

TOPICS = 30
PARTITIONS = 3
RECORDS = 100  # per partition: ten batches of ten, five in flight


@pytest.fixture(scope="module", params=("kraft", "zookeeper"))
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with shared_cluster(
        request, tmp_path_factory.mktemp(f"leaders-{request.param}"), brokers=3
    ) as c:
        yield c


def _create(cluster: Cluster, names: list[str], partitions: int) -> None:
    admin = confluent_admin(cluster)  # kept until its futures are done: its end fails them
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names]
    )
    for name, future in futures.items():
        assert result_error(future) is None, name


def _produce_in_order(cluster: Cluster, topics: list[str], partitions: int, **config: Any) -> None:
    """``RECORDS`` numbered records to every partition of ``topics`` at once, five requests in
    flight, small batches: each must be delivered without error."""
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 5,
            "batch.num.messages": 10,
            "linger.ms": 0,
            **QUIET,
            **config,
        }
    )
    failures: list[Any] = []

    def delivered(error: Any, _: Any) -> None:
        if error is not None:
            failures.append(error)

    for n in range(RECORDS):
        for topic in topics:
            for p in range(partitions):
                producer.produce(topic, value=str(n).encode(), partition=p, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert failures == []


def _read_back(cluster: Cluster, topics: list[str], partitions: range) -> dict[str, list[int]]:
    """Every record of the partitions, by "topic-partition", in log order (one consumer)."""
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "reader",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    consumer.assign([TopicPartition(t, p, 0) for t in topics for p in partitions])
    found: dict[str, list[int]] = {f"{t}-{p}": [] for t in topics for p in partitions}
    wanted = RECORDS * len(found)

    def read() -> bool:
        for message in consumer.consume(10_000, timeout=0.5):
            assert message.error() is None, message.error()
            found[f"{message.topic()}-{message.partition()}"].append(int(message.value()))
        return sum(len(records) for records in found.values()) >= wanted

    try:
        poll_until(read, timeout=60, what=f"{wanted} records")
    finally:
        consumer.close()
    return found


def _produce_from_two_producers(
    cluster: Cluster, prefix: str, partitions: int, **config: Any
) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(TOPICS)]
    _create(cluster, names, partitions)
    halves = [names[: TOPICS // 2], names[TOPICS // 2 :]]
    errors: list[BaseException] = []

    def produce(topics: list[str]) -> None:
        try:
            _produce_in_order(cluster, topics, partitions, **config)
        except BaseException as e:  # reported by the test's thread
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(half,)) for half in halves]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return names


@pytest.mark.parametrize("retries", [0, 5])
def test_records_of_new_topics_are_stored_in_producer_order(cluster: Cluster, retries: int) -> None:
    names = _produce_from_two_producers(cluster, f"order-r{retries}", PARTITIONS, retries=retries)
    in_order = list(range(RECORDS))
    stored = _read_back(cluster, names, range(PARTITIONS))
    assert {tp: records for tp, records in stored.items() if records != in_order} == {}


def test_records_of_new_partitions_are_stored_in_producer_order(cluster: Cluster) -> None:
    names = [f"grow-{i}" for i in range(TOPICS)]
    _create(cluster, names, 1)
    admin = confluent_admin(cluster)
    futures = admin.create_partitions([NewPartitions(n, PARTITIONS) for n in names])
    for name, future in futures.items():
        assert result_error(future) is None, name
    _produce_in_order(cluster, names, PARTITIONS, retries=0)
    in_order = list(range(RECORDS))
    stored = _read_back(cluster, names, range(PARTITIONS))
    assert {tp: records for tp, records in stored.items() if records != in_order} == {}


def _metadata(cluster: Cluster, topic: str) -> Any:
    with connected(cluster, 1) as wire:
        answer = wire.call(
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    (found,) = answer.topics
    return found


def test_a_leader_that_cannot_host_yet_is_not_named(cluster: Cluster) -> None:
    """With one broker stopped (SIGSTOP: still registered, not answering), a topic placed on
    every broker is created all the same; CreateTopics answers REQUEST_TIMED_OUT after its
    timeout, Metadata names no leader for the stopped broker's partitions until it hosts them."""
    stopped = cluster.brokers[3]
    stopped.pause()
    try:
        admin = confluent_admin(cluster, 1)
        futures = admin.create_topics(
            [NewTopic("late-leader", num_partitions=6, replication_factor=1)],
            operation_timeout=1.0,
        )
        error = result_error(futures["late-leader"])
        assert error is not None and error.code() == KafkaErrorCode.request_timed_out.value
        partitions = _metadata(cluster, "late-leader").partitions
        assert len(partitions) == 6
        waiting = [p for p in partitions if p.error_code is KafkaErrorCode.leader_not_available]
        assert waiting and all(p.leader_id == i32(-1) for p in waiting)
        assert all(
            p.leader_id != i32(-1) and p.error_code is KafkaErrorCode.none
            for p in partitions
            if p not in waiting
        )
    finally:
        stopped.resume()
    poll_until(
        lambda: all(
            p.error_code is KafkaErrorCode.none
            for p in _metadata(cluster, "late-leader").partitions
        ),
        timeout=30,
        what="every partition of late-leader to have a leader",
    )


def test_a_zero_timeout_answers_at_once(cluster: Cluster) -> None:
    admin = confluent_admin(cluster)
    futures = admin.create_topics(
        [NewTopic("no-wait", num_partitions=3, replication_factor=1)], operation_timeout=0
    )
    assert result_error(futures["no-wait"]) is None
    poll_until(
        lambda: all(
            p.error_code is KafkaErrorCode.none for p in _metadata(cluster, "no-wait").partitions
        ),
        timeout=30,
        what="every partition of no-wait to have a leader",
    )
