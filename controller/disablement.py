"""The disablement queue: KIP-950's ``topicsToBeDeleted``-style record of what is still owed.

For every topic in DISABLING it holds the partitions whose broker has not yet acked
DisableRemoteTopic for the topic's current tiered epoch, grouped by broker so that one request
per broker can carry many topics. It is derived state: a newly active controller rebuilds it from
the topics that are DISABLING in the metadata store, with every partition owed again (brokers
apply a repeated request idempotently).
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tiered.cluster.model import TieredState, TopicMetadata
from tiered.config import RemoteLogDisablePolicy, disable_policy


@dataclass(frozen=True)
class DisableEntry:
    """One partition's stop, as sent to its broker."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    tiered_epoch: int
    policy: RemoteLogDisablePolicy


@dataclass
class _PendingTopic:
    topic: TopicMetadata
    policy: RemoteLogDisablePolicy
    owed: dict[int, set[int]]  # broker -> partitions not yet acked
    total: int
    queued_at: float  # monotonic seconds


@dataclass(frozen=True)
class BrokerBacklog:
    """What one broker owes: DisableRemoteTopic entries not yet acked, and how long the oldest
    has waited (since this controller's term queued it)."""

    entries: int
    oldest_age_s: float


class DisablementQueue:
    """Not thread-safe: the controller calls it under its lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._topics: dict[str, _PendingTopic] = {}
        # broker -> topics it owes acks for, in the order they were queued (the first is the
        # oldest), and how many entries that is: a backlog costs O(1) per broker to read.
        self._by_broker: dict[int, dict[str, None]] = defaultdict(dict)
        self._entries: dict[int, int] = defaultdict(int)

    def __len__(self) -> int:
        return len(self._topics)

    def __contains__(self, topic: str) -> bool:
        return topic in self._topics

    def enqueue(self, topic: TopicMetadata) -> None:
        """Owes every partition of a DISABLING topic for its current epoch (replacing anything
        owed for an earlier epoch)."""
        if topic.tiered_state is not TieredState.DISABLING:
            raise ValueError(f"topic {topic.name} is {topic.tiered_state.value}, not DISABLING")
        self.remove(topic.name)
        owed: dict[int, set[int]] = defaultdict(set)
        for partition, broker in enumerate(topic.replicas):
            owed[broker].add(partition)
        self._topics[topic.name] = _PendingTopic(
            topic, disable_policy(topic.configs), dict(owed), topic.partition_count, self._clock()
        )
        for broker, partitions in owed.items():
            self._by_broker[broker][topic.name] = None
            self._entries[broker] += len(partitions)

    def remove(self, topic: str) -> None:
        pending = self._topics.pop(topic, None)
        if pending is None:
            return
        for broker, partitions in pending.owed.items():
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

    def owed_by(self, broker: int, limit: int) -> list[DisableEntry]:
        """Up to ``limit`` entries this broker still owes, across topics."""
        entries: list[DisableEntry] = []
        for name in sorted(self._by_broker.get(broker, ())):
            pending = self._topics[name]
            for partition in sorted(pending.owed.get(broker, ())):
                entries.append(
                    DisableEntry(
                        name,
                        pending.topic.topic_id,
                        partition,
                        pending.topic.tiered_epoch,
                        pending.policy,
                    )
                )
                if len(entries) >= limit:
                    return entries
        return entries

    def brokers_owing(self) -> set[int]:
        return set(self._by_broker)

    def ack(self, broker: int, entry: DisableEntry) -> TopicMetadata | None:
        """Records one acked partition. Returns the topic when this was its last owed ack (the
        caller then persists DISABLED); acks for another epoch or an unknown topic are ignored."""
        pending = self._topics.get(entry.topic)
        if (
            pending is None
            or pending.topic.topic_id != entry.topic_id
            or pending.topic.tiered_epoch != entry.tiered_epoch
        ):
            return None
        partitions = pending.owed.get(broker)
        if partitions is None or entry.partition not in partitions:
            return None
        partitions.discard(entry.partition)
        self._owe_fewer(broker, 1)
        if not partitions:
            del pending.owed[broker]
            self._owe_nothing_for(broker, entry.topic)
        if pending.owed:
            return None
        del self._topics[entry.topic]
        return pending.topic

    def backlogs(self) -> dict[int, BrokerBacklog]:
        """Every broker that owes acks, with its backlog: O(brokers)."""
        now = self._clock()
        return {
            broker: BrokerBacklog(
                count, now - self._topics[next(iter(self._by_broker[broker]))].queued_at
            )
            for broker, count in self._entries.items()
        }

    def progress(self, topic: str) -> tuple[int, int] | None:
        """(partitions still owed, total) of a queued topic, else None."""
        pending = self._topics.get(topic)
        if pending is None:
            return None
        return sum(len(p) for p in pending.owed.values()), pending.total

    def owed_partitions(self, topic: str) -> set[int]:
        pending = self._topics.get(topic)
        if pending is None:
            return set()
        return {p for partitions in pending.owed.values() for p in partitions}
