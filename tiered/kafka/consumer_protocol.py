"""The consumer protocol's assignment bytes (what SyncGroup hands a member and DescribeGroups
shows): an int16 version, then ``ConsumerProtocolAssignment`` of that version. A version newer
than kio knows is read as the newest it knows, as Kafka's ``ConsumerProtocol`` reads a newer
one (later versions only add fields at the end)."""

from __future__ import annotations

import struct

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as AssignmentV0,
)
from kio.schema.consumer_protocol_assignment.v1.data import (
    ConsumerProtocolAssignment as AssignmentV1,
)
from kio.schema.consumer_protocol_assignment.v2.data import (
    ConsumerProtocolAssignment as AssignmentV2,
)
from kio.schema.consumer_protocol_assignment.v3.data import (
    ConsumerProtocolAssignment as AssignmentV3,
)
from kio.serial import entity_reader

__all__ = ["TopicPartition", "decode_assignment"]

TopicPartition = tuple[str, int]
_VERSION = struct.Struct(">h")
_READERS = [entity_reader(t) for t in (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)]


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The (topic, partition) pairs of an assignment, sorted; empty bytes are no assignment.
    ValueError for bytes that are not an assignment."""
    if not data:
        return []
    if len(data) < _VERSION.size:
        raise ValueError("a consumer protocol assignment needs at least its version")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise ValueError(f"consumer protocol assignment version {version} is negative")
    try:
        assignment, _ = _READERS[min(version, len(_READERS) - 1)](data, _VERSION.size)
    except Exception as e:  # malformed bytes surface as any decoding exception
        raise ValueError(f"the consumer protocol assignment does not decode: {e}") from None
    return sorted(
        (str(topic.topic), int(partition))
        for topic in assignment.assigned_partitions
        for partition in topic.partitions
    )
