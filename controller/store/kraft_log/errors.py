"""What the KRaft-mode metadata log raises: one base class and the failures callers tell apart."""

from __future__ import annotations


class MetadataLogError(Exception):
    """The metadata log cannot do what was asked."""


class CorruptLogError(MetadataLogError):
    """The log's files are corrupt in a way recovery must not paper over (acknowledged batches
    would be lost); an operator has to look."""


class LogNotWritableError(MetadataLogError):
    """An append or snapshot on a log that is read-only, closed, not locked by this process, or
    failed by an earlier I/O error (reopen it to recover)."""


class OffsetBelowLogStart(MetadataLogError):  # noqa: N818 - the name the protocol uses
    """The batches asked for were deleted by snapshot retention: send the snapshot instead."""

    def __init__(self, offset: int, log_start_offset: int) -> None:
        super().__init__(f"offset {offset} is below the log start offset {log_start_offset}")
        self.offset = offset
        self.log_start_offset = log_start_offset
