"""Leadership: campaigning through the metadata store, the active term, and fenced writes.

``Leadership.run`` elects, activates (loads the image and lets its ``TermListener`` rebuild
everything derived from it), and serves until the store says leadership is lost or a store write
fails (its outcome is then unknown); it then deactivates, resigns and campaigns again.

``Term`` is what every other piece of the controller sees of that: the one lock that serializes
operations (as Kafka's controller serializes its events), the controller epoch while active, the
metadata image, and ``persist``, the only way to write the store. Every change follows one order:
validate (nothing persisted on rejection), ``persist`` (state and epoch with the config), update
the image, then tell brokers; I/O to brokers happens on the channel threads, outside the lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from controller.store import MetadataStore, MetadataStoreError
from controller.topic_changes import TopicChanges
from controller.topic_writes import TopicWrites
from tiered.cluster.model import MetadataImage
from tiered.errors import ErrorCode, TieredError
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import CONTROLLER_CAMPAIGN_BACKOFF

log = logging.getLogger(__name__)


class Term:
    """The active controller's term. ``image`` and everything derived from it may be read or
    changed only under ``lock``; the image changes only after ``persist`` returned."""

    def __init__(
        self,
        node_id: int,
        store: MetadataStore,
        write_timed: Callable[[float], None] = lambda seconds: None,
        topic_writes_flushed: Callable[[int, int], None] = lambda changes, queued: None,
    ) -> None:
        self.lock = threading.RLock()
        self.image = MetadataImage()
        self._node_id = node_id
        self._store = store
        self._write_timed = write_timed  # told each write's duration (the metrics' histogram)
        self._epoch: int | None = None
        self._stepping_down = threading.Event()
        self._step_down_reason = ""
        # What a describe of topics shows changed: raised after each write once the image has
        # it (the writer still holds the lock, so a woken watcher reads the new image).
        self.changes = TopicChanges()
        # Topic changes (alters, completed disablements) share writes; every other write
        # settles them first, so the store sees writes in the order the image does.
        self.topic_writes = TopicWrites(
            self.lock,
            lambda: self.image,
            self._write,
            store,
            topic_writes_flushed,
            applied=self.changes.changed,
        )

    @property
    def active_epoch(self) -> int | None:
        """The controller epoch while this controller is active, else None."""
        return self._epoch

    def require_active(self) -> int:
        """The controller epoch; raises NOT_CONTROLLER (naming the active controller when the
        store knows it) when this controller is not active, or is stepping down (a write failed,
        or a broker heard from a newer controller): nothing more is accepted in such a term,
        where a later write could succeed after an earlier one failed."""
        epoch = self._epoch
        if epoch is None:
            active = None
            with contextlib.suppress(MetadataStoreError):
                active = self._store.active_controller()
            where = f"; the active controller is {active[0]} at {active[1]}" if active else ""
            raise TieredError(
                ErrorCode.NOT_CONTROLLER,
                f"controller {self._node_id} is not the active controller{where}",
            )
        self._raise_if_stepping_down()
        return epoch

    def persist(self, write: Callable[[], None]) -> None:
        """Runs a store write (under the lock), after every topic change submitted before it. A
        failure leaves its outcome unknown, so this controller steps down (the next one reloads
        the truth) and NOT_CONTROLLER is raised for a retry."""
        self.topic_writes.settle()
        self._write(write)
        self.changes.changed()

    def _raise_if_stepping_down(self) -> None:
        """After a failed write (or word of a newer controller) the term accepts and writes
        nothing more: a later write could otherwise succeed after an earlier one failed."""
        if self._stepping_down.is_set():
            raise TieredError(
                ErrorCode.NOT_CONTROLLER,
                f"controller {self._node_id} is stepping down (epoch {self._epoch}); retry at "
                "the next",
            )

    def _write(self, write: Callable[[], None]) -> None:
        self._raise_if_stepping_down()
        started = time.monotonic()
        try:
            write()
        except MetadataStoreError as e:
            self.step_down("a metadata write failed")
            raise TieredError(
                ErrorCode.NOT_CONTROLLER,
                f"the metadata store write failed ({e}); the controller is stepping down, retry",
            ) from e
        finally:
            self._write_timed(time.monotonic() - started)

    def step_down(self, reason: str) -> None:
        """A write failed, or something showed that another controller is active: stop serving
        soon. The first reason of a term is the one kept."""
        if not self._stepping_down.is_set():
            self._step_down_reason = reason
        self._stepping_down.set()

    @property
    def stepping_down(self) -> bool:
        """A write failed, or a broker heard from a newer controller, since the term began."""
        return self._stepping_down.is_set()

    @property
    def step_down_reason(self) -> str:
        """Why the term is stepping down ("" while it is not)."""
        return self._step_down_reason if self._stepping_down.is_set() else ""

    def wait_stepping_down(self, timeout_s: float) -> bool:
        return self._stepping_down.wait(timeout_s)

    # Called by Leadership alone, under ``lock``.

    def begin(self, epoch: int, image: MetadataImage) -> None:
        self.topic_writes.reset(self._not_controller())
        self.image = image
        self._stepping_down.clear()
        self._epoch = epoch

    def end(self) -> None:
        self._epoch = None
        self.topic_writes.reset(self._not_controller())

    def _not_controller(self) -> TieredError:
        return TieredError(
            ErrorCode.NOT_CONTROLLER, f"controller {self._node_id}'s term ended; retry"
        )


class TermListener(Protocol):
    """What rebuilds and runs the state derived from the image, term by term."""

    def take_over(self, epoch: int, image: MetadataImage) -> None:
        """Under the term's lock, as the term begins: rebuild the derived state from ``image``.
        Raising aborts the activation (the controller resigns and campaigns again)."""

    def serve(self, epoch: int, image: MetadataImage) -> None:
        """Outside the lock, once the epoch is published: start talking to brokers and running
        jobs. Raising aborts the activation."""

    def stand_down(self) -> None:
        """Outside the lock, once the epoch is withdrawn: stop every sender and job."""


class Leadership:
    def __init__(
        self,
        node_id: int,
        endpoint: str,
        store: MetadataStore,
        term: Term,
        listener: TermListener,
        backoff: ExponentialBackoff = CONTROLLER_CAMPAIGN_BACKOFF,
    ) -> None:
        self._node_id = node_id
        self._backoff = backoff
        self._endpoint = endpoint
        self._store = store
        self._term = term
        self._listener = listener
        self._activated = threading.Event()

    def wait_active(self, timeout_s: float) -> bool:
        return self._activated.wait(timeout_s)

    def run(self, stop: threading.Event) -> None:
        """Campaigns, serves while active, and campaigns again after losing leadership. Failed
        campaigns are retried with backoff, from the start again once one activates."""
        backoff = Backoff(self._backoff)
        while not stop.is_set():
            try:
                epoch = self._store.elect(self._node_id, self._endpoint, stop)
            except MetadataStoreError as e:
                delay_s = backoff.next_delay()
                log.warning("Election failed (%s); retrying in %.2fs", e, delay_s)
                stop.wait(delay_s)
                continue
            if epoch is None:
                break
            try:
                self._activate(epoch)
            except Exception:
                delay_s = backoff.next_delay()
                log.exception(
                    "Activation as controller epoch %d failed; resigning, campaigning again in "
                    "%.2fs",
                    epoch,
                    delay_s,
                )
                self.deactivate()
                stop.wait(delay_s)
                continue
            backoff.reset()
            while not (stop.is_set() or self._store.leadership_lost.is_set()):
                if self._term.wait_stepping_down(0.5):
                    break
            reason = (
                "stopping" if stop.is_set() else self._term.step_down_reason or "leadership lost"
            )
            log.warning("Controller epoch %d: stepping down (%s)", epoch, reason)
            self.deactivate()
        self.deactivate()

    def _activate(self, epoch: int) -> None:
        image = self._store.load()
        with self._term.lock:
            self._term.begin(epoch, image)
            self._listener.take_over(epoch, image)
        self._listener.serve(epoch, image)
        self._activated.set()

    def deactivate(self) -> None:
        """Withdraws the epoch, stops what the term started and resigns. Idempotent."""
        self._activated.clear()
        with self._term.lock:
            self._term.end()
        self._listener.stand_down()
        self._store.resign()
