"""Group commit of topic changes: the alters of many clients, and the disablements that broker
acks complete, share durable writes.

Every topic change (``TopicChange``: before, after, a delete job or None) is *submitted* under
the term's lock, after validation against ``current`` (the image with every change submitted
but not yet applied on top: a second alter of a topic sees the first one). The submitter then
releases the lock and ``wait``s. Whichever waiting thread finds no write in flight takes
everything queued and writes it as one ``update_topics`` call outside the lock, so alters keep
queueing while a write runs; then, under the lock, each submission's ``on_durable`` applies its
committed changes to the image and tells whom it must (in submission order). Nothing is applied
before it is durable, and nothing stays queued while a waiter exists.

A failed write fails what it did not commit: a ZooKeeper flush is several multis
(``PartialWriteError`` says how many changes the first ones committed); those are applied as
any other, the rest of the flush and everything queued behind it fail with NOT_CONTROLLER and
change nothing (the controller steps down: the next one reloads the truth and the clients
retry there).

Other writes (topic creation and deletion, partitions, registrations, jobs, ACLs) are not
grouped: ``settle`` makes every submitted change durable and applied first, so the store sees
all writes in the order the image does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from controller.store import MetadataStore, MetadataStoreError, PartialWriteError, TopicChange
from tiered import failpoints
from tiered.cluster.model import MetadataImage, TopicMetadata
from tiered.errors import ErrorCode, TieredError

__all__ = ["Submission", "TopicWrites"]

OnDurable = Callable[[Sequence[TopicChange]], None]


@dataclass(eq=False)
class Submission:
    """Changes submitted together, and once written, how many committed (a prefix) and why
    the others did not."""

    changes: Sequence[TopicChange]
    on_durable: OnDurable  # under the lock, with the committed prefix (not called if empty)
    # Its waiter's own condition (on the term's lock): a flush wakes the waiters it finished
    # and the one who writes next, not every waiter (a hundred clients' alters each waking a
    # hundred threads a flush cost more than the writes).
    ready: threading.Condition
    done: bool = False
    committed: int = 0
    error: TieredError | None = None

    def failed(self, index: int) -> TieredError | None:
        """The error of ``changes[index]``, None if it committed."""
        return None if index < self.committed else self.error


@dataclass
class _Flush:
    submissions: list[Submission] = field(default_factory=list)

    def changes(self) -> list[TopicChange]:
        return [c for s in self.submissions for c in s.changes]


class TopicWrites:
    """Not to be called holding the term's lock except where a method says so."""

    def __init__(
        self,
        lock: threading.RLock,
        image: Callable[[], MetadataImage],
        write: Callable[[Callable[[], None]], None],
        store: MetadataStore,
        flushed: Callable[[int, int], None] = lambda changes, queued: None,
        applied: Callable[[], None] = lambda: None,
    ) -> None:
        """``write`` runs a store write as ``Term`` does (timed; a failure steps down and raises
        NOT_CONTROLLER); a flush is one ``store.writes.update_topics``; ``flushed(changes,
        queued)`` is told each flush's size and what queued behind it (the metrics); ``applied``
        is called, under the lock, once a flush's committed changes are in the image."""
        self._lock = lock
        self._changed = threading.Condition(lock)  # a write ended (``settle`` waits for it)
        self._image = image
        self._write = write
        self._store = store
        self._flushed = flushed
        self._applied_hook = applied
        self._queued = _Flush()
        self._writing: _Flush | None = None
        self._generation = 0  # raised by reset: a write that spans it is not applied
        # topic name -> its state after the latest submitted change not applied yet
        self._pending: dict[str, TopicMetadata] = {}

    # Under the term's lock.

    def current(self, name: str) -> TopicMetadata | None:
        """The topic as the changes submitted so far leave it (what validation must see)."""
        return self._pending.get(name) or self._image().topics.get(name)

    def submit(self, changes: Sequence[TopicChange], on_durable: OnDurable) -> Submission:
        submission = Submission(list(changes), on_durable, threading.Condition(self._lock))
        if not submission.changes:
            submission.done = True
            return submission
        for _, after, _ in submission.changes:
            self._pending[after.name] = after
        self._queued.submissions.append(submission)
        return submission

    def settle(self) -> None:
        """Every submitted change durable and applied (or failed). Under the lock: a write in
        flight finishes on its own thread (this waits, releasing the lock); queued ones are
        written here, holding it."""
        with self._changed:
            while self._writing is not None or self._queued.submissions:
                if self._writing is None:
                    self._flush(release_lock=False)
                else:
                    self._changed.wait()

    def reset(self, error: TieredError) -> None:
        """As a term ends or begins: whatever was queued fails with ``error`` (nothing of it
        was written)."""
        with self._changed:
            queued, self._queued = self._queued, _Flush()
            self._fail(queued.submissions, error)
            self._pending.clear()
            self._generation += 1

    # Outside the lock.

    def wait(self, submission: Submission) -> Submission:
        """Returns once ``submission`` is durable and applied, or failed: writing it (and
        whatever queued with it) unless a write is in flight, which it then waits for."""
        with submission.ready:
            while not submission.done:
                if self._writing is None:
                    self._flush(release_lock=True)
                else:
                    submission.ready.wait()
        return submission

    # The flush itself, entered holding the lock once (``wait``) or any number of times.

    def _flush(self, *, release_lock: bool) -> None:
        flush, self._queued = self._queued, _Flush()
        self._writing = flush
        generation = self._generation
        changes = flush.changes()
        self._flushed(len(changes), sum(len(s.changes) for s in self._queued.submissions))
        committed = len(changes)
        error: TieredError | None = None
        if release_lock:
            self._lock.release()
        try:
            self._write(lambda: self._write_changes(changes))
        except TieredError as e:
            cause = e.__cause__
            committed = cause.committed if isinstance(cause, PartialWriteError) else 0
            error = e
        finally:
            if release_lock:
                self._lock.acquire()
        if generation != self._generation:  # the term ended meanwhile: the next one reloaded
            committed = 0
            error = TieredError(
                ErrorCode.NOT_CONTROLLER, "the controller's term ended during the write; retry"
            )
        try:
            self._applied(flush, committed, error)
            if committed:
                self._applied_hook()
            if error is not None:  # queued behind a failed write: validated against it
                self.reset(error)
        finally:
            self._writing = None
            self._changed.notify_all()
            if self._queued.submissions:  # its waiter writes next (if it waits already)
                self._queued.submissions[0].ready.notify()

    def _write_changes(self, changes: Sequence[TopicChange]) -> None:
        if failpoints.hit("controller.topic_writes.flush"):
            raise MetadataStoreError("fail point controller.topic_writes.flush: write refused")
        self._store.writes.update_topics(changes)

    def _applied(self, flush: _Flush, committed: int, error: TieredError | None) -> None:
        left = committed
        for submission in flush.submissions:
            mine = min(left, len(submission.changes))
            left -= mine
            submission.committed = mine
            submission.error = (
                None
                if mine == len(submission.changes)
                else error
                or TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, "the topic write did not commit")
            )
            try:
                if mine:
                    submission.on_durable(submission.changes[:mine])
            finally:
                for _, after, _ in submission.changes:
                    if self._pending.get(after.name) is after:
                        del self._pending[after.name]
                submission.done = True
                submission.ready.notify()

    def _fail(self, submissions: Sequence[Submission], error: TieredError) -> None:
        for submission in submissions:
            submission.committed, submission.error, submission.done = 0, error, True
            submission.ready.notify()
