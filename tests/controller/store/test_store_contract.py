"""The controller metadata store contract (``controller.store.base``), run unchanged against every
backend: ZooKeeper (a real server, one chroot per test) and the KRaft-style metadata log.

``store_factory`` opens store instances on one backing store, as separate controller processes
would; what differs between backends (how a leader is deposed behind its back, how a broker
becomes present, how a write is made to fail halfway) lives in the factory, not in the tests.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from controller.store.base import (
    ControllerFencedError,
    MetadataStore,
    MetadataStoreError,
    TopicChange,
)
from tests.support.polling import poll_until
from tiered.cluster import zk_paths
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    PartitionDeleteProgress,
    TieredState,
    TopicMetadata,
)
from tiered.rpc.v1 import metadata_pb2
from tiered.security.scram import ScramCredential, ScramMechanism

PROMPT_S = 2.0  # what "returns promptly" means here
JOIN_S = 10.0


def expire_session(client: KazooClient, hosts: str) -> None:
    """Expires ``client``'s ZooKeeper session the way a server does after a partition: a second
    client attaches to the same session and closes it. ``client`` then sees LOST and reconnects
    with a new session; the old session's ephemerals are gone."""
    client_id = client.client_id
    assert client_id is not None, "the client to expire is not connected"
    other = KazooClient(hosts=hosts, client_id=client_id)
    other.start(timeout=15)
    other.stop()
    other.close()


@dataclass
class StoreFactory:
    """Opens metadata stores on one backing store (a ZooKeeper chroot or a log directory)."""

    kind: str
    open_store: Callable[[], MetadataStore]
    depose: Callable[[MetadataStore], None]
    """Takes leadership away from an elected store so that another can be elected: behind its
    back where the backend allows that (ZooKeeper: its session expires, and the store notices),
    else the only way there is (KRaft: it resigns, releasing the log directory's lock)."""
    make_present: Callable[[BrokerRegistration], None]
    """Makes a broker registration present where the backend expects brokers to register
    themselves (ZooKeeper: a ``BrokerZkRegistration``); nothing elsewhere."""
    sabotage_create: Callable[[MetadataStore, TopicMetadata], TopicMetadata | None]
    """Arranges for ``store.writes.create_topic(topic)`` to fail partway and returns what ``load`` must
    show under that name afterwards. ZooKeeper: the topic's config znode is created behind the
    store's back, so the multi fails at its last op. Elsewhere: a topic of that name exists."""
    opened: list[MetadataStore] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def open(self) -> MetadataStore:
        store = self.open_store()
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in reversed(self.opened):
            store.close()
        for cleanup in reversed(self.cleanups):
            cleanup()


def _zookeeper_factory(request: pytest.FixtureRequest) -> StoreFactory:
    from broker.zk_registration import BrokerZkRegistration
    from controller.store.zookeeper import ZooKeeperMetadataStore

    connect: str = request.getfixturevalue("zk_connect")
    hosts = connect.partition("/")[0]
    chroot = connect[len(hosts) :]
    factory: StoreFactory

    def open_store() -> MetadataStore:
        return ZooKeeperMetadataStore.from_config({"zookeeper.connect": connect})

    def depose(store: MetadataStore) -> None:
        assert isinstance(store, ZooKeeperMetadataStore)
        expire_session(store.client, hosts)
        # Until the store has seen its session end, a write of its may fail with an unknown
        # outcome (kazoo fails requests caught by the expiry with SessionExpiredError).
        poll_until(store.leadership_lost.is_set, what="the deposed store to see its session end")

    def make_present(registration: BrokerRegistration) -> None:
        broker = BrokerZkRegistration(connect, registration)
        broker.start()
        factory.cleanups.append(broker.close)

    def sabotage_create(store: MetadataStore, topic: TopicMetadata) -> TopicMetadata | None:
        assert isinstance(store, ZooKeeperMetadataStore)
        store.client.create(chroot + zk_paths.topic_config(topic.name), b"planted")
        return None

    factory = StoreFactory("zookeeper", open_store, depose, make_present, sabotage_create)
    return factory


def _kraft_factory(tmp_path: Path) -> StoreFactory:
    from controller.store.kraft import KRaftMetadataStore

    config = {"metadata.log.dir": str(tmp_path / "metadata")}

    def sabotage_create(store: MetadataStore, topic: TopicMetadata) -> TopicMetadata | None:
        existing = TopicMetadata(name=topic.name, topic_id=uuid.uuid4(), replicas=(7,))
        store.writes.create_topic(existing)
        return existing

    return StoreFactory(
        "kraft",
        lambda: KRaftMetadataStore.from_config(config),
        lambda store: store.resign(),
        lambda _registration: None,
        sabotage_create,
    )


@pytest.fixture(params=["zookeeper", "kraft"])
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    factory = (
        _zookeeper_factory(request) if request.param == "zookeeper" else _kraft_factory(tmp_path)
    )
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def zookeeper_factory(request: pytest.FixtureRequest) -> Iterator[StoreFactory]:
    """For what only ZooKeeper can show (a multi made to fail halfway behind the store's back)."""
    factory = _zookeeper_factory(request)
    try:
        yield factory
    finally:
        factory.close()


def elect(store: MetadataStore, controller_id: int = 1) -> int:
    epoch = store.elect(controller_id, f"127.0.0.1:{9000 + controller_id}", threading.Event())
    assert epoch is not None
    return epoch


def topic(
    name: str,
    partitions: int = 2,
    configs: dict[str, str] | None = None,
    state: TieredState = TieredState.DISABLED,
    tiered_epoch: int = 0,
) -> TopicMetadata:
    return TopicMetadata(
        name=name,
        topic_id=uuid.uuid4(),
        replicas=tuple(p % 3 for p in range(partitions)),
        configs=configs or {},
        tiered_state=state,
        tiered_epoch=tiered_epoch,
    )


def delete_job(
    t: TopicMetadata,
    tiered_epoch: int,
    state: DeleteJobState = DeleteJobState.PENDING,
    progress: tuple[PartitionDeleteProgress, ...] = (),
    attempts: int = 0,
    last_error: str = "",
) -> DeleteJob:
    return DeleteJob(
        topic=t.name,
        topic_id=t.topic_id,
        tiered_epoch=tiered_epoch,
        partition_count=t.partition_count,
        state=state,
        progress=progress,
        attempts=attempts,
        last_error=last_error,
    )


def disabled_with_delete(t: TopicMetadata) -> tuple[TopicMetadata, DeleteJob]:
    """``t`` (DISABLING) disabled with the delete policy: the topic as the controller writes it
    then, and the bulk delete it queues in the same write."""
    after = t.with_configs(
        {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}
    ).with_tiered_state(TieredState.DISABLED, t.tiered_epoch + 1)
    return after, delete_job(after, after.tiered_epoch)


class ElectionThread(threading.Thread):
    """``store.elect`` on a thread of its own, keeping the result."""

    def __init__(self, store: MetadataStore, controller_id: int) -> None:
        super().__init__(daemon=True, name=f"elect-{controller_id}")
        self.store = store
        self.controller_id = controller_id
        self.stop = threading.Event()
        self.result: int | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.store.elect(
                self.controller_id, f"127.0.0.1:{9000 + self.controller_id}", self.stop
            )
        except BaseException as e:
            self.error = e


# ----------------------------------------------------------------------------- leadership


def test_elect_raises_the_epoch_strictly(store_factory: StoreFactory) -> None:
    first = store_factory.open()
    assert elect(first, controller_id=1) == 1
    assert first.active_controller() == (1, "127.0.0.1:9001")
    image = first.load()
    assert (image.controller_id, image.controller_epoch) == (1, 1)
    assert image.controller_endpoint == "127.0.0.1:9001"
    first.resign()
    first.resign()  # idempotent

    second = store_factory.open()
    assert elect(second, controller_id=2) == 2
    assert second.active_controller() == (2, "127.0.0.1:9002")
    assert not second.leadership_lost.is_set()
    second.resign()
    assert elect(second, controller_id=2) == 3  # the same instance, elected again

    image = store_factory.open().load()
    assert (image.controller_id, image.controller_epoch) == (2, 3)
    assert image.controller_endpoint == "127.0.0.1:9002"


def test_writes_need_leadership(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    t = topic("never-written")
    with pytest.raises(ControllerFencedError):
        store.writes.create_topic(t)
    with pytest.raises(ControllerFencedError):
        store.writes.put_delete_job(delete_job(t, 1))
    elect(store)
    store.resign()
    with pytest.raises(ControllerFencedError):
        store.writes.create_topic(t)
    with pytest.raises(ControllerFencedError):
        store.writes.put_delete_job(delete_job(t, 1))
    image = store_factory.open().load()
    assert "never-written" not in image.topics
    assert image.delete_jobs == {}


def test_elect_with_stop_set_returns_none_while_another_leads(
    store_factory: StoreFactory,
) -> None:
    leader = store_factory.open()
    elect(leader, controller_id=1)
    standby = store_factory.open()

    stop = threading.Event()
    stop.set()
    started = time.monotonic()
    assert standby.elect(2, "127.0.0.1:9002", stop) is None
    assert time.monotonic() - started < PROMPT_S

    waiting = ElectionThread(standby, controller_id=2)
    waiting.start()
    waiting.join(timeout=0.3)  # an observation window: the standby must still be waiting
    assert waiting.is_alive(), f"elect returned {waiting.result!r} / {waiting.error!r}"
    stopped_at = time.monotonic()
    waiting.stop.set()
    waiting.join(timeout=JOIN_S)
    assert not waiting.is_alive()
    assert waiting.error is None
    assert waiting.result is None
    assert time.monotonic() - stopped_at < PROMPT_S

    # The leader was not disturbed.
    leader.writes.create_topic(topic("still-leading"))
    assert leader.active_controller() == (1, "127.0.0.1:9001")


def test_standby_takes_over_when_the_leader_resigns(store_factory: StoreFactory) -> None:
    leader = store_factory.open()
    assert elect(leader, controller_id=1) == 1
    standby = store_factory.open()
    waiting = ElectionThread(standby, controller_id=2)
    waiting.start()
    leader.resign()
    waiting.join(timeout=JOIN_S)
    assert not waiting.is_alive()
    assert waiting.error is None
    assert waiting.result == 2
    assert standby.active_controller() == (2, "127.0.0.1:9002")


# ----------------------------------------------------------------------------- topics


def test_topics_round_trip(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic(
        "orders",
        partitions=3,
        configs={"remote.storage.enable": "true", "retention.ms": "60000"},
        state=TieredState.ENABLED,
    )
    clicks = topic("clicks", partitions=1)
    audit = topic(
        "audit",
        configs={"remote.storage.enable": "true", "remote.log.disable.policy": "delete"},
        state=TieredState.DISABLING,
        tiered_epoch=3,
    )
    for t in (orders, clicks, audit):
        writer.writes.create_topic(t)

    disabling = orders.with_configs(
        {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}
    ).with_tiered_state(TieredState.DISABLING, 1)
    writer.writes.update_topic(orders, disabling)
    writer.writes.delete_topic(clicks)

    for reader in (writer, store_factory.open()):
        image = reader.load()
        assert image.topics == {"orders": disabling, "audit": audit}
        loaded = image.topics["orders"]
        # Configs and state changed together; the assignment and the id did not change.
        assert dict(loaded.configs) == {
            "remote.storage.enable": "false",
            "remote.log.disable.policy": "delete",
        }
        assert (loaded.tiered_state, loaded.tiered_epoch) == (TieredState.DISABLING, 1)
        assert loaded.replicas == orders.replicas
        assert image.topic_by_id(orders.topic_id) == disabling
        assert image.topic_by_id(clicks.topic_id) is None

    # A deleted name can be created again, as a new topic.
    clicks_again = topic("clicks", partitions=2)
    writer.writes.create_topic(clicks_again)
    assert store_factory.open().load().topics["clicks"] == clicks_again


def test_create_of_an_existing_topic_fails_and_changes_nothing(
    store_factory: StoreFactory,
) -> None:
    store = store_factory.open()
    elect(store)
    original = topic("orders", configs={"retention.ms": "1"})
    store.writes.create_topic(original)
    with pytest.raises(MetadataStoreError) as failure:
        store.writes.create_topic(topic("orders", partitions=5, configs={"retention.ms": "2"}))
    assert not isinstance(failure.value, ControllerFencedError)
    assert store_factory.open().load().topics == {"orders": original}


def test_a_failed_write_applies_nothing(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    elect(store)
    doomed = topic("doomed", configs={"remote.storage.enable": "true"}, state=TieredState.ENABLED)
    expected = store_factory.sabotage_create(store, doomed)
    with pytest.raises(MetadataStoreError) as failure:
        store.writes.create_topic(doomed)
    assert not isinstance(failure.value, ControllerFencedError)
    for reader in (store, store_factory.open()):
        assert reader.load().topics.get("doomed") == expected
    # The store is still the leader and writes on.
    fine = topic("fine")
    store.writes.create_topic(fine)
    assert store_factory.open().load().topics["fine"] == fine


def test_add_partitions_grows_topics_atomically(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic("orders", partitions=2, configs={"remote.storage.enable": "true"})
    orders = orders.with_tiered_state(TieredState.DISABLING, 2)
    clicks = topic("clicks", partitions=1)
    for t in (orders, clicks):
        writer.writes.create_topic(t)
    grown_orders = orders.with_replicas((*orders.replicas, 2, 1, 0))
    grown_clicks = clicks.with_replicas((*clicks.replicas, 1))
    writer.writes.add_partitions([(orders, grown_orders), (clicks, grown_clicks)])
    writer.writes.add_partitions([])
    # A later config change keeps the grown assignment.
    reconfigured = grown_clicks.with_configs({"retention.ms": "5"})
    writer.writes.update_topic(grown_clicks, reconfigured)
    for reader in (writer, store_factory.open()):
        image = reader.load()
        assert image.topics == {"orders": grown_orders, "clicks": reconfigured}
        assert image.topic_by_id(orders.topic_id) == grown_orders


def test_add_partitions_refuses_what_is_not_a_growth(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic("orders", partitions=2)
    writer.writes.create_topic(orders)
    not_growths = [
        orders,  # the same count
        orders.with_replicas(orders.replicas[:1]),  # fewer
        orders.with_replicas((5, *orders.replicas)),  # existing partitions moved
        orders.with_replicas((*orders.replicas, 1)).with_configs({"retention.ms": "1"}),
    ]
    for after in not_growths:
        with pytest.raises(ValueError):
            writer.writes.add_partitions([(orders, after)])
    ghost = topic("ghost")
    with pytest.raises(MetadataStoreError):
        writer.writes.add_partitions([(ghost, ghost.with_replicas((*ghost.replicas, 1)))])
    assert store_factory.open().load().topics == {"orders": orders}


def test_a_deposed_controller_cannot_add_partitions(store_factory: StoreFactory) -> None:
    first = store_factory.open()
    elect(first)
    orders = topic("orders", partitions=1)
    first.writes.create_topic(orders)
    store_factory.depose(first)
    second = store_factory.open()
    elect(second, controller_id=2)
    with pytest.raises(MetadataStoreError):
        first.writes.add_partitions([(orders, orders.with_replicas((*orders.replicas, 1)))])
    assert second.load().topics == {"orders": orders}


def test_zookeeper_add_partitions_rewrites_the_assignment_znode(
    zookeeper_factory: StoreFactory, zk_connect: str
) -> None:
    store = zookeeper_factory.open()
    elect(store)
    orders = topic("orders", partitions=1)
    store.writes.create_topic(orders)
    store.writes.add_partitions([(orders, orders.with_replicas((0, 2)))])
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    try:
        data, _ = client.get(zk_paths.topic("orders"))
    finally:
        client.stop()
        client.close()
    assert json.loads(data) == {
        "version": 3,
        "topic_id": str(orders.topic_id),
        "partitions": {"0": [0], "1": [2]},
    }


# ----------------------------------------------------------------------------- delete jobs


def test_update_topic_with_a_delete_job_writes_both(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic("orders", partitions=3, state=TieredState.DISABLING, tiered_epoch=4)
    other = topic("other", state=TieredState.ENABLED, tiered_epoch=1)
    writer.writes.create_topic(orders)
    writer.writes.create_topic(other)
    assert writer.load().delete_jobs == {}

    disabled, job = disabled_with_delete(orders)
    writer.writes.update_topic(orders, disabled, job)
    # Without a job, update_topic writes none (and leaves the existing ones).
    writer.writes.update_topic(other, other.with_configs({"retention.ms": "5"}))

    for reader in (writer, store_factory.open()):
        image = reader.load()
        assert image.topics["orders"] == disabled
        assert image.delete_jobs == {(orders.topic_id, 5): job}
        loaded = image.delete_jobs[(orders.topic_id, 5)]
        assert (loaded.topic, loaded.partition_count, loaded.state) == (
            "orders",
            3,
            DeleteJobState.PENDING,
        )


def test_update_topics_writes_every_change(store_factory: StoreFactory) -> None:
    # 450 topics: several ZooKeeper multis (UPDATE_TOPICS_PER_MULTI), one KRaft batch.
    writer = store_factory.open()
    elect(writer)
    topics = [
        topic(f"t-{i:03d}", partitions=1, state=TieredState.DISABLING, tiered_epoch=1)
        for i in range(450)
    ]
    for t in topics:
        writer.writes.create_topic(t)
    changes: list[TopicChange] = []
    for i, t in enumerate(topics):
        if i % 100 == 7:
            after, job = disabled_with_delete(t)
            changes.append((t, after, job))
        else:
            changes.append((t, t.with_tiered_state(TieredState.DISABLED, t.tiered_epoch), None))
    writer.writes.update_topics(changes)
    writer.writes.update_topics([])
    for reader in (writer, store_factory.open()):
        image = reader.load()
        assert image.topics == {after.name: after for _, after, _ in changes}
        assert image.delete_jobs == {job.key: job for _, _, job in changes if job is not None}
    ghost = topic("ghost", state=TieredState.DISABLING, tiered_epoch=1)
    with pytest.raises(MetadataStoreError):
        writer.writes.update_topics(
            [(ghost, ghost.with_tiered_state(TieredState.DISABLED, 1), None)]
        )


def test_put_delete_job_creates_and_replaces(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic("orders", partitions=2, state=TieredState.DISABLING, tiered_epoch=1)
    writer.writes.create_topic(orders)
    disabled, job = disabled_with_delete(orders)
    writer.writes.update_topic(orders, disabled, job)

    running = job.with_state(
        DeleteJobState.RUNNING,
        progress=(
            PartitionDeleteProgress(partition=0, objects_total=10, objects_deleted=4),
            PartitionDeleteProgress(partition=1),
        ),
        attempts=1,
        last_error="SlowDown from the object store",
    )
    writer.writes.put_delete_job(running)
    assert store_factory.open().load().delete_jobs == {job.key: running}

    done = running.with_state(
        DeleteJobState.DONE,
        progress=(
            PartitionDeleteProgress(
                partition=0, objects_total=10, objects_deleted=10, segments_deleted=5, done=True
            ),
            PartitionDeleteProgress(
                partition=1, objects_total=0, objects_deleted=0, segments_deleted=0, done=True
            ),
        ),
        last_error="",
    )
    writer.writes.put_delete_job(done)
    # A job of another epoch of the same topic is another record; put_delete_job creates it.
    later = delete_job(disabled, 9, attempts=2)
    writer.writes.put_delete_job(later)

    for reader in (writer, store_factory.open()):
        assert reader.load().delete_jobs == {job.key: done, later.key: later}


def test_delete_jobs_outlive_their_topic(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic("orders", state=TieredState.DISABLING, tiered_epoch=2)
    writer.writes.create_topic(orders)
    disabled, job = disabled_with_delete(orders)
    writer.writes.update_topic(orders, disabled, job)
    writer.writes.delete_topic(disabled)

    image = store_factory.open().load()
    assert "orders" not in image.topics
    assert image.delete_jobs == {job.key: job}
    # ... and go on being written, and a topic of the same name has nothing to do with them.
    running = job.with_state(DeleteJobState.RUNNING, attempts=1)
    writer.writes.put_delete_job(running)
    writer.writes.create_topic(topic("orders"))
    for reader in (writer, store_factory.open()):
        assert reader.load().delete_jobs == {job.key: running}

    # A new controller loads and writes them like any other.
    writer.resign()
    successor = store_factory.open()
    elect(successor, controller_id=2)
    assert successor.load().delete_jobs == {job.key: running}
    successor.writes.put_delete_job(running.with_state(DeleteJobState.DONE))
    assert store_factory.open().load().delete_jobs[job.key].state is DeleteJobState.DONE


def test_delete_topic_with_its_delete_job_writes_both(store_factory: StoreFactory) -> None:
    writer = store_factory.open()
    elect(writer)
    orders = topic("orders", state=TieredState.DISABLING, tiered_epoch=1)
    writer.writes.create_topic(orders)
    disabled, pending = disabled_with_delete(orders)  # its delete-policy job, still pending
    writer.writes.update_topic(orders, disabled, pending)
    every_epoch = DeleteJob.of_deleted_topic(disabled)
    with pytest.raises(ValueError, match="delete job"):
        writer.writes.delete_topic(disabled, DeleteJob.of_deleted_topic(topic("other")))
    assert store_factory.open().load().topics == {"orders": disabled}  # nothing written

    writer.writes.delete_topic(disabled, every_epoch)
    image = store_factory.open().load()
    assert image.topics == {}
    assert image.delete_jobs == {pending.key: pending, every_epoch.key: every_epoch}
    assert image.delete_jobs[every_epoch.key].topic_deleted
    assert every_epoch.tiered_epoch == disabled.tiered_epoch + 1  # every epoch of it
    # A topic re-created under the name is another topic id: no job is its.
    again = topic("orders")
    writer.writes.create_topic(again)
    image = store_factory.open().load()
    assert image.topics == {"orders": again}
    assert {topic_id for topic_id, _ in image.delete_jobs} == {orders.topic_id}


def test_a_deposed_controller_cannot_write_delete_jobs(store_factory: StoreFactory) -> None:
    old = store_factory.open()
    elect(old, controller_id=1)
    orders = topic("orders", state=TieredState.DISABLING, tiered_epoch=1)
    old.writes.create_topic(orders)
    disabled, job = disabled_with_delete(orders)
    old.writes.update_topic(orders, disabled, job)

    store_factory.depose(old)
    new = store_factory.open()
    elect(new, controller_id=2)

    with pytest.raises(ControllerFencedError):
        old.writes.put_delete_job(replace(job, state=DeleteJobState.DONE))  # replacing
    with pytest.raises(ControllerFencedError):
        old.writes.put_delete_job(delete_job(disabled, 7))  # creating
    again, second = disabled_with_delete(disabled.with_tiered_state(TieredState.DISABLING, 3))
    with pytest.raises(ControllerFencedError):
        old.writes.update_topic(disabled, again, second)

    image = new.load()
    assert image.delete_jobs == {job.key: job}
    assert image.topics == {"orders": disabled}
    assert store_factory.open().load().delete_jobs == {job.key: job}


def _plant_after_the_store_looks(
    monkeypatch: pytest.MonkeyPatch, store: MetadataStore, job: DeleteJob, data: bytes
) -> None:
    """Creates ``job``'s znode behind the store's back between the store's look at it (absent)
    and its multi, which then fails at its create."""
    from controller.store.zookeeper import ZooKeeperMetadataStore

    assert isinstance(store, ZooKeeperMetadataStore)
    client = store.client
    real_exists_async = client.exists_async
    target = store._p(zk_paths.delete_job(job.topic_id, job.tiered_epoch))

    def exists_async(path: str, watch: object = None) -> object:
        result = real_exists_async(path, watch=watch)
        if path == target:
            result.get(timeout=10)
            client.create(target, data)
        return result

    monkeypatch.setattr(client, "exists_async", exists_async)


def test_zookeeper_delete_job_znode(zookeeper_factory: StoreFactory, zk_connect: str) -> None:
    """The znode layout and protobuf record of a job; read back by multiRead and one by one
    alike."""
    from controller.store.zookeeper import ZooKeeperMetadataStore

    store = zookeeper_factory.open()
    elect(store)
    assert isinstance(store, ZooKeeperMetadataStore)
    orders = topic("orders", partitions=2, state=TieredState.DISABLING, tiered_epoch=2)
    store.writes.create_topic(orders)
    disabled, job = disabled_with_delete(orders)
    store.writes.update_topic(orders, disabled, job)
    running = job.with_state(
        DeleteJobState.RUNNING,
        progress=(
            PartitionDeleteProgress(partition=0, objects_total=3, objects_deleted=1),
            PartitionDeleteProgress(partition=1, objects_total=0, done=True),
        ),
        attempts=2,
        last_error="boom",
    )
    store.writes.put_delete_job(running)

    path = store._p(f"/tiered/delete_jobs/{orders.topic_id}-3")
    assert store._p(zk_paths.delete_job(orders.topic_id, 3)) == path
    assert metadata_pb2.DeleteJobRecord.FromString(
        store.client.get(path)[0]
    ) == metadata_pb2.DeleteJobRecord(
        topic_id=orders.topic_id.bytes,
        topic="orders",
        tiered_epoch=3,
        partition_count=2,
        state=metadata_pb2.RUNNING,
        attempts=2,
        last_error="boom",
        progress=[
            metadata_pb2.PartitionDeleteProgress(partition=0, objects_total=3, objects_deleted=1),
            metadata_pb2.PartitionDeleteProgress(partition=1, objects_total=0, done=True),
        ],
    )
    one_by_one = ZooKeeperMetadataStore(zk_connect, multi_read=False)
    try:
        assert one_by_one.load().delete_jobs == {job.key: running}
    finally:
        one_by_one.close()
    assert zookeeper_factory.open().load().delete_jobs == {job.key: running}


@pytest.mark.processes
def test_zookeeper_reads_the_json_delete_jobs_of_earlier_versions(
    zookeeper_factory: StoreFactory,
) -> None:
    """Versions before the protobuf record wrote a job's fields as JSON; they load the same.
    A znode holding neither is bad data."""
    from controller.store.zookeeper import ZooKeeperMetadataStore

    store = zookeeper_factory.open()
    assert isinstance(store, ZooKeeperMetadataStore)
    topic_id = uuid.uuid4()
    legacy = {
        "version": 1,
        "topic": "orders",
        "topic_id": str(topic_id),
        "tiered_epoch": 3,
        "partition_count": 2,
        "state": "RUNNING",
        "attempts": 2,
        "last_error": "boom",
        "progress": [
            {
                "partition": 0,
                "objects_total": 3,
                "objects_deleted": 1,
                "segments_deleted": 0,
                "done": False,
            },
            {
                "partition": 1,
                "objects_total": 0,
                "objects_deleted": 0,
                "segments_deleted": 4,
                "done": True,
            },
        ],
    }
    store.client.create(store._p(zk_paths.delete_job(topic_id, 3)), json.dumps(legacy).encode())
    expected = DeleteJob(
        topic="orders",
        topic_id=topic_id,
        tiered_epoch=3,
        partition_count=2,
        state=DeleteJobState.RUNNING,
        progress=(
            PartitionDeleteProgress(partition=0, objects_total=3, objects_deleted=1),
            PartitionDeleteProgress(partition=1, objects_total=0, segments_deleted=4, done=True),
        ),
        attempts=2,
        last_error="boom",
    )
    assert store.load().delete_jobs == {(topic_id, 3): expected}

    store.client.create(store._p(zk_paths.delete_job(topic_id, 4)), b"\xff\xff")
    with pytest.raises(MetadataStoreError, match="bad znode data"):
        store.load()


@pytest.mark.processes
def test_zookeeper_a_failed_job_create_leaves_the_topic_unchanged(
    zookeeper_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.store.zookeeper import ZooKeeperMetadataStore
    from controller.store.zookeeper.znodes import encode_delete_job

    store = zookeeper_factory.open()
    elect(store)
    assert isinstance(store, ZooKeeperMetadataStore)
    orders = topic("orders", configs={"remote.storage.enable": "true"})
    orders = orders.with_tiered_state(TieredState.DISABLING, 1)
    store.writes.create_topic(orders)
    disabled, job = disabled_with_delete(orders)
    planted = replace(job, state=DeleteJobState.DONE, attempts=99, last_error="planted")
    _plant_after_the_store_looks(monkeypatch, store, job, encode_delete_job(planted))

    with pytest.raises(MetadataStoreError, match="NodeExistsError") as failure:
        store.writes.update_topic(orders, disabled, job)
    assert not isinstance(failure.value, ControllerFencedError)
    monkeypatch.undo()
    assert not store.leadership_lost.is_set()
    # Neither the topic change nor the job was written: the job is the planted one.
    image = zookeeper_factory.open().load()
    assert image.topics == {"orders": orders}
    assert image.delete_jobs == {job.key: planted}

    # The store still leads and writes on (the planted znode is now set, not created).
    store.writes.update_topic(orders, disabled, job)
    image = zookeeper_factory.open().load()
    assert image.topics == {"orders": disabled}
    assert image.delete_jobs == {job.key: job}


@pytest.mark.processes
def test_zookeeper_a_failed_topic_change_writes_no_job(zookeeper_factory: StoreFactory) -> None:
    from controller.store.zookeeper import ZooKeeperMetadataStore

    store = zookeeper_factory.open()
    elect(store)
    assert isinstance(store, ZooKeeperMetadataStore)
    orders = topic("orders", configs={"retention.ms": "1"}, state=TieredState.DISABLING)
    orders = orders.with_tiered_state(TieredState.DISABLING, 1)
    store.writes.create_topic(orders)
    disabled, job = disabled_with_delete(orders)
    # The topic's config znode goes behind the store's back: the multi fails at its set.
    store.client.delete(store._p(zk_paths.topic_config("orders")))

    with pytest.raises(MetadataStoreError, match="NoNodeError") as failure:
        store.writes.update_topic(orders, disabled, job)
    assert not isinstance(failure.value, ControllerFencedError)
    image = zookeeper_factory.open().load()
    assert image.delete_jobs == {}
    assert image.topics == {"orders": orders.with_configs({})}  # as the sabotage left it
    assert store.client.exists(store._p(zk_paths.delete_job(job.topic_id, 2))) is None


@pytest.mark.processes
def test_zookeeper_a_failed_topic_delete_writes_no_job(zookeeper_factory: StoreFactory) -> None:
    from controller.store.zookeeper import ZooKeeperMetadataStore

    store = zookeeper_factory.open()
    elect(store)
    assert isinstance(store, ZooKeeperMetadataStore)
    orders = topic("orders", configs={"remote.storage.enable": "true"}, state=TieredState.ENABLED)
    store.writes.create_topic(orders)
    job = DeleteJob.of_deleted_topic(orders)
    # The topic's config znode goes behind the store's back: the multi fails at its delete.
    store.client.delete(store._p(zk_paths.topic_config("orders")))

    with pytest.raises(MetadataStoreError, match="NoNodeError"):
        store.writes.delete_topic(orders, job)
    image = zookeeper_factory.open().load()
    assert image.delete_jobs == {}
    assert set(image.topics) == {"orders"}  # the topic's other znodes are all there
    assert store.client.exists(store._p(zk_paths.delete_job(job.topic_id, 1))) is None


# ----------------------------------------------------------------------------- fencing


def test_a_deposed_controller_is_fenced(store_factory: StoreFactory) -> None:
    old = store_factory.open()
    assert elect(old, controller_id=1) == 1
    kept = topic("kept", configs={"retention.ms": "1000"}, state=TieredState.ENABLED)
    old.writes.create_topic(kept)

    store_factory.depose(old)
    new = store_factory.open()
    assert elect(new, controller_id=2) == 2

    with pytest.raises(ControllerFencedError):
        old.writes.create_topic(topic("from-the-zombie"))
    with pytest.raises(ControllerFencedError):
        old.writes.update_topic(kept, kept.with_tiered_state(TieredState.DISABLING, 1))
    with pytest.raises(ControllerFencedError):
        old.writes.delete_topic(kept)

    image = new.load()
    assert image.topics == {"kept": kept}
    assert (image.controller_id, image.controller_epoch) == (2, 2)
    # The new controller writes as usual.
    new.writes.update_topic(kept, kept.with_tiered_state(TieredState.DISABLING, 1))
    assert store_factory.open().load().topics["kept"].tiered_state is TieredState.DISABLING


# ----------------------------------------------------------------------------- brokers


def test_registered_broker_is_loaded(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    elect(store)
    registration = BrokerRegistration(broker_id=3, host="127.0.0.1", port=19093)
    store_factory.make_present(registration)
    store.register_broker(registration)
    assert store_factory.open().load().brokers.get(3) == registration


# ----------------------------------------------------------------------------- SCRAM credentials

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def test_scram_credentials_round_trip(store_factory: StoreFactory) -> None:
    store = store_factory.open()
    elect(store)
    alice_512 = ScramCredential.from_password(SHA512, "a", 4096)
    alice_256 = ScramCredential.from_password(SHA256, "a", 8192)
    bob = ScramCredential.from_password(SHA512, "b", 4096)
    store.writes.alter_scram_credentials(
        {("alice", SHA512): alice_512, ("alice", SHA256): alice_256, ("b,o=b", SHA512): bob}, []
    )
    assert store_factory.open().load().scram_credentials == {
        ("alice", SHA512): alice_512,
        ("alice", SHA256): alice_256,
        ("b,o=b", SHA512): bob,
    }
    new_bob = ScramCredential.from_password(SHA512, "b2", 4096)
    store.writes.alter_scram_credentials(
        {("b,o=b", SHA512): new_bob}, [("alice", SHA256), ("nobody", SHA512)]
    )
    assert store.load().scram_credentials == {
        ("alice", SHA512): alice_512,
        ("b,o=b", SHA512): new_bob,
    }
    with pytest.raises(ValueError, match="both set and removed"):
        store.writes.alter_scram_credentials({("alice", SHA512): bob}, [("alice", SHA512)])
    store.writes.alter_scram_credentials({}, [("alice", SHA512), ("b,o=b", SHA512)])
    assert store_factory.open().load().scram_credentials == {}


def test_a_deposed_controller_cannot_alter_scram_credentials(store_factory: StoreFactory) -> None:
    old = store_factory.open()
    elect(old, controller_id=1)
    store_factory.depose(old)
    new = store_factory.open()
    elect(new, controller_id=2)
    with pytest.raises(ControllerFencedError):
        old.writes.alter_scram_credentials(
            {("zombie", SHA512): ScramCredential.from_password(SHA512, "z")}, []
        )
    assert new.load().scram_credentials == {}


@pytest.mark.processes
def test_zookeeper_user_config_znode_is_kafkas(zookeeper_factory: StoreFactory) -> None:
    """``/config/users/{sanitized}`` holds Kafka's entity config: the credential string beside
    the user's other keys, which are kept; removing the last credential leaves the rest."""
    from controller.store.zookeeper import ZooKeeperMetadataStore

    store = zookeeper_factory.open()
    elect(store)
    assert isinstance(store, ZooKeeperMetadataStore)
    path = store._p("/config/users/al%20ice%2A%7E")
    assert store._p(zk_paths.user_config("al ice*~")) == path
    store.client.create(path, b'{"version":1,"config":{"producer_byte_rate":"1024"}}')
    credential = ScramCredential(b"salt", b"stored", b"server", 4096)
    store.writes.alter_scram_credentials({("al ice*~", SHA512): credential}, [])
    assert json.loads(store.client.get(path)[0]) == {
        "version": 1,
        "config": {
            "producer_byte_rate": "1024",
            "SCRAM-SHA-512": "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096",
        },
    }
    assert zookeeper_factory.open().load().scram_credentials == {("al ice*~", SHA512): credential}
    store.writes.alter_scram_credentials({}, [("al ice*~", SHA512)])
    assert json.loads(store.client.get(path)[0]) == {
        "version": 1,
        "config": {"producer_byte_rate": "1024"},
    }
    store.client.create(store._p("/config/users/garbage"), b"not json")
    assert zookeeper_factory.open().load().scram_credentials == {}  # logged and left out


def test_kraft_snapshot_carries_scram_credentials() -> None:
    from tiered.cluster import serde
    from tiered.cluster.model import MetadataImage

    image = MetadataImage()
    credential = ScramCredential.from_password(SHA512, "pw")
    image.scram_credentials[("alice", SHA512)] = credential
    restored = serde.image_from_snapshot(serde.image_to_batch(image, 5))
    assert restored.scram_credentials == {("alice", SHA512): credential}
    assert image.copy().scram_credentials == image.scram_credentials
