"""Which of the partitions a Produce, Fetch or ListOffsets request names this broker serves, and
Kafka's error for each one it does not.

A hosted partition is found by name among those hosted here (no controller call). Only the
others are looked up in the cluster view, once per request for all of them: a partition another
broker leads is NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and goes there), one
that does not exist is UNKNOWN_TOPIC_OR_PARTITION, as a Kafka broker answers from its metadata
cache. Before any of that, a topic the requester may not use so is TOPIC_AUTHORIZATION_FAILED
(its existence is not told).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from kio.schema.errors import ErrorCode as KafkaErrorCode

from broker.cluster_view import ClusterView, TopicPlacement
from broker.hosted import HostedPartition
from broker.kafka.convert import KafkaError, kafka_error
from tiered.errors import TieredError
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType
from tiered.security.principal import RequestContext

__all__ = [
    "LEADER_EPOCH",
    "HostedByName",
    "PartitionLookup",
    "Resolved",
    "guarded",
    "leader_epoch_error",
]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Replication factor 1: a partition's leader never changes, and Metadata answers epoch 0.
LEADER_EPOCH = 0
_NO_EPOCH = -1

TopicPartition = tuple[str, int]
Resolved = HostedPartition | KafkaError


class HostedByName(Protocol):
    def hosted_by_name(self, topic: str, partition: int) -> HostedPartition | None: ...


class PartitionLookup:
    def __init__(
        self, hosted: HostedByName, view: ClusterView, node_id: int, access: AccessControl
    ) -> None:
        self._hosted = hosted
        self._view = view
        self._node_id = node_id
        self._access = access

    def resolve(
        self,
        wanted: Iterable[TopicPartition],
        requester: RequestContext,
        operation: AclOperation,
    ) -> dict[TopicPartition, Resolved]:
        """Each partition: hosted here, or the (code, message) a client gets for it. Every
        topic is authorized once for ``operation`` (Write, Read, Describe)."""
        found: dict[TopicPartition, Resolved] = {}
        missing: list[TopicPartition] = []
        denials: dict[str, KafkaError | None] = {}
        for topic, partition in wanted:
            if topic not in denials:
                denial = self._access.denial(requester, operation, ResourceType.TOPIC, topic)
                denials[topic] = None if denial is None else kafka_error(denial)
            refused = denials[topic]
            if refused is not None:
                found[(topic, partition)] = refused
                continue
            hosted = self._hosted.hosted_by_name(topic, partition) if partition >= 0 else None
            if hosted is None:
                missing.append((topic, partition))
            else:
                found[(topic, partition)] = hosted
        if missing:
            found.update(self._errors(missing))
        return found

    def _errors(self, missing: list[TopicPartition]) -> dict[TopicPartition, KafkaError]:
        try:
            topics = self._view.topics(list(dict.fromkeys(t for t, _ in missing))).topics
        except TieredError as e:
            # Retriable either way: the client refreshes its metadata and comes back.
            message = f"broker {self._node_id} cannot reach the controller: {e.message}"
            return dict.fromkeys(missing, (KafkaErrorCode.not_leader_or_follower, message))
        return {(t, p): self._error(t, p, topics.get(t)) for t, p in missing}

    def _error(
        self, topic: str, partition: int, placement: TopicPlacement | TieredError | None
    ) -> KafkaError:
        if isinstance(placement, TopicPlacement) and 0 <= partition < len(placement.replicas):
            leader = placement.replicas[partition]
            if leader == self._node_id:
                return (
                    KafkaErrorCode.not_leader_or_follower,
                    f"partition {partition} of topic {topic!r} is placed on broker "
                    f"{self._node_id}, which does not host it yet",
                )
            return (
                KafkaErrorCode.not_leader_or_follower,
                f"partition {partition} of topic {topic!r} is led by broker {leader}, "
                f"not {self._node_id}",
            )
        if isinstance(placement, TopicPlacement):
            return (
                KafkaErrorCode.unknown_topic_or_partition,
                f"topic {topic!r} has partitions 0..{len(placement.replicas) - 1}, not {partition}",
            )
        return KafkaErrorCode.unknown_topic_or_partition, f"topic {topic!r} does not exist"


def leader_epoch_error(current_leader_epoch: int) -> KafkaError | None:
    """Kafka's check of the epoch a client believes current: -1 (not known) or ours is fine;
    a newer one means this broker is behind (UNKNOWN_LEADER_EPOCH), an older one that the
    client is (FENCED_LEADER_EPOCH)."""
    if current_leader_epoch in (_NO_EPOCH, LEADER_EPOCH):
        return None
    if current_leader_epoch > LEADER_EPOCH:
        return (
            KafkaErrorCode.unknown_leader_epoch,
            f"leader epoch {current_leader_epoch} is newer than {LEADER_EPOCH}",
        )
    return (
        KafkaErrorCode.fenced_leader_epoch,
        f"leader epoch {current_leader_epoch} is older than {LEADER_EPOCH}",
    )


def guarded(action: Callable[[], _T]) -> _T | KafkaError:
    """``action()``'s result, or what its failure means to a client: a domain error's own code,
    a storage failure KAFKA_STORAGE_ERROR, a log closed meanwhile (its partition was removed
    while the request ran) NOT_LEADER_OR_FOLLOWER, so that the client refreshes its metadata."""
    try:
        return action()
    except TieredError as e:
        return kafka_error(e)
    except OSError as e:
        _log.error("storage failure serving a Kafka request: %s", e)
        return KafkaErrorCode.kafka_storage_error, f"{type(e).__name__}: {e}"
    except ValueError as e:
        _log.warning("a Kafka request met a partition being removed: %s", e)
        return KafkaErrorCode.not_leader_or_follower, str(e)
