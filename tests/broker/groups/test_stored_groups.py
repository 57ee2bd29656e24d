"""Groups' records in ``__consumer_offsets`` (Kafka's ``GroupMetadataValue``): the codec against
Kafka's layouts, and a coordinator on a fake clock with its offsets store on a real log, as a
broker has them: a group written and then loaded by a new coordinator carries on, Stable in the
same generation with the same members and assignments; the SyncGroup answers wait for the
record; Empty, deleted and expired groups, a failed write, a returning static member, a
partition that moves away."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.groups.group_config import GroupConfig
from broker.groups.group_messages import LeavingMember, Protocol, SyncResult
from broker.groups.group_records import (
    StoredGroup,
    StoredMember,
    decode_group_value,
    encode_group_value,
)
from broker.groups.group_state import GroupState, check_loaded_state
from broker.groups.group_writer import GroupWriter
from broker.groups.offset_records import (
    CommittedOffset,
    GroupKey,
    RecordFormatError,
    decode_key,
)
from broker.groups.offset_store import OffsetStore
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.offsets_partition import OffsetsPartition
from broker.log import Log, LogConfig
from tests.support.group_harness import (
    GROUP,
    INITIAL_DELAY_MS,
    SESSION_MS,
    FakeClock,
    Harness,
)
from tests.support.group_requests import subscription
from tests.support.polling import poll_until
from tiered.kafka.records import iter_records

MEMBER = StoredMember("m1", "i1", "c", "/h", 30_000, 10_000, b"\x01", b"\x02")
STABLE = StoredGroup("consumer", 7, "range", "m1", 1234, (MEMBER,))
EMPTY = StoredGroup("consumer", 8, None, None, 5678)


def _fields(*parts: str | bytes) -> bytes:
    """A record from its fields: hex strings and raw bytes, in order."""
    return b"".join(bytes.fromhex(p) if isinstance(p, str) else p for p in parts)


# STABLE at version 3, field by field from Kafka's GroupMetadataValue.json.
STABLE_V3 = _fields(
    "0003",  # version
    "0008", b"consumer", "00000007",  # protocolType, generation
    "0005", b"range", "0002", b"m1",  # protocol, leader
    "00000000000004d2",  # currentStateTimestamp
    "00000001",  # members
    "0002", b"m1", "0002", b"i1",  # memberId, groupInstanceId
    "0001", b"c", "0002", b"/h",  # clientId, clientHost
    "00007530", "00002710",  # rebalanceTimeout, sessionTimeout
    "0000000101", "0000000102",  # subscription, assignment
)  # fmt: skip


# ------------------------------------------------------------------------------------ codec


def test_a_group_is_loaded_empty_or_stable() -> None:
    check_loaded_state(GROUP, GroupState.EMPTY)
    check_loaded_state(GROUP, GroupState.STABLE)
    with pytest.raises(ValueError, match="valid: Empty, Stable"):
        check_loaded_state(GROUP, GroupState.COMPLETING_REBALANCE)


def test_the_record_is_kafkas_version_3() -> None:
    assert encode_group_value(STABLE) == STABLE_V3
    assert decode_group_value(STABLE_V3) == STABLE
    for group in (EMPTY, StoredGroup("", 0, None, None, -1)):
        assert decode_group_value(encode_group_value(group)) == group


def test_older_and_flexible_versions_are_read() -> None:
    version_0 = _fields(
        "0000",
        "0008", b"consumer", "00000007",
        "0005", b"range", "0002", b"m1",
        "00000001",
        "0002", b"m1", "0001", b"c", "0002", b"/h",
        "00002710",  # one timeout: the session's, and the rebalance's as Kafka reads it
        "0000000101", "0000000102",
    )  # fmt: skip
    assert decode_group_value(version_0) == StoredGroup(
        "consumer",
        7,
        "range",
        "m1",
        -1,
        (StoredMember("m1", None, "c", "/h", 10_000, 10_000, b"\x01", b"\x02"),),
    )
    # Version 4: compact lengths (length + 1 as a varint, 0 is null) and tagged fields.
    version_4 = _fields(
        "0004",
        "09", b"consumer", "00000007",
        "06", b"range", "00",  # leader: null
        "00000000000004d2",
        "02",  # one member
        "03", b"m1", "00", "02", b"c", "03", b"/h",
        "00007530", "00002710",
        "0201", "0202",
        "01", "05", "02", "abcd",  # the member's tagged fields: one unknown one, skipped
        "00",
    )  # fmt: skip
    assert decode_group_value(version_4) == StoredGroup(
        "consumer",
        7,
        "range",
        None,
        1234,
        (StoredMember("m1", None, "c", "/h", 30_000, 10_000, b"\x01", b"\x02"),),
    )
    with pytest.raises(RecordFormatError, match="version 5"):
        decode_group_value(b"\x00\x05")
    with pytest.raises(RecordFormatError, match="ends early"):
        decode_group_value(STABLE_V3[:-3])


# -------------------------------------------------------------------------------- partition


def _open(directory: Path) -> OffsetsPartition:
    partition = OffsetsPartition(
        Log.open(directory, LogConfig(segment_bytes=4096)), compaction_min_records=10
    )
    partition.load()
    return partition


def test_records_survive_reopening_compaction_and_tombstones(tmp_path: Path) -> None:
    partition = _open(tmp_path)
    assert partition.group_stored("g", STABLE)
    assert not partition.group_stored("g", StoredGroup("consumer", 6, None, None, 1))  # stale
    assert partition.group_stored("g", EMPTY)
    assert partition.group_stored("h", STABLE)
    partition.commit("h", {("t", 0): CommittedOffset(3, 0, "", 1)})
    for _ in range(20):
        partition.group_stored("h", STABLE)
    assert partition.compaction_due()
    partition.compact()
    partition.log.close()

    reopened = _open(tmp_path)
    assert reopened.stored_groups() == {"g": EMPTY, "h": STABLE}
    assert reopened.records_from_start <= 4  # the copy: one offset, two groups, and no more
    assert reopened.group_deleted("g")  # a group with a record and no offsets
    assert not reopened.group_deleted("nobody")
    reopened.log.close()
    assert _open(tmp_path).stored_groups() == {"h": STABLE}


# ----------------------------------------------------------------------------------- writer


def test_the_writer_keeps_order_and_survives_failures() -> None:
    written: list[tuple[str, int]] = []

    def store(group_id: str, record: StoredGroup) -> ErrorCode:
        if group_id == "broken":
            raise OSError("disk full")
        written.append((group_id, record.generation))
        return ErrorCode.none

    def failing_callback(error: ErrorCode) -> None:
        raise RuntimeError("a callback's bug")

    outcomes: list[ErrorCode] = []
    writer = GroupWriter(store)
    try:
        writer.submit("broken", STABLE, outcomes.append)
        writer.submit("g", STABLE, failing_callback)
        writer.submit("g", EMPTY, outcomes.append)
        poll_until(lambda: len(outcomes) == 2, what="the writes")
        assert outcomes == [ErrorCode.unknown_server_error, ErrorCode.none]
        assert written == [("g", 7), ("g", 8)]
    finally:
        writer.close()
    writer.submit("late", STABLE, outcomes.append)
    assert outcomes[-1] is ErrorCode.coordinator_not_available
    idle = GroupWriter(store, start=False)
    idle.submit("queued", STABLE, outcomes.append)
    idle.close()  # what is still queued is answered, not written
    assert outcomes[-1] is ErrorCode.coordinator_not_available
    assert ("queued", 7) not in written


# ------------------------------------------------------------------------------ coordinator


class Broker:
    """A coordinator and its offsets store on a real log of partition 0 (every group maps to
    it), with the coordinator's writes run by hand (``harness.write_records``)."""

    def __init__(
        self,
        directory: Path,
        clock: FakeClock,
        store_group: Callable[[str, StoredGroup], ErrorCode] | None = None,
    ) -> None:
        self.log: Log | None = Log.open(directory)
        writer = GroupWriter(store_group or self._store_group, start=False)
        self.harness = Harness(
            GroupConfig(initial_rebalance_delay_ms=INITIAL_DELAY_MS),
            writer,
            lambda group_id: 0,
            clock,
        )
        self.store = OffsetStore(
            lambda index: self.log if index == 0 else None,
            lambda: [0],
            OffsetsConfig(retention_ms=60_000, retention_check_interval_ms=3_600_000),
            self.harness.coordinator,
            lambda: None,
            clock.wall_ms,
            partition_of=lambda group_id: 0,
        )
        self.store.start()  # a short log: loaded at once

    def _store_group(self, group_id: str, record: StoredGroup) -> ErrorCode:
        return self.store.store_group(group_id, record)

    @property
    def partition(self) -> OffsetsPartition:
        found = self.store.partition(0)
        assert isinstance(found, OffsetsPartition), found
        return found

    def close(self) -> None:
        self.harness.coordinator.close()
        self.store.close()
        if self.log is not None:
            self.log.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def brokers(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[[], Broker]]:
    """A broker on the test's log; each call is the next one (the one before closed, as a
    restart leaves it)."""
    made: list[Broker] = []

    def restart() -> Broker:
        if made:
            made[-1].close()
        made.append(Broker(tmp_path / "p0", clock))
        return made[-1]

    yield restart
    made[-1].close()


def _group_records(log: Log) -> list[StoredGroup | None]:
    read = log.read(log.log_start_offset, 1 << 20)
    found: list[StoredGroup | None] = []
    for consumed in iter_records(read.records):
        record = consumed.record
        assert record.key is not None
        if isinstance(decode_key(record.key), GroupKey):
            found.append(None if record.value is None else decode_group_value(record.value))
    return found


def two_members_syncing(
    h: Harness,
) -> tuple[str, str, int, Future[SyncResult], Future[SyncResult]]:
    """Two members joined and rebalanced; both SyncGroups sent, the leader's with an assignment.
    Returns the leader, the follower, the generation and their sync answers (Futures)."""
    first, first_join = h.join_new()
    second, second_join = h.join_new()
    h.initial_rebalance(first_join, second_join)
    generation = first_join.result(0).generation_id
    leader = first_join.result(0).leader
    follower = second if leader == first else first
    follower_sync = h.sync(follower, generation)
    leader_sync = h.sync(leader, generation, {leader: b"a", follower: b"b"})
    return leader, follower, generation, leader_sync, follower_sync


def test_the_sync_answers_wait_for_the_record(brokers: Callable[[], Broker]) -> None:
    broker = brokers()
    h = broker.harness
    leader, follower, generation, leader_sync, follower_sync = two_members_syncing(h)
    assert broker.log is not None
    assert not leader_sync.done() and not follower_sync.done()
    assert _group_records(broker.log) == []
    assert h.write_records() == 1
    assert (leader_sync.result(0).assignment, follower_sync.result(0).assignment) == (b"a", b"b")
    [stored] = _group_records(broker.log)
    assert stored is not None and stored.generation == generation
    assert {m.member_id: m.assignment for m in stored.members} == {leader: b"a", follower: b"b"}


def test_a_loaded_group_carries_on_in_its_generation(
    brokers: Callable[[], Broker], clock: FakeClock
) -> None:
    leader, follower, generation = brokers().harness.stable_pair()
    clock.now += 5  # the restart takes a while

    h = brokers().harness
    assert h.state() is GroupState.STABLE
    [described] = h.coordinator.describe([GROUP])
    assert described.protocol_type == "consumer" and described.protocol_data == "range"
    assert {m.member_id: m.assignment for m in described.members} == {
        leader: b"p0",
        follower: b"p1",
    }
    assert h.sync(follower, generation).result(0).assignment == b"p1"
    assert h.coordinator.offset_commit_error(GROUP, follower, generation, None) is ErrorCode.none
    # Sessions restart from the load: the time the old coordinator knew of does not count.
    h.advance(SESSION_MS - 1000)
    assert h.coordinator.heartbeat(GROUP, leader, None, generation) is ErrorCode.none
    assert h.coordinator.heartbeat(GROUP, follower, None, generation - 1) is (
        ErrorCode.illegal_generation
    )
    h.advance(1500)  # the follower's session (it did not heartbeat) passed
    assert h.coordinator.heartbeat(GROUP, leader, None, generation) is (
        ErrorCode.rebalance_in_progress
    )


def test_an_empty_group_comes_back_empty_and_expires_without_offsets(
    brokers: Callable[[], Broker], clock: FakeClock
) -> None:
    broker = brokers()
    leader, follower, generation = broker.harness.stable_pair()
    broker.partition.commit("kept", {("t", 0): CommittedOffset(1, 0, "", clock.wall_ms())})
    broker.harness.coordinator.leave(GROUP, [LeavingMember(leader), LeavingMember(follower)])
    assert broker.harness.state() is GroupState.EMPTY
    assert broker.harness.write_records() == 1

    broker = brokers()
    assert broker.harness.state() is GroupState.EMPTY
    assert broker.partition.stored_groups()[GROUP].generation == generation + 1
    # An Empty group without offsets expires (a tombstone); one with offsets stays.
    broker.partition.group_stored(
        "kept", dataclasses.replace(EMPTY, current_state_timestamp_ms=clock.wall_ms())
    )
    broker.store.remove_expired()
    assert broker.harness.state() is None
    assert set(broker.partition.stored_groups()) == {"kept"}

    broker = brokers()
    assert broker.harness.state() is None
    assert broker.harness.coordinator.state_of("kept") is GroupState.EMPTY


def test_offsets_expire_as_kafkas_and_an_empty_groups_retention_survives_a_restart(
    brokers: Callable[[], Broker], clock: FakeClock
) -> None:
    """Retention 60 s. A Stable consumer group keeps the offsets of the topics it subscribes
    to, and those of another topic expire from their commit; once it is Empty, every offset
    expires 60 s after it emptied, as its record says to the coordinator that loads it."""
    h = brokers().harness
    orders = Protocol("range", subscription(["orders"]))
    member, joined = h.join_new(protocols=(orders,), session_ms=600_000)
    h.initial_rebalance(joined)
    synced = h.sync(member, joined.result(0).generation_id, {member: b"a"})
    h.write_records()
    assert synced.result(0).error is ErrorCode.none
    broker = brokers()
    committed = CommittedOffset(5, 0, "", clock.wall_ms())
    broker.partition.commit(GROUP, {("orders", 0): committed, ("refunds", 0): committed})
    broker.harness.advance(70_000)
    assert broker.store.remove_expired() == 1
    assert set(broker.partition.committed(GROUP)) == {("orders", 0)}

    broker.harness.coordinator.leave(GROUP, [LeavingMember(member)])
    assert broker.harness.write_records() == 1  # Empty, dated now
    broker.harness.advance(50_000)
    broker = brokers()  # a new coordinator: the group's emptying is as its record dates it
    assert broker.harness.state() is GroupState.EMPTY
    assert broker.store.remove_expired() == 0
    broker.harness.advance(10_000)
    assert broker.store.remove_expired() == 1
    assert broker.harness.state() is None  # Empty without offsets: the group expired too
    assert broker.partition.stored_groups() == {}


def test_a_deleted_group_does_not_come_back(brokers: Callable[[], Broker]) -> None:
    broker = brokers()
    leader, follower, _ = broker.harness.stable_pair()
    broker.harness.coordinator.leave(GROUP, [LeavingMember(leader), LeavingMember(follower)])
    broker.harness.write_records()
    # DeleteGroups: membership lets it go, the offsets side writes the tombstones.
    assert broker.harness.coordinator.delete_group_error(GROUP) is ErrorCode.none
    assert broker.partition.group_deleted(GROUP)
    assert brokers().harness.state() is None


def test_a_failed_write_answers_the_error_and_rebalances(tmp_path: Path, clock: FakeClock) -> None:
    broker = Broker(tmp_path / "p0", clock, store_group=lambda g, r: ErrorCode.not_coordinator)
    try:
        h = broker.harness
        _, _, _, leader_sync, follower_sync = two_members_syncing(h)
        h.write_records()
        assert leader_sync.result(0).error is ErrorCode.not_coordinator
        assert follower_sync.result(0).error is ErrorCode.not_coordinator
        assert h.state() is GroupState.PREPARING_REBALANCE
    finally:
        broker.close()


def test_a_returning_static_member_is_stored_under_its_new_id(
    brokers: Callable[[], Broker],
) -> None:
    h = brokers().harness
    first_join, second_join = h.join(instance="a"), h.join(instance="b")
    h.initial_rebalance(first_join, second_join)
    first, second = first_join.result(0), second_join.result(0)
    generation, leader = first.generation_id, first.leader
    (_, leader_instance), (follower, instance) = sorted(
        [(first.member_id, "a"), (second.member_id, "b")], key=lambda m: m[0] != leader
    )
    follower_sync = h.sync(follower, generation, instance=instance)
    leader_sync = h.sync(leader, generation, {leader: b"a", follower: b"b"}, leader_instance)
    h.write_records()
    assert leader_sync.result(0).error is follower_sync.result(0).error is ErrorCode.none
    # The follower's instance restarts: its new member id answers once the record names it.
    rejoined = h.join(instance=instance)
    assert not rejoined.done()
    h.write_records()
    new_id = rejoined.result(0).member_id
    assert new_id != follower and rejoined.result(0).generation_id == generation

    h = brokers().harness
    assert h.state() is GroupState.STABLE
    assert h.coordinator.heartbeat(GROUP, new_id, instance, generation) is ErrorCode.none
    assert h.coordinator.heartbeat(GROUP, follower, instance, generation) is (
        ErrorCode.fenced_instance_id
    )


def test_a_partition_that_moves_away_takes_its_groups(brokers: Callable[[], Broker]) -> None:
    broker = brokers()
    leader, _, _ = broker.harness.stable_pair()
    rejoin = broker.harness.join(leader)  # the leader rejoins: a rebalance waits for the other
    assert not rejoin.done()
    log, broker.log = broker.log, None  # no longer hosted here
    assert broker.store.partition(0) is ErrorCode.not_coordinator
    assert rejoin.result(0).error is ErrorCode.not_coordinator
    assert broker.harness.state() is None
    assert log is not None
    log.close()


def test_a_loaded_consumer_group_knows_its_subscriptions(brokers: Callable[[], Broker]) -> None:
    h = brokers().harness
    orders = Protocol("range", subscription(["orders"]))
    only, joined = h.join_new(protocols=(orders,))
    h.initial_rebalance(joined)
    synced = h.sync(only, joined.result(0).generation_id, {only: b"a"})
    h.write_records()
    assert synced.result(0).error is ErrorCode.none

    h = brokers().harness
    # OffsetDelete keeps the offsets of the topics the loaded members subscribe to.
    assert h.coordinator.subscribed_topics(GROUP, {"orders", "refunds"}) == {"orders"}


def test_a_static_member_not_stored_keeps_its_old_id(tmp_path: Path, clock: FakeClock) -> None:
    refusal: list[ErrorCode] = []

    def store_group(group_id: str, record: StoredGroup) -> ErrorCode:
        return refusal[0] if refusal else broker.store.store_group(group_id, record)

    broker = Broker(tmp_path / "p0", clock, store_group)
    try:
        h = broker.harness
        joined = h.join(instance="a")
        h.initial_rebalance(joined)
        member_id, generation = joined.result(0).member_id, joined.result(0).generation_id
        synced = h.sync(member_id, generation, {member_id: b"a"}, "a")
        h.write_records()
        assert synced.result(0).error is ErrorCode.none
        refusal.append(ErrorCode.not_coordinator)
        rejoined = h.join(instance="a")
        h.write_records()
        assert rejoined.result(0).error is ErrorCode.not_coordinator
        assert h.coordinator.heartbeat(GROUP, member_id, "a", generation) is ErrorCode.none
        assert h.state() is GroupState.STABLE
    finally:
        broker.close()
