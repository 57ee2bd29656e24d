"""The group coordinator of a broker: Kafka's classic group membership (``GroupMetadataManager``'s
classic handlers) for the groups this broker coordinates.

- JoinGroup: a new dynamic member of v4+ first gets MEMBER_ID_REQUIRED with its id (so that a
  retried join is the same member); members join, the group rebalances (``rebalance``), and every
  member's answer waits, as a Future that holds no thread, until the join phase ends;
- static members (``group.instance.id``): a restarted member under the same instance id takes its
  old member's place and assignment, without a rebalance while the group is Stable; the old
  member id is FENCED_INSTANCE_ID from then on;
- SyncGroup: the leader's plan is passed through to every member; followers wait for it;
- Heartbeat keeps a session and tells members to rejoin (REBALANCE_IN_PROGRESS);
- LeaveGroup removes members (in batches, v3+) and the others rebalance at once;
- DescribeGroups and ListGroups, where groups that only have committed offsets are Empty;
- groups' records in ``__consumer_offsets`` (``stored_groups``): written when a generation
  completes and when a group becomes Empty, loaded with their partition, so that a new
  coordinator carries on with the same members in the same generation.

Every group API first asks ``coordinates`` whether this broker coordinates the group now. One
lock guards every group (requests of different connections, and deadlines, run concurrently);
nothing under it blocks.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import Future

from kio.schema.errors import ErrorCode

from broker.groups.deadlines import Deadlines
from broker.groups.group import Group, Member
from broker.groups.group_config import GroupConfig
from broker.groups.group_messages import (
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    ListedGroup,
    SyncRequest,
    SyncResult,
)
from broker.groups.group_records import StoredGroup
from broker.groups.group_state import GroupState
from broker.groups.group_writer import GroupWriter
from broker.groups.membership import OffsetExpiry
from broker.groups.rebalance import Rebalancer
from broker.groups.stored_groups import StoredGroups

__all__ = ["GroupCoordinator"]

log = logging.getLogger(__name__)


class GroupCoordinator:
    """Thread-safe. ``clock`` (seconds) drives the deadlines; tests pass a fake one with
    ``deadlines=Deadlines(clock, start=False)`` and run them by hand. ``wall_clock_ms`` dates
    groups' states, which offsets' retention counts from. ``writer`` writes groups'
    records (None: none are, and membership lasts as long as this object); ``partition_of``
    maps a group to its partition of ``__consumer_offsets`` (None: not known here); it is asked
    under the lock and must not block."""

    def __init__(
        self,
        coordinates: Callable[[str], ErrorCode],
        groups_with_offsets: Callable[[], Iterable[str]],
        config: GroupConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        deadlines: Deadlines | None = None,
        writer: GroupWriter | None = None,
        partition_of: Callable[[str], int | None] = lambda group_id: None,
        wall_clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._coordinates = coordinates
        self._wall_clock_ms = wall_clock_ms
        self._groups_with_offsets = groups_with_offsets
        self.config = config or GroupConfig()
        self._clock = clock
        self._lock = threading.RLock()
        self._groups: dict[str, Group] = {}
        self._deadlines = deadlines or Deadlines(clock)
        self._rebalance = Rebalancer(
            self._groups,
            self._lock,
            self._deadlines,
            self.config,
            emptied=self._group_emptied,
        )
        self._stored = StoredGroups(
            self._groups,
            self._lock,
            self._rebalance,
            writer,
            partition_of,
            wall_clock_ms,
            self.config.max_size,
        )

    def _group_emptied(self, group: Group) -> None:
        self._stored.emptied(group)  # made after the rebalancer, which calls this

    def close(self) -> None:
        """Stops the writes and the deadlines and answers every waiting member
        COORDINATOR_NOT_AVAILABLE (they look for the coordinator again)."""
        self._stored.close()
        self._deadlines.close()
        with self._lock:
            for group in self._groups.values():
                group.complete_all_joins(ErrorCode.coordinator_not_available)
                group.complete_all_syncs(ErrorCode.coordinator_not_available)

    def _refusal(self, group_id: str) -> ErrorCode:
        """Why this broker does not serve ``group_id`` now (NONE: it does)."""
        error = self._coordinates(group_id)
        if error is not ErrorCode.none:
            return error
        return ErrorCode.none if group_id else ErrorCode.invalid_group_id

    # ------------------------------------------------------------------------- JoinGroup

    def join(self, request: JoinRequest) -> Future[JoinResult]:
        answer: Future[JoinResult] = Future()
        error = self._refusal(request.group_id)
        if error is ErrorCode.none and not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            error = ErrorCode.invalid_session_timeout
        if error is not ErrorCode.none:
            answer.set_result(JoinResult(error, request.member_id))
            return answer
        with self._lock:
            group = self._groups.get(request.group_id)
            new_member = request.member_id == UNKNOWN_MEMBER_ID
            created = group is None
            if group is None:
                if not new_member:
                    answer.set_result(JoinResult(ErrorCode.unknown_member_id, request.member_id))
                    return answer
                group = self._groups[request.group_id] = Group(
                    request.group_id, self._wall_clock_ms
                )
            if not self._accepts(group, request.member_id):
                if request.member_id in group.members:
                    self._rebalance.cancel_session(group, request.member_id)
                group.remove(request.member_id)
                answer.set_result(JoinResult(ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID))
            elif new_member:
                self._join_new_member(group, request, answer)
            else:
                self._join_existing_member(group, request, answer)
            if created and not group.members and not group.pending_join_members:
                del self._groups[request.group_id]  # its first join failed: nothing to keep
        return answer

    def _accepts(self, group: Group, member_id: str) -> bool:
        """Whether ``group.max.size`` admits the member (existing members always; during a
        rebalance those already waiting, so that the last to rejoin are the ones refused)."""
        limit = self.config.max_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            waiting = member is not None and member.awaiting_join
            return waiting or group.awaiting_join_count() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(
        self, group: Group, request: JoinRequest, answer: Future[JoinResult]
    ) -> None:
        if group.is_in(GroupState.DEAD):
            answer.set_result(JoinResult(ErrorCode.coordinator_not_available, UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(request.protocol_type, (p.name for p in request.protocols)):
            answer.set_result(JoinResult(ErrorCode.inconsistent_group_protocol, UNKNOWN_MEMBER_ID))
            return
        member_id = Group.new_member_id(request.client_id, request.group_instance_id)
        instance_id = request.group_instance_id
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self._replace_static_member(group, request, existing, member_id, answer)
            else:
                self._rebalance.add_member(
                    group, self._member(request, member_id), answer, _client_reason(request)
                )
        elif request.requires_known_member_id:
            group.pending_join_members.add(member_id)
            self._rebalance.schedule_session(group, member_id, request.session_timeout_ms)
            answer.set_result(JoinResult(ErrorCode.member_id_required, member_id))
        else:
            self._rebalance.add_member(
                group, self._member(request, member_id), answer, _client_reason(request)
            )

    @staticmethod
    def _member(request: JoinRequest, member_id: str) -> Member:
        return Member(
            member_id,
            request.group_instance_id,
            request.client_id,
            request.client_host,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            request.protocol_type,
            request.protocols,
        )

    def _join_existing_member(
        self, group: Group, request: JoinRequest, answer: Future[JoinResult]
    ) -> None:
        member_id = request.member_id
        if group.is_in(GroupState.DEAD):
            answer.set_result(JoinResult(ErrorCode.coordinator_not_available, member_id))
            return
        if not group.supports_protocols(request.protocol_type, (p.name for p in request.protocols)):
            answer.set_result(JoinResult(ErrorCode.inconsistent_group_protocol, member_id))
            return
        if member_id in group.pending_join_members:
            if request.group_instance_id is not None:  # pending members are dynamic ones
                answer.set_result(JoinResult(ErrorCode.invalid_request, member_id))
                return
            self._rebalance.add_member(
                group, self._member(request, member_id), answer, _client_reason(request)
            )
            return
        error = group.member_error(member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            answer.set_result(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        changed = not member.matches(request.protocols)
        if group.is_in(GroupState.PREPARING_REBALANCE) or (
            group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and changed
        ):
            self._update_member(group, request, member, answer, "member changed or rejoined")
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The same member again (it missed its answer): the current generation.
            answer.set_result(group.join_result(member_id, group.is_leader(member_id)))
        elif group.is_in(GroupState.STABLE):
            if group.is_leader(member_id):
                # The leader rejoins to have the group reassigned (its topics' metadata changed).
                self._update_member(group, request, member, answer, "the leader rejoined")
            else:
                answer.set_result(group.join_result(member_id, leader_view=False))
        else:
            log.warning("group %s: member %s rejoins an empty group", group.group_id, member_id)
            answer.set_result(JoinResult(ErrorCode.unknown_member_id, member_id))

    def _update_member(
        self,
        group: Group,
        request: JoinRequest,
        member: Member,
        answer: Future[JoinResult],
        reason: str,
    ) -> None:
        group.update(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            answer,
        )
        self._rebalance.prepare_rebalance_or_complete_join(
            group, f"{member.member_id}: {reason} ({_client_reason(request)})"
        )

    def _replace_static_member(
        self,
        group: Group,
        request: JoinRequest,
        old_member_id: str,
        new_member_id: str,
        answer: Future[JoinResult],
    ) -> None:
        assert request.group_instance_id is not None
        leader_before = group.leader_id
        self._rebalance.cancel_session(group, old_member_id)
        member = group.replace_static_member(
            request.group_instance_id, old_member_id, new_member_id
        )
        log.info(
            "group %s: static member %s is back as %s (was %s)",
            group.group_id,
            request.group_instance_id,
            new_member_id,
            old_member_id,
        )
        self._rebalance.schedule_session(group, new_member_id, member.session_timeout_ms)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update(
            member,
            request.protocols,
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            answer,
        )
        if group.is_in(GroupState.STABLE):
            if group.protocol_name != group.select_protocol():
                self._rebalance.prepare_rebalance_or_complete_join(
                    group, f"static member {new_member_id} changed the group's protocol"
                )
            else:

                def answer_join() -> None:
                    if request.supports_skip_assignment:
                        # v9+: a returning leader learns it leads but must not assign again.
                        leads = group.is_leader(new_member_id)
                        result = group.join_result(new_member_id, leads, skip_assignment=leads)
                    else:
                        # Told the old leader leads, a returning leader syncs as a follower and
                        # gets back the assignment it had.
                        result = dataclasses.replace(
                            group.join_result(new_member_id, leader_view=False),
                            leader=leader_before or "",
                        )
                    group.complete_join(member, result)

                self._stored.static_member_replaced(
                    group, member, old_member_id, previous, answer_join
                )
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: assign again.
            self._rebalance.prepare_rebalance(group, f"static member {new_member_id} rejoined")
        else:
            self._rebalance.maybe_complete_join_phase(group)

    # ------------------------------------------------------------------------- SyncGroup

    def sync(self, request: SyncRequest) -> Future[SyncResult]:
        answer: Future[SyncResult] = Future()
        with self._lock:
            error = self._sync_error(request)
            if error is not ErrorCode.none:
                answer.set_result(SyncResult(error))
                return answer
            group = self._groups[request.group_id]
            member = group.members[request.member_id]
            if group.is_in(GroupState.PREPARING_REBALANCE):
                answer.set_result(SyncResult(ErrorCode.rebalance_in_progress))
            elif group.is_in(GroupState.COMPLETING_REBALANCE):
                member.sync_answer = answer
                self._rebalance.synced(group, member.member_id)
                if group.is_leader(member.member_id):
                    log.info(
                        "group %s generation %d: assignment from leader %s",
                        group.group_id,
                        group.generation_id,
                        member.member_id,
                    )
                    self._stored.leader_assigned(group, dict(request.assignments))
            else:  # Stable: the assignment it already has
                self._rebalance.synced(group, member.member_id)
                answer.set_result(
                    SyncResult(
                        ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
                    )
                )
        return answer

    def _sync_error(self, request: SyncRequest) -> ErrorCode:
        error = self._refusal(request.group_id)
        if error is not ErrorCode.none:
            return error
        group = self._groups.get(request.group_id)
        if group is None or not group.members:
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = group.member_error(request.member_id, request.group_instance_id)
        if error is not ErrorCode.none:
            return error
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return ErrorCode.none

    # ------------------------------------------------------------------------- Heartbeat

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self._refusal(group_id)
        if error is not ErrorCode.none:
            return error
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.unknown_member_id
            if group.is_in(GroupState.DEAD):
                return ErrorCode.coordinator_not_available
            error = group.member_error(member_id, group_instance_id)
            if error is not ErrorCode.none:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
            member = group.members[member_id]
            self._rebalance.schedule_session(group, member_id, member.session_timeout_ms)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                return ErrorCode.rebalance_in_progress
            return ErrorCode.none

    # ------------------------------------------------------------------------ LeaveGroup

    def leave(
        self, group_id: str, members: Sequence[LeavingMember]
    ) -> tuple[ErrorCode, list[LeaveResult]]:
        """(the request's error, each member's result); the group rebalances at once."""
        error = self._refusal(group_id)
        if error is not ErrorCode.none:
            return error, []
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.unknown_member_id, []
            if group.is_in(GroupState.DEAD):
                return ErrorCode.coordinator_not_available, []
            results = [self._leave_one(group, leaving) for leaving in members]
            left = [
                r.member_id or r.group_instance_id for r in results if r.error is ErrorCode.none
            ]
            if left:
                self._rebalance.after_removal(group, f"{left} left the group")
            return ErrorCode.none, results

    def _leave_one(self, group: Group, leaving: LeavingMember) -> LeaveResult:
        member_id, instance_id = leaving.member_id, leaving.group_instance_id
        reason = f"it left: {leaving.reason or 'no reason given'}"
        if member_id == UNKNOWN_MEMBER_ID:
            # An admin removes a static member by its instance id alone.
            static_id = group.static_member_id(instance_id) if instance_id is not None else None
            if static_id is None:
                return LeaveResult(member_id, instance_id, ErrorCode.unknown_member_id)
            self._rebalance.remove_member(group, static_id, reason)
            return LeaveResult(member_id, instance_id, ErrorCode.none)
        if member_id in group.pending_join_members:
            group.remove(member_id)
            self._rebalance.cancel_session(group, member_id)
            return LeaveResult(member_id, instance_id, ErrorCode.none)
        error = group.member_error(member_id, instance_id)
        if error is ErrorCode.none:
            self._rebalance.remove_member(group, member_id, reason)
        return LeaveResult(member_id, instance_id, error)

    # ----------------------------------------------------------- DescribeGroups, ListGroups

    def describe(self, group_ids: Collection[str]) -> list[DescribedGroup]:
        with_offsets: set[str] | None = None
        described = []
        for group_id in group_ids:
            error = self._refusal(group_id)
            if error is not ErrorCode.none:
                described.append(DescribedGroup(group_id, error, ""))
                continue
            with self._lock:
                group = self._groups.get(group_id)
                if group is not None:
                    described.append(
                        DescribedGroup(
                            group_id,
                            ErrorCode.none,
                            group.state.value,
                            group.protocol_type or "",
                            group.protocol_name or "" if group.is_in(GroupState.STABLE) else "",
                            group.describe_members(),
                        )
                    )
                    continue
            if with_offsets is None:
                with_offsets = set(self._groups_with_offsets())
            state = GroupState.EMPTY if group_id in with_offsets else GroupState.DEAD
            described.append(DescribedGroup(group_id, ErrorCode.none, state.value))
        return described

    def list_groups(self, states: Collection[GroupState] = ()) -> list[ListedGroup]:
        """Every group this broker coordinates now, in ``states`` if any are given (a group
        whose coordination moved elsewhere is left out: its members moved with it)."""
        with self._lock:
            listed = {
                group_id: ListedGroup(group_id, group.protocol_type or "", group.state.value)
                for group_id, group in self._groups.items()
            }
        for group_id in self._groups_with_offsets():
            listed.setdefault(group_id, ListedGroup(group_id, "", GroupState.EMPTY.value))
        wanted = {s.value for s in states}
        return [
            g
            for g in listed.values()
            if (not wanted or g.state in wanted) and self._coordinates(g.group_id) is ErrorCode.none
        ]

    # ------------------------------------------------------ what the offsets side asks

    def offset_commit_error(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode:
        """NONE when an OffsetCommit may be applied, else Kafka's error for it
        (``ClassicGroup.validateOffsetCommit``): generation -1 with an empty member id on a group
        without members is a standalone commit."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                # No group here: a standalone commit, else a member of a generation this
                # coordinator never had (it rejoins).
                return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
            if group.is_in(GroupState.DEAD):
                return ErrorCode.coordinator_not_available
            if generation_id < 0 and group.is_in(GroupState.EMPTY):
                return ErrorCode.none
            if generation_id >= 0 or member_id or group_instance_id is not None:
                error = group.member_error(member_id, group_instance_id)
                if error is not ErrorCode.none:
                    return error
                if generation_id != group.generation_id:
                    return ErrorCode.illegal_generation
            elif not group.is_in(GroupState.EMPTY):
                return ErrorCode.unknown_member_id
            if group.is_in(GroupState.COMPLETING_REBALANCE):
                return ErrorCode.rebalance_in_progress
            return ErrorCode.none

    def offset_fetch_error(
        self, group_id: str, member_id: str | None, generation_id: int
    ) -> ErrorCode:
        """As Kafka's ``ClassicGroup.validateOffsetFetch``: a classic group's fetch is refused
        only while it is being deleted (the member and generation of v7+ are not checked)."""
        with self._lock:
            group = self._groups.get(group_id)
            dead = group is not None and group.is_in(GroupState.DEAD)
            return ErrorCode.group_id_not_found if dead else ErrorCode.none

    def delete_group_error(self, group_id: str) -> ErrorCode:
        """NONE and the group gone (Dead, then forgotten) if it has no members, else
        NON_EMPTY_GROUP; whether a group unknown here exists is the offsets side's to say."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.none
            if group.is_in(
                GroupState.STABLE, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE
            ):
                return ErrorCode.non_empty_group
            self._rebalance.forget(group)
            group.transition_to(GroupState.DEAD)
            del self._groups[group_id]
            log.info("group %s deleted", group_id)
            return ErrorCode.none

    def groups_loaded(self, partition: int, stored: Mapping[str, StoredGroup]) -> None:
        self._stored.partition_loaded(partition, stored)

    def partition_unloaded(self, partition: int) -> None:
        self._stored.partition_unloaded(partition)

    def subscribed_topics(
        self, group_id: str, topics: Collection[str]
    ) -> frozenset[str] | ErrorCode:
        """Those of ``topics`` whose offsets an OffsetDelete must keep, as Kafka's
        ``ClassicGroup.validateOffsetDelete`` and ``isSubscribedToTopic`` decide: none for a group
        without members, the subscribed ones for a consumer group with members; a group with
        members of another protocol type is NON_EMPTY_GROUP, a Dead one GROUP_ID_NOT_FOUND."""
        with self._lock:
            group = self._groups.get(group_id)
            if group is None or group.is_in(GroupState.EMPTY):
                return frozenset()
            if group.is_in(GroupState.DEAD):
                return ErrorCode.group_id_not_found
            if not group.is_consumer_group:
                return ErrorCode.non_empty_group
            return frozenset(t for t in topics if group.is_subscribed_to(t))

    def state_of(self, group_id: str) -> GroupState | None:
        with self._lock:
            group = self._groups.get(group_id)
            return None if group is None else group.state

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        """A group not known here committed its offsets standalone: each expires from its
        commit, as in Kafka's group without a protocol type."""
        with self._lock:
            group = self._groups.get(group_id)
            return OffsetExpiry() if group is None else group.offset_expiry()


def _client_reason(request: JoinRequest) -> str:
    return f"client's reason: {request.reason or 'none given'}"


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and asked != actual
