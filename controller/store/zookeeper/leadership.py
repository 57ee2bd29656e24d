"""Leadership of the ZooKeeper store: election, resignation, and its loss with the session.

Leadership is Kafka's: whoever creates the ephemeral ``/controller`` is the active controller, and
the same transaction raises ``/controller_epoch``. The fenced writes (``writes``) check the
versions this election wrote. A controller whose ``/controller`` is deleted behind its back (an
operator forcing a new election) notices through a watch; the epoch check fences it once another
is elected.

Loss of leadership (``lost``) follows the session: LOST sets it at once; SUSPENDED sets it when the
connection is not back within the grace; a reconnection within the grace keeps leadership, once a
read has confirmed that ``/controller`` still belongs to our session. kazoo runs state listeners on
its connection thread and watch callbacks on its single callback thread: both only signal threads
of ours.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, WatchedEvent

from controller.store.base import ControllerFencedError, MetadataStoreError
from controller.store.zookeeper.znodes import parse_int
from tiered.cluster import zk_paths
from tiered.cluster.zk_znodes import decode_controller, encode_controller
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import ZOOKEEPER_ELECTION_BACKOFF
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient, first_failure

__all__ = ["Leader", "Leadership"]

log = logging.getLogger(__name__)

_STOP_POLL_S = 0.05  # how often a waiting elect() looks at its stop event
_ELECT_ATTEMPTS = 20  # back-to-back races lost in one elect round before it gives up
_ELECTION_ERRORS: tuple[type[Exception], ...] = (*TRANSPORT_ERRORS, MetadataStoreError)


@dataclass(frozen=True)
class Leader:
    """What an election won: the fenced writes check ``epoch_version`` and ``controller_version``."""

    controller_id: int
    endpoint: str
    epoch: int
    epoch_version: int  # the version of /controller_epoch our election wrote
    controller_version: int  # the version of our /controller
    session_id: int  # the session that owns our /controller


class Leadership:
    """This process's leadership through ``zk``; ``lost`` is the store's ``leadership_lost``,
    ``closed`` its closed event, ``name`` how logs name the store. Register ``on_state`` as a
    kazoo listener before the client starts."""

    def __init__(
        self,
        zk: ZkClient,
        lost: threading.Event,
        closed: threading.Event,
        suspended_grace_s: float,
        name: str,
        election_backoff: ExponentialBackoff = ZOOKEEPER_ELECTION_BACKOFF,
    ) -> None:
        self._zk = zk
        self._election_backoff = election_backoff
        self.lost = lost
        self._closed = closed
        self._grace_s = suspended_grace_s
        self._name = name
        # Guards the leader, the session id and the grace timer; never held across a request to
        # ZooKeeper (the listener that takes it runs on kazoo's I/O thread).
        self._lock = threading.Lock()
        self._leader: Leader | None = None
        self._session_id: int | None = None
        self._generation = 0  # raised by every connection state change
        self._grace_timer: threading.Timer | None = None

    def __repr__(self) -> str:
        return self._name

    @property
    def epoch(self) -> int | None:
        """The epoch of our election, None when we do not hold leadership."""
        leader = self._leader
        return None if leader is None else leader.epoch

    def require(self, what: str) -> Leader:
        """Our leadership, as far as we know without asking ZooKeeper; ``ControllerFencedError``
        if we have none or the session that won it has ended."""
        with self._lock:
            leader, session = self._leader, self._session_id
        if leader is None:
            raise ControllerFencedError(f"{what}: this process is not the active controller")
        if session != leader.session_id:
            # The session that owned our /controller has ended: not sent, so nothing written.
            self.lost.set()
            raise ControllerFencedError(
                f"{what}: controller {leader.controller_id} of epoch {leader.epoch} is fenced "
                f"(its ZooKeeper session 0x{leader.session_id:x} has ended); nothing was written"
            )
        return leader

    def close(self) -> None:
        """After the store's closed event is set: no grace timer runs on."""
        with self._lock:
            if self._grace_timer is not None:
                self._grace_timer.cancel()
                self._grace_timer = None

    # ------------------------------------------------------------------------------- election

    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        with self._lock:
            self._leader = None  # a new election abandons any earlier leadership of ours
        backoff = Backoff(self._election_backoff)  # an attempt that reaches ZooKeeper resets it
        while not stop.is_set():
            self._check_open()
            try:
                epoch = self._try_elect(controller_id, endpoint)
            except _ELECTION_ERRORS as e:
                if self._closed.is_set():
                    raise MetadataStoreError(f"{self!r} was closed during the election") from e
                delay_s = backoff.next_delay()
                log.warning("%r: election attempt failed, retrying in %.2fs: %r", self, delay_s, e)
                stop.wait(delay_s)
                continue
            if epoch is not None:
                log.info("%r: controller %d elected with epoch %d", self, controller_id, epoch)
                return epoch
            backoff.reset()
            self._await_controller_change(stop)
        return None

    def _try_elect(self, controller_id: int, endpoint: str) -> int | None:
        """The new epoch if this process won, None if another controller holds ``/controller``."""
        controller_path = self._zk.path(zk_paths.CONTROLLER)
        epoch_path = self._zk.path(zk_paths.CONTROLLER_EPOCH)
        for _ in range(_ELECT_ATTEMPTS):
            session = self._current_session()
            current = self._zk.get(epoch_path)
            txn = self._zk.kazoo.transaction()
            txn.create(controller_path, encode_controller(controller_id, endpoint), ephemeral=True)
            if current is None:
                epoch = 1
                txn.create(epoch_path, b"1")
            else:
                epoch = parse_int(epoch_path, current[0]) + 1
                txn.set_data(epoch_path, str(epoch).encode(), version=current[1].version)
            # Cleared before the attempt: a loss signalled from now on is about this leadership.
            self.lost.clear()
            results = self._zk.wait(txn.commit_async())
            failure = first_failure(results)
            if failure is None:
                epoch_version = 0 if current is None else int(results[1].version)
                leader = Leader(controller_id, endpoint, epoch, epoch_version, 0, session)
                with self._lock:
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
                stat = self._zk.exists(controller_path)
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
            stat = self._zk.exists(
                self._zk.path(zk_paths.CONTROLLER), watch=lambda _event: changed.set()
            )
        except TRANSPORT_ERRORS as e:
            log.debug("%r: cannot watch /controller: %r", self, e)
            stop.wait(_STOP_POLL_S)
            return
        if stat is None:
            return
        # kazoo fires the watch with a NONE event on disconnection too: then we look again.
        while not changed.wait(_STOP_POLL_S):
            if stop.is_set() or self._closed.is_set():
                return

    def resign(self) -> None:
        with self._lock:
            self._leader = None
        if self._closed.is_set() or not self._zk.kazoo.connected:
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
        controller_path = self._zk.path(zk_paths.CONTROLLER)
        epoch_path = self._zk.path(zk_paths.CONTROLLER_EPOCH)
        epoch = self._zk.get(epoch_path)
        stat = self._zk.exists(controller_path)
        if stat is None or stat.ephemeralOwner != session:
            return False
        txn = self._zk.kazoo.transaction()
        if epoch is not None:
            txn.check(epoch_path, epoch[1].version)
        txn.delete(controller_path, version=stat.version)
        return first_failure(self._zk.wait(txn.commit_async())) is None

    def active_controller(self) -> tuple[int, str] | None:
        self._check_open()
        path = self._zk.path(zk_paths.CONTROLLER)
        try:
            found = self._zk.get(path)
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"ZooKeeper get {path}: {e!r}") from e
        if found is None:
            return None
        try:
            return decode_controller(found[0])
        except ValueError as e:
            raise MetadataStoreError(str(e)) from e

    # ------------------------------------------------------------------------------- session

    def on_state(self, state: str) -> None:
        """kazoo's connection thread: bookkeeping and signals only."""
        verify: int | None = None
        with self._lock:
            self._generation += 1
            generation = self._generation
            if self._grace_timer is not None:
                self._grace_timer.cancel()
                self._grace_timer = None
            if state == KazooState.LOST:
                self._session_id = None
                if self._leader is not None:
                    log.warning("%r: ZooKeeper session lost: leadership lost", self)
                    self.lost.set()
            elif state == KazooState.SUSPENDED:
                if self._leader is not None and not self._closed.is_set():
                    timer = threading.Timer(self._grace_s, self._grace_expired, (generation,))
                    timer.daemon = True
                    timer.name = "zk-store-grace"
                    self._grace_timer = timer
                    timer.start()
            elif state == KazooState.CONNECTED:
                self._session_id = self._zk.session_id()
                if self._leader is not None and not self.lost.is_set():
                    verify = generation
        if verify is not None:
            self._verify_in_background(verify)

    def _grace_expired(self, generation: int) -> None:
        with self._lock:
            if generation != self._generation or self._leader is None or self._closed.is_set():
                return  # reconnected (or lost, or resigned) since
            log.warning(
                "%r: disconnected from ZooKeeper for more than %.1fs: leadership lost",
                self,
                self._grace_s,
            )
            self.lost.set()

    def _on_controller_event(self, event: WatchedEvent) -> None:
        """kazoo's callback thread: ``/controller`` changed or went while we lead."""
        if event.type == EventType.NONE:
            return  # a connection event: the state listener handles those
        with self._lock:
            leader, generation = self._leader, self._generation
            if leader is None or self._closed.is_set():
                return
        self._verify_in_background(generation)

    def _verify_in_background(self, generation: int) -> None:
        threading.Thread(
            target=self._verify, args=(generation,), name="zk-store-verify", daemon=True
        ).start()

    def _verify(self, generation: int) -> None:
        """After a reconnection within the grace, or an event on ``/controller``: is it still
        ours? If not (or if that cannot be read), leadership is lost."""
        leader = self._leader
        if leader is None:
            return
        try:
            reason = self._controller_doubt(leader)
        except TRANSPORT_ERRORS as e:
            with self._lock:
                if generation != self._generation:
                    return  # the connection changed again; that change is handled on its own
            reason = f"cannot read /controller: {e!r}"
        if reason is None:
            return
        with self._lock:
            if self._leader is not leader:
                return  # resigned or re-elected meanwhile
        log.warning("%r: %s: leadership lost", self, reason)
        self.lost.set()

    def _controller_doubt(self, leader: Leader) -> str | None:
        """Why ``/controller`` is not ``leader``'s, None if it is. Re-arms the watch on it."""
        found = self._zk.get(self._zk.path(zk_paths.CONTROLLER), watch=self._on_controller_event)
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

    def _drop_leader(self, leader: Leader) -> None:
        with self._lock:
            if self._leader is leader:
                self._leader = None

    def _current_session(self) -> int:
        session = self._zk.session_id()
        if session is None:
            raise KazooTimeoutError("not connected to ZooKeeper")
        return session

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise MetadataStoreError(f"{self!r} is closed")
