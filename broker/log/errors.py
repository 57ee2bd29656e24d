"""Errors raised by the local log."""

from __future__ import annotations

from tiered.errors import ErrorCode, TieredError


class CorruptRecordError(Exception):
    """A record's bytes fail validation: bad length, CRC mismatch or inconsistent fields.

    Recovery treats the first corrupt record as the end of the valid log and truncates there.
    """


class TruncatedRecordError(CorruptRecordError):
    """Fewer bytes are available than the record's header promises: a torn (half-written) tail."""


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
