"""CreatePartitions and topic auto-creation on a real cluster, in both metadata modes.

CreatePartitions through confluent-kafka's, kafka-python's and KafkaJS's admin clients and
``tiered-topics --alter``: a topic grows (the controller's placement or explicit assignments),
brokers host the new partitions and producers write to them; refusals are Kafka's errors and
messages and change nothing; a new partition of a tiered topic tiers like the others, and one of
a disabled topic is stopped as the others are until tiering is enabled again.

Auto-creation: producers of confluent-kafka, kafka-python and kcat write to a topic that does
not exist yet (``num.partitions`` partitions); a consumer's Metadata (no
``allow_auto_topic_creation``) creates nothing; internal and invalid names are refused.
"""

from __future__ import annotations

import asyncio
import datetime
import shutil
import subprocess
import time
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import NewPartitions
from kafka.admin import KafkaAdminClient
from kafka.admin import NewPartitions as PythonNewPartitions
from kio.schema.create_partitions.v3.request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.metadata.v3.request import MetadataRequest as MetadataV3
from kio.schema.metadata.v3.request import MetadataRequestTopic as TopicV3
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i32, i32Timedelta

from cli import topics as topics_cli
from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    SMALL_BATCHES,
    TIERED,
    Message,
    confluent_produce,
    consume,
    create_topic,
    python_produce,
    sample,
    wait_hosted,
)
from tests.support.kafka_cluster import (
    QUIET,
    confluent_admin,
    connected,
    kafka_bootstrap,
    result_error,
    shared_cluster,
)
from tests.support.kafkajs import kafkajs
from tests.support.polling import poll_until
from tiered.cluster.model import TieredState
from tiered.errors import TieredError

pytestmark = pytest.mark.processes

NUM_PARTITIONS = 2  # the brokers' num.partitions: auto-created topics get it


@pytest.fixture(scope="module", params=("kraft", "zookeeper"))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    overrides = {"num.partitions": str(NUM_PARTITIONS)}
    root = tmp_path_factory.mktemp(f"partitions-{request.param}")
    with shared_cluster(request, root, broker_overrides={1: overrides, 2: overrides}) as c:
        yield c


@pytest.fixture
def topic() -> str:
    return f"p-{uuid.uuid4().hex[:8]}"


def placement(cluster: Cluster, name: str) -> list[int]:
    return [p.leader for p in cluster.admin.describe_topic(name, False).partitions]


def grown(cluster: Cluster, name: str, count: int, **kwargs: Any) -> KafkaError | None:
    """confluent-kafka's create_partitions; its error, or None."""
    admin = confluent_admin(cluster)  # kept until answered: a destroyed handle fails its futures
    [future] = admin.create_partitions(
        [NewPartitions(name, count, **kwargs)], request_timeout=30
    ).values()
    return result_error(future)


# ------------------------------------------------------------------------------ CreatePartitions


def test_confluent_grows_a_topic_and_producers_write_to_the_new_partitions(
    cluster: Cluster, topic: str
) -> None:
    create_topic(cluster, topic, partitions=1)
    admin = confluent_admin(cluster)
    [future] = admin.create_partitions([NewPartitions(topic, 4)], validate_only=True).values()
    assert result_error(future) is None
    assert len(placement(cluster, topic)) == 1  # validated only
    assert grown(cluster, topic, 3) is None
    brokers = placement(cluster, topic)
    assert len(brokers) == 3 and set(brokers) <= set(cluster.brokers)
    wait_hosted(cluster, topic)
    messages = sample(30, partitions=3)
    confluent_produce(cluster, topic, messages)
    read = consume(cluster, topic, {0: 0, 1: 0, 2: 0}, len(messages))
    assert sorted((m.partition, m.value) for m in read) == sorted(
        (m.partition, m.value) for m in messages
    )


def test_kafka_python_and_kafkajs_place_new_partitions_where_asked(
    cluster: Cluster, topic: str
) -> None:
    create_topic(cluster, topic, partitions=1)
    first, second = sorted(cluster.brokers)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        admin.create_partitions({topic: PythonNewPartitions(2, [[second]])})
    finally:
        admin.close()
    [outcome] = kafkajs(
        cluster,
        {
            "op": "createPartitions",
            "topics": [{"topic": topic, "count": 4, "assignments": [[first], [second]]}],
        },
    )
    outcome.ok()
    brokers = placement(cluster, topic)
    assert brokers[1:] == [second, first, second]
    wait_hosted(cluster, topic)
    python_produce(cluster, topic, [Message(3, b"k", b"on the newest", (), 1_700_000_000_000)])
    [read] = consume(cluster, topic, {3: 0}, 1, client="python")
    assert read.value == b"on the newest"


def test_aiokafka_and_the_java_clients_version_grow_topics(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=1)

    async def aiokafka_grows() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
        await admin.start()
        try:
            await admin.create_partitions({topic: AioNewPartitions(total_count=2)})
        finally:
            await admin.close()

    asyncio.run(aiokafka_grows())
    assert len(placement(cluster, topic)) == 2
    # v3 (flexible), as the Java AdminClient sends it: one topic placed, one refused.
    last = max(cluster.brokers)
    request = CreatePartitionsRequest(
        topics=(
            CreatePartitionsTopic(
                name=topic,
                count=i32(3),
                assignments=(CreatePartitionsAssignment(broker_ids=(last,)),),
            ),
            CreatePartitionsTopic(name=f"{topic}-nope", count=i32(2), assignments=None),
        ),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        validate_only=False,
    )
    with connected(cluster, min(cluster.brokers)) as wire:
        results = wire.call(request).results
    assert [(r.name, r.error_code) for r in results] == [
        (topic, KafkaErrorCode.none),
        (f"{topic}-nope", KafkaErrorCode.unknown_topic_or_partition),
    ]
    assert placement(cluster, topic)[2] == last


def test_refusals_are_kafkas_and_change_nothing(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=2)
    before = placement(cluster, topic)
    refused = {
        "same count": (grown(cluster, topic, 2), KafkaError.INVALID_PARTITIONS),
        "fewer": (grown(cluster, topic, 1), KafkaError.INVALID_PARTITIONS),
        "unknown topic": (grown(cluster, f"{topic}-nope", 3), KafkaError.UNKNOWN_TOPIC_OR_PART),
        "unknown broker": (
            grown(cluster, topic, 3, replica_assignment=[[99]]),
            KafkaError.INVALID_REPLICA_ASSIGNMENT,
        ),
        "two replicas": (
            grown(cluster, topic, 3, replica_assignment=[sorted(cluster.brokers)]),
            KafkaError.INVALID_REPLICA_ASSIGNMENT,
        ),
    }
    for what, (error, code) in refused.items():
        assert error is not None and error.code() == code, (what, error)
    assert refused["same count"][0].str() == "Topic already has 2 partition(s)."
    assert refused["fewer"][0].str() == (
        f"The topic {topic} currently has 2 partition(s); 1 would not be an increase."
    )
    assert "broker 99, but no such broker is registered" in refused["unknown broker"][0].str()
    # KafkaJS: a count of assignments that does not match, in a request with a good topic.
    other = f"{topic}-other"
    create_topic(cluster, other, partitions=1)
    [outcome] = kafkajs(
        cluster,
        {
            "op": "createPartitions",
            "topics": [
                {"topic": topic, "count": 4, "assignments": [[min(cluster.brokers)]]},
                {"topic": other, "count": 2},
            ],
        },
    )
    assert outcome.error is not None and outcome.error["type"] == "INVALID_REPLICA_ASSIGNMENT"
    assert placement(cluster, topic) == before
    assert len(placement(cluster, other)) == 2  # the good topic of the request grew


def test_tiered_topics_alter_adds_partitions(
    cluster: Cluster, topic: str, capsys: pytest.CaptureFixture[str]
) -> None:
    create_topic(cluster, topic, partitions=1)
    base = ["--bootstrap-server", cluster.bootstrap, "--alter", "--topic", topic]
    assert topics_cli.main([*base, "--partitions", "3"]) == 0
    assert "Adding partitions succeeded!" in capsys.readouterr().out
    last = max(cluster.brokers)
    assert (
        topics_cli.main([*base, "--partitions", "5", "--replica-assignment", f"{last},{last}"]) == 0
    )
    assert placement(cluster, topic)[3:] == [last, last]
    capsys.readouterr()
    assert topics_cli.main([*base, "--partitions", "2"]) != 0
    err = capsys.readouterr().err
    assert "INVALID_PARTITIONS" in err and "would not be an increase" in err
    assert topics_cli.main([*base, "--partitions", "6", "--replica-assignment", "one"]) != 0
    assert "INVALID_REQUEST: --replica-assignment 'one' is not valid" in capsys.readouterr().err
    assert len(placement(cluster, topic)) == 5


def _now_ms() -> int:
    """Timestamps within retention.ms: closed segments of older records would expire at once."""
    return int(time.time() * 1000)


def _remote_segments(cluster: Cluster, name: str, partition: int) -> int:
    [found] = [p for p in cluster.admin.describe_topic(name).partitions if p.partition == partition]
    return found.remote_segment_count


def test_a_new_partition_of_a_tiered_topic_tiers_like_the_others(
    cluster: Cluster, topic: str
) -> None:
    create_topic(cluster, topic, partitions=1, **TIERED)
    assert grown(cluster, topic, 2) is None
    wait_hosted(cluster, topic)
    confluent_produce(
        cluster,
        topic,
        [Message(1, None, b"x" * 200, (), _now_ms() + i) for i in range(60)],
        **SMALL_BATCHES,
    )
    poll_until(
        lambda: _remote_segments(cluster, topic, 1) > 0,
        timeout=60,
        what=f"closed segments of the new partition of {topic} to reach remote storage",
    )
    read = consume(cluster, topic, {1: 0}, 60)
    assert [m.offset for m in read] == list(range(60))


def test_a_new_partition_of_a_disabled_topic_is_stopped_as_the_others(
    cluster: Cluster, topic: str
) -> None:
    create_topic(cluster, topic, partitions=1, **TIERED)
    cluster.admin.incremental_alter_configs(topic, set={"remote.storage.enable": "false"})
    disabled = cluster.wait_for_state(topic, TieredState.DISABLED)
    assert grown(cluster, topic, 2) is None
    wait_hosted(cluster, topic)
    leader = placement(cluster, topic)[1]
    topic_id = disabled.topic_id
    new = cluster.log_dirs(leader)[(topic_id, 1)]
    assert (new.tiered_epoch, new.copying) == (disabled.tiered_epoch, False)
    records = [Message(1, None, b"y" * 200, (), _now_ms() + i) for i in range(40)]
    # One record per batch: a single batch would fill one segment that never closes.
    confluent_produce(cluster, topic, records, **SMALL_BATCHES)
    assert _remote_segments(cluster, topic, 1) == 0
    # Enabled again, it copies like the first partition.
    cluster.admin.incremental_alter_configs(topic, set={"remote.storage.enable": "true"})
    cluster.wait_for_state(topic, TieredState.ENABLED)
    poll_until(
        lambda: _remote_segments(cluster, topic, 1) > 0,
        timeout=60,
        what=f"the new partition of {topic} to copy once tiering is enabled again",
    )


def _partition_count_or_none(cluster: Cluster, name: str) -> int | None:
    try:
        return len(cluster.admin.describe_topic(name, False).partitions)
    except TieredError:
        return None  # no controller active yet


def test_new_partitions_survive_a_controller_failover(cluster: Cluster, topic: str) -> None:
    create_topic(cluster, topic, partitions=1)
    assert grown(cluster, topic, 3) is None
    active = cluster.active_controller()
    active.kill()
    try:
        poll_until(
            lambda: _partition_count_or_none(cluster, topic) == 3,
            timeout=60,
            what="the standby to load the grown topic",
        )
        assert grown(cluster, topic, 4) is None  # the new controller grows it further
        wait_hosted(cluster, topic)
        confluent_produce(cluster, topic, [Message(3, None, b"after", (), 1_700_000_000_000)])
    finally:
        active.start()


# ------------------------------------------------------------------------------ auto-creation


def test_producers_create_the_topic_they_write_to(cluster: Cluster, topic: str) -> None:
    confluent_produce(cluster, f"{topic}-confluent", sample(5))
    python_produce(cluster, f"{topic}-python", sample(5))
    kcat = shutil.which("kcat")
    assert kcat is not None
    done = subprocess.run(
        [kcat, "-b", kafka_bootstrap(cluster), "-q", "-P", "-t", f"{topic}-kcat"],
        input=b"one\ntwo\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for client in ("confluent", "python", "kcat"):
        assert len(placement(cluster, f"{topic}-{client}")) == NUM_PARTITIONS
    read = consume(cluster, f"{topic}-kcat", {0: 0, 1: 0}, 2)
    assert sorted(m.value for m in read) == [b"one", b"two"]


def test_a_consumers_metadata_creates_nothing(cluster: Cluster, topic: str) -> None:
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(cluster), "group.id": "g", **QUIET})
    try:
        found = consumer.list_topics(topic, timeout=30).topics[topic]
    finally:
        consumer.close()
    assert found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with connected(cluster, min(cluster.brokers)) as wire:
        request = MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        [answer] = wire.call(request).topics
    assert answer.error_code is KafkaErrorCode.unknown_topic_or_partition
    assert topic not in {t.name for t in cluster.admin.describe_topics()}


def test_metadata_v3_creates_and_refuses_internal_and_invalid_names(
    cluster: Cluster, topic: str
) -> None:
    # (__transaction_state: __consumer_offsets exists once a consumer with a group.id asked for
    # its coordinator, as in Kafka)
    names = (topic, "__transaction_state", "bad/name")
    request = MetadataV3(topics=tuple(TopicV3(name=n) for n in names))
    with connected(cluster, max(cluster.brokers)) as wire:
        answers = {t.name: t.error_code for t in wire.call(request).topics}
        assert answers == {
            topic: KafkaErrorCode.leader_not_available,
            "__transaction_state": KafkaErrorCode.invalid_topic_exception,
            "bad/name": KafkaErrorCode.invalid_topic_exception,
        }
        wait_hosted(cluster, topic)
        [again] = wire.call(MetadataV3(topics=(TopicV3(name=topic),))).topics
    assert again.error_code is KafkaErrorCode.none
    assert len(again.partitions) == NUM_PARTITIONS
    listed = {t.name for t in cluster.admin.describe_topics()}
    assert topic in listed and "__transaction_state" not in listed
