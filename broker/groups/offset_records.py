"""The records of ``__consumer_offsets``, in Kafka's own layouts (the group coordinator's
``OffsetCommitKey``, ``OffsetCommitValue`` and ``GroupMetadataKey`` schemas), so that the log
reads as a Kafka broker's would.

A key starts with its version: 0 or 1 is an offset commit (group, topic, partition), 2 a group's
metadata (group). A null value is a tombstone. Values are written at version 3 (offset, leader
epoch, metadata, commit timestamp: what Kafka writes when no expire timestamp is given); 0, 1 and
3 are read (version 4 is Kafka's flexible one, which no broker writes for these records yet).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

__all__ = [
    "CommittedOffset",
    "GroupKey",
    "OffsetKey",
    "RecordFormatError",
    "RecordReader",
    "decode_key",
    "decode_value",
    "encode_group_key",
    "encode_offset_key",
    "encode_value",
    "kafka_string",
]

_OFFSET_KEY_VERSION = 1
_GROUP_KEY_VERSION = 2
_VALUE_VERSION = 3
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A record of ``__consumer_offsets`` that does not decode."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """One committed offset (``OffsetCommitValue``); ``commit_timestamp_ms`` is when the
    coordinator took it, which retention counts from.

    ``topic_id``: the topic's id when the offset was committed to this coordinator (None once
    loaded from the log, whose records, as Kafka's, name topics only). It tells an offset of a
    topic deleted and re-created under the same name from one of the topic that exists now."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    topic_id: uuid.UUID | None = field(default=None, compare=False)

    def of_another_topic(self, topic_id: uuid.UUID | None) -> bool:
        """Whether this offset was committed for another topic of the same name than
        ``topic_id`` (None: the topic does not exist now)."""
        return self.topic_id is not None and self.topic_id != topic_id


def kafka_string(text: str) -> bytes:
    """A Kafka STRING: its length as an int16, then its UTF-8 bytes."""
    data = text.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"a string of {len(data)} bytes does not fit a Kafka string")
    return _I16.pack(len(data)) + data


def encode_offset_key(key: OffsetKey) -> bytes:
    return (
        _I16.pack(_OFFSET_KEY_VERSION)
        + kafka_string(key.group)
        + kafka_string(key.topic)
        + _I32.pack(key.partition)
    )


def encode_group_key(key: GroupKey) -> bytes:
    return _I16.pack(_GROUP_KEY_VERSION) + kafka_string(key.group)


def encode_value(value: CommittedOffset) -> bytes:
    return (
        _I16.pack(_VALUE_VERSION)
        + _I64.pack(value.offset)
        + _I32.pack(value.leader_epoch)
        + kafka_string(value.metadata)
        + _I64.pack(value.commit_timestamp_ms)
    )


class RecordReader:
    """Reads a record's fields in order; a short or malformed record is a ``RecordFormatError``."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._position = 0

    def take(self, layout: struct.Struct) -> int:
        try:
            (value,) = layout.unpack_from(self._data, self._position)
        except struct.error as e:
            raise RecordFormatError(f"record ends early: {e}") from None
        self._position += layout.size
        return int(value)

    def unsigned_varint(self) -> int:
        value, shift = 0, 0
        while True:
            if self._position >= len(self._data):
                raise RecordFormatError("record ends inside a varint")
            byte = self._data[self._position]
            self._position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint longer than 5 bytes")

    def _size(self, compact: bool) -> int:
        """A length: int16 (strings) or int32 (bytes) when not ``compact``, else an unsigned
        varint of length + 1; -1 is null."""
        return self.unsigned_varint() - 1 if compact else self.take(_I16)

    def _slice(self, size: int) -> bytes:
        end = self._position + size
        if size < 0 or end > len(self._data):
            raise RecordFormatError(f"field of {size} bytes past the record's end")
        data = self._data[self._position : end]
        self._position = end
        return data

    def nullable_string(self, compact: bool = False) -> str | None:
        size = self._size(compact)
        if size == -1:
            return None
        try:
            return self._slice(size).decode("utf-8")
        except UnicodeDecodeError as e:
            raise RecordFormatError(f"string is not UTF-8: {e}") from None

    def string(self, compact: bool = False) -> str:
        text = self.nullable_string(compact)
        if text is None:
            raise RecordFormatError("null where a string is required")
        return text

    def bytes_field(self, compact: bool = False) -> bytes:
        size = self.unsigned_varint() - 1 if compact else self.take(_I32)
        return b"" if size == -1 else self._slice(size)

    def array_length(self, compact: bool = False) -> int:
        size = self.unsigned_varint() - 1 if compact else self.take(_I32)
        return max(size, 0)

    def skip_tagged_fields(self) -> None:
        """A flexible version's tagged fields: none is known here, all are skipped."""
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()  # the tag
            self._slice(self.unsigned_varint())


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    reader = RecordReader(data)
    version = reader.take(_I16)
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.take(_I32))
    if version == _GROUP_KEY_VERSION:
        return GroupKey(reader.string())
    raise RecordFormatError(f"key version {version}; valid: 0, 1 (offset), 2 (group metadata)")


def decode_value(data: bytes) -> CommittedOffset:
    reader = RecordReader(data)
    version = reader.take(_I16)
    if version not in (0, 1, 3):
        raise RecordFormatError(f"offset commit value version {version}; valid: 0, 1, 3")
    offset = reader.take(_I64)
    leader_epoch = reader.take(_I32) if version == 3 else -1
    metadata = reader.string()
    commit_timestamp_ms = reader.take(_I64)
    return CommittedOffset(offset, leader_epoch, metadata, commit_timestamp_ms)
