"""Disablements: every topic's disablement on the active controller, from DISABLING persisted to
DISABLED (KIP-950's ``topicsToBeDeleted``-style record of what is still owed).

For every topic in DISABLING it holds the partitions whose broker has not yet acked
DisableRemoteTopic for the topic's current tiered epoch, grouped by broker so that one request
per broker carries many topics. It is derived state: a new term rebuilds it from the topics that
are DISABLING in the image, with every partition owed again (brokers apply a repeated request
idempotently).

Its mutators are the events of a disablement, each called under the term's lock:

* ``term_started``: every DISABLING topic of the image is owed again;
* ``disabling_persisted``: an alter's DISABLING is durable; every hosting broker owes an ack;
* ``broker_acked``: a broker answered a DisableRemoteTopic. Whether an ack counts is decided
  here alone: sent in this term (controller epoch), for this topic (its id: a topic re-created
  under the same name owes its own acks) and for its current tiered epoch. The last ack of a
  topic submits DISABLED (with the delete policy, its bulk delete job) to the group commit;
* ``topic_deleted``: a deleted topic is owed nothing.

What a broker's channel sends comes from ``owed_by``; describes read ``progress``, the metrics
``backlogs``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from controller.delete_jobs import DeleteJobSupervisor
from controller.delete_schedule import broker_stop_policy, job_at_disabled
from controller.leadership import Term
from controller.metrics import BrokerBacklog
from controller.store import TopicChange
from controller.tiered_state import complete_disablement
from controller.topic_writes import Submission
from tiered import failpoints
from tiered.cluster.model import DeleteJobState, TieredState, TopicMetadata
from tiered.config import RemoteLogDisablePolicy, disable_policy
from tiered.errors import TieredError

__all__ = ["DisableEntry", "Disablements"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DisableEntry:
    """One partition's stop, as sent to its broker."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    tiered_epoch: int
    policy: RemoteLogDisablePolicy


@dataclass
class _Disabling:
    topic: TopicMetadata
    policy: RemoteLogDisablePolicy  # the brokers' stop (``broker_stop_policy``)
    owed: dict[int, set[int]]  # broker -> partitions not yet acked
    queued_at: float  # monotonic seconds


class Disablements:
    """Not thread-safe: every method runs under the term's lock."""

    def __init__(
        self,
        term: Term,
        jobs: DeleteJobSupervisor,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        """``wall_clock``: seconds since the epoch, the clock a delayed job's start is on."""
        self._term = term
        self._jobs = jobs
        self._clock = clock
        self._wall_clock = wall_clock
        self._topics: dict[str, _Disabling] = {}
        # broker -> topics it owes acks for, in the order they were queued (the first is the
        # oldest), and how many entries that is: a backlog costs O(1) per broker to read.
        self._by_broker: dict[int, dict[str, None]] = defaultdict(dict)
        self._entries: dict[int, int] = defaultdict(int)
        self._requeued = _RequeuedDisablements(())

    def __len__(self) -> int:
        return len(self._topics)

    def __contains__(self, topic: str) -> bool:
        return topic in self._topics

    # ------------------------------------------------------------------------------ events

    def term_started(self, topics: Iterable[TopicMetadata]) -> int:
        """Every partition of every DISABLING topic is owed again. Returns how many topics."""
        self._topics.clear()
        self._by_broker.clear()
        self._entries.clear()
        disabling = [t for t in topics if t.tiered_state is TieredState.DISABLING]
        for topic in disabling:
            self.disabling_persisted(topic)
        self._requeued = _RequeuedDisablements(disabling)
        return len(disabling)

    def disabling_persisted(self, topic: TopicMetadata) -> None:
        """Every partition of a DISABLING topic is owed for its current epoch (replacing what
        was owed for an earlier one)."""
        if topic.tiered_state is not TieredState.DISABLING:
            raise ValueError(f"topic {topic.name} is {topic.tiered_state.value}, not DISABLING")
        self._forget(topic.name)
        owed: dict[int, set[int]] = defaultdict(set)
        for partition, broker in enumerate(topic.replicas):
            owed[broker].add(partition)
        self._topics[topic.name] = _Disabling(
            topic, broker_stop_policy(topic.configs), dict(owed), self._clock()
        )
        for broker, partitions in owed.items():
            self._by_broker[broker][topic.name] = None
            self._entries[broker] += len(partitions)

    def broker_acked(
        self,
        broker_id: int,
        controller_epoch: int,
        entries: Sequence[DisableEntry],
        errors: Sequence[TieredError | None],
    ) -> Submission | None:
        """A broker answered a DisableRemoteTopic: ``errors[i]`` is None when it stopped
        ``entries[i]``'s partition. Topics whose last ack this was become DISABLED: returns
        their write, submitted, for the caller to ``wait`` on outside the lock."""
        if controller_epoch != self._term.active_epoch:
            return None  # sent by an earlier term: this one owes its own acks
        completed: list[tuple[TopicMetadata, RemoteLogDisablePolicy]] = []
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
            if not self._counts(broker_id, entry):
                continue
            disabling = self._topics[entry.topic]
            partitions = disabling.owed[broker_id]
            partitions.discard(entry.partition)
            self._owe_fewer(broker_id, 1)
            if not partitions:
                del disabling.owed[broker_id]
                self._owe_nothing_for(broker_id, entry.topic)
            if disabling.owed:
                failpoints.hit("controller.disable.some_acked")
                continue
            del self._topics[entry.topic]
            completed.append((disabling.topic, disabling.policy))
        self._term.changes.changed()  # the acks counted show in a describe
        return self._submit_disabled(completed) if completed else None

    def topic_deleted(self, name: str) -> None:
        self._forget(name)
        self._requeued.forget(name)

    # ------------------------------------------------------------------------------ queries

    def owed_by(self, broker: int, limit: int) -> list[DisableEntry]:
        """Up to ``limit`` entries this broker still owes, across topics."""
        entries: list[DisableEntry] = []
        for name in sorted(self._by_broker.get(broker, ())):
            disabling = self._topics[name]
            topic = disabling.topic
            for partition in sorted(disabling.owed.get(broker, ())):
                entries.append(
                    DisableEntry(
                        name, topic.topic_id, partition, topic.tiered_epoch, disabling.policy
                    )
                )
                if len(entries) >= limit:
                    return entries
        return entries

    def progress(self, topic: TopicMetadata) -> tuple[int, int, frozenset[int]]:
        """(acks owed, acks in all, partitions still owed) of a topic of the image. A DISABLING
        topic this term no longer tracks has had its last ack and its DISABLED write is in
        flight: every partition acked. Zeros for a topic that is not DISABLING."""
        disabling = self._topics.get(topic.name)
        if disabling is None:
            if topic.tiered_state is TieredState.DISABLING:
                return 0, topic.partition_count, frozenset()
            return 0, 0, frozenset()
        owed = frozenset(p for partitions in disabling.owed.values() for p in partitions)
        return len(owed), disabling.topic.partition_count, owed

    def backlogs(self) -> dict[int, BrokerBacklog]:
        """Every broker that owes acks, with its backlog: O(brokers)."""
        now = self._clock()
        return {
            broker: BrokerBacklog(
                count, now - self._topics[next(iter(self._by_broker[broker]))].queued_at
            )
            for broker, count in self._entries.items()
        }

    # ------------------------------------------------------------------------------ inside

    def _counts(self, broker_id: int, entry: DisableEntry) -> bool:
        """Whether an ack is one this term still waits for: the same topic (by id), its
        current tiered epoch, a partition that broker still owes."""
        disabling = self._topics.get(entry.topic)
        return (
            disabling is not None
            and disabling.topic.topic_id == entry.topic_id
            and disabling.topic.tiered_epoch == entry.tiered_epoch
            and entry.partition in disabling.owed.get(broker_id, ())
        )

    def _submit_disabled(
        self, acked: Sequence[tuple[TopicMetadata, RemoteLogDisablePolicy]]
    ) -> Submission:
        """DISABLED (and, with the delete policy, the bulk delete job: at once, or SCHEDULED
        after the topic's delete delay) for every topic whose last ack one broker response
        brought, with the policy its brokers stopped with, as one group of topic changes: a
        response acking 10k topics costs one fsync'd batch (KRaft) or a few multis (ZooKeeper),
        shared with the alters and completions that arrive meanwhile."""
        writes = self._term.topic_writes
        changes: list[TopicChange] = []
        now_ms = int(self._wall_clock() * 1000)
        for topic, stopped_with in acked:
            # As changes submitted before it leave the topic (an alter of its retention, say).
            current = writes.current(topic.name) or topic
            after = complete_disablement(current)
            changes.append((current, after, job_at_disabled(after, stopped_with, now_ms)))
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
                    "Topic %s: bulk delete of remote data below tiered epoch %d %s",
                    after.name,
                    after.tiered_epoch,
                    f"scheduled to start at {job.starts_at_ms} ms since the epoch"
                    if job.state is DeleteJobState.SCHEDULED
                    else "queued",
                )

    def _forget(self, topic: str) -> None:
        disabling = self._topics.pop(topic, None)
        if disabling is None:
            return
        for broker, partitions in disabling.owed.items():
            self._owe_fewer(broker, len(partitions))
            self._owe_nothing_for(broker, topic)

    def _owe_fewer(self, broker: int, count: int) -> None:
        left = self._entries[broker] - count
        if left:
            self._entries[broker] = left
        else:
            del self._entries[broker]

    def _owe_nothing_for(self, broker: int, topic: str) -> None:
        names = self._by_broker.get(broker)
        if names is not None:
            names.pop(topic, None)
            if not names:
                del self._by_broker[broker]


class _RequeuedDisablements:
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
