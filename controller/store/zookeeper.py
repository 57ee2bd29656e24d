"""The ZooKeeper metadata store: Kafka's ZooKeeper-mode layout (DESIGN.md section 4, paths in
``tiered.cluster.zk_paths``) under the connect string's chroot.

Leadership is Kafka's: whoever creates the ephemeral ``/controller`` is the active controller, and
the same transaction raises ``/controller_epoch``. Every later write is one ZooKeeper multi that
starts with ``check(/controller_epoch, version-we-wrote)`` and ``check(/controller)``, so a deposed
controller (another has since raised the epoch, or our ephemeral went with our session) writes
nothing and gets ``ControllerFencedError``. A write after our session has ended is refused without
being sent. A controller whose ``/controller`` is deleted behind its back (an operator forcing a
new election) notices through a watch; the epoch check fences it once another is elected.

Loss of leadership (``leadership_lost``) follows the session: LOST sets it at once; SUSPENDED sets it
when the connection is not back within ``suspended_grace_s``; a reconnection within the grace keeps
leadership, once a read has confirmed that ``/controller`` still belongs to our session.

``load`` lists ``/brokers/topics`` and ``/tiered/delete_jobs`` and reads the four znodes of every
topic and the znode of every delete job with ZooKeeper's multiRead (1,000 reads a request, a few
requests in flight); 5,000 topics take about 0.2 s where one async get per znode takes about 6 s.
Topics are decoded as the answers arrive, while the next requests are in flight, and topics with
the same config znode share one parsed config mapping.

Delete jobs (``DeleteJob``) are JSON znodes ``/tiered/delete_jobs/{topic_id}-{tiered_epoch}``,
apart from the topic's znodes because they outlive the topic. A job is written create-or-set: the
store looks whether the znode exists, then creates or sets it in the fenced multi (only the active
controller writes, so nothing races the look; if something did, the multi would fail whole).

kazoo notes: a failed transaction returns a list with an exception per op instead of raising; a
request made while disconnected is queued until the connection is back, however long, so every
request here waits at most the session timeout (then ``MetadataStoreError``); state listeners run
on kazoo's connection thread and watch callbacks on its single callback thread, so both only signal
threads of ours.
"""

from __future__ import annotations

import functools
import json
import logging
import struct
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    EXCEPTIONS,
    BadVersionError,
    MarshallingError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    UnimplementedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch

from controller.store.base import (
    ControllerFencedError,
    MetadataStore,
    MetadataStoreError,
    TopicChange,
)
from tiered.cluster import zk_paths
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    MetadataImage,
    PartitionDeleteProgress,
    TieredState,
    TopicMetadata,
    frozen_configs,
)
from tiered.cluster.zk_znodes import (
    decode_broker_registration,
    decode_controller,
    encode_controller,
)
from tiered.properties import int_property
from tiered.zk_client import TRANSPORT_ERRORS, connection_retry, split_connect_string

__all__ = [
    "LiveBrokersCallback",
    "ZnodeOp",
    "ZooKeeperMetadataStore",
    "topic_create_ops",
    "topic_update_ops",
]

log = logging.getLogger(__name__)

LiveBrokersCallback = Callable[[dict[int, BrokerRegistration]], None]

TOPIC_ZNODE_VERSION = 3
CONFIG_ZNODE_VERSION = 1
DELETE_JOB_ZNODE_VERSION = 1
READ_WINDOW = 2000  # async gets in flight during load() (without multiRead)
MULTI_READ_OPS = 1000  # reads per multiRead request
MULTI_READS_IN_FLIGHT = 8
UPDATE_TOPICS_PER_MULTI = 200  # update_topics: 600+ ops, ~100 KB a multi
_STOP_POLL_S = 0.05  # how often a waiting elect() looks at its stop event
_ELECT_ATTEMPTS = 20  # back-to-back races lost in one elect round before it gives up
_FENCE_OPS = 2  # every fenced multi starts with two checks
_ELECTION_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, MetadataStoreError)


class _MultiRead:
    """ZooKeeper's multiRead request (OpCode 22, ZooKeeper 3.6+): many getData in one round trip,
    answered together. kazoo has no API for it; this is a request object as kazoo's protocol layer
    takes them (``type``, ``serialize()``, ``deserialize(buffer, offset)``), like its Transaction.
    One request per znode costs kazoo a few select() calls each way: about 4,500 reads/s, against
    about 150,000/s this way.

    Wire format (ZooKeeper's jute ``MultiOperationRecord`` / ``MultiResponse``): per op a header
    (int type, bool done, int err) and a ``GetDataRequest`` (ustring path, bool watch), then a
    header with done set; the answer has per op a header and either a ``GetDataResponse`` (buffer
    data, Stat) or, with type -1, an ``ErrorResponse`` (int err)."""

    type = 22
    watcher = None  # kazoo looks for a watch to register

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def __repr__(self) -> str:
        return f"_MultiRead({len(self.paths)} paths)"

    def serialize(self) -> bytes:
        parts: list[bytes] = []
        for path in self.paths:
            encoded = path.encode()
            parts.append(_MULTI_HEADER.pack(_GET_DATA, False, -1))
            parts.append(_INT.pack(len(encoded)))
            parts.append(encoded)
            parts.append(b"\x00")  # no watch
        parts.append(_MULTI_HEADER.pack(-1, True, -1))
        return b"".join(parts)

    def deserialize(self, buffer: bytes, offset: int) -> list[bytes | None]:
        """The data of each path, None where it does not exist; raises any other error."""
        values: list[bytes | None] = []
        while True:
            op_type, done, _ = _MULTI_HEADER.unpack_from(buffer, offset)
            offset += _MULTI_HEADER.size
            if done:
                break
            if op_type == _GET_DATA:
                (length,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                data = b"" if length < 0 else bytes(buffer[offset : offset + length])
                offset += max(length, 0) + _STAT_SIZE
                values.append(data)
                continue
            (code,) = _INT.unpack_from(buffer, offset)
            offset += _INT.size
            if code != NoNodeError.code:
                raise EXCEPTIONS[code]()
            values.append(None)
        if len(values) != len(self.paths):
            raise MarshallingError(f"multiRead: {len(values)} answers to {len(self.paths)} reads")
        return values


_MULTI_HEADER = struct.Struct(">i?i")
_INT = struct.Struct(">i")
_STAT_SIZE = struct.calcsize(">qqqqiiiqiiq")  # ZooKeeper's Stat
_GET_DATA = 4


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _first_failure(results: Sequence[Any]) -> tuple[int, Exception] | None:
    """The op that failed a transaction: kazoo reports it with its own exception, the ops before it
    with RolledBackError and the ops after it with RuntimeInconsistency."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            return index, result
    return None


def _encode_delete_job(job: DeleteJob) -> bytes:
    return _json(
        {
            "version": DELETE_JOB_ZNODE_VERSION,
            "topic": job.topic,
            "topic_id": str(job.topic_id),
            "tiered_epoch": job.tiered_epoch,
            "partition_count": job.partition_count,
            "state": job.state.value,
            "attempts": job.attempts,
            "last_error": job.last_error,
            "progress": [
                {
                    "partition": p.partition,
                    "objects_total": p.objects_total,
                    "objects_deleted": p.objects_deleted,
                    "segments_deleted": p.segments_deleted,
                    "done": p.done,
                }
                for p in job.progress
            ],
        }
    )


def _int_field(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _decode_delete_job(data: bytes) -> DeleteJob:
    """The job of a delete job znode; ValueError, TypeError or KeyError if it is malformed."""
    value = json.loads(data)
    progress: list[PartitionDeleteProgress] = []
    for p in value["progress"]:
        if not isinstance(p["done"], bool):
            raise TypeError(f"done: {p['done']!r} is not a boolean")
        progress.append(
            PartitionDeleteProgress(
                partition=_int_field(p["partition"]),
                objects_total=_int_field(p["objects_total"]),
                objects_deleted=_int_field(p["objects_deleted"]),
                segments_deleted=_int_field(p["segments_deleted"]),
                done=p["done"],
            )
        )
    return DeleteJob(
        topic=str(value["topic"]),
        topic_id=uuid.UUID(str(value["topic_id"])),
        tiered_epoch=_int_field(value["tiered_epoch"]),
        partition_count=_int_field(value["partition_count"]),
        state=DeleteJobState(value["state"]),
        progress=tuple(progress),
        attempts=_int_field(value["attempts"]),
        last_error=str(value["last_error"]),
    )


_STATES = {state.value.encode(): state for state in TieredState}


@functools.lru_cache(maxsize=4096)
def _configs_of_znode(data: bytes) -> Mapping[str, str]:
    """The configs of a ``/config/topics/{topic}`` znode, parsed once per distinct content (most
    topics share their configs, and with them one read-only mapping)."""
    return frozen_configs({str(k): str(v) for k, v in json.loads(data)["config"].items()})


def _check_topic_name(name: str) -> None:
    if not name or name in {".", ".."} or "/" in name:
        raise ValueError(f"topic name {name!r} cannot be a znode name")


ZnodeOp = tuple[str, str, bytes]  # ("create" | "set" | "delete", path under the chroot, data)


def _config_json(topic: TopicMetadata) -> bytes:
    return _json({"version": CONFIG_ZNODE_VERSION, "config": dict(topic.configs)})


def topic_create_ops(topic: TopicMetadata) -> list[ZnodeOp]:
    """The znodes of a new topic (assignment, tiered storage state and epoch, configs), as the
    store's ``create_topic`` commits them in one multi; paths are relative to the chroot. Bulk
    loaders (``bench/seed_metadata.py``) write the same ops, many topics a transaction."""
    _check_topic_name(topic.name)
    assignment = {
        "version": TOPIC_ZNODE_VERSION,
        "topic_id": str(topic.topic_id),
        "partitions": {str(p): [b] for p, b in enumerate(topic.replicas)},
    }
    return [
        ("create", zk_paths.topic(topic.name), _json(assignment)),
        ("create", zk_paths.tiered_storage(topic.name), b""),
        ("create", zk_paths.tiered_epoch(topic.name), str(topic.tiered_epoch).encode()),
        ("create", zk_paths.tiered_state(topic.name), topic.tiered_state.value.encode()),
        ("create", zk_paths.topic_config(topic.name), _config_json(topic)),
    ]


def topic_update_ops(topic: TopicMetadata) -> list[ZnodeOp]:
    """The sets of a topic's configs, tiered state and tiered epoch (``update_topic``)."""
    _check_topic_name(topic.name)
    return [
        ("set", zk_paths.topic_config(topic.name), _config_json(topic)),
        ("set", zk_paths.tiered_state(topic.name), topic.tiered_state.value.encode()),
        ("set", zk_paths.tiered_epoch(topic.name), str(topic.tiered_epoch).encode()),
    ]


@dataclass(frozen=True)
class _Leadership:
    controller_id: int
    endpoint: str
    epoch: int
    epoch_version: int  # the version of /controller_epoch our election wrote
    controller_version: int  # the version of our /controller
    session_id: int  # the session that owns our /controller


class ZooKeeperMetadataStore(MetadataStore):
    """One controller's view of the ZooKeeper metadata; connects on construction.

    ``connect`` is ``host:port[,host:port...][/chroot]`` (a missing chroot is created);
    ``session_timeout_s`` is also how long any request may wait; ``suspended_grace_s`` is how
    long a lost connection may last before ``leadership_lost`` is set; ``multi_read=False`` makes
    ``load`` read znode by znode (what it falls back to on a server without multiRead).
    """

    mode = "zookeeper"

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_s: float = 6.0,
        suspended_grace_s: float = 2.0,
        connect_timeout_s: float = 15.0,
        multi_read: bool = True,
    ) -> None:
        super().__init__()
        hosts, self._chroot = split_connect_string(connect)
        self._connect = connect
        self._session_timeout_s = session_timeout_s
        self._op_timeout_s = session_timeout_s
        self._grace_s = suspended_grace_s
        self._multi_read = multi_read  # bulk reads by multiRead; off once a server refuses it
        # The state lock guards the leadership, the session id and the grace timer; it is never
        # held across a request to ZooKeeper (the listener that takes it runs on kazoo's I/O thread).
        self._state_lock = threading.Lock()
        self._leader: _Leadership | None = None
        self._session_id: int | None = None
        self._generation = 0  # raised by every connection state change
        self._grace_timer: threading.Timer | None = None
        self._live_watches: list[_LiveBrokersWatch] = []
        self._closed = False
        self._client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            connection_retry=connection_retry(session_timeout_s),
        )
        self._client.add_listener(self._on_state)
        try:
            self._client.start(timeout=connect_timeout_s)
            for parent in (
                zk_paths.BROKER_IDS,
                zk_paths.BROKER_TOPICS,
                zk_paths.CONFIG_TOPICS,
                zk_paths.DELETE_JOBS,
            ):
                self._ensure_path(self._p(parent))
        except TRANSPORT_ERRORS as e:
            self._shutdown_client()
            raise MetadataStoreError(f"cannot connect to ZooKeeper at {connect}: {e!r}") from e

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ZooKeeperMetadataStore:
        """``zookeeper.connect`` (host:port[,host:port...][/chroot], required),
        ``zookeeper.session.timeout.ms`` (default 6000), ``zookeeper.suspended.grace.ms``
        (default 2000: how long a lost connection may last before leadership counts as lost)."""
        connect = str(config.get("zookeeper.connect") or "").strip()
        if not connect:
            raise ValueError("zookeeper.connect is required when metadata.store=zookeeper")
        session_ms = int_property(config, "zookeeper.session.timeout.ms", 6000, minimum=1)
        grace_ms = int_property(config, "zookeeper.suspended.grace.ms", 2000, minimum=0)
        return cls(connect, session_timeout_s=session_ms / 1000, suspended_grace_s=grace_ms / 1000)

    def __repr__(self) -> str:
        return f"ZooKeeperMetadataStore({self._connect!r})"

    @property
    def client(self) -> KazooClient:
        """The kazoo client (for diagnostics and tests; its session owns our ``/controller``)."""
        return self._client

    @property
    def controller_epoch(self) -> int | None:
        """The epoch this store was elected with, None when it does not hold leadership."""
        leader = self._leader
        return None if leader is None else leader.epoch

    # ----------------------------------------------------------------------------- leadership

    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        with self._state_lock:
            self._leader = None  # a new election abandons any earlier leadership of ours
        pause = _STOP_POLL_S
        while not stop.is_set():
            self._check_open()
            try:
                epoch = self._try_elect(controller_id, endpoint)
            except _ELECTION_ERRORS as e:
                if self._closed:
                    raise MetadataStoreError(f"{self!r} was closed during the election") from e
                log.warning("%r: election attempt failed, retrying: %r", self, e)
                stop.wait(pause)
                pause = min(pause * 2, 1.0)
                continue
            if epoch is not None:
                log.info("%r: controller %d elected with epoch %d", self, controller_id, epoch)
                return epoch
            pause = _STOP_POLL_S
            self._await_controller_change(stop)
        return None

    def _try_elect(self, controller_id: int, endpoint: str) -> int | None:
        """The new epoch if this process won, None if another controller holds ``/controller``."""
        controller_path = self._p(zk_paths.CONTROLLER)
        epoch_path = self._p(zk_paths.CONTROLLER_EPOCH)
        for _ in range(_ELECT_ATTEMPTS):
            session = self._current_session()
            current = self._get(epoch_path)
            txn = self._client.transaction()
            txn.create(controller_path, encode_controller(controller_id, endpoint), ephemeral=True)
            if current is None:
                epoch = 1
                txn.create(epoch_path, b"1")
            else:
                epoch = self._parse_int(epoch_path, current[0]) + 1
                txn.set_data(epoch_path, str(epoch).encode(), version=current[1].version)
            # Cleared before the attempt: a loss signalled from now on is about this leadership.
            self.leadership_lost.clear()
            results = self._wait(txn.commit_async())
            failure = _first_failure(results)
            if failure is None:
                epoch_version = 0 if current is None else int(results[1].version)
                leader = _Leadership(controller_id, endpoint, epoch, epoch_version, 0, session)
                with self._state_lock:
                    self._leader = leader
                try:
                    # Also arms the watch that notices /controller deleted behind our back.
                    doubt = self._controller_doubt(leader)
                except BaseException:
                    self._drop_leader(leader)
                    raise
                if doubt is not None:
                    self._drop_leader(leader)
                    continue  # e.g. the session ended right after winning
                return epoch
            index, error = failure
            if index == 0 and isinstance(error, NodeExistsError):
                stat = self._wait(self._client.exists_async(controller_path))
                if stat is None:
                    continue  # gone meanwhile
                if stat.ephemeralOwner != session:
                    return None  # another controller is active
                # Ours from an earlier election of this session (not resigned, or a lost answer):
                # give it up and win again, so that the epoch is raised.
                self._delete_own_controller(session)
                continue
            if index == 1 and isinstance(error, BadVersionError | NodeExistsError | NoNodeError):
                continue  # /controller_epoch changed between our read and the multi
            raise MetadataStoreError(f"election multi failed at op {index}: {error!r}")
        raise MetadataStoreError(f"election lost {_ELECT_ATTEMPTS} races in a row")

    def _await_controller_change(self, stop: threading.Event) -> None:
        """Returns when ``/controller`` may have changed (or ``stop`` is set)."""
        changed = threading.Event()
        try:
            stat = self._wait(
                self._client.exists_async(
                    self._p(zk_paths.CONTROLLER), watch=lambda _event: changed.set()
                )
            )
        except TRANSPORT_ERRORS as e:
            log.debug("%r: cannot watch /controller: %r", self, e)
            stop.wait(_STOP_POLL_S)
            return
        if stat is None:
            return
        # kazoo fires the watch with a NONE event on disconnection too: then we look again.
        while not changed.wait(_STOP_POLL_S):
            if stop.is_set() or self._closed:
                return

    def resign(self) -> None:
        with self._state_lock:
            self._leader = None
        if self._closed or not self._client.connected:
            return  # our /controller, if any, goes with the session
        try:
            if self._delete_own_controller(self._current_session()):
                log.info("%r: resigned", self)
        except TRANSPORT_ERRORS as e:
            log.warning("%r: could not delete /controller (it goes with the session): %r", self, e)

    def _delete_own_controller(self, session: int) -> bool:
        """Deletes ``/controller`` if ``session`` owns it. Like Kafka, the delete is fenced by the
        version of ``/controller_epoch``, read first: an election since then (whose multi raised
        the epoch) makes it fail rather than delete the new controller's znode."""
        controller_path = self._p(zk_paths.CONTROLLER)
        epoch_path = self._p(zk_paths.CONTROLLER_EPOCH)
        epoch = self._get(epoch_path)
        stat = self._wait(self._client.exists_async(controller_path))
        if stat is None or stat.ephemeralOwner != session:
            return False
        txn = self._client.transaction()
        if epoch is not None:
            txn.check(epoch_path, epoch[1].version)
        txn.delete(controller_path, version=stat.version)
        return _first_failure(self._wait(txn.commit_async())) is None

    def active_controller(self) -> tuple[int, str] | None:
        self._check_open()
        path = self._p(zk_paths.CONTROLLER)
        try:
            found = self._get(path)
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"ZooKeeper get {path}: {e!r}") from e
        if found is None:
            return None
        try:
            return decode_controller(found[0])
        except ValueError as e:
            raise MetadataStoreError(str(e)) from e

    # ----------------------------------------------------------------------------- session

    def _on_state(self, state: str) -> None:
        """kazoo's connection thread: bookkeeping and signals only."""
        verify: int | None = None
        with self._state_lock:
            self._generation += 1
            generation = self._generation
            if self._grace_timer is not None:
                self._grace_timer.cancel()
                self._grace_timer = None
            if state == KazooState.LOST:
                self._session_id = None
                if self._leader is not None:
                    log.warning("%r: ZooKeeper session lost: leadership lost", self)
                    self.leadership_lost.set()
            elif state == KazooState.SUSPENDED:
                if self._leader is not None and not self._closed:
                    timer = threading.Timer(self._grace_s, self._grace_expired, (generation,))
                    timer.daemon = True
                    timer.name = "zk-store-grace"
                    self._grace_timer = timer
                    timer.start()
            elif state == KazooState.CONNECTED:
                client_id = self._client.client_id
                self._session_id = None if client_id is None else int(client_id[0])
                if self._leader is not None and not self.leadership_lost.is_set():
                    verify = generation
        if verify is not None:
            threading.Thread(
                target=self._verify_leadership, args=(verify,), name="zk-store-verify", daemon=True
            ).start()

    def _grace_expired(self, generation: int) -> None:
        with self._state_lock:
            if generation != self._generation or self._leader is None or self._closed:
                return  # reconnected (or lost, or resigned) since
            log.warning(
                "%r: disconnected from ZooKeeper for more than %.1fs: leadership lost",
                self,
                self._grace_s,
            )
            self.leadership_lost.set()

    def _on_controller_event(self, event: WatchedEvent) -> None:
        """kazoo's callback thread: ``/controller`` changed or went while we lead."""
        if event.type == EventType.NONE:
            return  # a connection event: the state listener handles those
        with self._state_lock:
            leader, generation = self._leader, self._generation
            if leader is None or self._closed:
                return
        threading.Thread(
            target=self._verify_leadership, args=(generation,), name="zk-store-verify", daemon=True
        ).start()

    def _verify_leadership(self, generation: int) -> None:
        """After a reconnection within the grace, or an event on ``/controller``: is it still
        ours? If not (or if that cannot be read), leadership is lost."""
        leader = self._leader
        if leader is None:
            return
        try:
            reason = self._controller_doubt(leader)
        except TRANSPORT_ERRORS as e:
            with self._state_lock:
                if generation != self._generation:
                    return  # the connection changed again; that change is handled on its own
            reason = f"cannot read /controller: {e!r}"
        if reason is None:
            return
        with self._state_lock:
            if self._leader is not leader:
                return  # resigned or re-elected meanwhile
        log.warning("%r: %s: leadership lost", self, reason)
        self.leadership_lost.set()

    def _controller_doubt(self, leader: _Leadership) -> str | None:
        """Why ``/controller`` is not ``leader``'s, None if it is. Re-arms the watch on it."""
        found = self._get(self._p(zk_paths.CONTROLLER), watch=self._on_controller_event)
        if found is None:
            return "/controller is gone"
        data, stat = found
        if stat.ephemeralOwner != leader.session_id:
            return f"/controller belongs to session 0x{stat.ephemeralOwner:x}"
        try:
            controller_id = decode_controller(data)[0]
        except ValueError as e:
            return str(e)
        if controller_id != leader.controller_id:
            return f"/controller names controller {controller_id}"
        return None

    def _drop_leader(self, leader: _Leadership) -> None:
        with self._state_lock:
            if self._leader is leader:
                self._leader = None

    # ----------------------------------------------------------------------------- reads

    def load(self) -> MetadataImage:
        self._check_open()
        multi_read = self._multi_read
        try:
            return self._load()
        except TRANSPORT_ERRORS as e:
            if not (multi_read and not self._multi_read):
                raise MetadataStoreError(f"ZooKeeper load: {e!r}") from e
        # The server refused multiRead, and ZooKeeper drops the connection of a client that sends
        # an unknown request: once more, one znode at a time (queued until kazoo reconnects).
        try:
            return self._load()
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"ZooKeeper load: {e!r}") from e

    def _load(self) -> MetadataImage:
        controller_path = self._p(zk_paths.CONTROLLER)
        epoch_path = self._p(zk_paths.CONTROLLER_EPOCH)
        controller = self._client.get_async(controller_path)
        epoch = self._client.get_async(epoch_path)
        names = sorted(self._children(self._p(zk_paths.BROKER_TOPICS)))
        job_names = sorted(self._children(self._p(zk_paths.DELETE_JOBS)))
        paths: list[str] = []
        for name in names:
            paths += [
                self._p(zk_paths.topic(name)),
                self._p(zk_paths.tiered_epoch(name)),
                self._p(zk_paths.tiered_state(name)),
                self._p(zk_paths.topic_config(name)),
            ]
        paths += [self._p(f"{zk_paths.DELETE_JOBS}/{name}") for name in job_names]
        image = MetadataImage()
        # Topics are decoded as their answers arrive, while later reads are still in flight.
        values = self._iter_many(paths)
        for name in names:
            topic_value, epoch_value, state_value, config_value = islice(values, 4)
            if topic_value is None:
                continue  # deleted since the listing
            image.put_topic(
                self._decode_topic(name, topic_value, epoch_value, state_value, config_value)
            )
        for job_name, job_value in zip(job_names, values, strict=True):
            if job_value is None:
                continue  # deleted since the listing
            job = self._decode_job(job_name, job_value)
            image.delete_jobs[job.key] = job
        image.brokers = self._live_brokers()
        found = self._wait_or_none(controller)
        if found is not None:
            try:
                image.controller_id, image.controller_endpoint = decode_controller(found)
            except ValueError as e:
                raise MetadataStoreError(str(e)) from e
        found = self._wait_or_none(epoch)
        if found is not None:
            image.controller_epoch = self._parse_int(epoch_path, found)
        return image

    def _decode_topic(
        self,
        name: str,
        topic_value: bytes,
        epoch_value: bytes | None,
        state_value: bytes | None,
        config_value: bytes | None,
    ) -> TopicMetadata:
        path = self._p(zk_paths.topic(name))
        try:
            assignment = json.loads(topic_value)
            partitions = {int(p): list(b) for p, b in assignment["partitions"].items()}
            replicas = tuple(
                int(partitions[p][0]) if partitions.get(p) else -1 for p in range(len(partitions))
            )
            topic_id = uuid.UUID(str(assignment["topic_id"]))
            configs = _configs_of_znode(config_value) if config_value is not None else {}
            state = (
                _STATES.get(state_value) or TieredState(state_value.decode().strip())
                if state_value is not None
                else TieredState.DISABLED
            )
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise MetadataStoreError(f"topic {name!r} at {path}: bad znode data: {e!r}") from e
        tiered_epoch = (
            0 if epoch_value is None else self._parse_int(zk_paths.tiered_epoch(name), epoch_value)
        )
        return TopicMetadata(
            name=name,
            topic_id=topic_id,
            replicas=replicas,
            configs=configs,
            tiered_state=state,
            tiered_epoch=tiered_epoch,
        )

    def _decode_job(self, job_name: str, data: bytes) -> DeleteJob:
        relative = f"{zk_paths.DELETE_JOBS}/{job_name}"
        try:
            job = _decode_delete_job(data)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise MetadataStoreError(
                f"delete job at {self._p(relative)}: bad znode data: {e!r}"
            ) from e
        if zk_paths.delete_job(job.topic_id, job.tiered_epoch) != relative:
            raise MetadataStoreError(
                f"delete job at {self._p(relative)} is keyed "
                f"({job.topic_id}, {job.tiered_epoch}), which is not its znode name"
            )
        return job

    def _live_brokers(self) -> dict[int, BrokerRegistration]:
        ids = sorted(int(c) for c in self._children(self._p(zk_paths.BROKER_IDS)) if c.isdigit())
        values = self._get_many([self._p(zk_paths.broker(i)) for i in ids])
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, data in zip(ids, values, strict=True):
            if data is None:
                continue  # gone since the listing
            try:
                brokers[broker_id] = decode_broker_registration(broker_id, data)
            except ValueError as e:
                log.warning("%r: ignoring a broker registration: %s", self, e)
        return brokers

    def watch_live_brokers(self, callback: LiveBrokersCallback) -> bool:
        """Calls ``callback`` with every live broker registration (``/brokers/ids``), first as soon
        as the watch is set and then after every change, from a thread of its own, until
        ``close``. Consecutive identical sets are delivered once. Returns True (ZooKeeper brokers
        register themselves, so the controller learns of them here)."""
        self._check_open()
        watch = _LiveBrokersWatch(self, callback)
        with self._state_lock:
            self._live_watches.append(watch)
        watch.start()
        return True

    # ----------------------------------------------------------------------------- fenced writes

    def create_topic(self, topic: TopicMetadata) -> None:
        self._fenced_multi(f"create topic {topic.name}", topic_create_ops(topic))

    def update_topic(
        self, before: TopicMetadata, after: TopicMetadata, delete_job: DeleteJob | None = None
    ) -> None:
        """One multi: the topic's config, tiered state and tiered epoch znodes and, with
        ``delete_job``, the creation or update of the job's znode."""
        self._check_change(before, after, delete_job)
        what = f"update topic {after.name}"
        ops = topic_update_ops(after)
        if delete_job is not None:
            ops.append(self._delete_job_op(what, delete_job))
        self._fenced_multi(what, ops)

    def update_topics(self, changes: Sequence[TopicChange]) -> None:
        """One multi per ``UPDATE_TOPICS_PER_MULTI`` topics, in order (a multi of 10k topics
        would pass ZooKeeper's 1 MB request limit)."""
        for before, after, delete_job in changes:
            self._check_change(before, after, delete_job)
        for start in range(0, len(changes), UPDATE_TOPICS_PER_MULTI):
            group = changes[start : start + UPDATE_TOPICS_PER_MULTI]
            what = (
                f"update topic {group[0][1].name}"
                if len(group) == 1
                else f"update {len(group)} topics ({group[0][1].name}..{group[-1][1].name})"
            )
            ops: list[ZnodeOp] = []
            for _, after, delete_job in group:
                ops += topic_update_ops(after)
                if delete_job is not None:
                    ops.append(self._delete_job_op(what, delete_job))
            self._fenced_multi(what, ops)

    @staticmethod
    def _check_change(
        before: TopicMetadata, after: TopicMetadata, delete_job: DeleteJob | None
    ) -> None:
        if before.name != after.name or before.topic_id != after.topic_id:
            raise ValueError(
                f"update_topic: {before.name} ({before.topic_id}) and {after.name} "
                f"({after.topic_id}) are not the same topic"
            )
        if before.replicas != after.replicas:
            raise ValueError(f"update_topic: the assignment of {after.name} cannot change")
        if delete_job is not None and delete_job.topic_id != after.topic_id:
            raise ValueError(
                f"update_topic: the delete job of topic id {delete_job.topic_id} is not "
                f"{after.name}'s ({after.topic_id})"
            )

    def put_delete_job(self, job: DeleteJob) -> None:
        """One multi creating or setting ``/tiered/delete_jobs/{topic_id}-{tiered_epoch}``."""
        what = f"put delete job {job.topic_id}-{job.tiered_epoch} ({job.topic})"
        self._fenced_multi(what, [self._delete_job_op(what, job)])

    def _delete_job_op(self, what: str, job: DeleteJob) -> ZnodeOp:
        """Create if the job's znode is absent, else set. Refused, without a read, when this
        process is not the active controller (the multi would be refused anyway)."""
        self._check_open()
        self._require_leader(what)
        path = zk_paths.delete_job(job.topic_id, job.tiered_epoch)
        try:
            stat = self._wait(self._client.exists_async(self._p(path)))
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"{what}: ZooKeeper exists {path}: {e!r}") from e
        return ("create" if stat is None else "set", path, _encode_delete_job(job))

    def delete_topic(self, topic: TopicMetadata) -> None:
        _check_topic_name(topic.name)
        self._fenced_multi(
            f"delete topic {topic.name}",
            [
                ("delete", zk_paths.tiered_state(topic.name), b""),
                ("delete", zk_paths.tiered_epoch(topic.name), b""),
                ("delete", zk_paths.tiered_storage(topic.name), b""),
                ("delete", zk_paths.topic(topic.name), b""),
                ("delete", zk_paths.topic_config(topic.name), b""),
            ],
        )

    def register_broker(self, registration: BrokerRegistration) -> None:
        """ZooKeeper brokers register themselves (``BrokerZkRegistration``): this checks that
        ``/brokers/ids/{id}`` holds this very registration (same incarnation)."""
        self._check_open()
        path = self._p(zk_paths.broker(registration.broker_id))
        try:
            found = self._get(path)
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"ZooKeeper get {path}: {e!r}") from e
        if found is None:
            raise MetadataStoreError(
                f"broker {registration.broker_id} is not registered in ZooKeeper ({path})"
            )
        try:
            present = decode_broker_registration(registration.broker_id, found[0])
        except ValueError as e:
            raise MetadataStoreError(str(e)) from e
        if present != registration:
            raise MetadataStoreError(
                f"{path} holds {present}, not {registration} (a stale or another registration)"
            )

    def _fenced_multi(self, what: str, ops: Sequence[ZnodeOp]) -> None:
        """Commits ``ops`` (kind, path in the layout, data) in one multi behind the fence checks."""
        self._check_open()
        leader = self._require_leader(what)
        txn = self._client.transaction()
        txn.check(self._p(zk_paths.CONTROLLER_EPOCH), leader.epoch_version)
        txn.check(self._p(zk_paths.CONTROLLER), leader.controller_version)
        paths = [zk_paths.CONTROLLER_EPOCH, zk_paths.CONTROLLER]
        for kind, path, data in ops:
            if kind == "create":
                txn.create(self._p(path), data)
            elif kind == "set":
                txn.set_data(self._p(path), data)
            else:
                txn.delete(self._p(path))
            paths.append(path)
        try:
            results = self._wait(txn.commit_async())
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(
                f"{what}: no answer from ZooKeeper, outcome unknown: {e!r}"
            ) from e
        failure = _first_failure(results)
        if failure is None:
            return
        index, error = failure
        if index < _FENCE_OPS and isinstance(error, BadVersionError | NoNodeError):
            self.leadership_lost.set()
            raise ControllerFencedError(
                f"{what}: controller {leader.controller_id} of epoch {leader.epoch} is fenced "
                f"({paths[index]}: {type(error).__name__}); nothing was written"
            )
        raise MetadataStoreError(
            f"{what}: {paths[index]}: {type(error).__name__}; nothing was written"
        )

    def _require_leader(self, what: str) -> _Leadership:
        """Our leadership, as far as we know without asking ZooKeeper; ``ControllerFencedError``
        if we have none or the session that won it has ended."""
        with self._state_lock:
            leader, session = self._leader, self._session_id
        if leader is None:
            raise ControllerFencedError(f"{what}: this process is not the active controller")
        if session != leader.session_id:
            # The session that owned our /controller has ended: not sent, so nothing written.
            self.leadership_lost.set()
            raise ControllerFencedError(
                f"{what}: controller {leader.controller_id} of epoch {leader.epoch} is fenced "
                f"(its ZooKeeper session 0x{leader.session_id:x} has ended); nothing was written"
            )
        return leader

    # ----------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.resign()
        finally:
            with self._state_lock:
                self._closed = True
                watches, self._live_watches = self._live_watches, []
                if self._grace_timer is not None:
                    self._grace_timer.cancel()
                    self._grace_timer = None
            for watch in watches:
                watch.stop()
            self._client.remove_listener(self._on_state)
            self._shutdown_client()

    # ----------------------------------------------------------------------------- internals

    def _p(self, path: str) -> str:
        return self._chroot + path

    def _check_open(self) -> None:
        if self._closed:
            raise MetadataStoreError(f"{self!r} is closed")

    def _shutdown_client(self) -> None:
        try:
            self._client.stop()
        finally:
            self._client.close()

    def _current_session(self) -> int:
        client_id = self._client.client_id
        if client_id is None:
            raise KazooTimeoutError("not connected to ZooKeeper")
        return int(client_id[0])

    def _wait(self, async_result: Any) -> Any:
        """A kazoo async result, waiting at most the session timeout."""
        try:
            return async_result.get(timeout=self._op_timeout_s)
        except KazooTimeoutError:
            raise KazooTimeoutError(
                f"no answer from ZooKeeper within {self._op_timeout_s}s"
            ) from None

    def _wait_or_none(self, async_result: Any) -> bytes | None:
        try:
            data, _ = self._wait(async_result)
        except NoNodeError:
            return None
        return bytes(data)

    def _get(
        self, path: str, watch: Callable[[WatchedEvent], None] | None = None
    ) -> tuple[bytes, ZnodeStat] | None:
        try:
            data, stat = self._wait(self._client.get_async(path, watch=watch))
        except NoNodeError:
            return None
        return bytes(data), stat

    def _children(self, path: str) -> list[str]:
        try:
            children: list[str] = self._wait(self._client.get_children_async(path))
        except NoNodeError:
            return []
        return children

    def _get_many(self, paths: Sequence[str]) -> list[bytes | None]:
        """The data of ``paths`` (None where missing)."""
        return list(self._iter_many(paths))

    def _iter_many(self, paths: Sequence[str]) -> Iterator[bytes | None]:
        """The data of ``paths`` in order (None where missing), each as soon as its answer is in:
        by multiRead where the server has it, else by async gets."""
        done = 0
        if self._multi_read:
            try:
                for value in self._iter_many_multi_read(paths):
                    yield value
                    done += 1
                return
            except UnimplementedError:
                log.warning("%r: ZooKeeper has no multiRead (< 3.6): reading one by one", self)
                self._multi_read = False
        yield from self._get_many_async(paths[done:])

    def _iter_many_multi_read(self, paths: Sequence[str]) -> Iterator[bytes | None]:
        """``MULTI_READ_OPS`` reads per request, ``MULTI_READS_IN_FLIGHT`` requests in flight;
        the answers of the oldest are yielded while the others are served."""
        pending: deque[Any] = deque()
        for start in range(0, len(paths), MULTI_READ_OPS):
            if len(pending) >= MULTI_READS_IN_FLIGHT:
                yield from self._wait(pending.popleft())
            async_result = self._client.handler.async_result()
            # kazoo's own Transaction.commit_async submits its request object the same way.
            self._client._call(_MultiRead(paths[start : start + MULTI_READ_OPS]), async_result)
            pending.append(async_result)
        while pending:
            yield from self._wait(pending.popleft())

    def _get_many_async(self, paths: Sequence[str]) -> list[bytes | None]:
        """One async get per path, at most ``READ_WINDOW`` in flight. ZooKeeper answers a
        session's requests in order, so waiting for the oldest keeps the window sliding."""
        values: list[bytes | None] = [None] * len(paths)
        pending: deque[tuple[int, Any]] = deque()
        for index, path in enumerate(paths):
            if len(pending) >= READ_WINDOW:
                done, result = pending.popleft()
                values[done] = self._wait_or_none(result)
            pending.append((index, self._client.get_async(path)))
        while pending:
            done, result = pending.popleft()
            values[done] = self._wait_or_none(result)
        return values

    def _ensure_path(self, path: str) -> None:
        current = ""
        for part in path.strip("/").split("/"):
            current += "/" + part
            try:
                self._wait(self._client.create_async(current, b""))
            except NodeExistsError:
                continue

    def _parse_int(self, path: str, data: bytes) -> int:
        try:
            return int(data.decode().strip())
        except ValueError as e:
            raise MetadataStoreError(f"{path}: not a decimal number: {data[:50]!r}") from e


class _LiveBrokersWatch:
    """A ChildrenWatch on ``/brokers/ids`` whose events wake a thread of ours, which reads the
    registrations and calls the callback (kazoo's callback thread must not block on it)."""

    def __init__(self, store: ZooKeeperMetadataStore, callback: LiveBrokersCallback) -> None:
        self._store = store
        self._callback = callback
        self._dirty = threading.Event()
        self._stopped = threading.Event()
        self._last: dict[int, BrokerRegistration] | None = None
        self._thread = threading.Thread(target=self._run, name="zk-live-brokers", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._dirty.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=self._store._op_timeout_s)

    def _on_children(self, _children: list[str]) -> bool | None:
        if self._stopped.is_set():
            return False  # kazoo drops the watch
        self._dirty.set()
        return None

    def _run(self) -> None:
        # Set up here: kazoo's ChildrenWatch reads synchronously, retrying until ZooKeeper answers.
        try:
            ChildrenWatch(
                self._store.client, self._store._p(zk_paths.BROKER_IDS), self._on_children
            )
        except TRANSPORT_ERRORS as e:
            if not self._stopped.is_set():
                log.error("live brokers: cannot watch %s: %r", zk_paths.BROKER_IDS, e)
            return
        while True:
            self._dirty.wait()
            if self._stopped.is_set():
                return
            self._dirty.clear()
            try:
                brokers = self._store._live_brokers()
            except TRANSPORT_ERRORS as e:
                log.warning("live brokers: cannot read %s, retrying: %r", zk_paths.BROKER_IDS, e)
                self._dirty.set()
                self._stopped.wait(0.2)
                continue
            if brokers == self._last:
                continue
            self._last = brokers
            try:
                self._callback(dict(brokers))
            except Exception:
                log.exception("live brokers callback failed")
