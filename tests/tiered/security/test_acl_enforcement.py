"""ACLs enforced on every path, with real processes in both metadata modes: the gRPC admin API
(AdminClient, tiered-acls) and the Kafka protocol (confluent-kafka's admin, producer, consumer).

Every request's principal is User:ANONYMOUS until certificates and SCRAM name others, so the
cluster runs with ``allow.everyone.if.no.acl.found=true`` and a super user nobody is: a resource
without ACLs is open, and an ACL on a resource closes it to every principal it does not allow
(ANONYMOUS holds ClusterAction, Alter and Describe on the cluster: brokers register, and the
tests manage ACLs). Denials must change nothing: configs, tiered state, epoch, remote objects.
The controller's audit line of every create, alter, delete and ACL change names the principal,
the operation, the resource and the outcome (``AuditTrail``).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import admin as kafka
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

from broker.groups.placement import partition_for
from cli.launch.ports import free_port
from tests.support.cluster import Cluster
from tests.support.group_requests import (
    DESCRIBE,
    group_request,
    join_member,
    serving_coordinator,
)
from tests.support.kafka_clients import wait_hosted
from tests.support.kafka_cluster import (
    MODES,
    QUIET,
    confluent_admin,
    connected,
    kafka_bootstrap,
    result_error,
    shared_cluster,
)
from tests.support.kafka_requests import by_partition, fetch
from tests.support.polling import poll_until
from tests.support.processes import REPO, DaemonProcess
from tiered.cluster.model import TieredState
from tiered.config import OFFSETS_TOPIC
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import broker_pb2 as broker_pb
from tiered.rpc.v1 import broker_pb2_grpc as broker_grpc
from tiered.rpc.v1 import records_pb2
from tiered.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from tiered.security.scram import ScramMechanism
from tiered.security.scram_admin import UserScramCredentialUpsertion

pytestmark = pytest.mark.processes

ANONYMOUS = "User:ANONYMOUS"
SECURE = {
    "authorizer.enabled": "true",
    "super.users": "User:nobody-has-this",
    "allow.everyone.if.no.acl.found": "true",
}
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000", "local.retention.bytes": "4000"}
Op = AclOperation


def acl(
    name: str,
    *operations: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    resource_type: ResourceType = ResourceType.TOPIC,
    pattern: PatternType = PatternType.LITERAL,
) -> list[AclBinding]:
    return [
        AclBinding(
            ResourcePattern(resource_type, name, pattern),
            AccessControlEntry(ANONYMOUS, "*", op, permission),
        )
        for op in operations
    ]


def deny(name: str, *operations: AclOperation, **kwargs: object) -> list[AclBinding]:
    return acl(name, *operations, permission=AclPermissionType.DENY, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"acls-{request.param}")
    with shared_cluster(
        request, root, broker_overrides={1: SECURE, 2: SECURE}, controller_overrides=SECURE
    ) as c:
        # One call: after it the cluster has ACLs, and only these operations are open on it.
        c.admin.create_acls(
            acl(
                CLUSTER_NAME,
                Op.CLUSTER_ACTION,
                Op.ALTER,
                Op.DESCRIBE,
                resource_type=ResourceType.CLUSTER,
            )
        )
        yield c


def remote_objects(cluster: Cluster, name: str, topic_id: uuid.UUID) -> list[Path]:
    """The topic's finished remote objects (not a copy's temporary file)."""
    base = cluster.root / "remote" / f"{name}-{topic_id}"
    return sorted(p for p in base.rglob("*") if p.is_file() and ".tmp-" not in p.name)


def denied(code: ErrorCode, call: object) -> None:
    with pytest.raises(TieredError) as failure:
        call()  # type: ignore[operator]
    assert failure.value.code is code, failure.value


class AuditTrail:
    """The controllers' audit lines (logger ``tiered.audit``) written after it was made."""

    def __init__(self, cluster: Cluster) -> None:
        self._controllers = list(cluster.controllers)
        self._marks = [len(c.output) for c in self._controllers]

    def lines(self) -> list[str]:
        return [
            line.rstrip()
            for controller, mark in zip(self._controllers, self._marks, strict=True)
            for line in controller.output[mark:]
            if " tiered.audit: " in line
        ]

    def expect(self, operation: str, resource: str, result: str, count: int = 1) -> None:
        """Until ``count`` lines name ANONYMOUS from 127.0.0.1 (the test and the brokers'
        Kafka clients), ``operation`` on ``resource`` (``Type:name``) and ``result``."""
        line = (
            f"principal={ANONYMOUS} host=127.0.0.1 operation={operation} resource={resource} "
            f"result={result}"
        )
        poll_until(
            lambda: sum(seen.endswith(f"tiered.audit: {line}") for seen in self.lines()) >= count,
            timeout=15,
            what=f"{count} audit line(s) {line!r}; seen {self.lines()}",
        )


def test_a_delete_policy_disable_needs_delete_however_spelled(cluster: Cluster) -> None:
    topic = cluster.tiered_topic("guarded", 1, TIERED)
    cluster.admin.create_acls(
        acl("guarded", Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.DESCRIBE, Op.WRITE, Op.READ)
    )
    before_objects = remote_objects(cluster, topic.name, topic.topic_id)
    assert before_objects
    admin = cluster.admin
    # One alter, either spelling.
    for spelling in (
        {"remote.log.disable.policy": "delete"},
        {"remote.log.delete.on.disable": "true"},
    ):
        denied(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            lambda s=spelling: admin.incremental_alter_configs(
                "guarded", {"remote.storage.enable": "false", **s}
            ),
        )
    # Across two alters: the policy alone turns nothing off (allowed), the disable then is judged
    # by the configs it results in.
    admin.incremental_alter_configs("guarded", {"remote.log.delete.on.disable": "true"})
    denied(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        lambda: admin.incremental_alter_configs("guarded", {"remote.storage.enable": "false"}),
    )
    # The Kafka protocol: the client's principal is judged, forwarded by the broker.
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        "guarded",
        incremental_configs=[
            ConfigEntry(
                "remote.storage.enable", "false", incremental_operation=AlterConfigOpType.SET
            )
        ],
    )
    kafka_admin = confluent_admin(cluster)  # kept: a collected client fails its futures
    [future] = kafka_admin.incremental_alter_configs([resource]).values()
    assert result_error(future).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    after = admin.describe_topic("guarded", include_partition_state=False)
    assert after.tiered_state is TieredState.ENABLED
    assert after.tiered_epoch == topic.tiered_epoch
    assert after.configs == {**TIERED, "remote.log.delete.on.disable": "true"}
    # Nothing deleted (copies of segments closed before the test may still be arriving).
    assert set(before_objects) <= set(remote_objects(cluster, topic.name, topic.topic_id))
    # With Delete it goes through.
    admin.create_acls(acl("guarded", Op.DELETE))
    result = admin.incremental_alter_configs("guarded", {"remote.storage.enable": "false"})
    assert result.tiered_epoch == topic.tiered_epoch + 1
    cluster.wait_for_state("guarded", TieredState.DISABLED)


def test_a_retain_disable_needs_alter_configs_only(cluster: Cluster) -> None:
    cluster.admin.create_topic("retained", 1, {"remote.storage.enable": "true"})
    cluster.admin.create_acls(acl("retained", Op.ALTER_CONFIGS))
    result = cluster.admin.incremental_alter_configs("retained", {"remote.storage.enable": "false"})
    assert result.tiered_state is TieredState.DISABLING
    cluster.admin.create_acls(deny("retained", Op.ALTER_CONFIGS))
    denied(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        lambda: cluster.admin.incremental_alter_configs("retained", {"retention.ms": "1000"}),
    )


def _produce(cluster: Cluster, topic: str) -> KafkaError | None:
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "message.timeout.ms": 10000, **QUIET}
    )
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"v", on_delivery=lambda e, _: outcome.append(e))
    producer.flush(30)
    return outcome[0] if outcome else None


def test_kafka_clients_are_denied_and_allowed(cluster: Cluster) -> None:
    admin = cluster.admin
    admin.create_topic("secret", 1)
    # A resource with ACLs is closed but for what they allow: Describe stays open.
    admin.create_acls(deny("secret", Op.WRITE, Op.READ, Op.DELETE) + acl("secret", Op.DESCRIBE))

    def produce_code() -> object:
        error = _produce(cluster, "secret")
        return None if error is None else error.code()

    # Brokers learn the ACLs from the metadata log or ZooKeeper, a moment later.
    poll_until(
        lambda: produce_code() == KafkaError.TOPIC_AUTHORIZATION_FAILED,
        timeout=30,
        what="produce to be refused",
    )
    kafka_admin = confluent_admin(cluster)
    [future] = kafka_admin.delete_topics(["secret"]).values()
    assert result_error(future).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    [future] = kafka_admin.delete_records([TopicPartition("secret", 0, -1)]).values()
    assert result_error(future).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.delete_topic("secret"))
    assert "secret" in {
        t.name for t in admin.describe_topic_listing(include_partition_state=False).topics
    }
    # Create: a prefix closed to ANONYMOUS.
    admin.create_acls(deny("closed-", Op.CREATE, pattern=PatternType.PREFIXED))
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.create_topic("closed-1", 1))
    [future] = kafka_admin.create_topics([NewTopic("closed-2", 1, 1)]).values()
    assert result_error(future).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Allowed again once the DENY goes.
    admin.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC, "secret"))])
    poll_until(lambda: produce_code() is None, timeout=30, what="produce to be allowed")
    admin.delete_topic("secret")


def test_a_fetch_without_read_is_refused_and_returns_no_records(cluster: Cluster) -> None:
    """The topic holds records and the principal may Describe and Write it, not Read: the
    leader answers every Fetch TOPIC_AUTHORIZATION_FAILED (29) with no records, to the raw wire
    and to confluent-kafka's consumer alike."""
    admin = cluster.admin
    admin.create_topic("unreadable", 1)
    wait_hosted(cluster, "unreadable")
    for _ in range(3):
        assert _produce(cluster, "unreadable") is None
    leader = admin.describe_topic("unreadable", include_partition_state=False).partitions[0].leader

    def fetched() -> Any:
        with connected(cluster, leader) as wire:
            return by_partition(wire.call(fetch({("unreadable", 0): 0})))[("unreadable", 0)]

    readable = fetched()
    assert readable.error_code == KafkaErrorCode.none and readable.records
    admin.create_acls(deny("unreadable", Op.READ) + acl("unreadable", Op.DESCRIBE, Op.WRITE))
    # Brokers learn the ACLs from the metadata log or ZooKeeper, a moment later.
    poll_until(
        lambda: fetched().error_code == KafkaErrorCode.topic_authorization_failed,
        timeout=30,
        what="Fetch to be refused",
    )
    refused = fetched()
    assert not refused.records and refused.high_watermark == -1, refused
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": f"unreadable-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            **QUIET,
        }
    )
    records: list[bytes | None] = []
    errors: list[int] = []

    def told() -> bool:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            records.append(message.value())
        elif message is not None:
            errors.append(message.error().code())
        return KafkaError.TOPIC_AUTHORIZATION_FAILED in errors

    try:
        consumer.assign([TopicPartition("unreadable", 0, 0)])
        poll_until(told, timeout=30, what="the consumer to be told TOPIC_AUTHORIZATION_FAILED")
    finally:
        consumer.close()
    assert records == []
    # Writing stays allowed: only Read was taken away.
    assert _produce(cluster, "unreadable") is None


def test_create_partitions_needs_alter_and_auto_creation_create(cluster: Cluster) -> None:
    admin = cluster.admin
    admin.create_topic("grow-closed", 1)
    admin.create_acls(deny("grow-closed", Op.ALTER) + acl("grow-closed", Op.DESCRIBE))
    kafka_admin = confluent_admin(cluster)
    [future] = kafka_admin.create_partitions([kafka.NewPartitions("grow-closed", 2)]).values()
    assert result_error(future).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.create_partitions("grow-closed", 2))
    assert len(admin.describe_topic("grow-closed", False).partitions) == 1
    # Auto-creation: Create on the cluster is not granted here, so Create on the topic decides.
    admin.create_acls(deny("auto-closed-", Op.CREATE, pattern=PatternType.PREFIXED))

    def metadata_code(name: str) -> object:
        error = kafka_admin.list_topics(name, timeout=10).topics[name].error
        return None if error is None else error.code()

    poll_until(
        lambda: metadata_code("auto-closed-1") == KafkaError.TOPIC_AUTHORIZATION_FAILED,
        timeout=30,
        what="auto-creation to be refused",
    )
    names = {t.name for t in admin.describe_topic_listing(include_partition_state=False).topics}
    assert "auto-closed-1" not in names
    metadata_code("auto-open-1")  # no ACL on it: created
    assert len(admin.describe_topic("auto-open-1", False).partitions) == 1


def test_metadata_and_describe_leave_out_what_the_client_may_not_see(cluster: Cluster) -> None:
    admin = cluster.admin
    admin.create_topic("hidden", 1)
    admin.create_topic("shown", 1)
    admin.create_acls(deny("hidden", Op.DESCRIBE))
    kafka_admin = confluent_admin(cluster)

    def listed() -> set[str]:
        return set(kafka_admin.list_topics(timeout=10).topics)

    poll_until(lambda: "hidden" not in listed(), timeout=30, what="Metadata to leave it out")
    assert "shown" in listed()
    named = kafka_admin.list_topics("hidden", timeout=10).topics["hidden"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The gRPC admin API too.
    assert "hidden" not in {
        t.name for t in admin.describe_topic_listing(include_partition_state=False).topics
    }
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.describe_topic("hidden"))
    admin.create_acls(deny("shown", Op.DESCRIBE_CONFIGS))
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.describe_configs("shown"))


def test_creates_are_audited_allowed_and_denied(cluster: Cluster) -> None:
    admin = cluster.admin
    admin.create_acls(deny("audited-closed", Op.CREATE))
    trail = AuditTrail(cluster)
    admin.create_topic("audited-create", 1)
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.create_topic("audited-closed", 1))
    # The Kafka protocol: judged and audited as the client, whose request the broker forwards.
    kafka_admin = confluent_admin(cluster)
    [future] = kafka_admin.create_topics([NewTopic("audited-kafka", 1, 1)]).values()
    assert result_error(future) is None
    trail.expect("Create", "Topic:audited-create", "ALLOWED")
    trail.expect("Create", "Topic:audited-closed", "DENIED")
    trail.expect("Create", "Topic:audited-kafka", "ALLOWED")


def test_alters_are_audited_allowed_and_denied(cluster: Cluster) -> None:
    """Config alters (AlterConfigs on the topic), partition growth (Alter on the topic) and a
    SCRAM credential change (Alter on the cluster)."""
    admin = cluster.admin
    admin.create_topic("audited-alter", 1)
    admin.create_topic("audited-frozen", 1)
    admin.create_acls(
        deny("audited-frozen", Op.ALTER_CONFIGS, Op.ALTER) + acl("audited-frozen", Op.DESCRIBE)
    )
    trail = AuditTrail(cluster)
    admin.incremental_alter_configs("audited-alter", {"retention.ms": "86400000"})
    denied(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        lambda: admin.incremental_alter_configs("audited-frozen", {"retention.ms": "86400000"}),
    )
    admin.create_partitions("audited-alter", 2)
    denied(
        ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.create_partitions("audited-frozen", 2)
    )
    upsertion = UserScramCredentialUpsertion(
        "audited-user", ScramMechanism.SCRAM_SHA_512, "audited-Pw-1c9e"
    )
    assert admin.alter_user_scram_credentials([upsertion]) == [("audited-user", None)]
    trail.expect("AlterConfigs", "Topic:audited-alter", "ALLOWED")
    trail.expect("AlterConfigs", "Topic:audited-frozen", "DENIED")
    trail.expect("Alter", "Topic:audited-alter", "ALLOWED")
    trail.expect("Alter", "Topic:audited-frozen", "DENIED")
    trail.expect("Alter", f"Cluster:{CLUSTER_NAME}", "ALLOWED")
    frozen = admin.describe_topic("audited-frozen", include_partition_state=False)
    assert len(frozen.partitions) == 1 and "retention.ms" not in frozen.configs


def test_deletes_are_audited_allowed_and_denied(cluster: Cluster) -> None:
    admin = cluster.admin
    admin.create_topic("audited-delete", 1)
    admin.create_topic("audited-kept", 1)
    admin.create_acls(deny("audited-kept", Op.DELETE) + acl("audited-kept", Op.DESCRIBE))
    trail = AuditTrail(cluster)
    admin.delete_topic("audited-delete")
    denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: admin.delete_topic("audited-kept"))
    trail.expect("Delete", "Topic:audited-delete", "ALLOWED")
    trail.expect("Delete", "Topic:audited-kept", "DENIED")
    assert "audited-kept" in {
        t.name for t in admin.describe_topic_listing(include_partition_state=False).topics
    }


def test_group_acls_on_the_brokers(cluster: Cluster) -> None:
    """Group ACLs made with ``tiered-acls --group`` reach the brokers, which judge the group
    APIs."""
    added = run_acls(
        cluster,
        "--add",
        "--deny-principal",
        ANONYMOUS,
        "--operation",
        "Read",
        "--group",
        "closed-group",
    )
    assert added.returncode == 0, added.stderr
    pattern = "ResourcePattern(resourceType=GROUP, name=closed-group, patternType=LITERAL)"
    listed = run_acls(cluster, "--list", "--group", "closed-group")
    assert listed.stdout.splitlines()[:2] == [
        f"Current ACLs for resource `{pattern}`: ",
        f" \t(principal={ANONYMOUS}, host=*, operation=READ, permissionType=DENY) ",
    ]

    serving_coordinator(cluster, "open-group")  # __consumer_offsets exists from here on

    def join_error(group: str) -> int:
        offsets = cluster.admin.describe_topic(OFFSETS_TOPIC, include_partition_state=False)
        coordinator = offsets.partitions[partition_for(group, len(offsets.partitions))].leader
        with connected(cluster, coordinator) as wire:
            return int(join_member(wire, 5, group).error_code)

    poll_until(
        lambda: join_error("closed-group") == KafkaErrorCode.group_authorization_failed,
        timeout=30,
        what="JoinGroup to be refused",
    )
    assert join_error("open-group") == KafkaErrorCode.none
    with connected(cluster, 1) as wire:  # Describe on the group to find its coordinator
        find = FindCoordinatorRequest(key_type=0, coordinator_keys=("closed-group",))
        [found] = wire.call(find).coordinators
    assert found.error_code == KafkaErrorCode.group_authorization_failed
    with connected(cluster, 1) as wire:
        described = wire.call(group_request(DESCRIBE, 5, groups=("closed-group", "open-group")))
    codes = {g.group_id: g.error_code for g in described.groups}
    # Describe is judged before coordination: a group coordinated elsewhere is NOT_COORDINATOR
    assert codes["closed-group"] == KafkaErrorCode.group_authorization_failed
    assert codes["open-group"] in (KafkaErrorCode.none, KafkaErrorCode.not_coordinator)


def run_acls(cluster: Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.acls", "--bootstrap-server", cluster.bootstrap, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_tiered_acls_round_trip_with_kafka_acls_output(cluster: Cluster) -> None:
    add = run_acls(
        cluster,
        "--add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "Describe",
        "--topic",
        "orders",
    )
    assert add.returncode == 0, add.stderr
    pattern = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`: " in add.stdout
    listed = run_acls(cluster, "--list", "--topic", "orders")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == f"Current ACLs for resource `{pattern}`: "
    assert sorted(listed.stdout.splitlines()[1:3]) == [
        " \t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) ",
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ",
    ]
    removed = run_acls(
        cluster,
        "--remove",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        "orders",
        "--force",
    )
    assert removed.returncode == 0, removed.stderr
    left = cluster.admin.describe_acls(
        AclBindingFilter(
            ResourcePatternFilter(ResourceType.TOPIC, "orders"),
            AccessControlEntryFilter(principal="User:alice"),
        )
    )
    assert [b.entry.operation for b in left] == [Op.DESCRIBE]
    bad = run_acls(cluster, "--add", "--allow-principal", "alice", "--topic", "orders")
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_REQUEST: ")


def test_acls_survive_a_controller_failover(cluster: Cluster) -> None:
    before = set(cluster.admin.describe_acls(AclBindingFilter()))
    assert before
    active = cluster.active_controller()
    active.kill()
    try:
        poll_until(
            lambda: _acls_or_none(cluster) == before, timeout=60, what="the standby to serve ACLs"
        )
        denied(ErrorCode.TOPIC_AUTHORIZATION_FAILED, lambda: cluster.admin.describe_topic("hidden"))
    finally:
        active.start()


def _acls_or_none(cluster: Cluster) -> set[AclBinding] | None:
    try:
        return set(cluster.admin.describe_acls(AclBindingFilter()))
    except TieredError:
        return None


def test_kafka_protocol_acl_apis(cluster: Cluster) -> None:
    """CreateAcls, DescribeAcls and DeleteAcls through confluent-kafka, forwarded as the client."""
    kafka_admin = confluent_admin(cluster)
    binding = kafka.AclBinding(
        kafka.ResourceType.TOPIC,
        "kafka-made",
        kafka.ResourcePatternType.PREFIXED,
        "User:carol",
        "*",
        kafka.AclOperation.WRITE,
        kafka.AclPermissionType.ALLOW,
    )
    [future] = kafka_admin.create_acls([binding]).values()
    assert future.result(30) is None
    any_carol = kafka.AclBindingFilter(
        kafka.ResourceType.ANY,
        None,
        kafka.ResourcePatternType.ANY,
        "User:carol",
        None,
        kafka.AclOperation.ANY,
        kafka.AclPermissionType.ANY,
    )
    assert kafka_admin.describe_acls(any_carol).result(30) == [binding]
    # The gRPC API sees what the Kafka protocol made.
    [made] = cluster.admin.describe_acls(
        AclBindingFilter(entry=AccessControlEntryFilter(principal="User:carol"))
    )
    assert made.pattern == ResourcePattern(ResourceType.TOPIC, "kafka-made", PatternType.PREFIXED)
    [future] = kafka_admin.delete_acls([any_carol]).values()
    assert future.result(30) == [binding]
    assert kafka_admin.describe_acls(any_carol).result(30) == []


def test_remote_storage_verify_needs_describe_on_the_cluster_or_the_topic(
    cluster: Cluster,
) -> None:
    """``tiered-remote-storage verify``: Describe on the cluster for every topic; without it,
    Describe on the topic it names."""
    admin = cluster.admin
    admin.create_topic("verify-open", 1)
    admin.create_topic("verify-hidden", 1)
    admin.create_acls(acl("verify-open", Op.DESCRIBE) + deny("verify-hidden", Op.DESCRIBE))
    assert admin.verify_remote_storage().missing == ()  # Describe on the cluster: every topic
    assert admin.verify_remote_storage("verify-hidden").segments_checked == 0
    no_cluster_describe = deny(CLUSTER_NAME, Op.DESCRIBE, resource_type=ResourceType.CLUSTER)
    admin.create_acls(no_cluster_describe)
    try:
        denied(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, admin.verify_remote_storage)
        assert admin.verify_remote_storage("verify-open").missing == ()
        denied(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            lambda: admin.verify_remote_storage("verify-hidden"),
        )
    finally:
        admin.delete_acls([AclBindingFilter.exactly(no_cluster_describe[0])])


def test_acl_and_credential_changes_need_alter_on_the_cluster_and_are_audited(
    cluster: Cluster,
) -> None:
    """Last in the module: once ANONYMOUS may not Alter the cluster, no ACL or SCRAM credential
    changes any more, and a scrub reports orphans but may not delete them. Each change, allowed
    or denied, is an audit line."""
    admin = cluster.admin
    trail = AuditTrail(cluster)
    temporary, kept = acl("audited-acl", Op.READ), acl("audited-acl-kept", Op.READ)
    admin.create_acls(temporary + kept)
    mine = AclBindingFilter(
        ResourcePatternFilter(ResourceType.TOPIC, "audited-acl"),
        AccessControlEntryFilter(principal=ANONYMOUS),
    )
    assert admin.delete_acls([mine]) == temporary
    # A scrub that deletes is an Alter of the cluster too (none is left here to delete).
    assert admin.scrub_remote_storage(0, execute=True).deleted == 0
    admin.create_acls(deny(CLUSTER_NAME, Op.ALTER, resource_type=ResourceType.CLUSTER))
    trail.expect("Alter", f"Cluster:{CLUSTER_NAME}", "ALLOWED", count=4)
    refused = run_acls(cluster, "--add", "--allow-principal", "User:x", "--topic", "t")
    assert refused.returncode == 1
    assert refused.stderr.startswith("CLUSTER_AUTHORIZATION_FAILED: "), refused.stderr
    found = admin.describe_acls(
        AclBindingFilter(entry=AccessControlEntryFilter(principal="User:x"))
    )
    assert found == []
    denied(
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        lambda: admin.delete_acls([AclBindingFilter(ResourcePatternFilter(ResourceType.TOPIC))]),
    )
    still = ResourcePatternFilter(ResourceType.TOPIC, "audited-acl-kept")
    assert admin.describe_acls(AclBindingFilter(still)) == kept
    upsertion = UserScramCredentialUpsertion(
        "refused-user", ScramMechanism.SCRAM_SHA_512, "refused-Pw-7a2b"
    )
    denied(
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        lambda: admin.alter_user_scram_credentials([upsertion]),
    )
    [missing] = admin.describe_user_scram_credentials(["refused-user"])
    assert isinstance(missing, TieredError) and missing.code is ErrorCode.RESOURCE_NOT_FOUND
    # Describe on the cluster still reports orphans; deleting them is refused.
    orphan = cluster.root / "remote" / f"scrubbed-{uuid.uuid4()}" / "0" / "left.bin"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"an orphan")
    assert orphan.name in "".join(admin.scrub_remote_storage(0).examples)
    denied(
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        lambda: admin.scrub_remote_storage(0, execute=True),
    )
    assert orphan.exists()
    trail.expect("Alter", f"Cluster:{CLUSTER_NAME}", "DENIED", count=4)


def test_disable_remote_topic_on_a_broker_needs_cluster_action(tmp_path: Path) -> None:
    """A caller without ClusterAction (the super user is a principal nobody has, and no ACL
    grants it) is refused by the broker itself, whoever forwarded what."""
    port = free_port()
    broker = DaemonProcess(
        "broker.main",
        tmp_path / "broker.properties",
        {
            "node.id": "7",
            "listeners": f"GRPC://127.0.0.1:{port}",
            "log.dirs": str(tmp_path / "log"),
            "rlmm.sqlite.path": str(tmp_path / "rlmm.db"),
            "remote.storage.root": str(tmp_path / "remote"),
            "authorizer.enabled": "true",
            "super.users": "User:nobody-has-this",
        },
    )
    broker.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = broker_grpc.BrokerServiceStub(channel)  # type: ignore[no-untyped-call]
        entry = broker_pb.DisableRemoteTopicEntry(
            partition=records_pb2.TopicIdPartition(topic_id=uuid.uuid4().bytes, partition=0),
            tiered_epoch=1,
            policy="delete",
        )
        with pytest.raises(grpc.RpcError) as failure:
            stub.DisableRemoteTopic(
                broker_pb.DisableRemoteTopicRequest(controller_epoch=1, entries=[entry]), timeout=10
            )
        assert failure.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert failure.value.details().startswith("CLUSTER_AUTHORIZATION_FAILED: User:ANONYMOUS")
        # Forwarding a principal does not help a caller that may not forward.
        with pytest.raises(grpc.RpcError) as failure:
            stub.AssignPartitions(
                broker_pb.AssignPartitionsRequest(controller_epoch=1),
                timeout=10,
                metadata=(("x-tiered-forwarded-principal", "User:nobody-has-this"),),
            )
        assert failure.value.code() is grpc.StatusCode.PERMISSION_DENIED
    finally:
        channel.close()
        broker.close()
