"""Disablement completion: the DISABLING topics of the active term, from enqueue to DISABLED.

Admin operations enqueue a topic once DISABLING is persisted; the broker registry hands out what
each broker owes (``owed_by``) and reports its answers (``acked``); once a topic's last partition
is acked this persists DISABLED (with the bulk delete job under the delete policy) and hands the
job to the delete-job supervisor. The queue itself is ``controller.disablement``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

from controller.delete_jobs import DeleteJobSupervisor
from controller.disablement import DisableEntry, DisablementQueue
from controller.leadership import Term
from controller.store import MetadataStore, TopicChange
from controller.tiered_state import complete_disablement
from controller.topic_writes import Submission
from tiered import failpoints
from tiered.cluster.model import DeleteJob, TieredState, TopicMetadata
from tiered.config import RemoteLogDisablePolicy, disable_policy
from tiered.errors import TieredError

log = logging.getLogger(__name__)


class RequeuedDisablements:
    """What a newly active controller owes from its predecessor: every partition of every topic
    that was DISABLING when it took over. It logs once every one of them has been re-sent (a
    broker answered a DisableRemoteTopic carrying it, ack or error) and once every such topic is
    DISABLED, with the time since activation: how long a failover mid-DISABLING holds them up."""

    def __init__(self, topics: Sequence[TopicMetadata]) -> None:
        self.started = time.monotonic()
        self.partitions = sum(t.partition_count for t in topics)
        self.topics = len(topics)
        self._unsent: dict[str, set[int]] = {t.name: set(range(t.partition_count)) for t in topics}
        self._undone = {t.name for t in topics}
        self._brokers: set[int] = set()

    def sent(self, broker_id: int, topic: str, partition: int) -> None:
        partitions = self._unsent.get(topic)
        if partitions is None:
            return
        self._brokers.add(broker_id)
        partitions.discard(partition)
        if not partitions:
            del self._unsent[topic]
            if not self._unsent:
                log.info(
                    "Re-sent %d outstanding disablements (every partition of the %d topics "
                    "DISABLING at activation) to brokers %s in %.3fs since activation",
                    self.partitions,
                    self.topics,
                    sorted(self._brokers),
                    time.monotonic() - self.started,
                )

    def done(self, topic: str) -> None:
        if topic not in self._undone:
            return
        self._undone.discard(topic)
        if not self._undone:
            log.info(
                "All %d topics DISABLING at activation are DISABLED, %.3fs since activation",
                self.topics,
                time.monotonic() - self.started,
            )

    def forget(self, topic: str) -> None:
        """A deleted topic is owed nothing any more."""
        if self._unsent.pop(topic, None) is not None and not self._unsent:
            log.info("Every outstanding disablement re-sent (the last ones' topics were deleted)")
        self.done(topic)


class DisableCompletion:
    """Every method runs under the term's lock."""

    def __init__(self, term: Term, store: MetadataStore, jobs: DeleteJobSupervisor) -> None:
        self._term = term
        self._store = store
        self._jobs = jobs
        self.queue = DisablementQueue()
        self._requeued = RequeuedDisablements(())

    def take_over(self, topics: Iterable[TopicMetadata]) -> int:
        """As a term begins: every partition of every DISABLING topic is owed again (brokers
        apply a repeated request idempotently). Returns how many topics that is."""
        self.queue = DisablementQueue()
        disabling = [t for t in topics if t.tiered_state is TieredState.DISABLING]
        for topic in disabling:
            self.queue.enqueue(topic)
        self._requeued = RequeuedDisablements(disabling)
        return len(disabling)

    def enqueue(self, topic: TopicMetadata) -> None:
        """DISABLING was persisted for ``topic``: every hosting broker owes an ack."""
        self.queue.enqueue(topic)

    def forget(self, name: str) -> None:
        """The topic was deleted."""
        self.queue.remove(name)
        self._requeued.forget(name)

    def owed_by(self, broker_id: int, limit: int) -> list[DisableEntry]:
        return self.queue.owed_by(broker_id, limit)

    def progress(self, name: str) -> tuple[int, int, frozenset[int]]:
        """(acks owed, acks in all, partitions still owed) of a topic; zeros when none is owed."""
        owed, total = self.queue.progress(name) or (0, 0)
        return owed, total, frozenset(self.queue.owed_partitions(name))

    def acked(
        self, broker_id: int, entries: Sequence[DisableEntry], errors: Sequence[TieredError | None]
    ) -> Submission | None:
        """A broker answered a DisableRemoteTopic of this term: ``errors[i]`` is None when it
        stopped ``entries[i]``'s partition. Topics whose last ack this was become DISABLED:
        returns their write, submitted, for the caller to ``wait`` on outside the lock."""
        completed: list[TopicMetadata] = []
        for entry, error in zip(entries, errors, strict=True):
            self._requeued.sent(broker_id, entry.topic, entry.partition)
            if error is not None:
                log.warning(
                    "Broker %d could not stop %s-%d for tiered epoch %d: %s",
                    broker_id,
                    entry.topic,
                    entry.partition,
                    entry.tiered_epoch,
                    error,
                )
                continue
            done = self.queue.ack(broker_id, entry)
            if done is not None:
                completed.append(done)
            elif entry.topic in self.queue:
                failpoints.hit("controller.disable.some_acked")
        self._term.changes.changed()  # the acks counted show in a describe
        return self._complete(completed) if completed else None

    def _complete(self, acked: Sequence[TopicMetadata]) -> Submission | None:
        """Submits DISABLED (and, with the delete policy, the bulk delete job) for every topic
        whose last ack one broker response brought, as one group of topic changes: a response
        acking 10k topics costs one fsync'd batch (KRaft) or a few multis (ZooKeeper), and it
        shares them with the alters and completions that arrive meanwhile."""
        writes = self._term.topic_writes
        changes: list[TopicChange] = []
        for topic in acked:
            current = writes.current(topic.name)
            if current is None or current.topic_id != topic.topic_id:
                continue
            after = complete_disablement(current)
            job = None
            if disable_policy(after.configs) is RemoteLogDisablePolicy.DELETE:
                job = DeleteJob(
                    after.name, after.topic_id, after.tiered_epoch, after.partition_count
                )
            changes.append((current, after, job))
        if not changes:
            return None
        failpoints.hit("controller.disable.all_acked")
        return writes.submit(changes, self._disabled)

    def _disabled(self, changes: Sequence[TopicChange]) -> None:
        """DISABLED is durable for these topics (under the lock)."""
        for _, after, job in changes:
            self._term.image.put_topic(after)
            self._requeued.done(after.name)
            log.info(
                "Topic %s: every broker acked tiered epoch %d; DISABLED (policy %s)",
                after.name,
                after.tiered_epoch,
                disable_policy(after.configs).value,
            )
            if job is not None:
                self._jobs.queued(job)
                log.info(
                    "Topic %s: bulk delete of remote data below tiered epoch %d queued",
                    after.name,
                    after.tiered_epoch,
                )
