"""The group coordinator (``broker.groups``) on a fake clock: Kafka's classic membership, its
state table and its deadlines, without a listener."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future

import pytest
from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from broker.groups.deadlines import Deadlines
from broker.groups.group_config import GroupConfig
from broker.groups.group_messages import (
    JoinResult,
    LeavingMember,
    Protocol,
    SyncRequest,
)
from broker.groups.group_state import (
    GroupState,
    InvalidGroupTransition,
    can_rebalance,
    check_transition,
)
from tests.support.group_harness import (
    GROUP,
    INITIAL_DELAY_MS,
    RANGE,
    REBALANCE_MS,
    ROUND_ROBIN,
    SESSION_MS,
    FakeClock,
    Harness,
)
from tests.support.group_requests import subscription
from tests.support.polling import poll_until


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    h.coordinator.close()


# ------------------------------------------------------------------------------- state table


def test_state_table_is_kafkas() -> None:
    allowed = {
        (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
        (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
        (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
        (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
        (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
        (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
        *((state, GroupState.DEAD) for state in GroupState),
    }
    for current in GroupState:
        for target in GroupState:
            if (current, target) in allowed:
                check_transition(GROUP, current, target)
            else:
                with pytest.raises(InvalidGroupTransition, match="reached from"):
                    check_transition(GROUP, current, target)
    assert {s for s in GroupState if can_rebalance(s)} == {
        GroupState.EMPTY,
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
    }
    assert GroupState.parse("completingrebalance") is GroupState.COMPLETING_REBALANCE
    assert GroupState.parse("nope") is None


def test_group_config_bounds_and_errors() -> None:
    config = GroupConfig.from_properties({"group.initial.rebalance.delay.ms": "0"})
    assert (config.min_session_timeout_ms, config.max_session_timeout_ms) == (6000, 1_800_000)
    assert config.initial_rebalance_delay_ms == 0
    with pytest.raises(ValueError, match=r"group\.max\.session\.timeout\.ms"):
        GroupConfig.from_properties(
            {"group.min.session.timeout.ms": "9000", "group.max.session.timeout.ms": "8000"}
        )
    with pytest.raises(ValueError, match=r"group\.max\.size"):
        GroupConfig.from_properties({"group.max.size": "0"})
    broker = {"node.id": "1", "log.dirs": "/nonexistent", "group.max.size": "5"}
    assert BrokerConfig.from_properties(broker).groups.max_size == 5
    with pytest.raises(ValueError, match=r"group\.min\.session\.timeout\.ms"):
        BrokerConfig.from_properties({**broker, "group.min.session.timeout.ms": "soon"})


# -------------------------------------------------------------------------------- JoinGroup


def test_member_id_required_round_then_initial_delay(harness: Harness) -> None:
    first = harness.join().result(0)
    assert first.error is ErrorCode.member_id_required
    assert first.member_id.startswith("client-")
    assert harness.state() is GroupState.EMPTY  # a pending member is not a member yet
    answer = harness.join(first.member_id)
    assert harness.state() is GroupState.PREPARING_REBALANCE
    harness.advance(INITIAL_DELAY_MS - 1)
    assert not answer.done()  # the first rebalance waits for more members
    harness.advance(1)
    result = answer.result(0)
    assert (result.error, result.generation_id, result.leader) == (
        ErrorCode.none,
        1,
        first.member_id,
    )
    assert result.protocol_name == "range"
    assert [m.metadata for m in result.members] == [RANGE.metadata]
    assert harness.state() is GroupState.COMPLETING_REBALANCE


def test_v3_member_joins_without_the_second_round(harness: Harness) -> None:
    answer = harness.join(version=3)
    harness.advance(INITIAL_DELAY_MS)
    assert answer.result(0).error is ErrorCode.none


def test_initial_delay_extends_while_members_arrive(harness: Harness) -> None:
    _, first = harness.join_new()
    harness.advance(INITIAL_DELAY_MS - 100)
    _, second = harness.join_new()  # a new member: the delay starts over
    harness.advance(100)
    assert not first.done()
    harness.advance(INITIAL_DELAY_MS)
    assert first.result(0).error is second.result(0).error is ErrorCode.none


def test_session_timeout_bounds(harness: Harness) -> None:
    low = harness.join(session_ms=5999).result(0)
    high = harness.join(session_ms=1_800_001).result(0)
    assert low.error is high.error is ErrorCode.invalid_session_timeout
    assert harness.state() is None


def test_refusals_come_first(harness: Harness) -> None:
    harness.refusals[GROUP] = ErrorCode.not_coordinator
    assert harness.join().result(0).error is ErrorCode.not_coordinator
    assert harness.sync("m", 1).result(0).error is ErrorCode.not_coordinator
    assert harness.coordinator.heartbeat(GROUP, "m", None, 1) is ErrorCode.not_coordinator
    assert harness.coordinator.leave(GROUP, [LeavingMember("m")]) == (
        ErrorCode.not_coordinator,
        [],
    )
    assert harness.join(group="").result(0).error is ErrorCode.invalid_group_id


def test_unknown_member_and_inconsistent_protocols(harness: Harness) -> None:
    assert harness.join("ghost").result(0).error is ErrorCode.unknown_member_id
    harness.stable_pair()
    other = harness.join(protocols=(Protocol("sticky", b""),)).result(0)
    assert other.error is ErrorCode.inconsistent_group_protocol


def test_a_group_whose_members_all_left_takes_any_protocol(harness: Harness) -> None:
    member_id, answer = harness.join_new()
    harness.coordinator.leave(GROUP, [LeavingMember(member_id)])
    assert answer.result(0).error is ErrorCode.unknown_member_id
    assert harness.state() is GroupState.PREPARING_REBALANCE  # the first rebalance's delay
    _, other = harness.join_new(protocols=(ROUND_ROBIN,))
    harness.initial_rebalance(other)
    assert other.result(0).protocol_name == "roundrobin"


def test_protocol_with_most_votes_among_common_ones(harness: Harness) -> None:
    _, a = harness.join_new(protocols=(ROUND_ROBIN, RANGE))
    _, b = harness.join_new(protocols=(ROUND_ROBIN, RANGE))
    _, c = harness.join_new(protocols=(RANGE, ROUND_ROBIN))
    harness.initial_rebalance(a, b, c)
    assert {f.result(0).protocol_name for f in (a, b, c)} == {"roundrobin"}


def test_group_max_size(harness: Harness) -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0, max_size=1))
    _, first = h.join_new()
    h.advance(0)
    assert first.result(0).error is ErrorCode.none
    second = h.join(version=3).result(0)
    assert second.error is ErrorCode.group_max_size_reached
    h.coordinator.close()


# ---------------------------------------------------------------------- SyncGroup, Heartbeat


def test_followers_wait_for_the_leaders_plan(harness: Harness) -> None:
    leader, follower, generation = harness.stable_pair()
    again = harness.sync(follower, generation).result(0)  # Stable: what it has
    assert (again.error, again.assignment, again.protocol_name) == (ErrorCode.none, b"p1", "range")
    assert harness.sync(follower, generation + 1).result(0).error is ErrorCode.illegal_generation
    assert harness.coordinator.heartbeat(GROUP, leader, None, generation) is ErrorCode.none
    assert (
        harness.coordinator.heartbeat(GROUP, leader, None, generation - 1)
        is ErrorCode.illegal_generation
    )
    assert harness.coordinator.heartbeat(GROUP, "ghost", None, generation) is (
        ErrorCode.unknown_member_id
    )


def test_sync_with_another_protocol_is_inconsistent(harness: Harness) -> None:
    leader, _, generation = harness.stable_pair()
    answer = harness.coordinator.sync(
        SyncRequest(GROUP, leader, None, generation, "consumer", "roundrobin", ())
    )
    assert answer.result(0).error is ErrorCode.inconsistent_group_protocol


def test_new_member_makes_the_others_rejoin(harness: Harness) -> None:
    leader, follower, generation = harness.stable_pair()
    _, newcomer = harness.join_new()
    assert harness.state() is GroupState.PREPARING_REBALANCE
    assert harness.coordinator.heartbeat(GROUP, follower, None, generation) is (
        ErrorCode.rebalance_in_progress
    )
    rejoins = [harness.join(leader), harness.join(follower)]
    # Not an initial rebalance: it completes once everyone rejoined, without a delay.
    results = [f.result(0) for f in (*rejoins, newcomer)]
    assert {r.generation_id for r in results} == {generation + 1}
    assert sum(1 for r in results if r.members) == 1  # the leader alone sees the members


def test_member_missing_the_rebalance_is_dropped_at_the_rebalance_timeout(
    harness: Harness,
) -> None:
    leader, follower, generation = harness.stable_pair()
    rejoin = harness.join(leader)  # the leader asks for a rebalance
    for _ in range(3):  # the follower keeps its session but never rejoins
        harness.advance(SESSION_MS // 2)
        harness.coordinator.heartbeat(GROUP, follower, None, generation)
    assert not rejoin.done()
    harness.advance(REBALANCE_MS)
    result = rejoin.result(0)
    assert result.generation_id == generation + 1
    assert [m.member_id for m in result.members] == [leader]


def test_sync_timeout_drops_members_that_never_synced(harness: Harness) -> None:
    # Sessions outlast the rebalance timeout: the sync deadline, not a session, drops it.
    _, first = harness.join_new(session_ms=2 * REBALANCE_MS)
    _, second = harness.join_new(session_ms=2 * REBALANCE_MS)
    harness.initial_rebalance(first, second)
    a, b = first.result(0), second.result(0)
    leader = a.leader
    leader_answer = a if a.member_id == leader else b
    harness.sync(leader, leader_answer.generation_id, {leader: b"all"}).result(0)
    # The follower never syncs: at the rebalance timeout it is dropped and the group rebalances.
    harness.advance(REBALANCE_MS)
    assert harness.state() is GroupState.PREPARING_REBALANCE
    described = harness.coordinator.describe([GROUP])[0]
    assert [m.member_id for m in described.members] == [leader]


def test_session_expiry_removes_a_silent_member(harness: Harness) -> None:
    leader, _, generation = harness.stable_pair()
    for _ in range(3):
        harness.advance(SESSION_MS // 2)
        assert harness.coordinator.heartbeat(GROUP, leader, None, generation) in (
            ErrorCode.none,
            ErrorCode.rebalance_in_progress,
        )
    assert harness.state() is GroupState.PREPARING_REBALANCE  # the follower expired
    rejoin = harness.join(leader)
    result = rejoin.result(0)
    assert [m.member_id for m in result.members] == [leader]


def test_pending_member_that_never_comes_back_expires(harness: Harness) -> None:
    first = harness.join().result(0)
    harness.advance(SESSION_MS)
    assert harness.join(first.member_id).result(0).error is ErrorCode.unknown_member_id


# ------------------------------------------------------------------------------- LeaveGroup


def test_leave_rebalances_at_once(harness: Harness) -> None:
    leader, follower, generation = harness.stable_pair()
    error, results = harness.coordinator.leave(GROUP, [LeavingMember(follower, None, "bye")])
    assert error is ErrorCode.none and results[0].error is ErrorCode.none
    # No session wait: the group rebalances now, and the leader's next heartbeat says so.
    assert harness.state() is GroupState.PREPARING_REBALANCE
    assert harness.coordinator.heartbeat(GROUP, leader, None, generation) is (
        ErrorCode.rebalance_in_progress
    )
    result = harness.join(leader).result(0)  # every member rejoined: no delay
    assert result.generation_id == generation + 1
    assert [m.member_id for m in result.members] == [leader]


def test_batched_leave_and_the_last_one_out_empties_the_group(harness: Harness) -> None:
    leader, follower, _ = harness.stable_pair()
    error, results = harness.coordinator.leave(
        GROUP, [LeavingMember(leader), LeavingMember(follower), LeavingMember("ghost")]
    )
    assert error is ErrorCode.none
    assert [r.error for r in results] == [
        ErrorCode.none,
        ErrorCode.none,
        ErrorCode.unknown_member_id,
    ]
    assert harness.state() is GroupState.EMPTY
    listed = harness.coordinator.list_groups([GroupState.EMPTY])
    assert [(g.group_id, g.state) for g in listed] == [(GROUP, "Empty")]


def test_leave_of_a_member_waiting_to_join_answers_its_join(harness: Harness) -> None:
    member_id, answer = harness.join_new()
    harness.coordinator.leave(GROUP, [LeavingMember(member_id)])
    assert answer.result(0).error is ErrorCode.unknown_member_id


# ----------------------------------------------------------------------- static membership


def test_restarted_static_member_gets_its_assignment_back_without_a_rebalance(
    harness: Harness,
) -> None:
    first = harness.join(instance="worker-1")
    second = harness.join(instance="worker-2")
    harness.initial_rebalance(first, second)
    a, b = first.result(0), second.result(0)
    generation = a.generation_id
    leader = a.leader
    follower = b.member_id if a.member_id == leader else a.member_id
    follower_instance = "worker-2" if a.member_id == leader else "worker-1"
    harness.sync(follower, generation, instance=follower_instance)
    harness.sync(leader, generation, {leader: b"p0", follower: b"p1"}).result(0)
    # The follower restarts: a new member id under the same instance id, at once answered.
    back = harness.join(instance=follower_instance).result(0)
    assert back.error is ErrorCode.none and back.member_id != follower
    assert back.generation_id == generation
    assert harness.state() is GroupState.STABLE
    synced = harness.sync(back.member_id, generation, instance=follower_instance).result(0)
    assert synced.assignment == b"p1"
    # The old member id is fenced.
    assert harness.coordinator.heartbeat(GROUP, follower, follower_instance, generation) is (
        ErrorCode.fenced_instance_id
    )
    assert harness.coordinator.offset_commit_error(
        GROUP, follower, generation, follower_instance
    ) is (ErrorCode.fenced_instance_id)


def test_restarted_static_leader_is_told_the_old_leader_leads(harness: Harness) -> None:
    answer = harness.join(instance="only")
    harness.advance(INITIAL_DELAY_MS)
    first = answer.result(0)
    harness.sync(first.member_id, first.generation_id, {first.member_id: b"p"}, "only").result(0)
    back = harness.join(instance="only").result(0)
    assert back.leader == first.member_id != back.member_id  # syncs as a follower
    assert harness.sync(back.member_id, back.generation_id, None, "only").result(0).assignment == (
        b"p"
    )
    v9 = harness.join(instance="only", version=9).result(0)
    assert v9.leader == v9.member_id and v9.skip_assignment


def test_static_member_that_does_not_rejoin_stays(harness: Harness) -> None:
    long_session = 2 * REBALANCE_MS  # no session expires in this test
    static = harness.join(instance="s", session_ms=long_session)
    dynamic_id, dynamic = harness.join_new(session_ms=long_session)
    harness.initial_rebalance(static, dynamic)
    static_id, generation = static.result(0).member_id, static.result(0).generation_id
    # The dynamic member changes its protocols: a rebalance the static member sits out.
    rejoin = harness.join(dynamic_id, protocols=(RANGE, ROUND_ROBIN), session_ms=long_session)
    harness.advance(REBALANCE_MS - 1)
    assert not rejoin.done()
    harness.advance(1)
    result = rejoin.result(0)
    assert result.generation_id == generation + 1
    assert result.leader == dynamic_id  # the leader that rejoined
    assert {m.member_id for m in result.members} == {static_id, dynamic_id}


# ------------------------------------------------------------------ describe, list, offsets


def test_describe_and_list(harness: Harness) -> None:
    harness.offsets_groups.add("offsets-only")
    leader, follower, _ = harness.stable_pair()
    described = {d.group_id: d for d in harness.coordinator.describe([GROUP, "offsets-only", "x"])}
    group = described[GROUP]
    assert (group.state, group.protocol_type, group.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert {m.member_id: m.assignment for m in group.members} == {leader: b"p0", follower: b"p1"}
    assert {m.metadata for m in group.members} == {RANGE.metadata}
    assert described["offsets-only"].state == "Empty"
    assert described["x"].state == "Dead"
    listed = {g.group_id: g.state for g in harness.coordinator.list_groups()}
    assert listed == {GROUP: "Stable", "offsets-only": "Empty"}
    assert [g.group_id for g in harness.coordinator.list_groups([GroupState.STABLE])] == [GROUP]
    harness.refusals[GROUP] = ErrorCode.not_coordinator  # coordinated elsewhere from now on
    assert [g.group_id for g in harness.coordinator.list_groups()] == ["offsets-only"]
    assert harness.coordinator.describe([GROUP])[0].error is ErrorCode.not_coordinator


def test_offset_commit_rules(harness: Harness) -> None:
    check = harness.coordinator.offset_commit_error
    assert check("unknown", "", -1, None) is ErrorCode.none  # standalone
    assert check("unknown", "m", 3, None) is ErrorCode.illegal_generation
    leader, follower, generation = harness.stable_pair()
    assert check(GROUP, leader, generation, None) is ErrorCode.none
    assert check(GROUP, leader, generation + 1, None) is ErrorCode.illegal_generation
    assert check(GROUP, "ghost", generation, None) is ErrorCode.unknown_member_id
    assert check(GROUP, "", -1, None) is ErrorCode.unknown_member_id  # the group has members
    harness.join(leader)  # rebalance: CompletingRebalance after both rejoin
    harness.join(follower)
    assert harness.state() is GroupState.COMPLETING_REBALANCE
    assert check(GROUP, leader, generation + 1, None) is ErrorCode.rebalance_in_progress
    assert harness.coordinator.offset_fetch_error(GROUP, None, -1) is ErrorCode.none


def test_delete_only_a_group_without_members(harness: Harness) -> None:
    leader, follower, _ = harness.stable_pair()
    assert harness.coordinator.delete_group_error(GROUP) is ErrorCode.non_empty_group
    harness.coordinator.leave(GROUP, [LeavingMember(leader), LeavingMember(follower)])
    assert harness.coordinator.delete_group_error(GROUP) is ErrorCode.none
    assert harness.state() is None
    assert harness.coordinator.delete_group_error("never-known") is ErrorCode.none


def test_offset_delete_keeps_the_topics_members_subscribe_to(harness: Harness) -> None:
    subscribed = harness.coordinator.subscribed_topics
    orders = Protocol("range", subscription(["orders"]))
    both = Protocol("range", subscription(["payments", "orders"]))
    first, first_join = harness.join_new(protocols=(orders,))
    second, second_join = harness.join_new(protocols=(both,))
    harness.initial_rebalance(first_join, second_join)
    asked = {"orders", "payments", "refunds"}
    assert subscribed(GROUP, asked) == {"orders", "payments"}
    harness.coordinator.leave(GROUP, [LeavingMember(first), LeavingMember(second)])
    assert harness.state() is GroupState.EMPTY
    assert subscribed(GROUP, asked) == frozenset()  # no members: every offset may go
    assert subscribed("never-known", asked) == frozenset()


def test_offset_delete_of_a_group_whose_subscriptions_are_unknown(harness: Harness) -> None:
    # RANGE's metadata is not a subscription: a consumer group then keeps every offset.
    harness.stable_pair()
    assert harness.coordinator.subscribed_topics(GROUP, {"a", "b"}) == {"a", "b"}
    _, joined = harness.join_new(group="connect", protocol_type="connect")
    harness.initial_rebalance(joined)
    refused = harness.coordinator.subscribed_topics("connect", {"a"})
    assert refused is ErrorCode.non_empty_group  # members of another protocol type


# ------------------------------------------------------------------------------ deadlines


def test_a_failing_deadline_does_not_stop_the_others() -> None:
    clock = FakeClock()
    deadlines = Deadlines(clock, start=False)
    ran: list[str] = []

    def boom() -> None:
        raise RuntimeError("boom")

    deadlines.schedule("a", 1, boom)
    deadlines.schedule("b", 2, lambda: ran.append("b"))
    deadlines.schedule("c", 2, lambda: ran.append("c"))
    deadlines.schedule("c", 5, lambda: ran.append("c-again"))  # replaces c
    deadlines.cancel("b")
    clock.now += 3
    assert deadlines.run_due() == 1 and ran == []
    clock.now += 3
    assert deadlines.run_due() == 1 and ran == ["c-again"]


def test_deadline_thread_runs_actions_on_the_real_clock() -> None:
    deadlines = Deadlines()
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("boom")

    deadlines.schedule("boom", 0, boom)
    deadlines.schedule("ok", 0.01, done.set)
    poll_until(done.is_set, what="the deadline thread to run a due action")
    deadlines.close()


def test_concurrent_joins_from_many_threads() -> None:
    h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
    answers: list[Future[JoinResult]] = []
    lock = threading.Lock()

    def member() -> None:
        _, answer = h.join_new()
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=member) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.advance(0)
    results = [a.result(0) for a in answers]
    assert {r.generation_id for r in results} == {1}
    assert sum(1 for r in results if r.members) == 1
    assert len(next(r for r in results if r.members).members) == 16
    h.coordinator.close()
