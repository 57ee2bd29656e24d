"""Persists what a broker hosts (``broker.assignment_journal``: a snapshot and a journal in the
log dir), so that a broker restarted after a crash serves its partitions again before the
controller re-sends anything.

A controller's request is answered only once what it changed is persisted (:meth:`persist`).
Changes applied from the KRaft metadata log, which a restarted broker replays from the start and
nobody is acked for, are persisted together within ``PERSIST_DELAY_S`` by one background thread
(:meth:`persist_soon`), which backs off while the disk fails. Only the partitions a change
touched are serialized, and the journal appends only the entries that changed: persisting costs
what changed, not what the broker hosts.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from broker.assignment_journal import AssignmentJournal
from broker.hosted import PartitionKey
from broker.hosted_partitions import HostedPartitions
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import ASSIGNMENT_PERSIST_BACKOFF

__all__ = ["PERSIST_DELAY_S", "AssignmentPersister"]

log = logging.getLogger(__name__)

# How long changes applied from the metadata log wait to be persisted together (a burst of
# metadata batches then costs one append to the assignment journal, not one each).
PERSIST_DELAY_S = 0.05


class AssignmentPersister:
    """``touched``, ``persist`` and ``persist_soon`` under the partitions' state change lock;
    :meth:`load` once, before them; :meth:`close` when done."""

    def __init__(
        self,
        journal: AssignmentJournal,
        partitions: HostedPartitions,
        backoff: ExponentialBackoff = ASSIGNMENT_PERSIST_BACKOFF,
    ) -> None:
        self._journal = journal
        self._partitions = partitions
        self.backoff = backoff
        # Partitions hosted, re-configured, stopped or removed since the last persist.
        self._touched: set[PartitionKey] = set()
        self._persist_wanted = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def load(self) -> list[dict[str, Any]]:
        """The journal's entries, for the broker to host again."""
        return self._journal.load()

    def touched(self, key: PartitionKey) -> None:
        """The entry of ``key`` may have changed: the next persist writes it if it did."""
        self._touched.add(key)

    def loaded(self) -> None:
        """What is hosted now is what the journal holds (just restored from it)."""
        self._touched.clear()

    def persist(self) -> None:
        """Appends the entries of the partitions touched since the last call. One writer at a
        time: the controller's pushes and the metadata follower both persist, under the state
        change lock."""
        with self._partitions.state_change_lock:
            if not self._touched:
                return
            changes = {key: self._partitions.journal_text(key) for key in self._touched}
            self._journal.write(changes)  # what did not change is not written
            self._touched.clear()

    def persist_soon(self) -> None:
        """Persists within ``PERSIST_DELAY_S``, together with the changes that follow."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._persist_later, name="broker-assignments-persister", daemon=True
            )
            self._thread.start()
        self._persist_wanted.set()

    def _persist_later(self) -> None:
        backoff = Backoff(self.backoff)
        while True:
            self._persist_wanted.wait()
            if self._closed.wait(PERSIST_DELAY_S):
                return  # close() persists what is owed
            self._persist_wanted.clear()
            try:
                self.persist()
                backoff.reset()
                continue
            except OSError:
                delay_s = backoff.next_delay()
                log.exception("Could not persist the assignments; retrying in %.2fs", delay_s)
                self._persist_wanted.set()
            self._closed.wait(delay_s)

    def close(self) -> None:
        """Stops the thread, persists what it still owed, and closes the journal."""
        self._closed.set()
        self._persist_wanted.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            self.persist()
        except OSError:
            log.exception("Could not persist the assignments on close")
        self._journal.close()
