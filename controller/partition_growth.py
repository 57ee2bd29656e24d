"""Where partitions go: the controller's placement of a new topic's partitions, and the plan of
a CreatePartitions (Kafka's ``ReplicationControlManager.createPartitions``: its checks, in its
order, with its messages). Pure functions of the topic and the brokers; ``AdminOperations``
persists what they return.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tiered.cluster.model import TopicMetadata
from tiered.config import validate_partition_count
from tiered.errors import ErrorCode, TieredError

__all__ = ["PartitionIncrease", "grown_topic", "place_partitions"]

REPLICATION_FACTOR = 1


@dataclass(frozen=True)
class PartitionIncrease:
    """One topic of a CreatePartitions request: its new partition count and, when given, the
    brokers of each new partition (Kafka's nullable ``assignments``: None lets the controller
    place them)."""

    topic: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


def place_partitions(live: Sequence[int], count: int) -> tuple[int, ...]:
    """The brokers of ``count`` new partitions: round robin over the live brokers from a random
    one, as Kafka's placer spreads them. INVALID_REPLICATION_FACTOR when none is live."""
    if not live:
        raise TieredError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {REPLICATION_FACTOR} time(s): All brokers are "
            "currently fenced or in controlled shutdown.",
        )
    start = random.randrange(len(live))
    return tuple(live[(start + p) % len(live)] for p in range(count))


def grown_topic(
    topic: TopicMetadata,
    increase: PartitionIncrease,
    registered: Collection[int],
    live: Sequence[int],
) -> TopicMetadata:
    """``topic`` with the partitions ``increase`` adds, or the ``TieredError`` Kafka answers:
    INVALID_PARTITIONS for a count that is not an increase, INVALID_REPLICA_ASSIGNMENT for
    assignments that do not fit, INVALID_REPLICATION_FACTOR when nothing is live to place on."""
    current = topic.partition_count
    if increase.count == current:
        raise TieredError(
            ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s)."
        )
    if increase.count < current:
        raise TieredError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {topic.name} currently has {current} partition(s); {increase.count} "
            "would not be an increase.",
        )
    validate_partition_count(increase.count)
    additional = increase.count - current
    if increase.assignments is None:
        return topic.with_replicas(topic.replicas + place_partitions(live, additional))
    if len(increase.assignments) != additional:
        raise TieredError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only "
            f"{len(increase.assignments)} assignment(s) were specified.",
        )
    for offset, brokers in enumerate(increase.assignments):
        _check_assignment(current + offset, brokers, registered, live)
    added = tuple(brokers[0] for brokers in increase.assignments)
    return topic.with_replicas(topic.replicas + added)


def _check_assignment(
    partition: int, brokers: Sequence[int], registered: Collection[int], live: Collection[int]
) -> None:
    """Kafka's ``validateManualPartitionAssignment``, then its check that a replica is active."""

    def invalid(message: str) -> TieredError:
        return TieredError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)

    if not brokers:
        raise invalid("The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(brokers):
        if broker_id not in registered:
            raise invalid(
                f"The manual partition assignment includes broker {broker_id}, but no such "
                "broker is registered."
            )
        if broker_id == previous:
            raise invalid(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    if len(brokers) != REPLICATION_FACTOR:
        raise invalid(
            f"The manual partition assignment includes a partition with {len(brokers)} "
            "replica(s), but this is not consistent with previous partitions, which have "
            f"{REPLICATION_FACTOR} replica(s)."
        )
    if not any(b in live for b in brokers):
        raise invalid(
            "All brokers specified in the manual partition assignment for partition "
            f"{partition} are fenced or in controlled shutdown."
        )
