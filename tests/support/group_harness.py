"""A group coordinator on a fake clock for tests: ``Harness`` joins and syncs members and runs
the deadlines that fall due as its clock advances."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from kio.schema.errors import ErrorCode

from broker.groups.coordinator import GroupCoordinator
from broker.groups.deadlines import Deadlines
from broker.groups.group_config import GroupConfig
from broker.groups.group_messages import (
    JoinRequest,
    JoinResult,
    Protocol,
    SyncRequest,
    SyncResult,
)
from broker.groups.group_state import GroupState
from broker.groups.group_writer import GroupWriter

__all__ = [
    "GROUP",
    "INITIAL_DELAY_MS",
    "RANGE",
    "REBALANCE_MS",
    "ROUND_ROBIN",
    "SESSION_MS",
    "FakeClock",
    "Harness",
]

GROUP = "payments"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
INITIAL_DELAY_MS = 3_000
RANGE = Protocol("range", b"range-subscription")
ROUND_ROBIN = Protocol("roundrobin", b"rr-subscription")


class FakeClock:
    """Seconds for the deadlines; ``wall_ms`` is the same time in milliseconds, for what dates
    groups' states and offsets' commits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return int(self.now * 1000)


class Harness:
    """A coordinator on a fake clock; ``advance`` moves the clock and runs what fell due."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        writer: GroupWriter | None = None,
        partition_of: Callable[[str], int | None] = lambda group_id: None,
        clock: FakeClock | None = None,
    ) -> None:
        """``writer``, ``partition_of``: the coordinator's (groups' records written through
        ``writer``); ``clock``: shared with what else the test runs on it."""
        self.clock = clock or FakeClock()
        self.writer = writer
        self.deadlines = Deadlines(self.clock, start=False)
        self.offsets_groups: set[str] = set()
        self.refusals: dict[str, ErrorCode] = {}
        self.coordinator = GroupCoordinator(
            lambda group: self.refusals.get(group, ErrorCode.none),
            lambda: sorted(self.offsets_groups),
            config or GroupConfig(initial_rebalance_delay_ms=INITIAL_DELAY_MS),
            self.clock,
            self.deadlines,
            writer,
            partition_of,
            self.clock.wall_ms,
        )

    def advance(self, ms: int) -> None:
        self.clock.now += ms / 1000
        self.deadlines.run_due()

    def initial_rebalance(self, *answers: Future[JoinResult]) -> None:
        """Waits out the first rebalance's delay, which each new member extends."""
        for _ in range(REBALANCE_MS // INITIAL_DELAY_MS):
            if all(a.done() for a in answers):
                return
            self.advance(INITIAL_DELAY_MS)
        raise AssertionError("the first rebalance did not complete")

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[Protocol, ...] = (RANGE,),
        version: int = 5,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
        group: str = GROUP,
        client: str = "client",
        protocol_type: str = "consumer",
    ) -> Future[JoinResult]:
        return self.coordinator.join(
            JoinRequest(
                group_id=group,
                member_id=member_id,
                group_instance_id=instance,
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                protocol_type=protocol_type,
                protocols=protocols,
                client_id=client,
                client_host="/127.0.0.1",
                requires_known_member_id=version >= 4,
                supports_skip_assignment=version >= 9,
            )
        )

    def join_new(self, **kwargs: object) -> tuple[str, Future[JoinResult]]:
        """A v4+ new member's two rounds: (its member id, the second join's answer)."""
        first = self.join(**kwargs).result(0)  # type: ignore[arg-type]
        assert first.error is ErrorCode.member_id_required
        return first.member_id, self.join(first.member_id, **kwargs)  # type: ignore[arg-type]

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> Future[SyncResult]:
        return self.coordinator.sync(
            SyncRequest(
                GROUP,
                member_id,
                instance,
                generation,
                "consumer",
                "range",
                tuple((assignments or {}).items()),
            )
        )

    def write_records(self) -> int:
        """Writes the groups' records handed to the writer (its callbacks answer members)."""
        return 0 if self.writer is None else self.writer.run_pending()

    def state(self) -> GroupState | None:
        return self.coordinator.state_of(GROUP)

    def stable_pair(self) -> tuple[str, str, int]:
        """Two members through their first rebalance and sync: (leader, follower, generation)."""
        first, first_join = self.join_new()
        second, second_join = self.join_new()
        self.initial_rebalance(first_join, second_join)
        leader_answer, follower_answer = first_join.result(0), second_join.result(0)
        generation = leader_answer.generation_id
        leader, follower = (first, second) if leader_answer.leader == first else (second, first)
        follower_sync = self.sync(follower, generation)
        assert not follower_sync.done()  # waits for the leader's plan
        leader_sync = self.sync(leader, generation, {leader: b"p0", follower: b"p1"})
        self.write_records()
        leader_sync.result(0)
        assert follower_sync.result(0).assignment == b"p1"
        assert self.state() is GroupState.STABLE
        del follower_answer
        return leader, follower, generation
