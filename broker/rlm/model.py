"""The RemoteLogManager's value types: its configuration, a topic's retention, what it needs of a
partition it leads, and its per-topic counters."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from broker.log import Log
from broker.rlm.partition_tiering import PartitionTiering, TieringState
from tiered.api import RemoteStorageException, TopicIdPartition
from tiered.config import TopicConfig


@dataclass(frozen=True)
class RemoteLogManagerConfig:
    broker_id: int
    copier_threads: int = 10
    expiration_threads: int = 10
    reader_threads: int = 10
    task_interval_s: float = 30.0
    custom_metadata_max_bytes: int = 128
    stop_wait_s: float = 120.0  # how long stop_partitions waits for an in-flight copy


class CustomMetadataSizeLimitExceededException(RemoteStorageException):
    """KIP-917: a RemoteStorageManager returned more custom metadata than the broker accepts."""


@dataclass(frozen=True)
class RetentionConfig:
    """A topic's retention, Kafka semantics: -1 is unlimited; the local settings' -2 means "the
    same as the total one"."""

    retention_ms: int = -1
    retention_bytes: int = -1
    local_retention_ms: int = -2
    local_retention_bytes: int = -2

    @classmethod
    def of(cls, topic: TopicConfig) -> RetentionConfig:
        """The retention of a partition of a topic with these configs."""
        return cls(
            retention_ms=topic.retention_ms,
            retention_bytes=topic.retention_bytes,
            local_retention_ms=topic.local_retention_ms,
            local_retention_bytes=topic.local_retention_bytes,
        )

    @property
    def effective_local_ms(self) -> int:
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_bytes(self) -> int:
        return (
            self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes
        )


class TieredPartition:
    """What the RemoteLogManager needs of a partition this broker leads: its log, its retention,
    and its tiering (epoch and state; copying at tiered epoch 0 unless given), which the
    RemoteLogManager reads and never keeps a copy of."""

    def __init__(
        self,
        topic_id_partition: TopicIdPartition,
        log: Log,
        *,
        retention: RetentionConfig | None = None,
        tiering: PartitionTiering | None = None,
    ) -> None:
        self.topic_id_partition = topic_id_partition
        self.log = log
        self.retention = retention or RetentionConfig()
        self.tiering = tiering or PartitionTiering(topic_id_partition, 0, TieringState.COPYING)


@dataclass
class RemoteLogMetrics:
    """Counters per topic (exported by the broker's metrics endpoint)."""

    copy_requests: Counter[str] = field(default_factory=Counter)
    copy_bytes: Counter[str] = field(default_factory=Counter)
    copy_errors: Counter[str] = field(default_factory=Counter)
    fetch_requests: Counter[str] = field(default_factory=Counter)
    fetch_bytes: Counter[str] = field(default_factory=Counter)
    delete_requests: Counter[str] = field(default_factory=Counter)
