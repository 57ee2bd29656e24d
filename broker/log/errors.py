"""Errors raised by the local log."""

from __future__ import annotations

from tiered.errors import ErrorCode, TieredError


class CorruptSegmentError(Exception):
    """A closed segment's batches fail validation: bad framing or offsets that do not follow on.
    Closed segments were fsynced before their successor existed, so this is damage outside the
    log's control; dropping the batches would silently lose acknowledged data from the middle of
    the log, so the log refuses to open instead. (A torn tail of the last segment is not this:
    recovery truncates it.)"""


class UnsupportedLogFormatError(TieredError):
    """A segment that does not hold Kafka record batches v2, such as a data directory written by
    the broker's old record format: refused (KAFKA_STORAGE_ERROR), never truncated."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class OffsetOutOfRangeError(TieredError):
    """A read asked for an offset the local log does not serve (Kafka's OFFSET_OUT_OF_RANGE)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


class CorruptCheckpointError(Exception):
    """A checkpoint file cannot be parsed. Checkpoints are replaced atomically, so this means
    the file was damaged outside the log's control; the log refuses to guess."""


class CorruptLogError(Exception):
    """The segments on disk do not form one contiguous log (a gap or overlap between segments).
    Only the last segment may lose a torn tail; anything else is refused rather than guessed at."""
