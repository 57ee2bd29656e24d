"""Raw group-API requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups) of any version, the consumer protocol's subscription and assignment bytes, and the
group's coordinator, for tests that play a group member on the wire."""

from __future__ import annotations

import datetime
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from kio.index import load_request_schema
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup

from cli.kafka_client.connection import KafkaConnection
from tests.support.cluster import Cluster
from tests.support.kafka_cluster import connected
from tests.support.polling import poll_until
from tiered.kafka.messages import build, nested

JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST = 11, 12, 13, 14, 15, 16
GROUP_KEYS = (JOIN, HEARTBEAT, LEAVE, SYNC, DESCRIBE, LIST)
SESSION = datetime.timedelta(seconds=10)


def group_request(api_key: int, version: int, **fields: Any) -> Any:
    """A request of ``version`` from ``fields`` (those the version lacks are dropped); JoinGroup
    defaults to a new ``consumer`` member of protocol ``range``, ``protocols`` and SyncGroup's
    ``assignments`` are given as (name, bytes) pairs."""
    request_type = load_request_schema(api_key, version)
    if api_key == JOIN:
        protocol_type = nested(request_type, "JoinGroupRequestProtocol")
        fields["protocols"] = tuple(
            build(protocol_type, name=name, metadata=metadata)
            for name, metadata in fields.get("protocols", (("range", b"sub"),))
        )
        fields.setdefault("session_timeout", SESSION)
        fields.setdefault("rebalance_timeout", SESSION)
        fields.setdefault("protocol_type", "consumer")
        fields.setdefault("member_id", "")
    if api_key == SYNC:
        assignment_type = nested(request_type, "SyncGroupRequestAssignment")
        fields["assignments"] = tuple(
            build(assignment_type, member_id=m, assignment=a)
            for m, a in fields.get("assignments", ())
        )
    if api_key == DESCRIBE:
        fields.setdefault("include_authorized_operations", False)
    return build(request_type, **fields)


def join_member(wire: KafkaConnection, version: int, group: str, **fields: Any) -> Any:
    """A member through JoinGroup (both rounds from v4): the answer to its last join."""
    answer = wire.call(group_request(JOIN, version, group_id=group, **fields))
    if version >= 4 and answer.error_code == ErrorCode.member_id_required:
        rejoin = {**fields, "member_id": answer.member_id}
        answer = wire.call(group_request(JOIN, version, group_id=group, **rejoin))
    return answer


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def subscription(topics: Sequence[str]) -> bytes:
    """The consumer protocol's Subscription v0 (a member's JoinGroup metadata)."""
    body = struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
    return body + struct.pack(">i", -1)


def assignment(partitions: Mapping[str, Sequence[int]]) -> bytes:
    """The consumer protocol's Assignment v0 (what SyncGroup hands a member)."""
    body = struct.pack(">hi", 0, len(partitions))
    for topic, indexes in partitions.items():
        body += _string(topic) + struct.pack(f">i{len(indexes)}i", len(indexes), *indexes)
    return body + struct.pack(">i", -1)


def serving_coordinator(cluster: Cluster, group: str, timeout_s: float = 30.0) -> int:
    """The id of ``group``'s coordinator once it serves the group: FindCoordinator names it (the
    first one creates ``__consumer_offsets``), and it answers the group's OffsetFetch (it hosts
    and loaded the group's partition)."""
    found: list[int] = []

    def named() -> bool:
        with connected(cluster, min(cluster.brokers)) as wire:
            find = FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
            [answer] = wire.call(find).coordinators
        found[:] = [int(answer.node_id)]
        return bool(answer.error_code == ErrorCode.none)

    def served() -> bool:
        fetch = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group_id=group, topics=None),))
        with connected(cluster, found[0]) as wire:
            [answer] = wire.call(fetch).groups
        return bool(answer.error_code == ErrorCode.none)

    poll_until(lambda: named() and served(), timeout=timeout_s, what=f"group {group!r} served")
    return found[0]
