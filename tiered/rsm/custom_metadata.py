"""The KIP-917 custom metadata the fsspec RemoteStorageManager returns from a copy.

It records where the segment's objects are (their key prefix relative to the storage root) and how
many bytes they take in total. Only what is particular to the segment is stored: the partition part
of the prefix (topic name, topic id, partition) is already in the segment metadata the custom
metadata travels with, so its size does not depend on the topic name and stays far below the
broker's default 128-byte limit (``remote.log.metadata.custom.metadata.max.bytes``) for every
legal topic name.

Format, version 1 (``varint`` is unsigned LEB128: 7 bits a byte, low bits first, high bit set on
every byte but the last)::

    u8       format version, 1
    varint   total bytes of all the segment's objects (data and indexes)
    varint   tiered epoch
    varint   start offset
    16 bytes segment id (UUID bytes)

That is 28 bytes for a 1 GiB segment with a 10-digit start offset and a tiered epoch below 128,
and 40 bytes at most (64-bit sizes and offsets, a 31-bit tiered epoch).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tiered.api import CustomMetadata, TopicIdPartition
from tiered.rsm import layout

FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class SegmentLocation:
    """What the custom metadata says: the segment's objects and their total size."""

    topic_id_partition: TopicIdPartition
    tiered_epoch: int
    start_offset: int
    segment_id: uuid.UUID
    total_bytes: int

    @property
    def prefix(self) -> str:
        """The objects' key prefix relative to the root (see :mod:`tiered.rsm.layout`)."""
        return layout.segment_prefix_of(
            self.topic_id_partition, self.tiered_epoch, self.start_offset, self.segment_id
        )


def _put_varint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"a varint can not be negative, got {value}")
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def varint(self, what: str) -> int:
        result = 0
        shift = 0
        while True:
            if self._pos >= len(self._data):
                raise ValueError(f"custom metadata truncated in {what}")
            byte = self._data[self._pos]
            self._pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError(f"custom metadata has an oversized varint in {what}")

    def take(self, n: int, what: str) -> bytes:
        if self._pos + n > len(self._data):
            raise ValueError(f"custom metadata truncated in {what}")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def finish(self) -> None:
        if self._pos != len(self._data):
            raise ValueError(
                f"custom metadata has {len(self._data) - self._pos} unexpected trailing bytes"
            )


def encode_custom_metadata(location: SegmentLocation) -> CustomMetadata:
    """``location`` in format version 1."""
    out = bytearray([FORMAT_VERSION])
    _put_varint(out, location.total_bytes)
    _put_varint(out, location.tiered_epoch)
    _put_varint(out, location.start_offset)
    out += location.segment_id.bytes
    return CustomMetadata(bytes(out))


def decode_custom_metadata(
    custom_metadata: CustomMetadata | bytes, topic_id_partition: TopicIdPartition
) -> SegmentLocation:
    """The location encoded by :func:`encode_custom_metadata`, for a segment of
    ``topic_id_partition`` (taken from the segment metadata the custom metadata belongs to).
    ``ValueError`` if ``custom_metadata`` is not in a known format (another plugin's, truncated,
    trailing bytes)."""
    data = custom_metadata.value if isinstance(custom_metadata, CustomMetadata) else custom_metadata
    reader = _Reader(data)
    version = reader.take(1, "the format version")[0]
    if version != FORMAT_VERSION:
        raise ValueError(f"unknown custom metadata format version {version}")
    total_bytes = reader.varint("the total bytes")
    tiered_epoch = reader.varint("the tiered epoch")
    start_offset = reader.varint("the start offset")
    segment_id = uuid.UUID(bytes=reader.take(16, "the segment id"))
    reader.finish()
    return SegmentLocation(
        topic_id_partition=topic_id_partition,
        tiered_epoch=tiered_epoch,
        start_offset=start_offset,
        segment_id=segment_id,
        total_bytes=total_bytes,
    )
