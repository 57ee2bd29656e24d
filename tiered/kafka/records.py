"""Individual records inside a v2 batch: build batches from records and decode them back.

Only tools and tests look inside batches (the console producer/consumer, property tests); the
broker's produce and fetch paths never do. Record layout (all lengths zigzag varints, -1 = null):
length, attributes int8, timestampDelta varlong, offsetDelta varint, key, value, header count,
then per header a UTF-8 key and a nullable value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kio.serial.errors import DecodeError
from kio.serial.readers import read_signed_varint, read_signed_varlong

from tiered.kafka.compression import Codec, CompressionError, compress, decompress
from tiered.kafka.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidRecordError,
    TimestampType,
    encode_batch,
    iter_batches,
)

__all__ = ["ConsumedRecord", "Record", "build_batch", "decode_batch", "iter_records"]

DEFAULT_MAX_DECOMPRESSED = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a client sees it; ``timestamp`` is epoch milliseconds."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int = 0


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """A record read back from a batch, with the offset the log gave it."""

    offset: int
    record: Record


def build_batch(
    records: Sequence[Record],
    codec: Codec = Codec.NONE,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
) -> bytes:
    """Encode ``records`` as one v2 batch compressed with ``codec``, as a producer would.

    Raises ValueError for an empty sequence (Kafka producers never send empty batches).
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_timestamp = records[0].timestamp
    body = bytearray()
    for delta, record in enumerate(records):
        _append_record(body, record, delta, record.timestamp - base_timestamp)
    return encode_batch(
        compress(codec, bytes(body)),
        codec=codec,
        timestamp_type=timestamp_type,
        transactional=transactional,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_timestamp,
        max_timestamp=max(record.timestamp for record in records),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


def decode_batch(
    buffer: bytes | bytearray | memoryview,
    header: BatchHeader,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[ConsumedRecord]:
    """Decode every record of the (already framed) batch ``header`` describes.

    Raises InvalidRecordError when the records section does not decode or disagrees with the
    header's record count.
    """
    with memoryview(buffer) as view:
        section = view[header.position + BATCH_HEADER_SIZE : header.end]
        try:
            data = decompress(header.codec, section, max_decompressed)
        except CompressionError as e:
            raise InvalidRecordError(str(e)) from e
    log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
    consumed: list[ConsumedRecord] = []
    position = 0
    try:
        while position < len(data):
            position, offset_delta, record = _read_record(data, position, header.base_timestamp)
            if log_append_time:
                record = Record(record.key, record.value, record.headers, header.max_timestamp)
            consumed.append(ConsumedRecord(header.base_offset + offset_delta, record))
    except (DecodeError, ValueError, IndexError) as e:
        raise InvalidRecordError(f"record {len(consumed)} of the batch does not decode: {e}") from e
    if len(consumed) != header.records_count:
        raise InvalidRecordError(
            f"batch declares {header.records_count} records but holds {len(consumed)}"
        )
    return consumed


def iter_records(
    buffer: bytes | bytearray | memoryview, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[ConsumedRecord]:
    """Yield the data records of a fetched records blob (control batches skipped).

    A partial batch at the end (a fetch cut at max bytes) is ignored, as clients do.
    """
    for header in iter_batches(buffer, allow_truncated_tail=True):
        if not header.is_control:
            yield from decode_batch(buffer, header, max_decompressed)


def _append_record(out: bytearray, record: Record, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray(b"\x00")  # attributes: unused in v2 records
    _append_varint(body, timestamp_delta)
    _append_varint(body, offset_delta)
    _append_bytes(body, record.key)
    _append_bytes(body, record.value)
    _append_varint(body, len(record.headers))
    for key, value in record.headers:
        _append_bytes(body, key.encode())
        _append_bytes(body, value)
    _append_varint(out, len(body))
    out += body


def _append_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _append_varint(out, -1)
        return
    _append_varint(out, len(value))
    out += value


def _append_varint(out: bytearray, value: int) -> None:
    zigzag = (value << 1) ^ (value >> 63)
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)


def _read_record(data: bytes, position: int, base_timestamp: int) -> tuple[int, int, Record]:
    length, size = read_signed_varint(data, position)
    position += size
    end = position + length
    if length < 0 or end > len(data):
        raise ValueError(f"record length {length} runs past the records section")
    position += 1  # attributes
    timestamp_delta, size = read_signed_varlong(data, position)
    position += size
    offset_delta, size = read_signed_varint(data, position)
    position += size
    key, position = _read_bytes(data, position, end)
    value, position = _read_bytes(data, position, end)
    header_count, size = read_signed_varint(data, position)
    position += size
    if header_count < 0:
        raise ValueError(f"negative header count {header_count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(header_count):
        header_key, position = _read_bytes(data, position, end)
        if header_key is None:
            raise ValueError("a record header key is null")
        header_value, position = _read_bytes(data, position, end)
        headers.append((header_key.decode(), header_value))
    if position != end:
        raise ValueError(f"record length {length} disagrees with its fields")
    return end, offset_delta, Record(key, value, tuple(headers), base_timestamp + timestamp_delta)


def _read_bytes(data: bytes, position: int, end: int) -> tuple[bytes | None, int]:
    length, size = read_signed_varint(data, position)
    position += size
    if length == -1:
        return None, position
    if length < -1 or position + length > end:
        raise ValueError(f"field length {length} runs past the record")
    return data[position : position + length], position + length
