"""Kafka record batches v2 for tests: produce payloads built as a producer builds them, and the
records of fetched batches read back with the leader epoch of their batch."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker.log import Log, LogConfig
from tiered.kafka.compression import Codec
from tiered.kafka.record_batch import iter_batches
from tiered.kafka.records import Record, build_batch, decode_batch


@dataclass(frozen=True)
class LoggedRecord:
    """A record as a log holds it: its offset and the leader epoch of its batch."""

    offset: int
    timestamp_ms: int
    leader_epoch: int
    key: bytes | None
    value: bytes | None


def batch(
    key: bytes | None,
    value: bytes | None,
    timestamp_ms: int | None = None,
    codec: Codec = Codec.NONE,
) -> bytes:
    """A batch of one record, stamped now unless ``timestamp_ms`` is given (the broker keeps a
    batch's timestamps as the producer set them, and retention.ms expires old ones)."""
    timestamp = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return build_batch([Record(key, value, timestamp=timestamp)], codec)


def batch_size(key: bytes | None, value: bytes | None) -> int:
    """Bytes of :func:`batch` for this key and value (whatever the timestamp)."""
    return len(batch(key, value))


def unsynced_config(**settings: Any) -> LogConfig:
    """A ``LogConfig`` of ``settings`` without an fsync per append (tests lose no power)."""
    return LogConfig(**{"flush_every_append": False, **settings})


def append_record(
    log: Log, key: bytes | None, value: bytes, timestamp_ms: int, leader_epoch: int = 0
) -> int:
    """Appends one record in a batch of its own; returns its offset."""
    return log.append_batches(batch(key, value, timestamp_ms), leader_epoch).first_offset


def read_records(log: Log, offset: int, max_bytes: int) -> list[LoggedRecord]:
    return decode(log.read(offset, max_bytes).records)


def one_batch_each(values: Iterable[bytes], timestamp_ms: int | None = None) -> bytes:
    """A produce payload of one single-record batch per value (so that segments roll between
    them as they did when every record was stored on its own)."""
    return b"".join(batch(None, value, timestamp_ms) for value in values)


def decode(records: bytes) -> list[LoggedRecord]:
    """Every record of every whole batch in ``records``, in order."""
    return [
        LoggedRecord(
            c.offset,
            c.record.timestamp,
            header.partition_leader_epoch,
            c.record.key,
            c.record.value,
        )
        for header in iter_batches(records, allow_truncated_tail=True)
        for c in decode_batch(records, header)
    ]


def offsets(records: bytes) -> list[int]:
    return [r.offset for r in decode(records)]


def values(records: bytes) -> list[bytes | None]:
    return [r.value for r in decode(records)]
