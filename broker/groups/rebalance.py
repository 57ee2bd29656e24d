"""The rebalance machinery of the group coordinator: Kafka's join phase (who rejoined, the
initial delay, the rebalance timeout), the sync phase (the leader's plan handed to every member)
and the member sessions, all on one ``Deadlines`` timer. ``GroupCoordinator`` calls it under its
lock; the deadlines it schedules take that lock before they act.

A member's session deadline moves on with each heartbeat and with each answer it gets; when it
passes, the member is removed unless it is waiting for a JoinGroup or SyncGroup answer (a
rebalance bounds that wait). A group's join phase ends when every member rejoined or at the
rebalance timeout (members that did not rejoin are dropped, static ones kept); its sync phase
ends when every member asked for its assignment or at the rebalance timeout (those that did not
are dropped and the group rebalances again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future

from kio.schema.errors import ErrorCode

from broker.groups.deadlines import Deadlines
from broker.groups.group import Group, Member
from broker.groups.group_config import GroupConfig
from broker.groups.group_messages import UNKNOWN_MEMBER_ID, JoinResult, SyncResult
from broker.groups.group_state import GroupState

__all__ = ["Rebalancer"]

log = logging.getLogger(__name__)

_JOIN, _SYNC, _SESSION = "join", "sync", "session"


class Rebalancer:
    def __init__(
        self,
        groups: Mapping[str, Group],
        lock: threading.RLock,
        deadlines: Deadlines,
        config: GroupConfig,
        emptied: Callable[[Group], None] = lambda group: None,
    ) -> None:
        """``emptied(group)``: a join phase ended with no member (the group is Empty)."""
        self._groups = groups
        self._lock = lock
        self._deadlines = deadlines
        self._config = config
        self._emptied = emptied

    # ------------------------------------------------------------------------- deadlines

    def _schedule(self, key: tuple[str, ...], delay_ms: int, action: Callable[[], None]) -> None:
        def locked() -> None:
            with self._lock:
                action()

        self._deadlines.schedule(key, delay_ms / 1000, locked)

    def _group(self, group_id: str, expected: Group) -> Group | None:
        """The group a deadline was set for, unless it was deleted (or replaced) since."""
        group = self._groups.get(group_id)
        return group if group is expected else None

    def schedule_session(self, group: Group, member_id: str, timeout_ms: int) -> None:
        self._schedule(
            (_SESSION, group.group_id, member_id),
            timeout_ms,
            lambda: self._session_expired(group, member_id),
        )

    def cancel_session(self, group: Group, member_id: str) -> None:
        self._deadlines.cancel((_SESSION, group.group_id, member_id))

    def forget(self, group: Group) -> None:
        """Cancels every deadline of a group being deleted."""
        self._deadlines.cancel((_JOIN, group.group_id))
        self._deadlines.cancel((_SYNC, group.group_id))
        for member_id in [*group.members, *group.pending_join_members]:
            self.cancel_session(group, member_id)

    # --------------------------------------------------------------------------- joining

    def add_member(
        self, group: Group, member: Member, answer: Future[JoinResult], reason: str
    ) -> None:
        member.is_new = True
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, answer)
        # A new member cannot heartbeat before its answer, and a client that gave up and retried
        # would leave a defunct member behind: its first wait is bounded instead.
        self.schedule_session(group, member.member_id, self._config.new_member_join_timeout_ms)
        self.prepare_rebalance_or_complete_join(group, f"{member.member_id} joined ({reason})")

    def prepare_rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
            self._propagate_assignment(group, ErrorCode.rebalance_in_progress)
        group.pending_sync_members.clear()
        self._deadlines.cancel((_SYNC, group.group_id))
        initial = group.is_in(GroupState.EMPTY)
        if initial:
            delay = self._config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "group %s prepares a rebalance from generation %d: %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self._schedule_join_timeout(group)

    def maybe_complete_join_phase(self, group: Group) -> None:
        """Completes the join phase once every member rejoined, except in a first rebalance,
        which waits out its delay for more members."""
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and group.previous_state is not GroupState.EMPTY
            and group.has_all_members_joined()
        ):
            self.complete_join(group)

    def _schedule_join_timeout(self, group: Group) -> None:
        self._schedule(
            (_JOIN, group.group_id),
            group.rebalance_timeout_ms(),
            lambda: self._join_timed_out(group),
        )

    def _join_timed_out(self, group: Group) -> None:
        if self._group(group.group_id, group) is not None:
            self.complete_join(group)

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        self._schedule(
            (_JOIN, group.group_id),
            delay_ms,
            lambda: self._initial_delay_passed(group, delay_ms, remaining_ms),
        )

    def _initial_delay_passed(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        if self._group(group.group_id, group) is None:
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay = min(self._config.initial_rebalance_delay_ms, remaining_ms)
            self._schedule_initial_join(group, next_delay, max(remaining_ms - delay_ms, 0))
        else:
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        """Ends the join phase: dynamic members that did not rejoin are dropped, the next
        generation starts and every member that rejoined gets its answer (the leader with the
        members' subscriptions)."""
        self._deadlines.cancel((_JOIN, group.group_id))
        for member in group.not_yet_rejoined():
            if not member.is_static:
                group.remove(member.member_id)
                self.cancel_session(group, member.member_id)
                log.info("group %s dropped %s: it did not rejoin", group.group_id, member.member_id)
        if group.is_in(GroupState.DEAD):
            return
        if not group.elect_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait for them (or their sessions).
            self._schedule_join_timeout(group)
            return
        group.init_next_generation()
        if group.is_in(GroupState.EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self._emptied(group)
            return
        log.info(
            "group %s generation %d: %d members, leader %s, protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.leader_id,
            group.protocol_name,
        )
        for member in list(group.members.values()):
            result = group.join_result(member.member_id, group.is_leader(member.member_id))
            group.complete_join(member, result)
            self.schedule_session(group, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        generation = group.generation_id
        self._schedule(
            (_SYNC, group.group_id),
            group.rebalance_timeout_ms(),
            lambda: self._sync_timed_out(group, generation),
        )

    # ---------------------------------------------------------------------------- syncing

    def synced(self, group: Group, member_id: str) -> None:
        """``member_id`` asked for its assignment: the sync phase stops waiting for it."""
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members or not group.is_in(
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ):
            self._deadlines.cancel((_SYNC, group.group_id))

    def assign(self, group: Group, assignments: Mapping[str, bytes]) -> None:
        """The leader's plan: every member gets its part (empty if the plan left it out) and the
        group is Stable."""
        missing = [m for m in group.members if m not in assignments]
        if missing:
            log.warning(
                "group %s generation %d: the leader assigned nothing to %s",
                group.group_id,
                group.generation_id,
                missing,
            )
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.none)
        group.transition_to(GroupState.STABLE)

    def assignment_not_stored(self, group: Group, error: ErrorCode) -> None:
        """The leader's plan could not be made durable: every member waiting for its assignment
        gets ``error`` and the group rebalances again (Kafka's
        ``resetAndPropagateAssignmentError``)."""
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)
        self.prepare_rebalance(group, f"its assignment could not be stored: {error.name}")

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        ok = error is ErrorCode.none
        for member in group.members.values():
            result = SyncResult(
                error,
                group.protocol_type if ok else None,
                group.protocol_name if ok else None,
                member.assignment,
            )
            if group.complete_sync(member, result):
                # Its session may have passed while it waited, which did not count.
                self.schedule_session(group, member.member_id, member.session_timeout_ms)

    def _sync_timed_out(self, group: Group, generation: int) -> None:
        if self._group(group.group_id, group) is None or generation != group.generation_id:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        late = list(group.pending_sync_members)
        if not late:
            return
        for member_id in late:
            group.remove(member_id)
            self.cancel_session(group, member_id)
        self.prepare_rebalance(group, f"{late} did not ask for their assignment in time")

    # --------------------------------------------------------------------- leaving, expiry

    def remove_member(self, group: Group, member_id: str, reason: str) -> None:
        """Removes a member (a leave or an expired session) and tells whoever still waits for a
        JoinGroup answer as it to join again; the others rebalance at once."""
        member = group.members[member_id]
        self.cancel_session(group, member_id)
        group.complete_join(member, JoinResult(ErrorCode.unknown_member_id, UNKNOWN_MEMBER_ID))
        group.remove(member_id)
        log.info("group %s: member %s removed (%s)", group.group_id, member_id, reason)

    def after_removal(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self.maybe_complete_join_phase(group)

    def _session_expired(self, group: Group, member_id: str) -> None:
        if self._group(group.group_id, group) is None or group.is_in(GroupState.DEAD):
            return
        if member_id in group.pending_join_members:
            group.remove(member_id)
            log.info("group %s: pending member %s expired", group.group_id, member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self.remove_member(group, member_id, "its session expired")
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance_or_complete_join(group, f"{member_id}'s session expired")
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join(group)
