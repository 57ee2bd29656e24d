"""A broker's presence in ZooKeeper mode: its registration, the ephemeral ``/brokers/ids/{id}``
(docs/design.md §3.1), kept for as long as the broker runs, and its look-up of the active
controller. This is what a broker process uses; it imports nothing of the controller.

Registration follows Kafka's (the znode's data: ``tiered.cluster.zk_znodes``) and lives as long as
the broker's session. A znode left by an earlier session of the same broker id (a broker restarted
faster than its old session timed out) is waited out, up to a deadline. After a session expiry the
znode is gone with the session: a worker thread creates it again once kazoo has a new session
(never from inside kazoo's state listener, which runs on kazoo's connection thread).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError

from tiered.cluster import zk_paths
from tiered.cluster.model import BrokerRegistration
from tiered.cluster.zk_znodes import decode_controller, encode_broker_registration
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import BROKER_REREGISTRATION_BACKOFF
from tiered.security.zookeeper_auth import NO_SECURITY, ZooKeeperSecurity
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient

__all__ = [
    "BrokerRegistrationError",
    "BrokerZkRegistration",
    "read_active_controller",
]

log = logging.getLogger(__name__)

_STALE_POLL_S = 0.05


class BrokerRegistrationError(Exception):
    """The broker could not register (ZooKeeper unreachable, or its id held by another session)."""


def read_active_controller(
    client: KazooClient, chroot: str = "", timeout_s: float = 10.0
) -> tuple[int, str, int] | None:
    """(controller id, endpoint, controller epoch) of the active controller, or None if there is
    none. ``chroot`` is prefixed to the paths (give "" for a client started with a chroot).
    Raises ``BrokerRegistrationError`` if ZooKeeper does not answer within ``timeout_s``, and
    ValueError if the znodes hold something else."""
    controller_path = chroot + zk_paths.CONTROLLER
    epoch_path = chroot + zk_paths.CONTROLLER_EPOCH
    controller = client.get_async(controller_path)
    epoch = client.get_async(epoch_path)
    try:
        try:
            data, _ = controller.get(timeout=timeout_s)
        except NoNodeError:
            return None
        try:
            epoch_data, _ = epoch.get(timeout=timeout_s)
            controller_epoch = int(epoch_data.decode())
        except NoNodeError:
            controller_epoch = 0
    except TRANSPORT_ERRORS as e:
        raise BrokerRegistrationError(f"cannot read the active controller: {e!r}") from e
    controller_id, endpoint = decode_controller(data)
    return controller_id, endpoint, controller_epoch


class BrokerZkRegistration:
    """Keeps ``/brokers/ids/{id}`` registered for this broker process.

    ``start()`` connects and registers (waiting out a stale znode of an earlier session of the same
    id, up to ``stale_timeout_s``); from then on the registration is re-created after every session
    expiry until ``close()``, which removes it (by closing the session).
    """

    def __init__(
        self,
        connect: str,
        registration: BrokerRegistration,
        *,
        session_timeout_s: float = 6.0,
        connect_timeout_s: float = 15.0,
        stale_timeout_s: float | None = None,
        backoff: ExponentialBackoff = BROKER_REREGISTRATION_BACKOFF,
        security: ZooKeeperSecurity = NO_SECURITY,
    ) -> None:
        self._zk = ZkClient(connect, session_timeout_s, security)
        self._session_timeout_s = session_timeout_s
        self._backoff = backoff
        self.registration = registration
        self._path = self._zk.path(zk_paths.broker(registration.broker_id))
        self._connect_timeout_s = connect_timeout_s
        # The old session's znode lives until the server expires that session.
        self._stale_timeout_s = (
            2 * session_timeout_s if stale_timeout_s is None else stale_timeout_s
        )
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._worker: threading.Thread | None = None
        self._on_close: list[Callable[[], None]] = []
        self._state: str | None = None  # the session's last state kazoo reported (its thread's)
        self.registrations = 0  # how many times the znode was created (1 + re-registrations)

    def __repr__(self) -> str:
        return f"BrokerZkRegistration({self._zk.connect!r}, broker {self.registration.broker_id})"

    @property
    def client(self) -> KazooClient:
        """The kazoo client (its session owns the registration)."""
        return self._zk.kazoo

    @property
    def zk_client(self) -> ZkClient:
        """The broker's ZooKeeper client, for what else it follows on its session (ACLs)."""
        return self._zk

    def on_close(self, callback: Callable[[], None]) -> None:
        """``callback`` runs in ``close``, before the session ends."""
        self._on_close.append(callback)

    @property
    def controller_endpoint(self) -> str | None:
        """The active controller's endpoint as ``/controller`` names it (None if none or if
        ZooKeeper cannot be read): where this broker forwards AdminService calls."""
        try:
            active = read_active_controller(self._zk.kazoo, self._zk.chroot, timeout_s=5.0)
        except Exception:
            return None
        return None if active is None else active[1]

    @property
    def path(self) -> str:
        """The registration znode's full path (chroot included)."""
        return self._path

    # ------------------------------------------------------------------------------- lifecycle

    def start(self, on_connected: Callable[[ZkClient], None] = lambda _zk: None) -> None:
        """Connects, calls ``on_connected`` with the session's client (what the broker follows
        on it must be loaded before the controller, seeing the registration, sends requests
        that depend on it), and registers; returns once ``/brokers/ids/{id}`` is ours. Raises
        ``BrokerRegistrationError`` if ZooKeeper is unreachable or the id stays taken, and
        what ``on_connected`` raises."""
        if self._closed.is_set():
            raise BrokerRegistrationError(f"{self!r} is closed")
        if self._worker is not None:
            return
        try:
            self._zk.start(self._connect_timeout_s, zk_paths.BROKER_IDS)
        except TRANSPORT_ERRORS as e:
            raise BrokerRegistrationError(
                f"cannot connect to ZooKeeper at {self._zk.connect}: {e}"
            ) from e
        try:
            on_connected(self._zk)
            self._register(deadline=time.monotonic() + self._stale_timeout_s)
        except BaseException:
            self._zk.close()
            raise
        self._zk.kazoo.add_listener(self._on_state)
        self._worker = threading.Thread(
            target=self._run, name=f"zk-broker-{self.registration.broker_id}", daemon=True
        )
        self._worker.start()

    def close(self) -> None:
        """Removes the registration (the session ends) and releases everything. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        for callback in self._on_close:
            callback()
        self._zk.kazoo.remove_listener(self._on_state)
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=self._zk.op_timeout_s + self._stale_timeout_s)
        self._zk.close()

    def __enter__(self) -> BrokerZkRegistration:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_registered(self) -> bool:
        """Whether the znode is there and owned by the current session (one round trip)."""
        try:
            stat = self._zk.exists(self._path)
        except TRANSPORT_ERRORS:
            return False
        session = self._zk.session_id()
        return stat is not None and session is not None and stat.ephemeralOwner == session

    # ------------------------------------------------------------------------------- internals

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: only log and signal. A new session (after LOST) lacks the
        # znode, and a resumed one is checked too, which costs one read.
        if self._closed.is_set():
            return
        self._log_state(state)
        if state == KazooState.CONNECTED:
            self._wake.set()

    def _log_state(self, state: str) -> None:
        """What a change of the session means for the broker: ZooKeeper is how the controller
        hears of it, so a lost session is a broker the controller sends nothing."""
        previous, self._state = self._state, state
        if state == previous:
            return
        if state == KazooState.SUSPENDED:
            log.warning(
                "%r: connection to ZooKeeper lost; the registration holds until the session "
                "expires (%.1fs without a connection), and the controller's requests still come "
                "meanwhile",
                self,
                self._session_timeout_s,
            )
        elif state == KazooState.LOST:
            log.warning(
                "%r: ZooKeeper session expired: %s is gone, so the active controller counts this "
                "broker as not live and sends it nothing (what it owes waits) until it registers "
                "again on a new session",
                self,
                self._path,
            )
        elif previous is not None:
            log.info(
                "%r: connected to ZooKeeper again (%s)",
                self,
                "a new session: registering again"
                if previous == KazooState.LOST
                else "the session resumed: still registered",
            )

    def _run(self) -> None:
        while not self._closed.is_set():
            self._wake.wait()
            if self._closed.is_set():
                return
            self._wake.clear()
            backoff = Backoff(self._backoff)  # of this wake-up: each new session starts over
            while not self._closed.is_set():
                try:
                    self._register(deadline=time.monotonic() + self._stale_timeout_s)
                    break
                except Exception as e:  # keep the broker registered whatever went wrong
                    if self._closed.is_set():
                        return
                    delay_s = backoff.next_delay()
                    log.warning(
                        "%r: re-registration failed, retrying in %.2fs: %r", self, delay_s, e
                    )
                    self._closed.wait(delay_s)

    def _register(self, deadline: float) -> None:
        """Makes sure the znode exists and belongs to the current session."""
        with self._lock:
            while True:
                if self._closed.is_set():
                    raise BrokerRegistrationError(f"{self!r} is closed")
                session = self._zk.session_id()
                if session is None:
                    if time.monotonic() > deadline:
                        raise BrokerRegistrationError(f"{self!r}: not connected to ZooKeeper")
                    self._closed.wait(_STALE_POLL_S)
                    continue
                try:
                    self._zk.wait(
                        self._zk.kazoo.create_async(
                            self._path,
                            encode_broker_registration(self.registration),
                            ephemeral=True,
                        )
                    )
                except NodeExistsError:
                    pass
                except NoNodeError:  # /brokers/ids was removed behind our back
                    self._zk.ensure_path(self._zk.path(zk_paths.BROKER_IDS))
                    continue
                else:
                    self.registrations += 1
                    log.info("%r: registered (session 0x%x)", self, session)
                    return
                stat = self._zk.exists(self._path)
                if stat is not None and stat.ephemeralOwner == session:
                    return  # ours already (a resumed session, or a create whose answer was lost)
                if stat is not None and time.monotonic() > deadline:
                    raise BrokerRegistrationError(
                        f"{self._path} is held by another session (0x{stat.ephemeralOwner:x}) "
                        f"and did not go within {self._stale_timeout_s}s: is broker "
                        f"{self.registration.broker_id} running elsewhere?"
                    )
                if stat is not None:
                    # A stale registration of an earlier session of this id: it goes when the
                    # server expires that session.
                    self._closed.wait(_STALE_POLL_S)
