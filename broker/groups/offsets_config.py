"""The broker keys of committed offsets, with Kafka's names and defaults. A bad value stops the
broker with an error naming the key and what is valid."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tiered.properties import int_property

__all__ = ["OffsetsConfig"]


@dataclass(frozen=True)
class OffsetsConfig:
    num_partitions: int = 50
    """``offsets.topic.num.partitions``: of ``__consumer_offsets`` when it is created."""
    segment_bytes: int = 100 * 1024 * 1024
    """``offsets.topic.segment.bytes``."""
    retention_ms: int = 10080 * 60 * 1000
    """``offsets.retention.minutes``: how long a group without members keeps an offset."""
    retention_check_interval_ms: int = 600_000
    """``offsets.retention.check.interval.ms``: how often expired offsets, and offsets of
    deleted topics, are removed."""
    metadata_max_bytes: int = 4096
    """``offset.metadata.max.bytes``: a commit's metadata longer than this is
    OFFSET_METADATA_TOO_LARGE."""

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> OffsetsConfig:
        defaults = cls()
        return cls(
            num_partitions=int_property(
                values, "offsets.topic.num.partitions", defaults.num_partitions, minimum=1
            ),
            segment_bytes=int_property(
                values, "offsets.topic.segment.bytes", defaults.segment_bytes, minimum=1
            ),
            retention_ms=int_property(
                values, "offsets.retention.minutes", defaults.retention_ms // 60_000, minimum=1
            )
            * 60_000,
            retention_check_interval_ms=int_property(
                values,
                "offsets.retention.check.interval.ms",
                defaults.retention_check_interval_ms,
                minimum=1,
            ),
            metadata_max_bytes=int_property(
                values, "offset.metadata.max.bytes", defaults.metadata_max_bytes, minimum=0
            ),
        )
