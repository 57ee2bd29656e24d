"""ACLs in the controller metadata store of either mode (the contract of ``create_acls`` and
``delete_acls``), Kafka's ZooKeeper layout, a broker following them in ZooKeeper mode, and the
metadata records that carry them in KRaft mode."""

from __future__ import annotations

import json
import uuid

import pytest
from kazoo.client import KazooClient

from controller.store.base import ControllerFencedError, MetadataStoreError
from tests.controller.store.test_store_contract import (  # noqa: F401 - fixtures
    StoreFactory,
    elect,
    store_factory,
    zookeeper_factory,
)
from tests.support.polling import poll_until
from tiered.cluster import serde
from tiered.cluster.model import MetadataImage
from tiered.cluster.zk_acls import AclZkFollower
from tiered.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tiered.security.acl_serde import acl_record, remove_acl_record
from tiered.zk_client import ZkClient

pytestmark = pytest.mark.zookeeper


def acl(
    name: str,
    operation: AclOperation = AclOperation.READ,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    resource_type: ResourceType = ResourceType.TOPIC,
) -> tuple[uuid.UUID, AclBinding]:
    return uuid.uuid4(), AclBinding(
        ResourcePattern(resource_type, name, pattern),
        AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
    )


READ_ORDERS = acl("orders")
WRITE_ORDERS = acl("orders", AclOperation.WRITE, principal="User:bob")
PREFIXED = acl("ord", AclOperation.DESCRIBE, PatternType.PREFIXED)
CLUSTER = acl("kafka-cluster", AclOperation.ALTER, resource_type=ResourceType.CLUSTER)


def bindings(image: MetadataImage) -> set[AclBinding]:
    return {b for _, b in image.acls.items()}


def test_acls_are_created_and_deleted_atomically_and_load_in_another_store(
    store_factory: StoreFactory,  # noqa: F811
) -> None:
    store = store_factory.open()
    elect(store)
    store.writes.create_acls([READ_ORDERS, WRITE_ORDERS, PREFIXED, CLUSTER])
    store.resign()
    other = store_factory.open()
    elect(other, 2)
    loaded = other.load()
    assert bindings(loaded) == {READ_ORDERS[1], WRITE_ORDERS[1], PREFIXED[1], CLUSTER[1]}
    stored = [(i, b) for i, b in loaded.acls.items() if b in (READ_ORDERS[1], PREFIXED[1])]
    other.writes.delete_acls(stored)
    assert bindings(other.load()) == {WRITE_ORDERS[1], CLUSTER[1]}


def test_a_deposed_store_writes_no_acl(store_factory: StoreFactory) -> None:  # noqa: F811
    store = store_factory.open()
    elect(store)
    store_factory.depose(store)
    winner = store_factory.open()
    elect(winner, 2)
    with pytest.raises(ControllerFencedError):
        store.writes.create_acls([READ_ORDERS])
    assert bindings(winner.load()) == set()


def test_zookeeper_layout_is_kafkas(
    zookeeper_factory: StoreFactory,  # noqa: F811
    kazoo_client: KazooClient,
) -> None:
    store = zookeeper_factory.open()
    elect(store)
    store.writes.create_acls([READ_ORDERS, WRITE_ORDERS, PREFIXED])
    data, _ = kazoo_client.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Allow",
                "operation": "Read",
                "host": "*",
            },
            {"principal": "User:bob", "permissionType": "Allow", "operation": "Write", "host": "*"},
        ],
    }
    data, _ = kazoo_client.get("/kafka-acl-extended/prefixed/Topic/ord")
    assert json.loads(data)["acls"][0]["operation"] == "Describe"
    [literal_change] = kazoo_client.get_children("/kafka-acl-changes")
    assert literal_change.startswith("acl_changes_")
    assert kazoo_client.get(f"/kafka-acl-changes/{literal_change}")[0] == b"Topic:orders"
    [extended] = kazoo_client.get_children("/kafka-acl-extended-changes")
    event = json.loads(kazoo_client.get(f"/kafka-acl-extended-changes/{extended}")[0])
    assert event == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "ord",
        "patternType": "PREFIXED",
    }
    store.writes.delete_acls(
        [(i, b) for i, b in store.load().acls.items() if b.pattern.name == "ord"]
    )
    assert kazoo_client.exists("/kafka-acl-extended/prefixed/Topic/ord") is None


def test_zookeeper_refuses_a_name_that_is_no_znode_name_and_writes_nothing(
    zookeeper_factory: StoreFactory,  # noqa: F811
) -> None:
    store = zookeeper_factory.open()
    elect(store)
    with pytest.raises(MetadataStoreError, match="cannot be a znode name"):
        store.writes.create_acls([READ_ORDERS, acl("a/b", pattern=PatternType.PREFIXED)])
    assert bindings(store.load()) == set()


def test_a_broker_follows_acl_changes_on_its_own_session(
    zookeeper_factory: StoreFactory,  # noqa: F811
    zk_connect: str,
) -> None:
    store = zookeeper_factory.open()
    elect(store)
    store.writes.create_acls([READ_ORDERS])
    zk = ZkClient(zk_connect, 6.0)
    zk.start(10.0)
    follower = AclZkFollower(zk)
    try:
        follower.start()
        assert {b for _, b in follower.acls.items()} == {READ_ORDERS[1]}
        store.writes.create_acls([PREFIXED, WRITE_ORDERS])
        poll_until(lambda: len(follower.acls) == 3, what="the broker to see two new ACLs")
        store.writes.delete_acls(
            [(i, b) for i, b in store.load().acls.items() if b == READ_ORDERS[1]]
        )
        poll_until(
            lambda: {b for _, b in follower.acls.items()} == {PREFIXED[1], WRITE_ORDERS[1]},
            what="the broker to see the removal",
        )
    finally:
        follower.close()
        zk.close()


def test_kraft_records_and_snapshots_carry_acls() -> None:
    image = MetadataImage()
    serde.apply_records(image, [acl_record(*READ_ORDERS), acl_record(*PREFIXED)])
    assert bindings(image) == {READ_ORDERS[1], PREFIXED[1]}
    serde.apply_record(image, remove_acl_record(READ_ORDERS[0]))
    assert bindings(image) == {PREFIXED[1]}
    restored = serde.image_from_snapshot(serde.image_to_batch(image, 7))
    assert restored.acls.items() == image.acls.items()
