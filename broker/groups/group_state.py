"""A classic group's state machine: Kafka's ``ClassicGroupState`` and its valid transitions.

====================  =============================================  ==========================
to                    from                                           when
====================  =============================================  ==========================
PREPARING_REBALANCE   EMPTY, STABLE, COMPLETING_REBALANCE            a member joins, leaves,
                                                                     changes or expires
COMPLETING_REBALANCE  PREPARING_REBALANCE                            every member (re)joined or
                                                                     the rebalance timed out
STABLE                COMPLETING_REBALANCE                           the leader's assignment
EMPTY                 PREPARING_REBALANCE                            the join phase ended with
                                                                     no member
DEAD                  any                                            the group is deleted
====================  =============================================  ==========================

A group loaded from its record in ``__consumer_offsets`` starts in Empty or Stable (Kafka's
``loadGroup``), the states its record is written in.

Any other move raises :class:`InvalidGroupTransition` (a ``ValueError``): the table below is the
one place that knows which transitions are valid.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

__all__ = [
    "GroupState",
    "InvalidGroupTransition",
    "can_rebalance",
    "check_loaded_state",
    "check_transition",
]


class GroupState(enum.Enum):
    """Kafka's names (``Empty``, ``PreparingRebalance``, ...) as the values: what DescribeGroups
    and ListGroups answer."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @classmethod
    def parse(cls, text: str) -> GroupState | None:
        """ListGroups' states filter: a name in any case (``stable``, ``Stable``); None for an
        unknown one (Kafka's filter then matches nothing)."""
        key = text.strip().lower()
        return next((s for s in cls if s.value.lower() == key), None)


_VALID_PREVIOUS: Mapping[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}

_LOADED_STATES = frozenset({GroupState.EMPTY, GroupState.STABLE})


class InvalidGroupTransition(ValueError):  # noqa: N818 - named as tiered_state's
    """A move the table does not allow: a coordinator bug, never a client's error."""

    def __init__(self, group_id: str, current: GroupState, target: GroupState) -> None:
        valid = ", ".join(sorted(s.value for s in _VALID_PREVIOUS[target]))
        super().__init__(
            f"group {group_id!r} cannot move from {current.value} to {target.value}; "
            f"{target.value} is reached from: {valid}"
        )


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raises :class:`InvalidGroupTransition` unless ``current`` may move to ``target``."""
    if current not in _VALID_PREVIOUS[target]:
        raise InvalidGroupTransition(group_id, current, target)


def check_loaded_state(group_id: str, state: GroupState) -> None:
    """Raises ``ValueError`` unless a loaded group may start in ``state``."""
    if state not in _LOADED_STATES:
        valid = ", ".join(sorted(s.value for s in _LOADED_STATES))
        raise ValueError(f"group {group_id!r} cannot be loaded in {state.value}; valid: {valid}")


def can_rebalance(state: GroupState) -> bool:
    """Whether a group in ``state`` may start a rebalance (PreparingRebalance is reachable)."""
    return state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]
