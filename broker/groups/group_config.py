"""The broker's group coordinator settings, under Kafka's keys and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tiered.properties import int_property

__all__ = [
    "GROUP_INITIAL_REBALANCE_DELAY_MS",
    "GROUP_MAX_SESSION_TIMEOUT_MS",
    "GROUP_MAX_SIZE",
    "GROUP_MIN_SESSION_TIMEOUT_MS",
    "GroupConfig",
]

GROUP_MIN_SESSION_TIMEOUT_MS = "group.min.session.timeout.ms"
GROUP_MAX_SESSION_TIMEOUT_MS = "group.max.session.timeout.ms"
GROUP_INITIAL_REBALANCE_DELAY_MS = "group.initial.rebalance.delay.ms"
GROUP_MAX_SIZE = "group.max.size"
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    # How long the first rebalance of an empty group waits for more members (extended by each
    # new one up to the rebalance timeout), so that a starting fleet is not rebalanced per member.
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = _INT_MAX
    # Kafka's fixed bound on a new member's first JoinGroup wait (it cannot heartbeat yet).
    new_member_join_timeout_ms: int = 300_000

    def __post_init__(self) -> None:
        if self.max_session_timeout_ms < self.min_session_timeout_ms:
            raise ValueError(
                f"{GROUP_MAX_SESSION_TIMEOUT_MS}={self.max_session_timeout_ms} is not valid; "
                f"expected >= {GROUP_MIN_SESSION_TIMEOUT_MS} ({self.min_session_timeout_ms})"
            )

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> GroupConfig:
        """ValueError names a bad key and what is valid."""
        defaults = cls()
        return cls(
            min_session_timeout_ms=int_property(
                values, GROUP_MIN_SESSION_TIMEOUT_MS, defaults.min_session_timeout_ms, minimum=0
            ),
            max_session_timeout_ms=int_property(
                values, GROUP_MAX_SESSION_TIMEOUT_MS, defaults.max_session_timeout_ms, minimum=0
            ),
            initial_rebalance_delay_ms=int_property(
                values,
                GROUP_INITIAL_REBALANCE_DELAY_MS,
                defaults.initial_rebalance_delay_ms,
                minimum=0,
            ),
            max_size=int_property(values, GROUP_MAX_SIZE, defaults.max_size, minimum=1),
        )
