"""The metadata log's frame format: encoding, CRC-checked decoding, and the scans recovery needs.

Every batch and every snapshot is one frame: a 4-byte big-endian payload length, a 4-byte
``zlib.crc32`` of the payload, then the payload (a serialized ``MetadataRecordBatch``). The records
of a batch have consecutive offsets from its ``base_offset``; batches follow each other without
gaps, across segment files too.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from google.protobuf.message import DecodeError

from tiered.rpc.v1 import metadata_pb2

_HEADER = struct.Struct(">II")  # payload length, crc32(payload)
HEADER_SIZE = _HEADER.size
_BASE_OFFSET_TAG = b"\x08"  # field 1 (base_offset), varint: how every batch at offset > 0 begins
_RECORDS_TAG = 0x12  # field 2 (records), length-delimited: how the batch at offset 0 begins

Batch = metadata_pb2.MetadataRecordBatch
BatchCallback = Callable[[metadata_pb2.MetadataRecordBatch], None]


def encode_frame(payload: bytes) -> bytes:
    """length | crc32 | payload."""
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_frame(data: bytes, pos: int = 0) -> tuple[Batch, int] | None:
    """The batch framed at ``pos`` and the position after its frame, or None if no complete,
    CRC-valid, parseable, non-empty frame starts there."""
    if len(data) - pos < HEADER_SIZE:
        return None
    length, crc = _HEADER.unpack_from(data, pos)
    start = pos + HEADER_SIZE
    end = start + length
    if length == 0 or end > len(data):
        return None
    payload = data[start:end]
    if zlib.crc32(payload) != crc:
        return None
    batch = Batch()
    try:
        batch.ParseFromString(payload)
    except DecodeError:
        return None
    return batch, end


def peek_frame(data: bytes, pos: int) -> tuple[int, int] | None:
    """(the batch's base offset, the position after the frame) of a complete, CRC-valid frame at
    ``pos`` whose payload starts as ``MetadataRecordBatch`` serializes (field 1, ``base_offset``,
    omitted when 0, then the records), without parsing the records; None otherwise."""
    if len(data) - pos < HEADER_SIZE:
        return None
    length, crc = _HEADER.unpack_from(data, pos)
    start = pos + HEADER_SIZE
    end = start + length
    if length == 0 or end > len(data) or zlib.crc32(memoryview(data)[start:end]) != crc:
        return None
    first = data[start]
    if first == _RECORDS_TAG:
        return 0, end
    if first != _BASE_OFFSET_TAG[0]:
        return None
    value, shift, i = 0, 0, start + 1
    while i < end and shift < 64:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, end
        shift += 7
        i += 1
    return None


def find_valid_frame(data: bytes, start: int, min_base_offset: int) -> int | None:
    """The position of the first valid frame at or after ``start`` holding a batch at
    ``min_base_offset`` or later: evidence that a bad frame before it is not a torn tail."""
    i = start + HEADER_SIZE
    while True:
        idx = data.find(_BASE_OFFSET_TAG, i)
        if idx < 0:
            return None
        pos = idx - HEADER_SIZE
        decoded = decode_frame(data, pos)
        if decoded is not None and decoded[0].records and decoded[0].base_offset >= min_base_offset:
            return pos
        i = idx + 1
