"""The on-disk record format: one record per batch, big-endian, CRC-protected.

Layout (``length`` counts every byte after the length field itself)::

    length u32 | crc u32 | offset i64 | timestamp_ms i64 | leader_epoch i32
    | key_len i32 (-1 = None) | key | value_len i32 | value

``crc`` is ``zlib.crc32`` of every byte after the crc field. A reader can therefore tell a torn
tail (fewer bytes than ``length`` promises) from a corrupt record (CRC or field mismatch), and
both are rejected: nothing past the first invalid record is ever served.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from broker.log.errors import CorruptRecordError, TruncatedRecordError

_PREFIX = struct.Struct(">II")  # length, crc
_FIXED = struct.Struct(">qqii")  # offset, timestamp_ms, leader_epoch, key_len
_VALUE_LEN = struct.Struct(">i")

PREFIX_SIZE = _PREFIX.size
"""Bytes of the length and CRC fields: what a reader fetches first to learn the rest."""

RECORD_OVERHEAD = _PREFIX.size + _FIXED.size + _VALUE_LEN.size
"""Encoded size of a record whose key is None or empty and whose value is empty."""

MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Largest ``length`` a decoder accepts. A garbage length field would otherwise make recovery try
to read (and allocate) gigabytes before noticing the CRC is wrong."""

_CRC_COVERED_MIN = _FIXED.size + _VALUE_LEN.size


@dataclass(frozen=True, slots=True)
class Record:
    """One log record. ``key`` may be None; ``value`` is always bytes."""

    offset: int
    timestamp_ms: int
    leader_epoch: int
    key: bytes | None
    value: bytes

    @property
    def size_bytes(self) -> int:
        """The record's encoded size, without encoding it."""
        return encoded_size(self.key, self.value)


def encoded_size(key: bytes | None, value: bytes) -> int:
    """Bytes ``encode_record`` produces for this key and value (the segment roll check needs it
    before the offset is known)."""
    return RECORD_OVERHEAD + (len(key) if key is not None else 0) + len(value)


def encode_record(record: Record) -> bytes:
    """Serializes ``record``. Raises ``ValueError`` if a field does not fit its wire type."""
    key = record.key
    key_len = -1 if key is None else len(key)
    try:
        fixed = _FIXED.pack(record.offset, record.timestamp_ms, record.leader_epoch, key_len)
    except struct.error as e:
        raise ValueError(f"record field out of range: {e}") from e
    body = b"".join((fixed, key or b"", _VALUE_LEN.pack(len(record.value)), record.value))
    if 4 + len(body) > MAX_RECORD_BYTES:
        raise ValueError(f"record of {4 + len(body)} bytes exceeds {MAX_RECORD_BYTES}")
    return _PREFIX.pack(4 + len(body), zlib.crc32(body)) + body


def decode_record(buf: bytes | memoryview, pos: int = 0) -> tuple[Record, int]:
    """Decodes the record starting at ``buf[pos]``; returns it and the position just past it.

    Raises ``TruncatedRecordError`` if ``buf`` ends inside the record and ``CorruptRecordError``
    if the length, the CRC or the key/value lengths are inconsistent.
    """
    view = memoryview(buf)
    if len(view) - pos < PREFIX_SIZE:
        raise TruncatedRecordError(f"{len(view) - pos} bytes at {pos}: a record header needs 8")
    length, crc = _PREFIX.unpack_from(view, pos)
    _check_length(length, pos)
    end = pos + 4 + length
    if end > len(view):
        raise TruncatedRecordError(
            f"record at {pos} needs {4 + length} bytes, {len(view) - pos} left"
        )
    return _decode_body(view[pos + PREFIX_SIZE : end], crc, pos), end


def read_record(f: BinaryIO, pos: int) -> tuple[Record, int]:
    """Reads and decodes the record at ``pos`` of an open file, which must be positioned there.

    Returns the record and the position just past it; same errors as ``decode_record``.
    Reading the header first means a garbage length never triggers a huge read.
    """
    head = f.read(PREFIX_SIZE)
    if len(head) < PREFIX_SIZE:
        raise TruncatedRecordError(f"{len(head)} bytes at {pos}: a record header needs 8")
    length, crc = _PREFIX.unpack(head)
    _check_length(length, pos)
    body = f.read(length - 4)
    if len(body) < length - 4:
        raise TruncatedRecordError(f"record at {pos} needs {4 + length} bytes, file ends first")
    return _decode_body(memoryview(body), crc, pos), pos + 4 + length


def _check_length(length: int, pos: int) -> None:
    if length < 4 + _CRC_COVERED_MIN or length > MAX_RECORD_BYTES:
        raise CorruptRecordError(f"record at {pos}: impossible length {length}")


def _decode_body(body: memoryview, crc: int, pos: int) -> Record:
    if zlib.crc32(body) != crc:
        raise CorruptRecordError(f"record at {pos}: CRC mismatch")
    offset, timestamp_ms, leader_epoch, key_len = _FIXED.unpack_from(body, 0)
    at = _FIXED.size
    key: bytes | None = None
    if key_len >= 0:
        key = bytes(body[at : at + key_len])
        at += key_len
    elif key_len != -1:
        raise CorruptRecordError(f"record at {pos}: key length {key_len}")
    if at + _VALUE_LEN.size > len(body):
        raise CorruptRecordError(f"record at {pos}: key overruns the record")
    (value_len,) = _VALUE_LEN.unpack_from(body, at)
    at += _VALUE_LEN.size
    if value_len < 0 or at + value_len != len(body):
        raise CorruptRecordError(f"record at {pos}: value length {value_len} disagrees with length")
    return Record(offset, timestamp_ms, leader_epoch, key, bytes(body[at:]))
