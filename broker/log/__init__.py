"""The broker's local segment log: Kafka record batches v2 in segments with sparse indexes, the
leader epoch cache, the idempotent producers' state and the per-partition ``Log`` that ties them
together with crash recovery."""

from broker.log.batches import BatchRead
from broker.log.errors import (
    CorruptCheckpointError,
    CorruptLogError,
    CorruptSegmentError,
    OffsetOutOfRangeError,
    UnsupportedLogFormatError,
)
from broker.log.leader_epoch import LeaderEpochCache
from broker.log.log import DELETE_TO_HIGH_WATERMARK, Log, LogConfig
from broker.log.producer_state import BatchMetadata, ProducerState
from broker.log.results import AppendInfo, TimestampOffset
from broker.log.segment import LogSegment

__all__ = [
    "DELETE_TO_HIGH_WATERMARK",
    "AppendInfo",
    "BatchMetadata",
    "BatchRead",
    "CorruptCheckpointError",
    "CorruptLogError",
    "CorruptSegmentError",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "LogSegment",
    "OffsetOutOfRangeError",
    "ProducerState",
    "TimestampOffset",
    "UnsupportedLogFormatError",
]
