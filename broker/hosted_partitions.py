"""The partitions a broker hosts (replication factor 1: it leads each of them), found by key
(topic id, partition) or by name (the Kafka APIs address partitions by name, and a name owns a
directory under ``log.dirs``), and the stops acked for partitions not hosted yet.

Changes are made one at a time, under ``state_change_lock`` (Kafka's ``replicaStateChangeLock``):
the controller's pushes and the KRaft metadata follower apply at once. Lookups take only the
short ``lock``, so that reads and appends never wait for a change to finish.
"""

from __future__ import annotations

import threading
import uuid

from broker.hosted import HostedPartition, PartitionKey, PartitionStop
from tiered.errors import ErrorCode, TieredError

__all__ = ["HostedPartitions"]


class HostedPartitions:
    """Thread-safe lookups; :meth:`add`, :meth:`discard` and ``stops_before_hosting`` under
    ``state_change_lock``."""

    def __init__(self, node_id: int) -> None:
        self._node_id = node_id
        self._partitions: dict[PartitionKey, HostedPartition] = {}
        # (topic name, partition) -> its key: the local directory a partition owns
        self._by_name: dict[tuple[str, int], PartitionKey] = {}
        # Stops acked for partitions not hosted yet: applied when they are (see broker.tiering).
        self.stops_before_hosting: dict[PartitionKey, PartitionStop] = {}
        self.lock = threading.Lock()
        self.state_change_lock = threading.RLock()

    def get(self, key: PartitionKey) -> HostedPartition | None:
        return self._partitions.get(key)

    def hosted(self, topic_id: uuid.UUID, partition: int) -> HostedPartition:
        """The partition; ``TieredError`` (UNKNOWN_TOPIC_OR_PARTITION) if it is not hosted."""
        found = self._partitions.get((topic_id, partition))
        if found is None:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of topic id {topic_id} is not hosted by broker "
                f"{self._node_id}",
            )
        return found

    def hosted_by_name(self, topic: str, partition: int) -> HostedPartition | None:
        """The partition of the topic named ``topic`` if hosted here, else None."""
        with self.lock:
            key = self._by_name.get((topic, partition))
            return None if key is None else self._partitions.get(key)

    def all(self) -> list[HostedPartition]:
        """Every hosted partition, as hosted now."""
        return list(self._partitions.values())

    def add(self, hosted: HostedPartition) -> None:
        tp = hosted.topic_id_partition
        with self.lock:
            self._partitions[hosted.key] = hosted
            self._by_name[(tp.topic, tp.partition)] = hosted.key

    def discard(self, hosted: HostedPartition) -> None:
        tp = hosted.topic_id_partition
        with self.lock:
            self._partitions.pop(hosted.key, None)
            if self._by_name.get((tp.topic, tp.partition)) == hosted.key:
                del self._by_name[(tp.topic, tp.partition)]

    def journal_text(self, key: PartitionKey) -> str | None:
        """The assignment journal's entry for ``key``: the hosted partition's, else the stop
        acked before hosting it, else None (nothing to keep)."""
        with self.lock:
            hosted = self._partitions.get(key)
        if hosted is not None:
            return hosted.assignment_json()
        stop = self.stops_before_hosting.get(key)
        return None if stop is None else stop.journal_json()

    def close(self) -> None:
        """Closes every hosted partition's log."""
        for hosted in self.all():
            hosted.log.close()
