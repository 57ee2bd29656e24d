"""``ZooKeeperMetadataStore``: the ``MetadataStore`` contract over ZooKeeper, put together from
its parts (leadership, loading, fenced writes, the live-brokers watch)."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from kazoo.client import KazooClient

from controller.store.base import MetadataStore, MetadataStoreError
from controller.store.zookeeper.leadership import Leadership
from controller.store.zookeeper.live_brokers import LiveBrokersCallback, LiveBrokersWatch
from controller.store.zookeeper.loading import Loader
from controller.store.zookeeper.writes import FencedWriter
from tiered.cluster import zk_paths
from tiered.cluster.model import BrokerRegistration, MetadataImage
from tiered.cluster.zk_acl_znodes import ACL_PARENTS
from tiered.properties import int_property
from tiered.security.zookeeper_acl import ZooKeeperAuthenticationError
from tiered.security.zookeeper_auth import NO_SECURITY, ZooKeeperSecurity
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient
from tiered.zk_multi_read import BulkReader

__all__ = ["ZooKeeperMetadataStore"]


class ZooKeeperMetadataStore(MetadataStore):
    """One controller's view of the ZooKeeper metadata; connects on construction.

    ``connect`` is ``host:port[,host:port...][/chroot]`` (a missing chroot is created);
    ``session_timeout_s`` is also how long any request may wait; ``suspended_grace_s`` is how
    long a lost connection may last before ``leadership_lost`` is set; ``multi_read=False`` makes
    ``load`` read znode by znode (what it falls back to on a server without multiRead);
    ``security``: the cluster's ZooKeeper identity and whether its znodes carry ACLs.
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
        security: ZooKeeperSecurity = NO_SECURITY,
    ) -> None:
        super().__init__()
        self._zk = ZkClient(connect, session_timeout_s, security)
        self._closed = threading.Event()
        name = repr(self)
        self._leadership = Leadership(
            self._zk, self.leadership_lost, self._closed, suspended_grace_s, name
        )
        self._loader = Loader(
            self._zk, BulkReader(self._zk, multi_read=multi_read), self._check_open, name
        )
        self.writes = FencedWriter(self._zk, self._leadership, self._check_open)
        self._watches_lock = threading.Lock()
        self._live_watches: list[LiveBrokersWatch] = []
        self._zk.kazoo.add_listener(self._leadership.on_state)
        try:
            self._zk.start(
                connect_timeout_s,
                zk_paths.BROKER_IDS,
                zk_paths.BROKER_TOPICS,
                zk_paths.CONFIG_TOPICS,
                zk_paths.CONFIG_USERS,
                zk_paths.DELETE_JOBS,
                *ACL_PARENTS,
            )
        except ZooKeeperAuthenticationError as e:
            raise MetadataStoreError(f"{e} (ZooKeeper at {connect})") from e
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"cannot connect to ZooKeeper at {connect}: {e!r}") from e

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ZooKeeperMetadataStore:
        """``zookeeper.connect`` (host:port[,host:port...][/chroot], required),
        ``zookeeper.session.timeout.ms`` (default 6000), ``zookeeper.suspended.grace.ms``
        (default 2000: how long a lost connection may last before leadership counts as lost),
        ``zookeeper.jaas.config.file`` and ``zookeeper.set.acl`` (``ZooKeeperSecurity``)."""
        connect = str(config.get("zookeeper.connect") or "").strip()
        if not connect:
            raise ValueError("zookeeper.connect is required when metadata.store=zookeeper")
        session_ms = int_property(config, "zookeeper.session.timeout.ms", 6000, minimum=1)
        grace_ms = int_property(config, "zookeeper.suspended.grace.ms", 2000, minimum=0)
        return cls(
            connect,
            session_timeout_s=session_ms / 1000,
            suspended_grace_s=grace_ms / 1000,
            security=ZooKeeperSecurity.from_config(config),
        )

    def __repr__(self) -> str:
        return f"ZooKeeperMetadataStore({self._zk.connect!r})"

    @property
    def client(self) -> KazooClient:
        """The kazoo client (for diagnostics and tests; its session owns our ``/controller``)."""
        return self._zk.kazoo

    def _p(self, path: str) -> str:
        """The full path of a path of the layout (for diagnostics and tests)."""
        return self._zk.path(path)

    @property
    def controller_epoch(self) -> int | None:
        """The epoch this store was elected with, None when it does not hold leadership."""
        return self._leadership.epoch

    # ------------------------------------------------------------------------------- leadership

    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        return self._leadership.elect(controller_id, endpoint, stop)

    def resign(self) -> None:
        self._leadership.resign()

    def active_controller(self) -> tuple[int, str] | None:
        return self._leadership.active_controller()

    # ------------------------------------------------------------------------------- reads

    def load(self) -> MetadataImage:
        return self._loader.load()

    def register_broker(self, registration: BrokerRegistration) -> None:
        """ZooKeeper brokers register themselves (``BrokerZkRegistration``): this checks that
        ``/brokers/ids/{id}`` holds this very registration (same incarnation)."""
        self._loader.check_registration(registration)

    def watch_live_brokers(self, callback: LiveBrokersCallback) -> bool:
        """Calls ``callback`` with every live broker registration (``/brokers/ids``), first as soon
        as the watch is set and then after every change, from a thread of its own, until
        ``close``. Consecutive identical sets are delivered once. Returns True (ZooKeeper brokers
        register themselves, so the controller learns of them here)."""
        self._check_open()
        watch = LiveBrokersWatch(self._zk, self._loader.live_brokers, callback)
        with self._watches_lock:
            self._live_watches.append(watch)
        watch.start()
        return True

    # ------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        if self._closed.is_set():
            return
        try:
            self.resign()
        finally:
            self._closed.set()
            self._leadership.close()
            with self._watches_lock:
                watches, self._live_watches = self._live_watches, []
            for watch in watches:
                watch.stop()
            self._zk.kazoo.remove_listener(self._leadership.on_state)
            self._zk.close()

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise MetadataStoreError(f"{self!r} is closed")
