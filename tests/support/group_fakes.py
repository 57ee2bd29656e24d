"""A stand-in for group membership in tests of the offsets side: every group is without members,
so every commit is a standalone one (generation -1, no member id)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from kio.schema.errors import ErrorCode

from broker.groups.group_records import StoredGroup
from broker.groups.group_state import GroupState
from broker.groups.membership import OffsetExpiry

__all__ = ["NoMembers"]


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

    def subscribed_topics(
        self, group_id: str, topics: Collection[str]
    ) -> frozenset[str] | ErrorCode:
        return frozenset()

    def state_of(self, group_id: str) -> GroupState | None:
        return None

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        return OffsetExpiry()  # standalone: from each commit

    def groups_loaded(self, partition: int, stored: Mapping[str, StoredGroup]) -> None:
        pass

    def partition_unloaded(self, partition: int) -> None:
        pass
