"""What the offsets side asks of group membership (``GroupCoordinator``, on the membership
side): whether a commit or a fetch may go ahead for a member, whether a group may be deleted,
which topics' offsets an OffsetDelete must keep, when a group's offsets expire, and a group's
state; and what it tells membership: the groups a partition of ``__consumer_offsets`` brought
back when it loaded, and that a partition is no longer served here. (Membership writes its
groups' records through ``OffsetStore.store_group``.)"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from broker.groups.group_records import StoredGroup
from broker.groups.group_state import GroupState

__all__ = ["GroupMembership", "OffsetExpiry"]


@dataclass(frozen=True, slots=True)
class OffsetExpiry:
    """Kafka's ``OffsetExpirationCondition`` for one group: an offset expires
    ``offsets.retention.minutes`` after ``empty_since_ms`` (when the group became Empty) or,
    when that is None, after its own commit; the offsets of ``subscribed_topics`` never do."""

    empty_since_ms: int | None = None
    subscribed_topics: frozenset[str] = frozenset()

    def expired(self, topic: str, commit_timestamp_ms: int, now_ms: int, retention_ms: int) -> bool:
        if topic in self.subscribed_topics:
            return False
        since = commit_timestamp_ms if self.empty_since_ms is None else self.empty_since_ms
        return now_ms - since >= retention_ms


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

    def subscribed_topics(
        self, group_id: str, topics: Collection[str]
    ) -> frozenset[str] | ErrorCode:
        """Those of ``topics`` the group's members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC: their
        offsets stay), or why the whole OffsetDelete is refused (NON_EMPTY_GROUP,
        GROUP_ID_NOT_FOUND)."""

    def state_of(self, group_id: str) -> GroupState | None:
        """The group's state, None for a group membership does not know."""

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        """How the group's offsets expire now; None: none of them do (a group rebalancing, or
        one whose members' subscriptions are not known)."""

    def groups_loaded(self, partition: int, stored: Mapping[str, StoredGroup]) -> None:
        """``partition`` loaded: its groups, as stored, replace any membership held of it."""

    def partition_unloaded(self, partition: int) -> None:
        """``partition`` is no longer served here: its groups go."""
