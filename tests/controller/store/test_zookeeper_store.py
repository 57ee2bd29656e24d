"""ZooKeeper-specific behaviour of the controller metadata store and of the brokers' registration:
the znode layout (a contract), fencing of zombies, session suspension and loss, live brokers."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.connection import _CONNECTION_DROP

from broker.zk_registration import (
    BrokerRegistrationError,
    BrokerZkRegistration,
    read_active_controller,
)
from controller.store.base import ControllerFencedError, MetadataStoreError
from controller.store.zookeeper import ZooKeeperMetadataStore
from tests.controller.store.test_store_contract import expire_session
from tests.support.polling import poll_until
from tests.support.zookeeper import ZooKeeperServer, start_kazoo_client
from tiered.cluster import zk_paths
from tiered.cluster.model import BrokerRegistration, TieredState, TopicMetadata

pytestmark = [pytest.mark.zookeeper, pytest.mark.processes]

ENDPOINT = "127.0.0.1:9091"

OpenStore = Callable[..., ZooKeeperMetadataStore]


@pytest.fixture
def open_store(zk_connect: str) -> Iterator[OpenStore]:
    """``open_store(**overrides)``: a store on this test's chroot, closed at the end."""
    opened: list[ZooKeeperMetadataStore] = []

    def open_store(**config: str) -> ZooKeeperMetadataStore:
        store = ZooKeeperMetadataStore.from_config({"zookeeper.connect": zk_connect, **config})
        opened.append(store)
        return store

    yield open_store
    for store in reversed(opened):
        store.close()


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A server of this test's own, free to be stopped and restarted."""
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def hosts_of(connect: str) -> str:
    return connect.partition("/")[0]


def elect(store: ZooKeeperMetadataStore, controller_id: int = 1) -> int:
    epoch = store.elect(controller_id, ENDPOINT, threading.Event())
    assert epoch is not None
    return epoch


def orders_topic() -> TopicMetadata:
    return TopicMetadata(
        name="orders",
        topic_id=uuid.uuid4(),
        replicas=(0, 1, 2),
        configs={"remote.storage.enable": "true", "retention.ms": "86400000"},
        tiered_state=TieredState.ENABLED,
        tiered_epoch=2,
    )


def snapshot(client: KazooClient, paths: list[str]) -> dict[str, tuple[bytes, int] | None]:
    """Data and modification zxid of each path (None if absent)."""
    result: dict[str, tuple[bytes, int] | None] = {}
    for path in paths:
        found = client.exists(path)
        result[path] = None if found is None else (client.get(path)[0], found.mzxid)
    return result


def topic_paths(name: str) -> list[str]:
    return [
        zk_paths.topic(name),
        zk_paths.tiered_storage(name),
        zk_paths.tiered_epoch(name),
        zk_paths.tiered_state(name),
        zk_paths.topic_config(name),
    ]


# ----------------------------------------------------------------------------- layout


def test_znodes_follow_the_contract_layout(
    open_store: OpenStore, kazoo_client: KazooClient
) -> None:
    store = open_store()
    assert elect(store, controller_id=7) == 1
    orders = orders_topic()
    store.writes.create_topic(orders)

    assert json.loads(kazoo_client.get("/brokers/topics/orders")[0]) == {
        "version": 3,
        "topic_id": str(orders.topic_id),
        "partitions": {"0": [0], "1": [1], "2": [2]},
    }
    assert kazoo_client.get_children("/brokers/topics/orders") == ["tieredstorage"]
    assert sorted(kazoo_client.get_children("/brokers/topics/orders/tieredstorage")) == [
        "state",
        "tiered_epoch",
    ]
    assert kazoo_client.get("/brokers/topics/orders/tieredstorage/tiered_epoch")[0] == b"2"
    assert kazoo_client.get("/brokers/topics/orders/tieredstorage/state")[0] == b"ENABLED"
    assert json.loads(kazoo_client.get("/config/topics/orders")[0]) == {
        "version": 1,
        "config": {"remote.storage.enable": "true", "retention.ms": "86400000"},
    }
    controller, stat = kazoo_client.get("/controller")
    value = json.loads(controller)
    assert {k: value[k] for k in ("version", "brokerid", "endpoint")} == {
        "version": 2,
        "brokerid": 7,
        "endpoint": ENDPOINT,
    }
    assert value["timestamp"].isdigit()
    assert abs(int(value["timestamp"]) - time.time() * 1000) < 60_000
    assert stat.ephemeralOwner == store.client.client_id[0]
    assert kazoo_client.get("/controller_epoch")[0] == b"1"
    assert kazoo_client.exists("/controller_epoch").ephemeralOwner == 0
    assert kazoo_client.exists("/brokers/ids") is not None

    disabling = orders.with_configs({"remote.log.disable.policy": "delete"}).with_tiered_state(
        TieredState.DISABLING, 3
    )
    store.writes.update_topic(orders, disabling)
    assert kazoo_client.get("/brokers/topics/orders/tieredstorage/tiered_epoch")[0] == b"3"
    assert kazoo_client.get("/brokers/topics/orders/tieredstorage/state")[0] == b"DISABLING"
    assert json.loads(kazoo_client.get("/config/topics/orders")[0]) == {
        "version": 1,
        "config": {"remote.log.disable.policy": "delete"},
    }

    store.writes.delete_topic(disabling)
    assert kazoo_client.get_children("/brokers/topics") == []
    assert kazoo_client.get_children("/config/topics") == []
    assert read_active_controller(kazoo_client) == (7, ENDPOINT, 1)


def test_a_missing_chroot_is_created(zk_connect: str, kazoo_client: KazooClient) -> None:
    store = ZooKeeperMetadataStore.from_config({"zookeeper.connect": f"{zk_connect}/a/b"})
    try:
        assert elect(store) == 1
        assert store.active_controller() == (1, ENDPOINT)
    finally:
        store.close()
    assert kazoo_client.get("/a/b/controller_epoch")[0] == b"1"
    assert kazoo_client.exists("/a/b/controller") is None  # close() resigned
    assert kazoo_client.exists("/controller") is None


def test_from_config_validates() -> None:
    with pytest.raises(ValueError, match=r"zookeeper\.connect"):
        ZooKeeperMetadataStore.from_config({})
    with pytest.raises(ValueError, match=r"zookeeper\.session\.timeout\.ms"):
        ZooKeeperMetadataStore.from_config(
            {"zookeeper.connect": "127.0.0.1:1", "zookeeper.session.timeout.ms": "soon"}
        )
    with pytest.raises(ValueError, match=r"zookeeper\.suspended\.grace\.ms"):
        ZooKeeperMetadataStore.from_config(
            {"zookeeper.connect": "127.0.0.1:1", "zookeeper.suspended.grace.ms": "-1"}
        )


def test_a_failed_multi_creates_no_znode(open_store: OpenStore, kazoo_client: KazooClient) -> None:
    store = open_store()
    elect(store)
    kazoo_client.create("/config/topics/orders", b"planted behind the store's back")
    with pytest.raises(MetadataStoreError, match="config/topics/orders: NodeExistsError") as e:
        store.writes.create_topic(orders_topic())
    assert not isinstance(e.value, ControllerFencedError)
    assert kazoo_client.exists("/brokers/topics/orders") is None
    assert kazoo_client.get_children("/brokers/topics") == []
    assert kazoo_client.get("/config/topics/orders")[0] == b"planted behind the store's back"
    assert not store.leadership_lost.is_set()


def test_resign_deletes_only_our_controller_znode(
    open_store: OpenStore, kazoo_client: KazooClient
) -> None:
    leader, standby = open_store(), open_store()
    assert standby.active_controller() is None
    elect(leader)
    owner = kazoo_client.exists("/controller").ephemeralOwner
    standby.resign()  # not the leader: must leave the leader's znode alone
    assert kazoo_client.exists("/controller").ephemeralOwner == owner
    leader.close()
    leader.close()  # idempotent
    assert kazoo_client.exists("/controller") is None
    assert elect(standby, controller_id=2) == 2


# ----------------------------------------------------------------------------- fencing


def test_a_zombie_controller_is_fenced(
    open_store: OpenStore, zk_connect: str, kazoo_client: KazooClient
) -> None:
    zombie = open_store()
    assert elect(zombie, controller_id=1) == 1
    orders = orders_topic()
    zombie.writes.create_topic(orders)
    paths = topic_paths("orders") + topic_paths("fresh")
    before = snapshot(kazoo_client, paths)

    expire_session(zombie.client, hosts_of(zk_connect))
    poll_until(zombie.leadership_lost.is_set, what="the zombie to see its session expire")
    successor = open_store()
    assert elect(successor, controller_id=2) == 2
    assert kazoo_client.get("/controller_epoch")[0] == b"2"

    fresh = TopicMetadata(name="fresh", topic_id=uuid.uuid4(), replicas=(0,))
    with pytest.raises(ControllerFencedError):
        zombie.writes.create_topic(fresh)
    with pytest.raises(ControllerFencedError):
        zombie.writes.update_topic(orders, orders.with_tiered_state(TieredState.DISABLING, 3))
    with pytest.raises(ControllerFencedError):
        zombie.writes.delete_topic(orders)
    assert snapshot(kazoo_client, paths) == before
    assert read_active_controller(kazoo_client) == (2, ENDPOINT, 2)


def test_the_epoch_check_fences_a_controller_that_kept_its_session(
    open_store: OpenStore, kazoo_client: KazooClient
) -> None:
    # An operator deletes /controller (Kafka's way to force a new election): the old controller's
    # session is fine, so only the /controller_epoch version check in its multi can stop it.
    old = open_store()
    assert elect(old, controller_id=1) == 1
    orders = orders_topic()
    old.writes.create_topic(orders)
    paths = topic_paths("orders") + topic_paths("late")
    before = snapshot(kazoo_client, paths)

    kazoo_client.delete("/controller")
    poll_until(old.leadership_lost.is_set, what="the old controller to notice /controller went")
    new = open_store()
    assert elect(new, controller_id=2) == 2
    assert kazoo_client.exists("/controller").version == 0  # as old's was: no help to fence

    with pytest.raises(ControllerFencedError, match="controller_epoch"):
        old.writes.create_topic(TopicMetadata(name="late", topic_id=uuid.uuid4(), replicas=(0,)))
    with pytest.raises(ControllerFencedError, match="controller_epoch"):
        old.writes.update_topic(orders, orders.with_tiered_state(TieredState.DISABLING, 3))
    with pytest.raises(ControllerFencedError, match="controller_epoch"):
        old.writes.delete_topic(orders)
    assert snapshot(kazoo_client, paths) == before


# ----------------------------------------------------------------------------- session


def _state_recorder(store: ZooKeeperMetadataStore) -> list[str]:
    states: list[str] = []
    store.client.add_listener(states.append)
    return states


def test_a_suspension_shorter_than_the_grace_keeps_leadership(open_store: OpenStore) -> None:
    grace_s = 2.0
    store = open_store(**{"zookeeper.suspended.grace.ms": str(int(grace_s * 1000))})
    elect(store)
    session = store.client.client_id[0]
    states = _state_recorder(store)
    # kazoo's own test hook drops the connection (SUSPENDED); the client reconnects at once
    # with the same session. (A server restart would do too, but a JVM's start time under load
    # is no good measure of "shorter than the grace".)
    suspended_at = time.monotonic()
    store.client._call(_CONNECTION_DROP, store.client.handler.async_result())
    poll_until(
        lambda: states[-2:] == [KazooState.SUSPENDED, KazooState.CONNECTED],
        timeout=grace_s,
        what="the store to be suspended and reconnect",
    )
    assert time.monotonic() - suspended_at < grace_s
    # Observe past the grace: no timer may fire for a suspension that ended in time.
    time.sleep(max(0.0, suspended_at + grace_s + 0.5 - time.monotonic()))
    assert not store.leadership_lost.is_set()
    assert store.client.client_id[0] == session
    store.writes.create_topic(orders_topic())  # still the controller: writes go through
    assert store.active_controller() == (1, ENDPOINT)


def test_a_zookeeper_restart_longer_than_the_grace_loses_leadership(
    private_server: ZooKeeperServer,
) -> None:
    store = ZooKeeperMetadataStore.from_config(
        {
            "zookeeper.connect": private_server.connect_string,
            "zookeeper.session.timeout.ms": "4000",
            "zookeeper.suspended.grace.ms": "300",
        }
    )
    try:
        assert elect(store) == 1
        states = _state_recorder(store)
        private_server.stop()
        poll_until(store.leadership_lost.is_set, what="leadership to be lost after the grace")
        assert KazooState.LOST not in states  # only suspended: the grace decided
        private_server.start()
        # kazoo may have connected while the JVM was starting and wait out that attempt.
        poll_until(lambda: store.client.connected, timeout=30, what="the store to reconnect")
        assert store.leadership_lost.is_set()  # the doubt stays: the controller resigns
        store.resign()
        assert elect(store) == 2
        assert not store.leadership_lost.is_set()
        store.writes.create_topic(orders_topic())
    finally:
        store.close()


# ----------------------------------------------------------------------------- brokers


class Brokers:
    """What ``watch_live_brokers`` delivered, for polling."""

    def __init__(self) -> None:
        self.calls: list[dict[int, BrokerRegistration]] = []
        self.lock = threading.Lock()

    def __call__(self, brokers: dict[int, BrokerRegistration]) -> None:
        with self.lock:
            self.calls.append(brokers)

    def last(self) -> dict[int, BrokerRegistration] | None:
        with self.lock:
            return self.calls[-1] if self.calls else None


def test_watch_live_brokers(
    open_store: OpenStore, zk_connect: str, kazoo_client: KazooClient
) -> None:
    store = open_store()
    seen = Brokers()
    assert store.watch_live_brokers(seen) is True
    poll_until(lambda: seen.last() == {}, what="the initial (empty) set")

    one = BrokerRegistration(broker_id=1, host="127.0.0.1", port=19091)
    two = BrokerRegistration(broker_id=2, host="127.0.0.1", port=19092)
    with BrokerZkRegistration(zk_connect, one), BrokerZkRegistration(zk_connect, two):
        poll_until(lambda: seen.last() == {1: one, 2: two}, what="both brokers to appear")
        store.register_broker(one)
        store.register_broker(two)
    poll_until(lambda: seen.last() == {}, what="both brokers to go on close")
    with pytest.raises(MetadataStoreError, match="not registered"):
        store.register_broker(one)

    # A restarted broker 1 (a new incarnation) loses its session: it registers again by itself.
    restarted = BrokerRegistration(broker_id=1, host="127.0.0.1", port=19091)
    broker = BrokerZkRegistration(zk_connect, restarted)
    broker.start()
    try:
        poll_until(lambda: seen.last() == {1: restarted}, what="the restarted broker")
        with pytest.raises(MetadataStoreError, match="not"):
            store.register_broker(one)  # the old incarnation is not the one registered
        old_session = broker.client.client_id[0]
        with broker._lock:  # hold re-registration back until the watcher has seen the loss
            expire_session(broker.client, hosts_of(zk_connect))
            poll_until(lambda: seen.last() == {}, what="the expired registration to go")
        poll_until(lambda: seen.last() == {1: restarted}, what="the broker to register again")
        assert broker.registrations == 2
        owner = kazoo_client.exists("/brokers/ids/1").ephemeralOwner
        assert owner == broker.client.client_id[0] != old_session
        assert broker.is_registered()
        data = json.loads(kazoo_client.get("/brokers/ids/1")[0])
        assert {k: data[k] for k in ("version", "host", "port", "incarnation_id")} == {
            "version": 5,
            "host": "127.0.0.1",
            "port": 19091,
            "incarnation_id": str(restarted.incarnation_id),
        }
        assert data["timestamp"].isdigit()
        store.register_broker(restarted)
        assert store.load().brokers == {1: restarted}
    finally:
        broker.close()


def test_a_broker_waits_out_its_stale_registration(
    zookeeper_server: ZooKeeperServer, zk_connect: str, kazoo_client: KazooClient
) -> None:
    registration = BrokerRegistration(broker_id=5, host="127.0.0.1", port=19095)
    # The previous run of broker 5 left its znode behind with a session not yet expired.
    previous = start_kazoo_client(zk_connect)
    previous.create("/brokers/ids/5", b"{}", ephemeral=True, makepath=True)
    stale_owner = previous.client_id[0]

    broker = BrokerZkRegistration(zk_connect, registration, stale_timeout_s=30.0)
    starting = threading.Thread(target=broker.start, daemon=True)
    starting.start()
    try:
        starting.join(timeout=0.3)  # an observation window: it must be waiting
        assert starting.is_alive()
        assert kazoo_client.exists("/brokers/ids/5").ephemeralOwner == stale_owner
        previous.stop()  # the old session ends
        previous.close()
        starting.join(timeout=10)
        assert not starting.is_alive()
        assert broker.is_registered()
        assert kazoo_client.exists("/brokers/ids/5").ephemeralOwner == broker.client.client_id[0]
    finally:
        broker.close()

    # A live duplicate never goes: start gives up at the deadline, naming the problem.
    holder = start_kazoo_client(zk_connect)
    try:
        holder.create("/brokers/ids/5", b"{}", ephemeral=True)
        duplicate = BrokerZkRegistration(zk_connect, registration, stale_timeout_s=0.3)
        with pytest.raises(BrokerRegistrationError, match="held by another session"):
            duplicate.start()
        duplicate.close()
    finally:
        holder.stop()
        holder.close()
    assert zookeeper_server.is_running


# ----------------------------------------------------------------------------- scale


def test_load_of_5000_topics(private_server: ZooKeeperServer) -> None:
    # A private server: deleting 25,000 znodes from the shared one would take longer than the test.
    count = 5000
    connect = f"{private_server.connect_string}/scale"
    store = ZooKeeperMetadataStore.from_config({"zookeeper.connect": connect})
    readers: list[ZooKeeperMetadataStore] = []
    try:
        elect(store)
        states = list(TieredState)
        topics = [
            TopicMetadata(
                name=f"topic-{i:05d}",
                topic_id=uuid.uuid4(),
                replicas=tuple((i + p) % 3 for p in range(1 + i % 3)),
                configs={"remote.storage.enable": "true", "retention.ms": str(i)},
                tiered_state=states[i % 3],
                tiered_epoch=i % 7,
            )
            for i in range(count)
        ]
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=16) as pool:  # concurrent multis pipeline
            list(pool.map(store.writes.create_topic, topics))
        created_s = time.perf_counter() - started
        expected = {t.name: t for t in topics}

        timings: dict[str, float] = {}
        for label, multi_read in (("multiRead", True), ("async gets", False)):
            reader = ZooKeeperMetadataStore(connect, multi_read=multi_read)
            readers.append(reader)
            started = time.perf_counter()
            image = reader.load()
            timings[label] = time.perf_counter() - started
            assert image.topics == expected, label
            assert image.topic_by_id(topics[1234].topic_id) == topics[1234]
            assert image.controller_epoch == 1
        print(
            f"\nZooKeeper store: created {count} topics in {created_s:.2f}s; load() of {count} "
            f"topics ({4 * count} znodes): "
            + ", ".join(f"{label} {seconds:.2f}s" for label, seconds in timings.items())
        )
    finally:
        for reader in readers:
            reader.close()
        store.close()


def test_load_falls_back_when_the_server_refuses_multi_read(
    open_store: OpenStore, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tiered import zk_multi_read

    store = open_store()
    elect(store)
    orders = orders_topic()
    store.writes.create_topic(orders)
    reader = open_store()
    # An opcode the server does not know: it answers UNIMPLEMENTED, then drops the connection,
    # as a ZooKeeper older than 3.6 does with multiRead.
    monkeypatch.setattr(zk_multi_read.MultiRead, "type", 99)
    assert reader.load().topics == {"orders": orders}
    assert "no multiRead" in caplog.text
    caplog.clear()
    assert reader.load().topics == {"orders": orders}
    assert "no multiRead" not in caplog.text  # not tried again
    assert not store.leadership_lost.is_set()
