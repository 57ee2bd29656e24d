"""The watch behind ``watch_live_brokers``: the registrations under ``/brokers/ids``, delivered
after every change."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kazoo.recipe.watchers import ChildrenWatch

from tiered.cluster import zk_paths
from tiered.cluster.model import BrokerRegistration
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import LIVE_BROKERS_READ_BACKOFF
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient

__all__ = ["LiveBrokersCallback", "LiveBrokersWatch"]

log = logging.getLogger(__name__)

LiveBrokersCallback = Callable[[dict[int, BrokerRegistration]], None]


class LiveBrokersWatch:
    """A ChildrenWatch on ``/brokers/ids`` whose events wake a thread of ours, which reads the
    registrations with ``read_brokers`` and calls the callback (kazoo's callback thread must not
    block on it). Consecutive identical sets are delivered once."""

    def __init__(
        self,
        zk: ZkClient,
        read_brokers: Callable[[], dict[int, BrokerRegistration]],
        callback: LiveBrokersCallback,
        backoff: ExponentialBackoff = LIVE_BROKERS_READ_BACKOFF,
    ) -> None:
        self._zk = zk
        self._backoff = backoff
        self._read_brokers = read_brokers
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
            self._thread.join(timeout=self._zk.op_timeout_s)

    def _on_children(self, _children: list[str]) -> bool | None:
        if self._stopped.is_set():
            return False  # kazoo drops the watch
        self._dirty.set()
        return None

    def _run(self) -> None:
        # Set up here: kazoo's ChildrenWatch reads synchronously, retrying until ZooKeeper answers.
        try:
            ChildrenWatch(self._zk.kazoo, self._zk.path(zk_paths.BROKER_IDS), self._on_children)
        except TRANSPORT_ERRORS as e:
            if not self._stopped.is_set():
                log.error("live brokers: cannot watch %s: %r", zk_paths.BROKER_IDS, e)
            return
        self._deliver_changes()

    def _deliver_changes(self) -> None:
        """Reads and delivers the registrations after each change until stopped; a read that
        fails is retried with backoff (from the start again once one succeeds)."""
        backoff = Backoff(self._backoff)
        while True:
            self._dirty.wait()
            if self._stopped.is_set():
                return
            self._dirty.clear()
            try:
                brokers = self._read_brokers()
            except TRANSPORT_ERRORS as e:
                delay_s = backoff.next_delay()
                log.warning(
                    "live brokers: cannot read %s, retrying in %.2fs: %r",
                    zk_paths.BROKER_IDS,
                    delay_s,
                    e,
                )
                self._dirty.set()
                self._stopped.wait(delay_s)
                continue
            backoff.reset()
            if brokers == self._last:
                continue
            self._last = brokers
            try:
                self._callback(dict(brokers))
            except Exception:
                log.exception("live brokers callback failed")
