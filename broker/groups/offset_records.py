"""The records of ``__consumer_offsets``, in Kafka's own layouts (the group coordinator's
``OffsetCommitKey``, ``OffsetCommitValue`` and ``GroupMetadataKey`` schemas), so that the log
reads as a Kafka broker's would.

A key starts with its version: 0 or 1 is an offset commit (group, topic, partition), 2 a group's
metadata (group). A null value is a tombstone. Values are written at version 4 with the topic's
id as the tagged field 0, as Kafka 4.1 writes them (KAFKA-19141), or at version 3 (offset, leader
epoch, metadata, commit timestamp) when the id is not known; 0, 1, 3 and 4 are read.
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
_VALUE_VERSION_WITH_TOPIC_ID = 4  # flexible: compact metadata, then tagged fields
_TOPIC_ID_TAG = 0
_ZERO_UUID = uuid.UUID(int=0)  # Kafka's "no topic id"
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

    ``topic_id``: the id of the topic the offset was committed for (None in a record written
    without it). It tells an offset of a topic deleted and re-created under the same name from
    one of the topic that exists now."""

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
    if value.topic_id is None:
        return (
            _I16.pack(_VALUE_VERSION)
            + _I64.pack(value.offset)
            + _I32.pack(value.leader_epoch)
            + kafka_string(value.metadata)
            + _I64.pack(value.commit_timestamp_ms)
        )
    metadata = value.metadata.encode("utf-8")
    return (
        _I16.pack(_VALUE_VERSION_WITH_TOPIC_ID)
        + _I64.pack(value.offset)
        + _I32.pack(value.leader_epoch)
        + _unsigned_varint(len(metadata) + 1)
        + metadata
        + _I64.pack(value.commit_timestamp_ms)
        + _unsigned_varint(1)  # one tagged field: the topic id
        + _unsigned_varint(_TOPIC_ID_TAG)
        + _unsigned_varint(16)
        + value.topic_id.bytes
    )


def _unsigned_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


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

    def tagged_fields(self) -> dict[int, bytes]:
        """A flexible version's tagged fields, by tag."""
        fields = {}
        for _ in range(self.unsigned_varint()):
            tag = self.unsigned_varint()
            fields[tag] = self._slice(self.unsigned_varint())
        return fields

    def skip_tagged_fields(self) -> None:
        """A flexible version's tagged fields: none is known here, all are skipped."""
        self.tagged_fields()


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
    if version not in (0, 1, 3, 4):
        raise RecordFormatError(f"offset commit value version {version}; valid: 0, 1, 3, 4")
    flexible = version >= _VALUE_VERSION_WITH_TOPIC_ID
    offset = reader.take(_I64)
    leader_epoch = reader.take(_I32) if version >= 3 else -1
    metadata = reader.string(compact=flexible)
    commit_timestamp_ms = reader.take(_I64)
    if version == 1:
        reader.take(_I64)  # the expire timestamp, which retention ignores (as Kafka's does)
    topic_id = None
    if flexible:
        raw = reader.tagged_fields().get(_TOPIC_ID_TAG)
        if raw is not None:
            if len(raw) != 16:
                raise RecordFormatError(f"topic id of {len(raw)} bytes; a UUID has 16")
            found = uuid.UUID(bytes=raw)
            topic_id = None if found == _ZERO_UUID else found
    return CommittedOffset(offset, leader_epoch, metadata, commit_timestamp_ms, topic_id)
