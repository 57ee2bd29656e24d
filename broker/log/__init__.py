"""The broker's local segment log: record format, segments with sparse indexes, the leader
epoch cache and the per-partition ``Log`` that ties them together with crash recovery."""

from broker.log.errors import (
    CorruptCheckpointError,
    CorruptLogError,
    CorruptRecordError,
    OffsetOutOfRangeError,
    TruncatedRecordError,
)
from broker.log.leader_epoch import LeaderEpochCache
from broker.log.log import Log, LogConfig
from broker.log.records import Record, decode_record, encode_record
from broker.log.segment import LogSegment

__all__ = [
    "CorruptCheckpointError",
    "CorruptLogError",
    "CorruptRecordError",
    "LeaderEpochCache",
    "Log",
    "LogConfig",
    "LogSegment",
    "OffsetOutOfRangeError",
    "Record",
    "TruncatedRecordError",
    "decode_record",
    "encode_record",
]
