"""The group coordinator's side of groups' records in ``__consumer_offsets`` (Kafka's
``GroupMetadataManager.storeGroup`` and ``loadGroupsAndOffsets``): what it writes, when, and what
it does with the groups a loaded partition brings back.

- A generation completes (the leader's SyncGroup): the group's record, with the leader's plan,
  is written first; the members get their assignments once it is durable (a failed write
  answers them the error and the group rebalances again, as Kafka does).
- The group becomes Empty: its record, without members (nothing waits for it).
- A static member comes back while the group is Stable: the record with its new member id, and
  its JoinGroup answer once durable (a failed write restores the old member id), so that a new
  coordinator does not fence it.
- A partition loads: its groups replace whatever this broker held of that partition's groups,
  Stable with their members and assignments (each member's session restarted from now) or
  Empty. A partition that moved away takes its groups along: their waiting members are told
  NOT_COORDINATOR.

Tombstones (DeleteGroups, expiry) are the offsets side's. ``GroupCoordinator`` calls this under
its lock; the writer's callbacks take that lock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, MutableMapping

from kio.schema.errors import ErrorCode

from broker.groups.group import Group, Member
from broker.groups.group_messages import JoinResult, Protocol
from broker.groups.group_records import StoredGroup
from broker.groups.group_state import GroupState
from broker.groups.group_writer import GroupWriter
from broker.groups.rebalance import Rebalancer

__all__ = ["StoredGroups"]

log = logging.getLogger(__name__)


class StoredGroups:
    def __init__(
        self,
        groups: MutableMapping[str, Group],
        lock: threading.RLock,
        rebalance: Rebalancer,
        writer: GroupWriter | None,
        partition_of: Callable[[str], int | None],
        wall_clock_ms: Callable[[], int],
        max_size: int,
    ) -> None:
        """``writer`` None: nothing is written (a coordinator without ``__consumer_offsets``)."""
        self._groups = groups
        self._lock = lock
        self._rebalance = rebalance
        self._writer = writer
        self._partition_of = partition_of
        self._wall_clock_ms = wall_clock_ms
        self._max_size = max_size

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()

    def _current(self, group: Group, generation: int) -> bool:
        """Whether a callback's group is still served here, in the generation it wrote."""
        return self._groups.get(group.group_id) is group and group.generation_id == generation

    # ------------------------------------------------------------------------------ writing

    def leader_assigned(self, group: Group, assignments: Mapping[str, bytes]) -> None:
        """The leader's plan for a group in CompletingRebalance: written, then handed out."""
        if self._writer is None:
            self._rebalance.assign(group, assignments)
            return
        generation = group.generation_id
        plan = {m: assignments.get(m, b"") for m in group.members}

        def written(error: ErrorCode) -> None:
            with self._lock:
                if not (
                    self._current(group, generation)
                    and group.is_in(GroupState.COMPLETING_REBALANCE)
                ):
                    return  # the group moved on while it was written
                if error is ErrorCode.none:
                    self._rebalance.assign(group, assignments)
                else:
                    self._rebalance.assignment_not_stored(group, error)

        self._writer.submit(group.group_id, group.stored(plan), written)

    def emptied(self, group: Group) -> None:
        if self._writer is not None:
            self._writer.submit(group.group_id, group.stored())

    def static_member_replaced(
        self,
        group: Group,
        member: Member,
        old_member_id: str,
        previous: tuple[tuple[Protocol, ...], int, int],
        answer: Callable[[], None],
    ) -> None:
        """A static member took ``old_member_id``'s place in a Stable group: ``answer()`` (its
        JoinGroup answer) once the group's record names it; if the write fails, it gets the
        error and the old member is restored with ``previous`` (its protocols and timeouts)."""
        if self._writer is None:
            answer()
            return
        generation = group.generation_id
        instance_id = member.group_instance_id
        assert instance_id is not None

        def written(error: ErrorCode) -> None:
            with self._lock:
                if (
                    not self._current(group, generation)
                    or group.members.get(member.member_id) is not member
                ):
                    return
                if error is ErrorCode.none:
                    if group.is_in(GroupState.STABLE):
                        answer()
                    return
                log.warning(
                    "group %s: static member %s not stored (%s); %s is restored",
                    group.group_id,
                    member.member_id,
                    error.name,
                    old_member_id,
                )
                group.complete_join(member, JoinResult(error, ""))
                protocols, rebalance_timeout_ms, session_timeout_ms = previous
                group.update(member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
                self._rebalance.cancel_session(group, member.member_id)
                old = group.replace_static_member(instance_id, member.member_id, old_member_id)
                self._rebalance.schedule_session(group, old.member_id, old.session_timeout_ms)

        self._writer.submit(group.group_id, group.stored(), written)

    # ------------------------------------------------------------------------------ loading

    def partition_loaded(self, partition: int, stored: Mapping[str, StoredGroup]) -> None:
        with self._lock:
            self.partition_unloaded(partition)
            for group_id, record in stored.items():
                self._drop(group_id)
                group = Group.loaded(group_id, record, self._wall_clock_ms)
                self._groups[group_id] = group
                for member in group.members.values():
                    self._rebalance.schedule_session(
                        group, member.member_id, member.session_timeout_ms
                    )
                log.info(
                    "group %s loaded: %s, generation %d, %d members",
                    group_id,
                    group.state.value,
                    group.generation_id,
                    len(group.members),
                )
                if len(group.members) > self._max_size:
                    self._rebalance.prepare_rebalance(
                        group, f"loaded with more members than group.max.size {self._max_size}"
                    )

    def partition_unloaded(self, partition: int) -> None:
        with self._lock:
            for group_id in [g for g in self._groups if self._partition_of(g) == partition]:
                self._drop(group_id)

    def _drop(self, group_id: str) -> None:
        """Kafka's ``onGroupUnloaded``: the group is Dead here, its waiting members told to find
        their coordinator again."""
        group = self._groups.pop(group_id, None)
        if group is None:
            return
        self._rebalance.forget(group)
        group.complete_all_joins(ErrorCode.not_coordinator)
        group.complete_all_syncs(ErrorCode.not_coordinator)
        group.transition_to(GroupState.DEAD)
