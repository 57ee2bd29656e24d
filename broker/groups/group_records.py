"""A group's record in ``__consumer_offsets``: Kafka's ``GroupMetadataValue`` (under the
``GroupMetadataKey`` of ``offset_records``), what a new coordinator needs for the group's
members to carry on in their generation: the protocol, the generation, the leader, and each
member's ids, timeouts, subscription and assignment.

Written at version 3, as Kafka writes it (the highest version that is not flexible); versions 0
to 4 are read (4 is the flexible one: compact lengths and tagged fields, which are skipped). A
null value (a tombstone) removes the group.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from broker.groups.offset_records import RecordFormatError, RecordReader, kafka_string

__all__ = ["StoredGroup", "StoredMember", "decode_group_value", "encode_group_value"]

_VALUE_VERSION = 3
_FLEXIBLE_VERSION = 4
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NULL = _I16.pack(-1)


@dataclass(frozen=True, slots=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes  # its metadata for the group's protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class StoredGroup:
    """A group as its coordinator keeps it: Stable with its members, or Empty without."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int  # -1: unknown
    members: tuple[StoredMember, ...] = ()


def _nullable(text: str | None) -> bytes:
    return _NULL if text is None else kafka_string(text)


def _bytes(data: bytes) -> bytes:
    return _I32.pack(len(data)) + data


def _encode_member(member: StoredMember) -> bytes:
    return (
        kafka_string(member.member_id)
        + _nullable(member.group_instance_id)
        + kafka_string(member.client_id)
        + kafka_string(member.client_host)
        + _I32.pack(member.rebalance_timeout_ms)
        + _I32.pack(member.session_timeout_ms)
        + _bytes(member.subscription)
        + _bytes(member.assignment)
    )


def encode_group_value(group: StoredGroup) -> bytes:
    return (
        _I16.pack(_VALUE_VERSION)
        + kafka_string(group.protocol_type)
        + _I32.pack(group.generation)
        + _nullable(group.protocol)
        + _nullable(group.leader)
        + _I64.pack(group.current_state_timestamp_ms)
        + _I32.pack(len(group.members))
        + b"".join(_encode_member(m) for m in group.members)
    )


def _decode_member(reader: RecordReader, version: int) -> StoredMember:
    compact = version >= _FLEXIBLE_VERSION
    member_id = reader.string(compact)
    instance_id = reader.nullable_string(compact) if version >= 3 else None
    client_id = reader.string(compact)
    client_host = reader.string(compact)
    rebalance_timeout_ms = reader.take(_I32) if version >= 1 else -1
    session_timeout_ms = reader.take(_I32)
    subscription = reader.bytes_field(compact)
    assignment = reader.bytes_field(compact)
    if compact:
        reader.skip_tagged_fields()
    return StoredMember(
        member_id,
        instance_id,
        client_id,
        client_host,
        # Version 0 had one timeout for both, as Kafka reads it.
        session_timeout_ms if version == 0 else rebalance_timeout_ms,
        session_timeout_ms,
        subscription,
        assignment,
    )


def decode_group_value(data: bytes) -> StoredGroup:
    reader = RecordReader(data)
    version = reader.take(_I16)
    if not 0 <= version <= _FLEXIBLE_VERSION:
        raise RecordFormatError(f"group metadata value version {version}; valid: 0 to 4")
    compact = version >= _FLEXIBLE_VERSION
    protocol_type = reader.string(compact)
    generation = reader.take(_I32)
    protocol = reader.nullable_string(compact)
    leader = reader.nullable_string(compact)
    timestamp = reader.take(_I64) if version >= 2 else -1
    members = tuple(_decode_member(reader, version) for _ in range(reader.array_length(compact)))
    if compact:
        reader.skip_tagged_fields()
    return StoredGroup(protocol_type, generation, protocol, leader, timestamp, members)
