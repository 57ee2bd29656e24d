"""What the log answers to appends and timestamp lookups (reads answer ``BatchRead``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """The outcome of ``Log.append_batches``: what a Produce response reports."""

    first_offset: int
    """Base offset of the first batch (Produce's ``base_offset``)."""
    last_offset: int
    max_timestamp_ms: int
    """Largest batch max timestamp appended (-1 if the batches carry none)."""
    log_start_offset: int
    record_count: int
    """Records written: 0 for a duplicate."""
    duplicate: bool = False
    """The batch was a retry of one already in the log: nothing was written, and the offsets
    are those it was first written at (Kafka answers such a retry with NONE and them)."""
    rolled: bool = False
    """A segment was closed to make room: it may be copied to remote storage now."""


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """ListOffsets by timestamp: the first record whose timestamp is at least the one asked
    for, and the leader epoch that wrote it (None if the epoch cache does not cover it)."""

    timestamp_ms: int
    offset: int
    leader_epoch: int | None
