"""Kafka record batches v2 (magic 2) as opaque byte ranges: parse, verify, assign offsets.

The produce path does no per-record work: a batch is checked by its fixed 61-byte header and one
CRC32C over the bytes after the crc field, then stored as received after its baseOffset and
partitionLeaderEpoch are rewritten in place (both precede the CRC range, so the CRC stays valid).
Decoding individual records lives in ``tiered.kafka.records``.

Errors carry the Kafka error code the broker answers with: a truncated or CRC-failing batch is
CORRUPT_MESSAGE (Kafka's CorruptRecordException), a well-framed batch that breaks the rules
(wrong magic, inconsistent counts, unknown codec, ...) is INVALID_RECORD (InvalidRecordException).
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias

from crc32c import crc32c
from kio.schema.errors import ErrorCode

from tiered.kafka.compression import Codec

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC_POSITION",
    "MAGIC_V2",
    "BatchHeader",
    "Buffer",
    "CorruptRecordError",
    "InvalidRecordError",
    "RecordBatchError",
    "TimestampType",
    "assign_offsets",
    "assigned_offsets_pieces",
    "encode_batch",
    "iter_batches",
    "parse_batch_header",
    "validate_produce_records",
]

# baseOffset int64, batchLength int32, then partitionLeaderEpoch int32, magic int8, crc uint32,
# attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
# producerId int64, producerEpoch int16, baseSequence int32, recordsCount int32.
_HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = _HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
_OFFSET_AND_EPOCH = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
Buffer: TypeAlias = bytes | bytearray | memoryview
_BATCH_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
MAGIC_POSITION = 16
MAGIC_V2 = 2  # the only record format the broker reads and writes
_CRC_POSITION = MAGIC_POSITION + 1
_CRC_END = _CRC_POSITION + _CRC.size  # the CRC covers attributes .. end of batch
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
NO_PRODUCER_ID = -1


class RecordBatchError(ValueError):
    """A record batch the broker rejects; ``error_code`` is the Kafka error to answer with."""

    error_code: ErrorCode = ErrorCode.corrupt_message


class CorruptRecordError(RecordBatchError):
    """Truncated bytes or a CRC mismatch (CORRUPT_MESSAGE, 2)."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(RecordBatchError):
    """A well-framed batch that breaks Kafka's rules (INVALID_RECORD, 87)."""

    error_code = ErrorCode.invalid_record


class TimestampType(enum.IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The fixed header of one v2 batch found at ``position`` in a buffer."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, framing included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def end(self) -> int:
        return self.position + self.size

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec_id(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def codec(self) -> Codec:
        """Raises InvalidRecordError for codec ids Kafka does not define (5-7)."""
        try:
            return Codec(self.codec_id)
        except ValueError:
            raise InvalidRecordError(f"unknown compression codec id {self.codec_id}") from None

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & _TIMESTAMP_TYPE_BIT else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def is_idempotent(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def parse_batch_header(
    buffer: bytes | bytearray | memoryview, position: int = 0, limit: int = -1, start: int = 0
) -> BatchHeader:
    """Parse and frame-check the batch at ``position`` without verifying its CRC.

    ``buffer`` holds the bytes of a payload or segment from its position ``start`` on, and the
    batch must end by ``limit`` (-1: where ``buffer`` ends). With a ``limit``, ``buffer`` needs
    to hold only the header's bytes before it, so that a reader walking a segment through a
    window frames each batch by its header without reading the batch.

    Raises CorruptRecordError when the bytes are truncated or the length is impossible, and
    InvalidRecordError when the magic is not 2 (older message formats are not accepted).
    """
    at = position - start
    available = (len(buffer) + start if limit < 0 else limit) - position
    if available < LOG_OVERHEAD + 5:
        raise CorruptRecordError(
            f"{available} bytes at position {position} cannot hold a record batch header"
        )
    magic = buffer[at + MAGIC_POSITION]
    if magic != MAGIC_V2:
        raise InvalidRecordError(f"record batch magic {magic} is not supported (only 2)")
    if available < BATCH_HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated to {available} bytes")
    header = BatchHeader(position, *_HEADER.unpack_from(buffer, at))
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch length {header.batch_length} is smaller than the minimum overhead"
        )
    if header.size > available:
        raise CorruptRecordError(
            f"record batch of {header.size} bytes at position {position} is truncated to "
            f"{available} bytes"
        )
    return header


def verify_crc(buffer: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    """Raises CorruptRecordError when the stored CRC32C does not match the batch bytes."""
    with memoryview(buffer) as view:
        actual = crc32c(view[header.position + _CRC_END : header.end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} is corrupt "
            f"(stored crc {header.crc:#010x}, computed {actual:#010x})"
        )


def iter_batches(
    buffer: bytes | bytearray | memoryview,
    *,
    verify: bool = True,
    allow_truncated_tail: bool = False,
) -> Iterator[BatchHeader]:
    """Yield the header of every batch in ``buffer`` in order, checking each CRC if ``verify``.

    A fetch response may end with a partial batch (the broker cut it at max bytes); with
    ``allow_truncated_tail`` such a tail ends the iteration instead of raising.
    Raises CorruptRecordError / InvalidRecordError as ``parse_batch_header`` and ``verify_crc``.
    """
    position = 0
    while position < len(buffer):
        try:
            header = parse_batch_header(buffer, position)
        except CorruptRecordError:
            if allow_truncated_tail and _is_truncated_tail(buffer, position):
                return
            raise
        if verify:
            verify_crc(buffer, header)
        yield header
        position = header.end


def _is_truncated_tail(buffer: bytes | bytearray | memoryview, position: int) -> bool:
    available = len(buffer) - position
    if available < LOG_OVERHEAD:
        return True
    batch_length: int = _BATCH_LENGTH.unpack_from(buffer, position + 8)[0]
    plausible = batch_length >= _MIN_BATCH_LENGTH
    return plausible and LOG_OVERHEAD + batch_length > available


def validate_produce_records(records: bytes | bytearray | memoryview) -> BatchHeader:
    """Check one partition's records from a Produce request (v3+) the way Kafka's broker does.

    Exactly one v2 batch with a valid CRC, a known codec, a record count matching its offset
    range, not a control batch, and a producer id when transactional. Returns its header.
    Raises CorruptRecordError or InvalidRecordError (their ``error_code`` is the answer).
    """
    if len(records) == 0:
        raise InvalidRecordError("produce requests must hold one record batch per partition")
    header = parse_batch_header(records, 0)
    if header.end != len(records):
        parse_batch_header(records, header.end)  # CorruptRecordError for a partial tail
        raise InvalidRecordError("produce requests may hold only one record batch per partition")
    verify_crc(records, header)
    _ = header.codec  # raises InvalidRecordError for the undefined codec ids 5-7
    if header.records_count <= 0 or header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record count {header.records_count} does not match the batch's offset range "
            f"(last offset delta {header.last_offset_delta})"
        )
    if header.is_control:
        raise InvalidRecordError("clients may not produce control batches")
    if header.is_transactional and not header.is_idempotent:
        raise InvalidRecordError("a transactional batch needs a producer id")
    return header


def encode_batch(
    records_section: bytes,
    *,
    codec: Codec,
    timestamp_type: TimestampType,
    transactional: bool,
    base_offset: int,
    partition_leader_epoch: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytes:
    """One v2 batch framing ``records_section`` (records already encoded and compressed with
    ``codec``), with its length and CRC32C computed, as a producer sends it."""
    attributes = int(codec)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= _TRANSACTIONAL_BIT
    header = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        header,
        0,
        base_offset,
        _MIN_BATCH_LENGTH + len(records_section),
        partition_leader_epoch,
        MAGIC_V2,
        0,  # the CRC, computed over the bytes after it
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    crc = crc32c(records_section, crc32c(header[_CRC_END:]))
    _CRC.pack_into(header, _CRC_POSITION, crc)
    return bytes(header) + records_section


def assign_offsets(
    buffer: bytearray | memoryview,
    header: BatchHeader,
    base_offset: int,
    partition_leader_epoch: int,
) -> int:
    """Rewrite the batch's baseOffset and partitionLeaderEpoch in place; return the next offset.

    Both fields precede the CRC range, so the stored CRC stays valid.
    """
    _OFFSET_AND_EPOCH.pack_into(
        buffer, header.position, base_offset, header.batch_length, partition_leader_epoch
    )
    return base_offset + header.last_offset_delta + 1


def assigned_offsets_pieces(
    batch: memoryview, header: BatchHeader, base_offset: int, partition_leader_epoch: int
) -> tuple[bytearray, memoryview]:
    """The batch at ``header.position`` in ``batch`` as two pieces to write one after the other:
    a copy of its first bytes with ``assign_offsets`` applied, and the rest as it came (CRC
    range included), so that stamping a batch copies a few bytes rather than the batch."""
    split = header.position + _OFFSET_AND_EPOCH.size
    head = bytearray(batch[header.position : split])
    assign_offsets(
        head, dataclasses.replace(header, position=0), base_offset, partition_leader_epoch
    )
    return head, batch[split : header.end]
