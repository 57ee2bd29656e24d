"""What the group coordinator takes and answers, free of any wire version: the kio requests of
JoinGroup, SyncGroup, ... become these in ``broker.kafka.groups_api`` and the answers go back
into the version the client sent.

Error codes are Kafka's (``kio``'s ``ErrorCode``), as the coordinator answers with them."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = [
    "NO_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "DescribedGroup",
    "DescribedMember",
    "JoinRequest",
    "JoinResult",
    "JoinedMember",
    "LeaveResult",
    "LeavingMember",
    "ListedGroup",
    "Protocol",
    "SyncRequest",
    "SyncResult",
]

UNKNOWN_MEMBER_ID = ""  # a member's id before the coordinator gave it one
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class Protocol:
    """One assignment protocol a member supports (``range``, ``roundrobin``, ...), with its
    metadata (the consumer's subscription), opaque to the broker."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    client_id: str
    client_host: str
    requires_known_member_id: bool  # JoinGroup v4+: MEMBER_ID_REQUIRED round for new members
    supports_skip_assignment: bool  # JoinGroup v9+
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """A member as the leader sees it in its JoinGroup answer: what it subscribes to."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()  # the leader's answer only


@dataclass(frozen=True, slots=True)
class SyncRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    generation_id: int
    protocol_type: str | None  # SyncGroup v5+
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]  # (member id, assignment): the leader's plan


@dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # of the group's protocol; empty unless the group is Stable
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str  # Kafka's state name; "" with an error
    protocol_type: str = ""
    protocol_data: str = ""  # the chosen protocol, when Stable
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
