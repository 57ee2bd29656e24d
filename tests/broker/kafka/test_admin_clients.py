"""Kafka admin clients (confluent-kafka's AdminClient, kafka-python's KafkaAdminClient) against a
real cluster's Kafka listeners, in both metadata modes: metadata, topics, configs, KIP-950's
disable through IncrementalAlterConfigs, and the error codes of docs/design.md §4 and
docs/kafka-compatibility.md."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as PythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as PythonNewTopic
from kio.schema.alter_configs.v2.request import AlterableConfig, AlterConfigsRequest
from kio.schema.alter_configs.v2.request import AlterConfigsResource as LegacyResource
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.find_coordinator.v0.request import FindCoordinatorRequest as FindCoordinatorV0
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest

from broker.groups.placement import OFFSETS_TOPIC, partition_for
from tests.support.cluster import Cluster
from tests.support.kafka_cluster import (
    MODES,
    QUIET,
    confluent_admin,
    connected,
    kafka_bootstrap,
    result_error,
    shared_cluster,
)
from tests.support.polling import poll_until
from tiered.cluster.model import TieredState

pytestmark = pytest.mark.processes

TIERED = {"remote.storage.enable": "true"}
TIMEOUT = datetime.timedelta(seconds=30)


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with shared_cluster(request, tmp_path_factory.mktemp(f"kafka-admin-{request.param}")) as c:
        yield c


@pytest.fixture
def topic() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def create(cluster: Cluster, name: str, partitions: int = 2, **configs: str) -> None:
    admin = confluent_admin(cluster)  # held until the answer: a dropped client fails its futures
    [future] = admin.create_topics([NewTopic(name, partitions, 1, config=configs)]).values()
    assert future.result(30) is None


def describe(cluster: Cluster, name: str, broker_id: int | None = None) -> dict[str, Any]:
    resource = ConfigResource("topic", name)
    admin = confluent_admin(cluster, broker_id)
    return dict(admin.describe_configs([resource])[resource].result(30))


def incremental(
    cluster: Cluster,
    changes: dict[str, list[tuple[str, AlterConfigOpType, str | None]]],
    broker_id: int | None = None,
    validate_only: bool = False,
) -> dict[str, Any]:
    """The KafkaError (or None) of each topic's IncrementalAlterConfigs, sent in one request."""
    resources = [
        ConfigResource(
            "topic",
            name,
            incremental_configs=[
                ConfigEntry(key, value, incremental_operation=op) for key, op, value in ops
            ],
        )
        for name, ops in changes.items()
    ]
    admin = confluent_admin(cluster, broker_id)
    futures = admin.incremental_alter_configs(resources, validate_only=validate_only)
    return {resource.name: result_error(future) for resource, future in futures.items()}


def state_of(cluster: Cluster, name: str) -> tuple[str, str]:
    entries = describe(cluster, name)
    return entries["remote.log.tiered.state"].value, entries["remote.log.tiered.epoch"].value


# ----------------------------------------------------------------------------------- metadata


def test_metadata_shows_every_broker_and_each_partition_leader(
    cluster: Cluster, topic: str
) -> None:
    create(cluster, topic, partitions=4)
    leaders = {p.partition: p.leader for p in cluster.admin.describe_topic(topic).partitions}
    endpoints = {
        broker_id: tuple(kafka_bootstrap(cluster, broker_id).rsplit(":", 1))
        for broker_id in cluster.brokers
    }
    for broker_id in cluster.brokers:  # any broker answers for the whole cluster
        metadata = confluent_admin(cluster, broker_id).list_topics(timeout=30)
        assert {b.id: (b.host, str(b.port)) for b in metadata.brokers.values()} == endpoints
        assert metadata.controller_id == min(cluster.brokers)
        assert metadata.cluster_id
        partitions = metadata.topics[topic].partitions
        assert {p: partitions[p].leader for p in partitions} == leaders
        assert all(partitions[p].replicas == [leaders[p]] == partitions[p].isrs for p in partitions)
    python_admin = KafkaAdminClient(
        bootstrap_servers=kafka_bootstrap(cluster), request_timeout_ms=30000
    )
    try:
        assert topic in python_admin.list_topics()
        described = python_admin.describe_cluster()
        assert described["controller_id"] == min(cluster.brokers)
        assert described["cluster_id"] == metadata.cluster_id
        assert sorted(b["broker_id"] for b in described["brokers"]) == sorted(cluster.brokers)
    finally:
        python_admin.close()


def test_describe_log_dirs_lists_each_brokers_partitions(cluster: Cluster, topic: str) -> None:
    create(cluster, topic, partitions=4)
    leaders = {p.partition: p.leader for p in cluster.admin.describe_topic(topic).partitions}
    expected = {
        b: sorted(p for p, leader in leaders.items() if leader == b) for b in cluster.brokers
    }
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster), request_timeout_ms=30000)

    def hosted() -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for broker in admin.describe_log_dirs():
            [log_dir] = broker["log_dirs"]
            assert log_dir["log_dir"].endswith(f"broker-{broker['broker']}")
            found[broker["broker"]] = sorted(
                p["partition_index"]
                for t in log_dir["topics"]
                if t["name"] == topic
                for p in t["partitions"]
            )
        return found

    try:
        poll_until(lambda: hosted() == expected, timeout=30, what="every partition hosted")
    finally:
        admin.close()


def test_metadata_for_a_missing_topic_creates_it_only_if_the_client_allows(
    cluster: Cluster, topic: str
) -> None:
    # librdkafka asks for creation unless allow.auto.create.topics is false; the brokers'
    # auto.create.topics.enable is Kafka's default, true.
    refusing = ConfluentAdmin(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "allow.auto.create.topics": False,
            **QUIET,
        }
    )
    metadata = refusing.list_topics(topic, timeout=30)
    assert metadata.topics[topic].error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert topic not in {t.name for t in cluster.admin.describe_topics()}
    confluent_admin(cluster).list_topics(topic, timeout=30)
    assert len(cluster.admin.describe_topic(topic, False).partitions) == 1  # num.partitions


# ----------------------------------------------------------------------------------- topics


def test_create_topics_answers_each_topic_on_its_own(cluster: Cluster, topic: str) -> None:
    admin = confluent_admin(cluster)
    futures = admin.create_topics(
        [
            NewTopic(topic, 3, 1, config=TIERED),
            NewTopic(f"{topic}-rf3", 1, 3),
            NewTopic(f"{topic}-compacted", 1, 1, config={**TIERED, "cleanup.policy": "compact"}),
            NewTopic(f"{topic}-policy", 1, 1, config={"remote.log.disable.policy": "purge"}),
        ]
    )
    errors = {name: result_error(future) for name, future in futures.items()}
    assert errors[topic] is None
    assert errors[f"{topic}-rf3"].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert errors[f"{topic}-compacted"].code() == KafkaError.INVALID_CONFIG
    policy = errors[f"{topic}-policy"]
    assert policy.code() == KafkaError.INVALID_REQUEST
    assert "remote.log.disable.policy" in policy.str() and "retain, delete" in policy.str()
    assert [t.name for t in cluster.admin.describe_topics() if t.name.startswith(topic)] == [topic]
    assert cluster.admin.describe_topic(topic).tiered_state is TieredState.ENABLED
    [exists] = admin.create_topics([NewTopic(topic, 1, 1)]).values()
    assert result_error(exists).code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_validate_only_persists_nothing(cluster: Cluster, topic: str) -> None:
    admin = confluent_admin(cluster)
    [future] = admin.create_topics([NewTopic(topic, 1, 1)], validate_only=True).values()
    assert future.result(30) is None
    assert topic not in {t.name for t in cluster.admin.describe_topics()}
    create(cluster, topic, **TIERED)
    before = cluster.admin.describe_topic(topic, include_partition_state=False)
    errors = incremental(
        cluster,
        {topic: [("remote.storage.enable", AlterConfigOpType.SET, "false")]},
        validate_only=True,
    )
    assert errors == {topic: None}
    assert cluster.admin.describe_topic(topic, include_partition_state=False) == before


def test_kafka_python_creates_describes_alters_and_deletes(cluster: Cluster, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster), request_timeout_ms=30000)
    try:
        admin.create_topics(
            [PythonNewTopic(topic, 2, 1, topic_configs={**TIERED, "retention.ms": "3600000"})]
        )
        resource = PythonConfigResource(ConfigResourceType.TOPIC, topic)
        described = admin.describe_configs([resource], config_filter="all")["topic"][topic]
        assert described["retention.ms"]["value"] == "3600000"
        assert described["remote.log.tiered.state"]["value"] == "ENABLED"
        broker = PythonConfigResource(ConfigResourceType.BROKER, "1")
        static = admin.describe_configs([broker], config_filter="all")["broker"]["1"]
        assert static["node.id"]["value"] == "1" and static["node.id"]["read_only"]
        resource = PythonConfigResource(
            ConfigResourceType.TOPIC,
            topic,
            {"retention.ms": ("DELETE", None), "segment.ms": "60000"},
        )
        admin.alter_configs([resource], raise_on_unknown=False, incremental=True)
        configs = cluster.admin.describe_topic(topic, include_partition_state=False).configs
        assert dict(configs) == {**TIERED, "segment.ms": "60000"}
        admin.delete_topics([topic])
    finally:
        admin.close()
    assert topic not in {t.name for t in cluster.admin.describe_topics()}


# ----------------------------------------------------------------------------------- configs


def test_describe_configs_gives_sources_defaults_and_the_tiered_state(
    cluster: Cluster, topic: str
) -> None:
    create(cluster, topic, **TIERED, **{"retention.ms": "3600000"})
    entries = describe(cluster, topic)
    dynamic = {k for k, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert dynamic == {
        "remote.storage.enable",
        "retention.ms",
        "remote.log.tiered.state",
        "remote.log.tiered.epoch",
    }
    assert entries["retention.ms"].value == "3600000" and not entries["retention.ms"].is_default
    default = entries["segment.bytes"]
    assert (default.value, default.is_default, default.source) == (
        "1073741824",
        True,
        ConfigSource.DEFAULT_CONFIG.value,
    )
    for key, value in (("remote.log.tiered.state", "ENABLED"), ("remote.log.tiered.epoch", "0")):
        assert (entries[key].value, entries[key].is_read_only) == (value, True)
    assert not entries["retention.ms"].is_read_only
    broker = ConfigResource("broker", "2")
    admin = confluent_admin(cluster)
    broker_entries = admin.describe_configs([broker])[broker].result(30)
    assert broker_entries["node.id"].value == "2" and broker_entries["node.id"].is_read_only


def test_incremental_set_delete_and_list_operations(cluster: Cluster, topic: str) -> None:
    create(cluster, topic, **TIERED, **{"retention.ms": "3600000"})
    assert incremental(
        cluster,
        {
            topic: [
                ("retention.ms", AlterConfigOpType.DELETE, None),
                ("retention.bytes", AlterConfigOpType.SET, "1048576"),
            ]
        },
    ) == {topic: None}
    configs = cluster.admin.describe_topic(topic, include_partition_state=False).configs
    assert dict(configs) == {**TIERED, "retention.bytes": "1048576"}

    [error] = incremental(
        cluster, {topic: [("retention.ms", AlterConfigOpType.APPEND, "5")]}
    ).values()
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "retention.ms" in error.str() and "cleanup.policy" in error.str()
    # A list config takes APPEND; compaction is refused on a tiered topic.
    [error] = incremental(
        cluster, {topic: [("cleanup.policy", AlterConfigOpType.APPEND, "compact")]}
    ).values()
    assert error.code() == KafkaError.INVALID_CONFIG
    plain = f"{topic}-plain"
    create(cluster, plain)
    assert incremental(
        cluster, {plain: [("cleanup.policy", AlterConfigOpType.APPEND, "compact")]}
    ) == {plain: None}
    assert describe(cluster, plain)["cleanup.policy"].value == "delete,compact"
    assert incremental(
        cluster, {plain: [("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete")]}
    ) == {plain: None}
    assert describe(cluster, plain)["cleanup.policy"].value == "compact"


def test_one_bad_resource_leaves_the_good_ones_applied(cluster: Cluster, topic: str) -> None:
    good, bad_policy, bad_boolean = topic, f"{topic}-policy", f"{topic}-boolean"
    for name in (good, bad_policy, bad_boolean):
        create(cluster, name, **TIERED)
    before = {
        name: cluster.admin.describe_topic(name, include_partition_state=False)
        for name in (bad_policy, bad_boolean)
    }
    errors = incremental(
        cluster,
        {
            good: [("retention.ms", AlterConfigOpType.SET, "7200000")],
            bad_policy: [
                ("remote.log.disable.policy", AlterConfigOpType.SET, "purge"),
                ("remote.storage.enable", AlterConfigOpType.SET, "false"),
            ],
            bad_boolean: [("remote.storage.enable", AlterConfigOpType.SET, "maybe")],
            f"{topic}-missing": [("retention.ms", AlterConfigOpType.SET, "1")],
        },
    )
    assert errors[good] is None
    assert errors[bad_policy].code() == KafkaError.INVALID_REQUEST
    assert "remote.log.disable.policy='purge'" in errors[bad_policy].str()
    assert "retain, delete" in errors[bad_policy].str()
    assert errors[bad_boolean].code() == KafkaError.INVALID_REQUEST
    assert "remote.storage.enable='maybe'" in errors[bad_boolean].str()
    assert errors[f"{topic}-missing"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert describe(cluster, good)["retention.ms"].value == "7200000"
    for name, topic_before in before.items():
        assert cluster.admin.describe_topic(name, include_partition_state=False) == topic_before


def test_legacy_alter_configs_through_another_broker_replaces_the_set(
    cluster: Cluster, topic: str
) -> None:
    create(cluster, topic, **TIERED, **{"retention.ms": "3600000"})
    not_lowest = max(cluster.brokers)
    with connected(cluster, not_lowest) as client:
        response = client.call(
            AlterConfigsRequest(
                resources=(
                    LegacyResource(
                        resource_type=2,
                        resource_name=topic,
                        configs=(
                            AlterableConfig(name="remote.storage.enable", value="true"),
                            AlterableConfig(name="segment.ms", value="60000"),
                        ),
                    ),
                ),
                validate_only=False,
            )
        )
    [answer] = response.responses
    assert answer.error_code is KafkaErrorCode.none, answer.error_message
    configs = cluster.admin.describe_topic(topic, include_partition_state=False).configs
    assert dict(configs) == {**TIERED, "segment.ms": "60000"}  # retention.ms is gone


def test_admin_through_a_broker_that_is_not_the_lowest_id(cluster: Cluster, topic: str) -> None:
    not_lowest = max(cluster.brokers)
    with connected(cluster, not_lowest) as client:
        created = client.call(
            CreateTopicsRequest(
                topics=(
                    CreatableTopic(
                        name=topic,
                        num_partitions=-1,
                        replication_factor=-1,
                        assignments=(),
                        configs=(),
                    ),
                ),
                timeout=TIMEOUT,
                validate_only=False,
            )
        )
        [result] = created.topics
        assert result.error_code is KafkaErrorCode.none, result.error_message
        assert (result.num_partitions, result.replication_factor) == (1, 1)
        assert result.topic_id == cluster.admin.describe_topic(topic).topic_id
        group = client.call(FindCoordinatorRequest(key_type=0, coordinator_keys=("g",)))
        # the leader of the group's __consumer_offsets partition, created by that request
        offsets = cluster.admin.describe_topic(OFFSETS_TOPIC, include_partition_state=False)
        leader = offsets.partitions[partition_for("g", len(offsets.partitions))].leader
        assert [(c.key, c.node_id, c.error_code) for c in group.coordinators] == [
            ("g", leader, KafkaErrorCode.none)
        ]
        old = client.call(FindCoordinatorV0(key="g"))
        assert (old.error_code, old.node_id) == (KafkaErrorCode.none, leader)
    assert incremental(
        cluster, {topic: [("retention.ms", AlterConfigOpType.SET, "60000")]}, broker_id=not_lowest
    ) == {topic: None}
    assert describe(cluster, topic, broker_id=not_lowest)["retention.ms"].value == "60000"


def test_delete_by_id_of_a_topic_deleted_and_created_again_elsewhere_deletes_nothing(
    cluster: Cluster, topic: str
) -> None:
    """A broker whose cluster view still has the old topic (a Metadata request of every topic
    just listed it) is asked, by id, to delete the topic deleted and created again through the
    controller: the new topic of that name stays."""
    cluster.admin.create_topic(topic, 1, {}, wait_hosted=True)
    old = cluster.admin.describe_topic(topic).topic_id
    with connected(cluster, 1) as client:
        listed = client.call(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert topic in {t.name for t in listed.topics}
        cluster.admin.delete_topic(topic)
        cluster.admin.create_topic(topic, 1, {}, wait_hosted=True)
        new = cluster.admin.describe_topic(topic).topic_id
        deleted = client.call(
            DeleteTopicsRequest(
                topics=(DeleteTopicState(name=None, topic_id=old),), timeout=TIMEOUT
            )
        )
    [result] = deleted.responses
    assert result.error_code is KafkaErrorCode.unknown_topic_id, result
    assert cluster.admin.describe_topic(topic).topic_id == new


# ----------------------------------------------------------------------------------- KIP-950


def test_a_delete_policy_disable_returns_persisted_and_reaches_disabled(
    cluster: Cluster, topic: str
) -> None:
    create(cluster, topic, **TIERED)
    errors = incremental(
        cluster,
        {
            topic: [
                ("remote.log.disable.policy", AlterConfigOpType.SET, "delete"),
                ("remote.storage.enable", AlterConfigOpType.SET, "false"),
            ]
        },
    )
    assert errors == {topic: None}
    state, epoch = state_of(cluster, topic)  # persisted before the answer: at least DISABLING
    assert state in ("DISABLING", "DISABLED") and epoch == "1"
    poll_until(lambda: state_of(cluster, topic) == ("DISABLED", "1"), timeout=60, what="DISABLED")


def test_a_disable_or_enable_during_disabling_is_invalid_config(
    cluster: Cluster, topic: str
) -> None:
    create(cluster, topic, partitions=2, **TIERED)  # one partition on each broker
    lowest, paused_id = min(cluster.brokers), max(cluster.brokers)
    paused = cluster.brokers[paused_id]  # its ack cannot arrive: DISABLING holds
    paused.pause()
    try:
        disable = [
            ("remote.log.disable.policy", AlterConfigOpType.SET, "delete"),
            ("remote.storage.enable", AlterConfigOpType.SET, "false"),
        ]
        assert incremental(cluster, {topic: disable}, broker_id=lowest) == {topic: None}
        disabling = cluster.admin.describe_topic(topic, include_partition_state=False)
        assert (disabling.tiered_state, disabling.tiered_epoch) == (TieredState.DISABLING, 1)
        for value in ("false", "true"):
            change = [("remote.storage.enable", AlterConfigOpType.SET, value)]
            [error] = incremental(cluster, {topic: change}, broker_id=lowest).values()
            assert error.code() == KafkaError.INVALID_CONFIG
            assert error.str().startswith("TIERED_STORAGE_DISABLEMENT_IN_PROGRESS:"), error.str()
        # Nothing changed (the ack of the broker that is not paused may come in meanwhile).
        after = cluster.admin.describe_topic(topic, include_partition_state=False)
        assert (after.tiered_state, after.tiered_epoch) == (TieredState.DISABLING, 1)
        assert after.configs == disabling.configs
    finally:
        paused.resume()
    assert cluster.wait_for_state(topic, TieredState.DISABLED).tiered_epoch == 1
