"""The consumer protocol (protocol type ``consumer``): a member's subscription (its JoinGroup
metadata) and its assignment (what SyncGroup hands it and DescribeGroups shows), each an int16
version, then ``ConsumerProtocolSubscription`` or ``ConsumerProtocolAssignment`` of that version.
A version newer than kio knows is read as the newest it knows, as Kafka's ``ConsumerProtocol``
reads a newer one (later versions only add fields at the end)."""

from __future__ import annotations

import struct
from typing import Any

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
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.serial import entity_reader

__all__ = ["CONSUMER_PROTOCOL_TYPE", "TopicPartition", "decode_assignment", "decode_subscription"]

CONSUMER_PROTOCOL_TYPE = "consumer"

TopicPartition = tuple[str, int]
_VERSION = struct.Struct(">h")
_READERS = [entity_reader(t) for t in (AssignmentV0, AssignmentV1, AssignmentV2, AssignmentV3)]
_SUBSCRIPTION_READER = entity_reader(SubscriptionV0)


def _version(data: bytes, what: str) -> int:
    if len(data) < _VERSION.size:
        raise ValueError(f"a consumer protocol {what} needs at least its version")
    (version,) = _VERSION.unpack_from(data)
    if version < 0:
        raise ValueError(f"consumer protocol {what} version {version} is negative")
    return int(version)


def decode_subscription(data: bytes) -> frozenset[str]:
    """The topics of a member's subscription. Read as version 0 whatever its version, as Kafka's
    coordinator reads it: every later version starts with version 0's fields. ValueError for
    bytes that are not a subscription."""
    _version(data, "subscription")
    try:
        subscription, _ = _SUBSCRIPTION_READER(data, _VERSION.size)
    except Exception as e:  # malformed bytes surface as any decoding exception
        raise ValueError(f"the consumer protocol subscription does not decode: {e}") from None
    return frozenset(str(topic) for topic in subscription.topics)


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The (topic, partition) pairs of an assignment, sorted; empty bytes are no assignment.
    ValueError for bytes that are not an assignment."""
    if not data:
        return []
    version = _version(data, "assignment")
    assignment: Any  # of one of four versions
    try:
        assignment, _ = _READERS[min(version, len(_READERS) - 1)](data, _VERSION.size)
    except Exception as e:  # malformed bytes surface as any decoding exception
        raise ValueError(f"the consumer protocol assignment does not decode: {e}") from None
    return sorted(
        (str(topic.topic), int(partition))
        for topic in assignment.assigned_partitions
        for partition in topic.partitions
    )
