"""The RemoteLogMetadataManager contract, run unchanged against every backend and both read paths.

Mirrors Kafka's RemoteLogSegmentLifecycleTest, RemoteLogMetadataCacheTest and
RemoteLogLeaderEpochStateTest. ``path="leader"`` writes and reads through a manager that leads the
partition (in-memory cache); ``path="store"`` writes through one non-leader manager and reads through
another (straight from the backend), as the controller's delete job and followers do.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rlmm_support import (
    BROKER_1,
    COPY_SEGMENT_FINISHED,
    COPY_SEGMENT_STARTED,
    DELETE_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    SEG_SIZE,
    FailingCommit,
    RecordingBackend,
    Store,
    listing,
    new_tp,
    segment,
    store,
    update_of,
    upsert,
)
from tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.rlmm import keys
from tiered.rlmm.backend import Delete
from tiered.rlmm.manager import StoreRemoteLogMetadataManager
from tiered.rlmm.sqlite_backend import SqliteBackend
from tiered.rpc.v1 import rlmm_store_pb2 as store_pb

__all__ = ["store"]  # the parametrized fixture


class Paths:
    def __init__(
        self, writer: StoreRemoteLogMetadataManager, reader: StoreRemoteLogMetadataManager
    ):
        self.writer = writer
        self.reader = reader


@pytest.fixture(params=["leader", "store"])
def paths(request: pytest.FixtureRequest, store: Store) -> Iterator[tuple[Paths, TopicIdPartition]]:
    tp = new_tp()
    if request.param == "leader":
        leader = store.manager()
        leader.on_partition_leadership_changes({tp}, set())
        assert leader.is_leader_cache(tp)
        yield Paths(leader, leader), tp
    else:
        writer, reader = store.manager(), store.manager(broker_id=BROKER_1)
        yield Paths(writer, reader), tp
        assert not reader.is_leader_cache(tp)


def test_remote_log_segment_lifecycle(paths: tuple[Paths, TopicIdPartition]) -> None:
    p, tp = paths
    # segment 0: offsets [0-100], leader epochs (0,0), (1,20), (2,80)
    seg0 = segment(tp, {0: 0, 1: 20, 2: 80}, 0, 100)
    p.writer.add_remote_log_segment_metadata(seg0)
    # Still copying: neither readable nor counted as copied.
    assert p.reader.remote_log_segment_metadata(tp, 1, 40) is None
    for epoch in range(3):
        assert p.reader.highest_offset_for_epoch(tp, epoch) is None
    finished = update_of(seg0, COPY_SEGMENT_FINISHED)
    p.writer.update_remote_log_segment_metadata(finished)
    seg0 = seg0.create_with_updates(finished)

    seg1 = upsert(p.writer, tp, {2: 101}, 101, 200, COPY_SEGMENT_FINISHED)
    seg2 = upsert(p.writer, tp, {2: 201, 3: 240}, 201, 300, COPY_SEGMENT_FINISHED)
    seg3 = upsert(p.writer, tp, {3: 250, 4: 370}, 250, 400, COPY_SEGMENT_FINISHED)

    expected = {
        (1, 40): seg0,
        (2, 110): seg1,
        (3, 240): seg2,
        (3, 250): seg3,
        (4, 375): seg3,
        (1, 110): None,  # epoch 1 ends at 79
        (4, 401): None,  # beyond the last segment
        (5, 301): None,  # no such epoch
    }
    for (epoch, offset), want in expected.items():
        assert p.reader.remote_log_segment_metadata(tp, epoch, offset) == want, (epoch, offset)

    # DELETE_SEGMENT_STARTED and DELETE_SEGMENT_FINISHED segments are not readable.
    p.writer.update_remote_log_segment_metadata(update_of(seg0, DELETE_SEGMENT_STARTED))
    assert p.reader.remote_log_segment_metadata(tp, 0, 10) is None
    p.writer.update_remote_log_segment_metadata(update_of(seg0, DELETE_SEGMENT_FINISHED))
    assert p.reader.remote_log_segment_metadata(tp, 0, 10) is None

    # The highest copied offset per epoch survives the deletion of the segment that set it.
    highest = {0: 19, 1: 79, 2: 239, 3: 369, 4: 400}
    for epoch, offset in highest.items():
        assert p.reader.highest_offset_for_epoch(tp, epoch) == offset
    assert p.reader.highest_offset_for_epoch(tp, 5) is None


def test_copy_segment_started_is_listed_but_not_readable(
    paths: tuple[Paths, TopicIdPartition],
) -> None:
    p, tp = paths
    seg = segment(tp, {0: 0}, 0, 50)
    p.writer.add_remote_log_segment_metadata(seg)
    assert p.reader.remote_log_segment_metadata(tp, 0, 0) is None
    assert listing(p.reader, tp, 0) == [seg]
    assert listing(p.reader, tp) == [seg]
    assert p.reader.remote_log_size(tp, 0) == SEG_SIZE


def test_copy_segment_finished_is_listed_and_readable(
    paths: tuple[Paths, TopicIdPartition],
) -> None:
    p, tp = paths
    seg = upsert(p.writer, tp, {0: 101}, 101, 200, COPY_SEGMENT_FINISHED)
    assert p.reader.remote_log_segment_metadata(tp, 0, 150) == seg
    assert listing(p.reader, tp, 0) == [seg]
    assert listing(p.reader, tp) == [seg]


def test_delete_segment_started_is_listed_but_not_readable(
    paths: tuple[Paths, TopicIdPartition],
) -> None:
    p, tp = paths
    seg = upsert(p.writer, tp, {0: 201}, 201, 300, DELETE_SEGMENT_STARTED)
    assert p.reader.remote_log_segment_metadata(tp, 0, 250) is None
    assert listing(p.reader, tp, 0) == [seg]
    assert listing(p.reader, tp) == [seg]


def test_delete_segment_finished_is_gone(paths: tuple[Paths, TopicIdPartition]) -> None:
    p, tp = paths
    seg = upsert(p.writer, tp, {0: 301}, 301, 400, DELETE_SEGMENT_STARTED)
    assert p.reader.remote_log_segment_metadata(tp, 0, 350) is None
    p.writer.update_remote_log_segment_metadata(update_of(seg, DELETE_SEGMENT_FINISHED))
    assert listing(p.reader, tp, 0) == []
    assert listing(p.reader, tp) == []
    assert p.reader.remote_log_size(tp, 0) == 0
    # Terminal: the metadata is gone, so a further update finds nothing (Kafka's cache likewise).
    with pytest.raises(RemoteResourceNotFoundException):
        p.writer.update_remote_log_segment_metadata(update_of(seg, DELETE_SEGMENT_FINISHED))


def test_list_segments_by_epoch_in_start_offset_order(
    paths: tuple[Paths, TopicIdPartition],
) -> None:
    p, tp = paths
    # Added out of order, listed by start offset.
    seg2 = upsert(p.writer, tp, {0: 201, 1: 301}, 201, 400, COPY_SEGMENT_FINISHED)
    seg0 = upsert(p.writer, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)
    seg1 = upsert(p.writer, tp, {0: 101}, 101, 200, COPY_SEGMENT_FINISHED)
    assert listing(p.reader, tp, 0) == [seg0, seg1, seg2]
    assert listing(p.reader, tp) == [seg0, seg1, seg2]
    assert listing(p.reader, tp, 1) == [seg2]
    assert listing(p.reader, tp, 7) == []


def test_invalid_arguments(paths: tuple[Paths, TopicIdPartition]) -> None:
    p, tp = paths
    with pytest.raises(TypeError):
        p.writer.add_remote_log_segment_metadata(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        p.writer.update_remote_log_segment_metadata(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        p.writer.put_remote_partition_delete_metadata(None)  # type: ignore[arg-type]
    for state in RemoteLogSegmentState:
        if state is COPY_SEGMENT_STARTED:
            continue
        seg = segment(tp, {0: 0}, 0, 100)
        moved = seg.create_with_updates(update_of(seg, state))
        with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
            p.writer.add_remote_log_segment_metadata(moved)
    unknown = segment(tp, {0: 0}, 0, 100)
    with pytest.raises(RemoteResourceNotFoundException):
        p.writer.update_remote_log_segment_metadata(update_of(unknown, DELETE_SEGMENT_STARTED))
    # Nothing above changed the partition (through the store path it was not even created).
    if p.reader.is_leader_cache(tp):
        assert listing(p.reader, tp) == []
    else:
        with pytest.raises(RemoteResourceNotFoundException):
            listing(p.reader, tp)


def test_invalid_transition_is_dropped(
    paths: tuple[Paths, TopicIdPartition], caplog: pytest.LogCaptureFixture
) -> None:
    p, tp = paths
    seg = upsert(p.writer, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)
    p.writer.update_remote_log_segment_metadata(update_of(seg, DELETE_SEGMENT_FINISHED))
    assert "can not move to DELETE_SEGMENT_FINISHED" in caplog.text
    assert listing(p.reader, tp) == [seg]
    assert p.reader.remote_log_segment_metadata(tp, 0, 50) == seg
    # A retried add of a finished segment is an invalid transition too.
    p.writer.add_remote_log_segment_metadata(dataclasses.replace(seg, state=COPY_SEGMENT_STARTED))
    assert listing(p.reader, tp) == [seg]


def test_self_transitions_are_idempotent(paths: tuple[Paths, TopicIdPartition]) -> None:
    p, tp = paths
    seg = segment(tp, {0: 0}, 0, 100)
    p.writer.add_remote_log_segment_metadata(seg)
    p.writer.add_remote_log_segment_metadata(seg)  # a retried add
    finished = update_of(seg, COPY_SEGMENT_FINISHED)
    p.writer.update_remote_log_segment_metadata(finished)
    p.writer.update_remote_log_segment_metadata(finished)
    assert listing(p.reader, tp) == [seg.create_with_updates(finished)]
    assert p.reader.remote_log_size(tp, 0) == SEG_SIZE
    assert p.reader.remote_log_totals(tp).segment_count == 1


def test_superset_copy_replaces_earlier_segments(paths: tuple[Paths, TopicIdPartition]) -> None:
    """Kafka's case 1: L0 copied S0 [0-100], then L1 copied S1 [0-200] in the same epoch."""
    p, tp = paths
    s0 = upsert(p.writer, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)
    s1 = upsert(p.writer, tp, {0: 0}, 0, 200, COPY_SEGMENT_FINISHED)
    assert p.reader.remote_log_segment_metadata(tp, 0, 50) == s1
    # The replaced segment stays listed (unreferenced) so that it can be cleaned up.
    assert {m.remote_log_segment_id for m in listing(p.reader, tp, 0)} == {
        s0.remote_log_segment_id,
        s1.remote_log_segment_id,
    }
    assert p.reader.remote_log_size(tp, 0) == 2 * SEG_SIZE
    assert p.reader.highest_offset_for_epoch(tp, 0) == 200


def test_overlapping_copy_wins_for_later_offsets(paths: tuple[Paths, TopicIdPartition]) -> None:
    """Kafka's case 2: S0 [10-90] then S1 [5-100] and S2 [101-200]: offset 95 is in S1."""
    p, tp = paths
    s0 = upsert(p.writer, tp, {0: 10}, 10, 90, COPY_SEGMENT_FINISHED)
    s1 = upsert(p.writer, tp, {0: 5}, 5, 100, COPY_SEGMENT_FINISHED)
    s2 = upsert(p.writer, tp, {0: 101}, 101, 200, COPY_SEGMENT_FINISHED)
    assert p.reader.remote_log_segment_metadata(tp, 0, 95) == s1
    assert p.reader.remote_log_segment_metadata(tp, 0, 150) == s2
    assert s0.remote_log_segment_id in {m.remote_log_segment_id for m in listing(p.reader, tp, 0)}


def test_displaced_segment_at_same_offset_stays_listed(
    paths: tuple[Paths, TopicIdPartition],
) -> None:
    """Where Kafka loses a segment: S0 [0-200] then S1 [0-100] maps offset 0 to S1 without the
    replacement loop running; Kafka drops S0 from every listing, we keep it unreferenced."""
    p, tp = paths
    s0 = upsert(p.writer, tp, {0: 0}, 0, 200, COPY_SEGMENT_FINISHED)
    s1 = upsert(p.writer, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)
    assert p.reader.remote_log_segment_metadata(tp, 0, 50) == s1
    ids = [m.remote_log_segment_id for m in listing(p.reader, tp, 0)]
    assert sorted(ids, key=str) == sorted(
        [s0.remote_log_segment_id, s1.remote_log_segment_id], key=str
    )
    assert p.reader.remote_log_size(tp, 0) == 2 * SEG_SIZE


def test_custom_metadata_is_byte_exact(paths: tuple[Paths, TopicIdPartition], store: Store) -> None:
    p, tp = paths
    values = [None, CustomMetadata(b""), CustomMetadata(b"\x00bucket-7\xff" * 3)]
    segs = []
    for i, custom in enumerate(values):
        seg = segment(tp, {0: i * 100}, i * 100, i * 100 + 99, custom=custom)
        p.writer.add_remote_log_segment_metadata(seg)
        segs.append(seg)
    # The update's custom metadata replaces it; None in an update keeps what the segment had.
    p.writer.update_remote_log_segment_metadata(
        update_of(segs[0], COPY_SEGMENT_FINISHED, CustomMetadata(b"from-copy"))
    )
    p.writer.update_remote_log_segment_metadata(update_of(segs[1], COPY_SEGMENT_FINISHED))
    fresh = store.manager(broker_id=7)  # another process, reading from the store
    for reader in (p.reader, fresh):
        got = {m.start_offset: m.custom_metadata for m in listing(reader, tp)}
        assert got == {0: CustomMetadata(b"from-copy"), 100: CustomMetadata(b""), 200: values[2]}
        assert got[100] is not None and got[100].value == b""


def test_remote_log_size_and_totals_count_each_state(paths: tuple[Paths, TopicIdPartition]) -> None:
    p, tp = paths
    upsert(p.writer, tp, {0: 0}, 0, 99, COPY_SEGMENT_STARTED, size=10)
    upsert(p.writer, tp, {0: 100}, 100, 199, COPY_SEGMENT_FINISHED, size=20)
    upsert(p.writer, tp, {0: 200, 1: 250}, 200, 299, COPY_SEGMENT_FINISHED, size=40)
    upsert(p.writer, tp, {1: 300}, 300, 399, DELETE_SEGMENT_STARTED, size=80)
    upsert(p.writer, tp, {1: 400}, 400, 499, DELETE_SEGMENT_FINISHED, size=160)
    assert p.reader.remote_log_size(tp, 0) == 10 + 20 + 40
    assert p.reader.remote_log_size(tp, 1) == 40 + 80  # a segment counts in each of its epochs
    assert p.reader.remote_log_size(tp, 2) == 0
    totals = p.reader.remote_log_totals(tp)
    assert (totals.size_bytes, totals.segment_count) == (10 + 20 + 40 + 80, 4)  # each once
    assert (totals.copy_finished_size_bytes, totals.copy_finished_segment_count) == (60, 2)


def test_unknown_partition_raises_not_found(store: Store) -> None:
    reader = store.manager()
    tp = new_tp()
    with pytest.raises(RemoteResourceNotFoundException):
        reader.remote_log_size(tp, 0)
    with pytest.raises(RemoteResourceNotFoundException):
        reader.remote_log_totals(tp)
    with pytest.raises(RemoteResourceNotFoundException):
        reader.remote_log_segment_metadata(tp, 0, 0)
    with pytest.raises(RemoteResourceNotFoundException):
        list(reader.list_remote_log_segments(tp))
    # Once a leader has taken it over, the partition exists and is empty.
    leader = store.manager()
    leader.on_partition_leadership_changes({tp}, set())
    assert leader.remote_log_size(tp, 0) == 0
    assert reader.remote_log_size(tp, 0) == 0


def test_partition_delete_lifecycle(paths: tuple[Paths, TopicIdPartition], store: Store) -> None:
    p, tp = paths
    seg = upsert(p.writer, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)

    def put(state: RemotePartitionDeleteState) -> None:
        p.writer.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, 1, BROKER_1)
        )

    put(RemotePartitionDeleteState.DELETE_PARTITION_FINISHED)  # invalid from nothing: dropped
    assert p.reader.remote_partition_delete_state(tp) is None
    put(RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
    put(RemotePartitionDeleteState.DELETE_PARTITION_FINISHED)  # skips STARTED: dropped
    assert (
        p.reader.remote_partition_delete_state(tp)
        is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
    )
    put(RemotePartitionDeleteState.DELETE_PARTITION_STARTED)
    # Until FINISHED, segments stay readable so that the deleter can find them.
    assert p.reader.remote_log_segment_metadata(tp, 0, 5) == seg
    p.writer.update_remote_log_segment_metadata(update_of(seg, DELETE_SEGMENT_STARTED))
    p.writer.update_remote_log_segment_metadata(update_of(seg, DELETE_SEGMENT_FINISHED))
    put(RemotePartitionDeleteState.DELETE_PARTITION_FINISHED)
    for reader in (p.reader, p.writer, store.manager(broker_id=9)):
        with pytest.raises(RemoteResourceNotFoundException):
            reader.remote_log_size(tp, 0)
        with pytest.raises(RemoteResourceNotFoundException):
            list(reader.list_remote_log_segments(tp))
    # Nothing of the partition is left in the backend.
    backend = store.backend()
    try:
        assert backend.list_children("rlmm/partitions") == []
    finally:
        backend.close()
    # A new leader starts it afresh.
    leader = store.manager(broker_id=3)
    leader.on_partition_leadership_changes({tp}, set())
    assert listing(leader, tp) == []


def test_marking_many_partitions_at_once_gives_each_its_outcome(store: Store) -> None:
    leader = store.manager()
    led = [new_tp(partition=p) for p in range(3)]
    leader.on_partition_leadership_changes(set(led), set())
    for tp in led:
        upsert(leader, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)
    unknown = new_tp("never-tiered")
    marked = RemotePartitionDeleteState.DELETE_PARTITION_MARKED
    outcomes = leader.put_remote_partition_delete_metadata_all(
        [RemotePartitionDeleteMetadata(tp, marked, 1, BROKER_1) for tp in [*led, unknown]]
    )
    assert outcomes[:3] == [None, None, None]
    assert isinstance(outcomes[3], RemoteResourceNotFoundException)
    reader = store.manager(broker_id=BROKER_1)
    assert [reader.remote_partition_delete_state(tp) for tp in led] == [marked] * 3


def test_a_failed_group_commit_fails_every_mark_and_leaves_the_cache_as_stored(
    tmp_path: Path,
) -> None:
    backend = SqliteBackend(str(tmp_path / "rlmm.db"))
    leader = StoreRemoteLogMetadataManager(backend, broker_id=0)
    try:
        led = [new_tp(partition=p) for p in range(3)]
        leader.on_partition_leadership_changes(set(led), set())
        for tp in led:
            upsert(leader, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)
        marks = [
            RemotePartitionDeleteMetadata(
                tp, RemotePartitionDeleteState.DELETE_PARTITION_MARKED, 1, BROKER_1
            )
            for tp in led
        ]
        backend._db = FailingCommit(backend._db)  # type: ignore[assignment]
        outcomes = leader.put_remote_partition_delete_metadata_all(marks)
        assert all(isinstance(o, RemoteStorageException) for o in outcomes), outcomes
        # The leader's cache does not claim what never became durable; a repeat succeeds.
        assert [leader.remote_partition_delete_state(tp) for tp in led] == [None] * 3
        assert leader.put_remote_partition_delete_metadata_all(marks) == [None] * 3
        assert {leader.remote_partition_delete_state(tp) for tp in led} == {
            RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        }
    finally:
        leader.close()


def test_a_finished_epoch_deletion_keeps_newer_segments_and_can_run_again(
    paths: tuple[Paths, TopicIdPartition], store: Store
) -> None:
    """KIP-950: deletion for a disablement removes older tiered epochs only; a re-enable that
    copied newer segments meanwhile keeps the partition alive and ready for the next one."""
    p, tp = paths
    old = upsert(p.writer, tp, {0: 0}, 0, 100, COPY_SEGMENT_FINISHED)

    def put(state: RemotePartitionDeleteState) -> None:
        p.writer.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, 1, BROKER_1)
        )

    put(RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
    put(RemotePartitionDeleteState.DELETE_PARTITION_STARTED)
    newer = upsert(p.writer, tp, {0: 0}, 101, 200, COPY_SEGMENT_FINISHED)  # copied after re-enable
    p.writer.update_remote_log_segment_metadata(update_of(old, DELETE_SEGMENT_STARTED))
    p.writer.update_remote_log_segment_metadata(update_of(old, DELETE_SEGMENT_FINISHED))
    put(RemotePartitionDeleteState.DELETE_PARTITION_FINISHED)
    for reader in (p.reader, p.writer, store.manager(broker_id=9)):
        assert reader.remote_partition_delete_state(tp) is None
        assert listing(reader, tp) == [newer]
        assert reader.remote_log_size(tp, 0) == newer.segment_size_in_bytes
    put(RemotePartitionDeleteState.DELETE_PARTITION_MARKED)  # the next disablement
    assert (
        p.reader.remote_partition_delete_state(tp)
        is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
    )


def test_random_operations_keep_aggregates_and_both_paths_equal(store: Store) -> None:
    """After every step, the leader's cache, a fresh store reader and a fresh leader (reloading
    everything, including after DELETE_SEGMENT_FINISHED) agree, and remote_log_size equals the sum
    over the listing it is defined by."""
    rng = random.Random(1234)
    tp = new_tp()
    leader = store.manager()
    leader.on_partition_leadership_changes({tp}, set())
    reader = store.manager(broker_id=BROKER_1)
    live: dict[uuid.UUID, RemoteLogSegmentMetadata] = {}
    next_offset = 0
    epoch = 0
    for step in range(120):
        choice = rng.random()
        if choice < 0.45 or not live:
            if rng.random() < 0.2:
                epoch += 1
            length = rng.randint(1, 50)
            start = next_offset if rng.random() < 0.85 else max(0, next_offset - rng.randint(1, 80))
            epochs = {epoch: start}
            if rng.random() < 0.2 and length > 2:
                epoch += 1
                epochs[epoch] = start + length // 2
            seg = segment(tp, epochs, start, start + length, size=rng.randint(1, 5000))
            leader.add_remote_log_segment_metadata(seg)
            live[seg.remote_log_segment_id.id] = seg
            next_offset = max(next_offset, start + length + 1)
        else:
            segment_id = rng.choice(sorted(live))
            seg = live[segment_id]
            target = rng.choice(list(RemoteLogSegmentState)[1:])
            upd = update_of(seg, target)
            leader.update_remote_log_segment_metadata(upd)
            if RemoteLogSegmentState.is_valid_transition(seg.state, target):
                if target is DELETE_SEGMENT_FINISHED:
                    del live[segment_id]
                else:
                    live[segment_id] = seg.create_with_updates(upd)
        if step % 20 == 19:
            fresh_leader = store.manager(broker_id=5)
            fresh_leader.on_partition_leadership_changes({tp}, set())
            _assert_same_answers(tp, [leader, reader, fresh_leader], live, epoch)
            fresh_leader.on_stop_partitions({tp})
            # the fresh leader took the partition over: the old one must reclaim to write again
            leader.on_partition_leadership_changes({tp}, set())


def _assert_same_answers(
    tp: TopicIdPartition,
    managers: list[StoreRemoteLogMetadataManager],
    live: dict[uuid.UUID, RemoteLogSegmentMetadata],
    max_epoch: int,
) -> None:
    expected_all = sorted(live.values(), key=lambda m: (m.start_offset, m.remote_log_segment_id.id))
    for manager in managers:
        assert listing(manager, tp) == expected_all
        assert manager.remote_log_segment_ids(tp) == set(live)
        assert manager.remote_log_start_offset(tp) == (
            expected_all[0].start_offset if expected_all else None
        )
        totals = manager.remote_log_totals(tp)
        assert totals.size_bytes == sum(m.segment_size_in_bytes for m in live.values())
        assert totals.segment_count == len(live)
        finished = [m for m in live.values() if m.state is COPY_SEGMENT_FINISHED]
        assert totals.copy_finished_size_bytes == sum(m.segment_size_in_bytes for m in finished)
        for epoch in range(max_epoch + 2):
            listed = listing(manager, tp, epoch)
            assert manager.remote_log_size(tp, epoch) == sum(
                m.segment_size_in_bytes for m in listed
            )
            assert listed == [m for m in expected_all if epoch in m.segment_leader_epochs]
    reference = managers[0]
    for manager in managers[1:]:
        for epoch in range(max_epoch + 2):
            assert manager.highest_offset_for_epoch(
                tp, epoch
            ) == reference.highest_offset_for_epoch(tp, epoch)
            for offset in range(0, max(m.end_offset for m in live.values()) + 2, 7) if live else []:
                assert manager.remote_log_segment_metadata(
                    tp, epoch, offset
                ) == reference.remote_log_segment_metadata(tp, epoch, offset), (epoch, offset)


def test_segment_ids_are_per_partition(store: Store) -> None:
    """Two partitions do not see each other's segments, epochs or sizes."""
    leader = store.manager()
    tp_a, tp_b = new_tp("a", 0), new_tp("a", 1)
    leader.on_partition_leadership_changes({tp_a, tp_b}, set())
    seg_a = upsert(leader, tp_a, {0: 0}, 0, 10, COPY_SEGMENT_FINISHED, size=5)
    assert listing(leader, tp_b) == []
    assert leader.remote_log_size(tp_b, 0) == 0
    assert leader.remote_log_segment_metadata(tp_a, 0, 3) == seg_a
    assert leader.remote_log_segment_metadata(tp_b, 0, 3) is None
    foreign = RemoteLogSegmentId(tp_b, seg_a.remote_log_segment_id.id)
    with pytest.raises(RemoteResourceNotFoundException):
        leader.update_remote_log_segment_metadata(
            update_of(seg_a, DELETE_SEGMENT_STARTED).__class__(
                foreign, 1, None, DELETE_SEGMENT_STARTED, 0
            )
        )


def test_a_batch_update_spans_many_writes_and_survives_a_writer_between_them(
    paths: tuple[Paths, TopicIdPartition],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The bulk delete's batch: chunks commit one after another on one open partition; another
    writer's commit between two chunks costs a reload, not an update, and loses nothing."""
    p, tp = paths
    caplog.set_level(logging.INFO, logger="tiered.rlmm.manager")
    doomed = [
        upsert(p.writer, tp, {0: 100 * i}, 100 * i, 100 * i + 99, COPY_SEGMENT_FINISHED)
        for i in range(10)
    ]
    other = (
        p.writer
        if p.writer.is_leader_cache(tp)
        else StoreRemoteLogMetadataManager(p.writer.backend, broker_id=BROKER_1)
    )
    intruder: list[RemoteLogSegmentMetadata] = []
    commit = p.writer._commit

    def commit_then_intrude(*args: object, **kwargs: object) -> None:
        commit(*args, **kwargs)  # type: ignore[arg-type]
        if not intruder and not p.writer.is_leader_cache(tp):
            intruder.append(upsert(other, tp, {0: 5_000}, 5_000, 5_099, COPY_SEGMENT_FINISHED))

    monkeypatch.setattr(p.writer, "_commit", commit_then_intrude)
    p.writer.update_remote_log_segment_metadata_batch(
        [update_of(m, DELETE_SEGMENT_STARTED) for m in doomed], batch_size=3
    )
    assert bool(intruder) == ("lost a race" in caplog.text)  # the store path reloaded once
    listed = {m.remote_log_segment_id: m for m in listing(p.reader, tp)}
    assert {listed[m.remote_log_segment_id].state for m in doomed} == {DELETE_SEGMENT_STARTED}
    for m in intruder:
        assert listed[m.remote_log_segment_id].state is COPY_SEGMENT_FINISHED
    totals = p.reader.remote_log_totals(tp)
    assert totals.segment_count == len(doomed) + len(intruder)
    assert totals.copy_finished_segment_count == len(intruder)
    p.writer.update_remote_log_segment_metadata_batch(
        [update_of(m, DELETE_SEGMENT_FINISHED) for m in doomed], batch_size=4
    )
    assert [m.remote_log_segment_id for m in listing(p.reader, tp)] == [
        m.remote_log_segment_id for m in intruder
    ]


def _stamped(
    manager: StoreRemoteLogMetadataManager,
    tp: TopicIdPartition,
    epochs: dict[int, int],
    start: int,
    tiered_epoch: int,
    states: tuple[RemoteLogSegmentState, ...],
) -> RemoteLogSegmentMetadata:
    """A segment of ``tiered_epoch`` added and moved through ``states``."""
    current = segment(tp, epochs, start, start + 99, tiered_epoch=tiered_epoch)
    manager.add_remote_log_segment_metadata(current)
    for state in states:
        update = update_of(current, state)
        manager.update_remote_log_segment_metadata(update)
        current = current.create_with_updates(update)
    return current


def test_segments_deleted_below_epoch_are_removed_in_bulk(
    paths: tuple[Paths, TopicIdPartition], store: Store
) -> None:
    """The bulk delete's removal: only the DELETE_SEGMENT_STARTED segments stamped below the
    epoch go, only in DELETE_PARTITION_STARTED, batch after batch, with the aggregates exact;
    the partition's newer and unmarked segments and another partition's stay."""
    p, tp = paths
    deleting = (COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED)
    doomed = [
        _stamped(
            p.writer,
            tp,
            {0: 100 * i} if i % 2 else {0: 100 * i, 1: 100 * i + 50},
            100 * i,
            0,
            deleting,
        )
        for i in range(7)
    ]
    unmarked = _stamped(p.writer, tp, {1: 1_000}, 1_000, 0, (COPY_SEGMENT_FINISHED,))
    newer = [
        _stamped(p.writer, tp, {1: 2_000}, 2_000, 1, (COPY_SEGMENT_FINISHED,)),
        _stamped(p.writer, tp, {2: 2_100}, 2_100, 1, deleting),
        _stamped(p.writer, tp, {2: 2_200}, 2_200, 1, ()),
    ]
    other_tp = new_tp()
    other = _stamped(p.writer, other_tp, {0: 0}, 0, 0, deleting)
    kept = [unmarked, *newer]

    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1)  # not being deleted: dropped
    assert len(listing(p.reader, tp)) == len(doomed) + len(kept)
    for state in (
        RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
        RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
    ):
        p.writer.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, 1, BROKER_1)
        )
    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1, batch_size=2)

    def ids(segments: list[RemoteLogSegmentMetadata]) -> set[RemoteLogSegmentId]:
        return {m.remote_log_segment_id for m in segments}

    assert ids(listing(p.reader, tp)) == ids(kept)
    assert ids(listing(p.reader, other_tp)) == {other.remote_log_segment_id}
    totals = p.reader.remote_log_totals(tp)
    assert (totals.segment_count, totals.size_bytes) == (len(kept), len(kept) * SEG_SIZE)
    assert totals.copy_finished_segment_count == 2
    assert [p.reader.remote_log_size(tp, e) for e in (0, 1, 2)] == [0, 2 * SEG_SIZE, 2 * SEG_SIZE]
    assert ids(listing(p.reader, tp, 0)) == set()
    for manager in (p.reader, store.manager(broker_id=BROKER_1)):  # and a fresh load agrees
        assert ids(listing(manager, tp)) == ids(kept)
    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1)  # again: nothing left to go
    assert ids(listing(p.reader, tp)) == ids(kept)


@pytest.mark.parametrize("tiered_epoch", [-1, True, "1"])
def test_segments_deleted_below_epoch_rejects_a_bad_epoch(
    paths: tuple[Paths, TopicIdPartition], tiered_epoch: object
) -> None:
    p, tp = paths
    for event in (
        p.writer.handle_partition_segments_delete_started_below_epoch,
        p.writer.handle_partition_segments_deleted_below_epoch,
    ):
        with pytest.raises((TypeError, ValueError), match="tiered_epoch"):
            event(tp, tiered_epoch)  # type: ignore[arg-type]


def test_segments_below_epoch_are_marked_deleting_in_bulk(
    paths: tuple[Paths, TopicIdPartition], store: Store
) -> None:
    """The bulk delete's marking: every segment stamped below the epoch, whatever its state but
    already deleting, reads as DELETE_SEGMENT_STARTED at once, only in DELETE_PARTITION_STARTED;
    the newer ones and another partition's are untouched."""
    p, tp = paths
    below = [
        _stamped(p.writer, tp, {0: 100 * i}, 100 * i, 0, (COPY_SEGMENT_FINISHED,)) for i in range(5)
    ]
    below.append(_stamped(p.writer, tp, {0: 500, 1: 550}, 500, 0, ()))  # a copy that died
    below.append(_stamped(p.writer, tp, {1: 600}, 600, 0, (DELETE_SEGMENT_STARTED,)))
    newer = _stamped(p.writer, tp, {1: 2_000}, 2_000, 1, (COPY_SEGMENT_FINISHED,))
    other_tp = new_tp()
    other = _stamped(p.writer, other_tp, {0: 0}, 0, 0, (COPY_SEGMENT_FINISHED,))

    assert p.writer.handle_partition_segments_delete_started_below_epoch(tp, 1) == []  # dropped
    for state in (
        RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
        RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
    ):
        p.writer.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, 1, BROKER_1)
        )
    marked = p.writer.handle_partition_segments_delete_started_below_epoch(tp, 1)

    assert {m.remote_log_segment_id for m in marked} == {m.remote_log_segment_id for m in below}
    listed = {m.remote_log_segment_id: m for m in listing(p.reader, tp)}
    assert {listed[m.remote_log_segment_id].state for m in below} == {DELETE_SEGMENT_STARTED}
    assert listed[newer.remote_log_segment_id].state is COPY_SEGMENT_FINISHED
    assert [m.state for m in listing(p.reader, other_tp)] == [other.state]
    totals = p.reader.remote_log_totals(tp)
    assert (totals.segment_count, totals.copy_finished_segment_count) == (len(below) + 1, 1)
    assert p.reader.remote_log_segment_metadata(tp, 0, 150) is None  # no longer readable
    assert p.reader.remote_log_segment_metadata(tp, 1, 2_050) == newer
    # marking again changes nothing; the removal then leaves only the newer segment
    again = p.writer.handle_partition_segments_delete_started_below_epoch(tp, 1)
    assert {m.remote_log_segment_id for m in again} == set(listed) - {newer.remote_log_segment_id}
    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1)
    for manager in (p.reader, store.manager(broker_id=BROKER_1)):
        assert [m.remote_log_segment_id for m in listing(manager, tp)] == [
            newer.remote_log_segment_id
        ]


def _seen(metadata: RemoteLogSegmentMetadata | None) -> tuple[object, ...] | None:
    """What a reader learns of a segment, but the last event's time and broker: a partition's
    delete epoch marks its segments without an event of their own."""
    if metadata is None:
        return None
    return (
        metadata.remote_log_segment_id.id,
        metadata.start_offset,
        metadata.end_offset,
        metadata.state,
        metadata.tiered_epoch,
        metadata.segment_size_in_bytes,
        tuple(metadata.segment_leader_epochs.items()),
    )


def _answers(manager: StoreRemoteLogMetadataManager, tp: TopicIdPartition) -> dict[str, object]:
    """Every read of the partition, up to the segments' event times and brokers."""
    epochs = range(4)
    return {
        "listing": [_seen(m) for m in listing(manager, tp)],
        "by_epoch": [[_seen(m) for m in listing(manager, tp, e)] for e in epochs],
        "size": [manager.remote_log_size(tp, e) for e in epochs],
        "highest": [manager.highest_offset_for_epoch(tp, e) for e in epochs],
        "totals": manager.remote_log_totals(tp),
        "lookups": [
            _seen(manager.remote_log_segment_metadata(tp, e, offset))
            for e in epochs
            for offset in range(0, 1_300, 41)
        ],
    }


def test_the_delete_epoch_reads_as_marking_each_segment_below_it(store: Store) -> None:
    """The delete epoch written by one event is read exactly as DELETE_SEGMENT_STARTED written
    for each segment below it: two partitions with the same history, one marked segment by
    segment and one by its delete epoch, answer every read alike, from the leader's cache and
    from the store, then after more events (copies of the next tiered epoch overlapping the old
    ones, transitions of old segments, valid or not) and after the bulk removal."""
    rng = random.Random(22)
    leader, reader = store.manager(), store.manager(broker_id=BROKER_1)
    by_segment, by_epoch = new_tp(), new_tp()
    leader.on_partition_leadership_changes({by_segment, by_epoch}, set())
    live: list[RemoteLogSegmentMetadata] = []

    def both(event: str, metadata: object) -> None:
        """The event on both partitions, which take it (or refuse it) alike."""
        outcomes = []
        for tp in (by_segment, by_epoch):
            segment_id = RemoteLogSegmentId(tp, metadata.remote_log_segment_id.id)  # type: ignore[attr-defined]
            try:
                getattr(leader, event)(
                    dataclasses.replace(metadata, remote_log_segment_id=segment_id)
                )  # type: ignore[call-overload]
                outcomes.append(None)
            except RemoteResourceNotFoundException:  # a segment removed by DELETE_SEGMENT_FINISHED
                outcomes.append("not found")
        assert outcomes[0] == outcomes[1]

    def random_steps(count: int, tiered_epoch: int) -> None:
        for _ in range(count):
            if rng.random() < 0.5 or not live:
                start = rng.randrange(0, 1_200, 10)
                leader_epochs = {rng.randint(0, 1): start}
                if rng.random() < 0.3:
                    leader_epochs[max(leader_epochs) + 1] = start + 5
                seg = segment(
                    by_segment,
                    leader_epochs,
                    start,
                    start + rng.randint(9, 150),
                    size=rng.randint(1, 999),
                    tiered_epoch=tiered_epoch,
                )
                both("add_remote_log_segment_metadata", seg)
                live.append(seg)
                if rng.random() < 0.8:
                    both(
                        "update_remote_log_segment_metadata", update_of(seg, COPY_SEGMENT_FINISHED)
                    )
            else:
                seg = rng.choice(live)
                target = rng.choice(list(RemoteLogSegmentState)[1:])
                both("update_remote_log_segment_metadata", update_of(seg, target))

    def assert_alike() -> None:
        for manager in (leader, reader):
            assert _answers(manager, by_segment) == _answers(manager, by_epoch)

    random_steps(40, tiered_epoch=0)
    for tp in (by_segment, by_epoch):
        for state in (
            RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
            RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
        ):
            leader.put_remote_partition_delete_metadata(
                RemotePartitionDeleteMetadata(tp, state, 1, BROKER_1)
            )
    leader.update_remote_log_segment_metadata_batch(
        [
            update_of(m, DELETE_SEGMENT_STARTED)
            for m in listing(leader, by_segment)
            if m.state is not DELETE_SEGMENT_STARTED
        ]
    )
    marked = leader.handle_partition_segments_delete_started_below_epoch(by_epoch, 1)
    assert {m.remote_log_segment_id.id for m in marked} == {
        m.remote_log_segment_id.id for m in listing(leader, by_segment)
    }
    assert leader.remote_log_totals(by_epoch).copy_finished_segment_count == 0
    assert_alike()
    random_steps(40, tiered_epoch=1)
    assert_alike()
    for tp in (by_segment, by_epoch):
        leader.handle_partition_segments_deleted_below_epoch(tp, 1)
    assert_alike()
    assert {m.tiered_epoch for m in listing(reader, by_epoch)} <= {1}


def _deleting(manager: StoreRemoteLogMetadataManager, tp: TopicIdPartition) -> None:
    for state in (
        RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
        RemotePartitionDeleteState.DELETE_PARTITION_STARTED,
    ):
        manager.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, 1, BROKER_1)
        )


def test_marking_writes_the_partition_record_only_and_removal_deletes_by_key(
    store: Store,
) -> None:
    """However many segments a partition has, marking them deleting is one write of one record,
    and their removal writes no segment record: it deletes them by key, batch after batch."""
    tp = new_tp()
    writer = StoreRemoteLogMetadataManager(RecordingBackend(store.backend()), broker_id=BROKER_1)
    store.opened.append(writer)
    doomed = [
        _stamped(writer, tp, {i % 3: 100 * i}, 100 * i, 0, (COPY_SEGMENT_FINISHED,))
        for i in range(12)
    ]
    newer = _stamped(writer, tp, {2: 5_000}, 5_000, 1, (COPY_SEGMENT_FINISHED,))
    _deleting(writer, tp)
    recorded = writer.backend
    assert isinstance(recorded, RecordingBackend)
    recorded.multis.clear()

    marked = writer.handle_partition_segments_delete_started_below_epoch(tp, 1)
    assert len(marked) == len(doomed)
    assert [[op.key for op in ops] for ops in recorded.multis] == [[keys.partition_key(tp)]]
    writer.handle_partition_segments_delete_started_below_epoch(tp, 1)  # again: nothing to write
    assert len(recorded.multis) == 1

    recorded.multis.clear()
    reads: list[int] = []
    get_many = recorded.get_many
    recorded.get_many = lambda keys: reads.append(len(keys)) or get_many(keys)  # type: ignore[method-assign]
    writer.handle_partition_segments_deleted_below_epoch(tp, 1, batch_size=5)
    assert reads == []  # the partition as the marking left it: nothing to read again
    assert len(recorded.multis) == 3
    segment_ops = [op for ops in recorded.multis for op in ops if "/s/" in op.key]
    assert len(segment_ops) == len(doomed)
    assert all(isinstance(op, Delete) for op in segment_ops)
    assert [m.remote_log_segment_id for m in listing(store.manager(), tp)] == [
        newer.remote_log_segment_id
    ]


def test_a_copy_below_the_delete_epoch_is_deleting_from_its_start(
    paths: tuple[Paths, TopicIdPartition],
) -> None:
    """A copy stamped below the delete epoch that starts after the marking (a broker still
    copying the old epoch) is deleting at once: not readable, not counted as copied, refused
    COPY_SEGMENT_FINISHED. Its objects may still be landing, unseen by whoever marked: the
    removal keeps it until a marking has returned it."""
    p, tp = paths
    _stamped(p.writer, tp, {0: 0}, 0, 0, (COPY_SEGMENT_FINISHED,))
    _deleting(p.writer, tp)
    p.writer.handle_partition_segments_delete_started_below_epoch(tp, 1)
    late = segment(tp, {0: 100}, 100, 199, tiered_epoch=0)
    p.writer.add_remote_log_segment_metadata(late)
    p.writer.update_remote_log_segment_metadata(update_of(late, COPY_SEGMENT_FINISHED))  # dropped
    assert [m.state for m in listing(p.reader, tp)] == [DELETE_SEGMENT_STARTED] * 2
    assert p.reader.remote_log_segment_metadata(tp, 0, 150) is None
    totals = p.reader.remote_log_totals(tp)
    assert (totals.segment_count, totals.copy_finished_segment_count) == (2, 0)
    assert p.reader.remote_log_size(tp, 0) == 2 * SEG_SIZE  # deleting segments are listed
    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1)
    assert [m.remote_log_segment_id for m in listing(p.reader, tp)] == [late.remote_log_segment_id]
    marked = p.writer.handle_partition_segments_delete_started_below_epoch(tp, 1)
    assert [m.remote_log_segment_id for m in marked] == [late.remote_log_segment_id]
    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1)
    assert listing(p.reader, tp) == []
    assert p.reader.remote_log_size(tp, 0) == 0


def test_marking_a_partition_recorded_without_copy_finished_by_epoch_counts_right(
    store: Store,
) -> None:
    """A partition record written before the copy-finished aggregates were kept by tiered epoch:
    the marking rebuilds them from the segments, so the totals leave out those below E."""
    tp = new_tp()
    writer = store.manager()
    for i in range(3):
        _stamped(writer, tp, {0: 100 * i}, 100 * i, i, (COPY_SEGMENT_FINISHED,))
    backend = store.backend()
    try:
        stored = backend.get(keys.partition_key(tp))
        assert stored is not None
        record = store_pb.PartitionStateRecord.FromString(stored.value)
        assert len(record.copy_finished_by_tiered_epoch) == 3
        del record.copy_finished_by_tiered_epoch[:]
        backend.update(keys.partition_key(tp), record.SerializeToString(), stored.version)
    finally:
        backend.close()
    _deleting(writer, tp)
    writer.handle_partition_segments_delete_started_below_epoch(tp, 2)
    for reader in (writer, store.manager(broker_id=BROKER_1)):
        totals = reader.remote_log_totals(tp)
        assert (totals.copy_finished_segment_count, totals.copy_finished_size_bytes) == (
            1,
            SEG_SIZE,
        )


def test_remote_log_below_epoch_comes_from_the_aggregates(
    paths: tuple[Paths, TopicIdPartition], store: Store
) -> None:
    """What a delete job counts when it starts: the segments stamped below the epoch, in every
    state; through the marking the count stands, and the removal takes it to zero. A segment
    not copy-finished is counted whatever its epoch (only finished copies are kept by epoch)."""
    p, tp = paths
    for i in range(4):
        _stamped(p.writer, tp, {0: 100 * i}, 100 * i, 0, (COPY_SEGMENT_FINISHED,))
    _stamped(p.writer, tp, {0: 400}, 400, 0, ())  # a copy in progress
    _stamped(p.writer, tp, {0: 500}, 500, 0, (COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED))
    for i in range(3):
        _stamped(p.writer, tp, {1: 1_000 + 100 * i}, 1_000 + 100 * i, 1, (COPY_SEGMENT_FINISHED,))
    _stamped(p.writer, tp, {1: 1_300}, 1_300, 1, ())  # at epoch 1, but not yet finished
    _stamped(p.writer, tp, {2: 2_000}, 2_000, 2, (COPY_SEGMENT_FINISHED,))

    def counts() -> list[int]:
        return [p.reader.remote_log_below_epoch(tp, e).segment_count for e in (0, 1, 2, 3)]

    def sizes() -> list[int]:
        return [p.reader.remote_log_below_epoch(tp, e).size_bytes for e in (0, 1, 2, 3)]

    # exact: 0, 6, 10, 11; the 3 segments not copy-finished count below every epoch
    assert counts() == [3, 7, 10, 11]
    # the bytes follow the counts, each segment its recorded size, as remote_log_size adds them
    assert sizes() == [SEG_SIZE * n for n in counts()]
    assert sizes()[-1] == p.reader.remote_log_totals(tp).size_bytes
    _deleting(p.writer, tp)
    p.writer.handle_partition_segments_delete_started_below_epoch(tp, 1)
    assert counts() == [3, 7, 10, 11]
    p.writer.handle_partition_segments_deleted_below_epoch(tp, 1)
    assert counts() == [1, 1, 4, 5]  # exact: 0, 0, 4, 5
    assert sizes() == [SEG_SIZE * n for n in counts()]
    with pytest.raises(RemoteResourceNotFoundException):
        p.reader.remote_log_below_epoch(new_tp(), 1)


def test_remote_log_below_epoch_of_a_record_without_the_epochs_aggregates_counts_all(
    store: Store,
) -> None:
    """A partition record written before finished copies were kept by tiered epoch: every
    segment, the most there can be below any epoch."""
    tp = new_tp()
    writer = store.manager()
    for i in range(3):
        _stamped(writer, tp, {0: 100 * i}, 100 * i, i, (COPY_SEGMENT_FINISHED,))
    backend = store.backend()
    try:
        stored = backend.get(keys.partition_key(tp))
        assert stored is not None
        record = store_pb.PartitionStateRecord.FromString(stored.value)
        del record.copy_finished_by_tiered_epoch[:]
        backend.update(keys.partition_key(tp), record.SerializeToString(), stored.version)
    finally:
        backend.close()
    reader = store.manager(broker_id=BROKER_1)
    below = [reader.remote_log_below_epoch(tp, e) for e in (0, 1, 3)]
    assert [(b.segment_count, b.size_bytes) for b in below] == [(3, 3 * SEG_SIZE)] * 3


def test_a_write_between_the_marking_and_the_removal_is_seen_by_the_removal(
    store: Store,
) -> None:
    """The removal starts from the partition as its marking left it only if nobody wrote to it
    since: a segment finished by a broker and a newer copy in between are taken into account."""
    tp = new_tp()
    writer, broker = store.manager(), store.manager(broker_id=BROKER_1)
    doomed = [
        _stamped(writer, tp, {0: 100 * i}, 100 * i, 0, (COPY_SEGMENT_FINISHED,)) for i in range(6)
    ]
    _deleting(writer, tp)
    writer.handle_partition_segments_delete_started_below_epoch(tp, 1)
    broker.update_remote_log_segment_metadata(update_of(doomed[0], DELETE_SEGMENT_FINISHED))
    newer = _stamped(broker, tp, {1: 1_000}, 1_000, 1, (COPY_SEGMENT_FINISHED,))
    writer.handle_partition_segments_deleted_below_epoch(tp, 1, batch_size=4)
    for reader in (writer, store.manager(broker_id=7)):
        assert listing(reader, tp) == [newer]
        totals = reader.remote_log_totals(tp)
        assert (totals.segment_count, totals.copy_finished_segment_count) == (1, 1)
        assert [reader.remote_log_size(tp, e) for e in (0, 1)] == [0, SEG_SIZE]
