"""What the offsets side asks of group membership (``GroupCoordinator``, on the membership
side): whether a commit or a fetch may go ahead for a member, whether a group may be deleted,
and a group's state. ``NoMembers`` stands in where no membership is served: every group is
without members, so every commit is a standalone one (generation -1, no member id)."""

from __future__ import annotations

import enum
from typing import Protocol

from kio.schema.errors import ErrorCode

__all__ = ["GroupMembership", "NoMembers", "has_members"]


class GroupMembership(Protocol):
    def offset_commit_error(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode:
        """NONE when an OffsetCommit may be applied, else Kafka's error for it."""

    def offset_fetch_error(
        self, group_id: str, member_id: str | None, generation_id: int
    ) -> ErrorCode:
        """NONE when an OffsetFetch may be answered (v7+ carries member and generation)."""

    def delete_group_error(self, group_id: str) -> ErrorCode:
        """NONE (and the group forgotten) if it has no members, else NON_EMPTY_GROUP."""

    def state_of(self, group_id: str) -> enum.Enum | None:
        """The group's state (Kafka's GroupState), None for a group membership does not know."""


_WITHOUT_MEMBERS = frozenset({"EMPTY", "DEAD"})


def has_members(membership: GroupMembership, group_id: str) -> bool:
    """Whether the group has members now (any state but Empty and Dead)."""
    state = membership.state_of(group_id)
    return state is not None and state.name not in _WITHOUT_MEMBERS


class NoMembers:
    """Membership of a broker that serves none: standalone commits only."""

    def offset_commit_error(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None
    ) -> ErrorCode:
        # Kafka's rule for a group it does not know: a commit without a generation is a
        # standalone one; a generation is one of a group that is gone.
        return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation

    def offset_fetch_error(
        self, group_id: str, member_id: str | None, generation_id: int
    ) -> ErrorCode:
        return ErrorCode.none

    def delete_group_error(self, group_id: str) -> ErrorCode:
        return ErrorCode.none

    def state_of(self, group_id: str) -> enum.Enum | None:
        return None
