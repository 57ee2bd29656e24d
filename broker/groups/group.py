"""One classic group: its members (dynamic and static), the generation, the protocol its members
agreed on, and the answers its members wait for. Kafka's ``ClassicGroup`` and
``ClassicGroupMember``; the rebalance logic that drives them is in ``coordinator``.

Not thread-safe: the coordinator holds its lock around every use.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.groups.group_messages import (
    DescribedMember,
    JoinedMember,
    JoinResult,
    Protocol,
    SyncResult,
)
from broker.groups.group_records import StoredGroup, StoredMember
from broker.groups.group_state import (
    GroupState,
    can_rebalance,
    check_loaded_state,
    check_transition,
)
from broker.groups.membership import OffsetExpiry
from tiered.kafka.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription

__all__ = ["Group", "Member"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    join_answer: Future[JoinResult] | None = None
    sync_answer: Future[SyncResult] | None = None
    # Joined but not yet through a join phase: it can still expire while it waits (it cannot
    # heartbeat without its answer).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_answer is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_answer is not None

    def has_satisfied_heartbeat(self) -> bool:
        """A member waiting for its JoinGroup or SyncGroup answer counts as alive, unless new."""
        return not self.is_new and (self.awaiting_join or self.awaiting_sync)

    def metadata(self, protocol_name: str | None) -> bytes:
        return next((p.metadata for p in self.protocols if p.name == protocol_name), b"")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first protocol, in this member's order of preference, that every member supports."""
        return next(p.name for p in self.protocols if p.name in candidates)

    def stored(self, protocol_name: str | None, assignment: bytes) -> StoredMember:
        return StoredMember(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.metadata(protocol_name),
            assignment,
        )

    @classmethod
    def loaded(cls, stored: StoredMember, protocol_type: str, protocol_name: str | None) -> Member:
        """A member as its group's record has it: the group's protocol is the one it supports
        (Kafka's ``readGroupMessageValue``), with its subscription as that protocol's metadata."""
        protocols = () if protocol_name is None else (Protocol(protocol_name, stored.subscription),)
        return cls(
            stored.member_id,
            stored.group_instance_id,
            stored.client_id,
            stored.client_host,
            stored.rebalance_timeout_ms,
            stored.session_timeout_ms,
            protocol_type,
            protocols,
            stored.assignment,
        )

    def describe(self, protocol_name: str | None) -> DescribedMember:
        return DescribedMember(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.metadata(protocol_name) if protocol_name is not None else b"",
            self.assignment,
        )


@dataclass(eq=False)
class Group:
    group_id: str
    wall_clock_ms: Callable[[], int]
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_join_members: set[str] = field(default_factory=set)  # got MEMBER_ID_REQUIRED
    pending_sync_members: set[str] = field(default_factory=set)
    # The initial rebalance's delay is extended while new members keep arriving.
    new_member_added: bool = False
    # When the group entered its state (wall clock, as stored; None: not known).
    state_timestamp_ms: int | None = None
    # The topics a consumer group's members subscribe to, as of its generation; None when not
    # known (not a consumer group, no generation yet, or metadata that does not decode).
    subscribed_topics: frozenset[str] | None = None

    # ---------------------------------------------------------------------------- records

    @classmethod
    def loaded(cls, group_id: str, stored: StoredGroup, wall_clock_ms: Callable[[], int]) -> Group:
        """The group as its record has it: Stable with its members and their assignments, or
        Empty without (Kafka's ``GroupMetadata.loadGroup``)."""
        state = GroupState.STABLE if stored.members else GroupState.EMPTY
        check_loaded_state(group_id, state)
        protocol_type = stored.protocol_type or None
        group = cls(
            group_id,
            wall_clock_ms,
            state=state,
            generation_id=stored.generation,
            protocol_type=protocol_type,
            protocol_name=stored.protocol,
            state_timestamp_ms=(
                None if stored.current_state_timestamp_ms < 0 else stored.current_state_timestamp_ms
            ),
        )
        for member in stored.members:
            group.add(Member.loaded(member, stored.protocol_type, stored.protocol))
        group.leader_id = stored.leader if stored.leader in group.members else group.leader_id
        group.protocol_type = protocol_type
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    def stored(self, assignments: Mapping[str, bytes] | None = None) -> StoredGroup:
        """The group's record (Kafka's ``GroupMetadataValue``), with ``assignments`` (each
        member's own when None)."""
        return StoredGroup(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            -1 if self.state_timestamp_ms is None else self.state_timestamp_ms,
            tuple(
                m.stored(
                    self.protocol_name,
                    m.assignment if assignments is None else assignments.get(m.member_id, b""),
                )
                for m in self.members.values()
            ),
        )

    # ------------------------------------------------------------------------------ states

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState) -> None:
        check_transition(self.group_id, self.state, target)
        self.previous_state, self.state = self.state, target
        self.state_timestamp_ms = self.wall_clock_ms()

    def can_rebalance(self) -> bool:
        return can_rebalance(self.state)

    # ----------------------------------------------------------------------------- members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, join_answer: Future[JoinResult] | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_answer = join_answer
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> Member:
        """The member of ``instance_id`` under a new id (a restarted static member): it keeps the
        old one's assignment; whoever still waits as the old id is fenced."""
        old = self.members.pop(old_member_id)
        self.complete_join(old, JoinResult(ErrorCode.fenced_instance_id, old_member_id))
        self.complete_sync(old, SyncResult(ErrorCode.fenced_instance_id))
        new = Member(
            new_member_id,
            old.group_instance_id,
            old.client_id,
            old.client_host,
            old.rebalance_timeout_ms,
            old.session_timeout_ms,
            old.protocol_type,
            old.protocols,
            old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def update(
        self,
        member: Member,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_answer: Future[JoinResult] | None,
    ) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_answer = join_answer

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def member_error(self, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's ``validateMember``: NONE, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID (another
        member id holds the instance id now)."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                log.info(
                    "group %s: member %s of instance %s is fenced by member %s",
                    self.group_id,
                    member_id,
                    instance_id,
                    existing,
                )
                return ErrorCode.fenced_instance_id
        return ErrorCode.none if member_id in self.members else ErrorCode.unknown_member_id

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_join_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Kafka's ``maybeElectNewJoinedLeader``: a leader that did not rejoin gives way to one
        that did; False when no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        log.info(
            "group %s: leader %s did not rejoin in time; %s leads",
            self.group_id,
            self.leader_id,
            joined.member_id,
        )
        self.leader_id = joined.member_id
        return True

    @staticmethod
    def new_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"

    # --------------------------------------------------------------------------- protocols

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Whether a member with these protocols may join: any non-empty set while Empty, else
        the group's type and a protocol every member supports."""
        names = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type or not names:
            return False
        # A group rebalancing with no member left (they all left) takes any protocol.
        return not self.members or bool(names & self._candidates())

    def _candidates(self) -> set[str]:
        counts = Counter(p.name for m in self.members.values() for p in set(m.protocols))
        return {name for name, count in counts.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        """Every member votes for its preferred protocol among those all support; most votes wins."""
        candidates = self._candidates()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's ``ClassicGroup.isSubscribedToTopic``: when the subscriptions are not known, a
        consumer group counts as subscribed (its offsets are kept, to be safe)."""
        if self.subscribed_topics is None:
            return self.is_consumer_group
        return topic in self.subscribed_topics

    def offset_expiry(self) -> OffsetExpiry | None:
        """Kafka's ``ClassicGroup.offsetExpirationCondition``: a group without a protocol (its
        offsets committed standalone) expires each offset from its commit; an Empty group all of
        them from when it emptied (from each commit when that is not known); a Stable consumer
        group whose subscriptions are known those of the topics it no longer subscribes to,
        from their commit; any other group none."""
        if self.protocol_type is None:
            return OffsetExpiry()
        if self.is_in(GroupState.EMPTY):
            return OffsetExpiry(empty_since_ms=self.state_timestamp_ms)
        subscribed = self.subscribed_topics
        if self.is_consumer_group and self.is_in(GroupState.STABLE) and subscribed is not None:
            return OffsetExpiry(subscribed_topics=subscribed)
        return None

    def _compute_subscribed_topics(self) -> frozenset[str] | None:
        if not self.is_consumer_group:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        try:
            return frozenset().union(
                *(
                    decode_subscription(m.metadata(self.protocol_name))
                    for m in self.members.values()
                )
            )
        except ValueError as e:
            log.warning(
                "group %s: a member's %s subscription does not decode (%s); its subscribed "
                "topics are not known",
                self.group_id,
                self.protocol_name,
                e,
            )
            return None

    def joined_members(self) -> tuple[JoinedMember, ...]:
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        )

    def join_result(
        self, member_id: str, leader_view: bool, skip_assignment: bool = False
    ) -> JoinResult:
        """The current generation as ``member_id`` is told it (the leader also gets the members)."""
        return JoinResult(
            ErrorCode.none,
            member_id,
            self.generation_id,
            self.protocol_type,
            self.protocol_name,
            self.leader_id or "",
            skip_assignment,
            self.joined_members() if leader_view else (),
        )

    # ----------------------------------------------------------------------------- answers

    def complete_join(self, member: Member, result: JoinResult) -> bool:
        answer, member.join_answer = member.join_answer, None
        if answer is None:
            return False
        with contextlib.suppress(InvalidStateError):  # cancelled by a closing listener
            answer.set_result(result)
        return True

    def complete_sync(self, member: Member, result: SyncResult) -> bool:
        answer, member.sync_answer = member.sync_answer, None
        if answer is None:
            return False
        with contextlib.suppress(InvalidStateError):
            answer.set_result(result)
        return True

    def complete_all_joins(self, error: ErrorCode) -> None:
        for member in self.members.values():
            self.complete_join(member, JoinResult(error, member.member_id))

    def complete_all_syncs(self, error: ErrorCode) -> None:
        for member in self.members.values():
            self.complete_sync(member, SyncResult(error))

    def describe_members(self) -> tuple[DescribedMember, ...]:
        protocol = self.protocol_name if self.state is GroupState.STABLE else None
        return tuple(m.describe(protocol) for m in self.members.values())
