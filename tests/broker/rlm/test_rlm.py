"""The broker's RemoteLogManager in-process: real local logs, a real sqlite RLMM and a real
directory as remote storage; RSM wrappers inject slowness and failures."""

from __future__ import annotations

import ast
import itertools
import logging
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log import Log, LogConfig, OffsetOutOfRangeError
from broker.rlm.manager import (
    RemoteLogManager,
    RemoteLogManagerConfig,
    RetentionConfig,
    TieredPartition,
)
from broker.rlm.partition_tiering import PartitionTiering, TieringState
from broker.rlm.scheduler import PeriodicTask, ScheduledPool
from tests.support.batches import append_record, decode
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered import rlmm, rsm
from tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteState,
    RemoteStorageException,
    RemoteStorageManager,
    TopicIdPartition,
)
from tiered.config import RemoteLogDisablePolicy
from tiered.kafka.compression import Codec
from tiered.kafka.records import Record, build_batch

FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


class WrappedRsm(RemoteStorageManager):
    """The real RSM, with hooks to block, fail or bloat particular calls."""

    def __init__(self, inner: RemoteStorageManager) -> None:
        self.inner = inner
        self.copy_started = threading.Event()
        self.copy_gate: threading.Event | None = None  # copies wait for it when set
        self.fetch_started = threading.Event()
        self.fetch_gate: threading.Event | None = None
        self.fail_copies = 0
        self.bloat_topics: set[str] = set()
        self.events: list[str] = []  # completion order of gated calls, for ordering checks

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> CustomMetadata | None:
        self.copy_started.set()
        if self.copy_gate is not None:
            assert self.copy_gate.wait(30)
        if self.fail_copies > 0:
            self.fail_copies -= 1
            raise RemoteStorageException("injected upload failure")
        custom = self.inner.copy_log_segment_data(metadata, segment_data)
        self.events.append("copy returned")
        if metadata.topic_id_partition.topic in self.bloat_topics:
            return CustomMetadata(b"x" * 200)
        return custom

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        self.fetch_started.set()
        if self.fetch_gate is not None:
            assert self.fetch_gate.wait(30)
        data = self.inner.fetch_log_segment(metadata, start_position, end_position)
        self.events.append("fetch returned")
        return data

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self.inner.fetch_index(metadata, index_type)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.inner.delete_log_segment_data(metadata)


class FakeClock:
    def __init__(self, now_s: float = 1_000_000.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


class Broker:
    """An RLM with its RLMM and RSM; remote storage in ``tmp_path`` unless ``remote_storage``
    (the RSM's config) says otherwise."""

    def __init__(self, tmp_path: Path, remote_storage: dict[str, str] | None = None) -> None:
        self.tmp_path = tmp_path
        self.clock = FakeClock()
        self.rlmm = rlmm.create({"rlmm.sqlite.path": str(tmp_path / "rlmm.db"), "broker.id": "0"})
        self.real_rsm = rsm.create(
            remote_storage or {"remote.storage.root": str(tmp_path / "remote")}
        )
        self.rsm = WrappedRsm(self.real_rsm)
        self.rlm = RemoteLogManager(
            RemoteLogManagerConfig(broker_id=0, task_interval_s=3600, stop_wait_s=30),
            self.rlmm,
            self.rsm,
            clock=self.clock,
        )
        self.logs: dict[TopicIdPartition, Log] = {}

    def partition(self, topic: str, records: int, segment_bytes: int = 2000) -> TopicIdPartition:
        tp = TopicIdPartition(uuid.uuid4(), topic, 0)
        log = Log.open(self.tmp_path / f"{topic}-0", LogConfig(segment_bytes=segment_bytes))
        for i in range(records):
            append_record(log, f"k{i}".encode(), f"value-{i}".encode() * 3, 1_000 + i, 0)
        self.logs[tp] = log
        return tp

    def lead(self, *tps: TopicIdPartition, retention: RetentionConfig | None = None) -> None:
        self.rlm.on_leadership_change(
            [
                TieredPartition(tp, self.logs[tp], retention=retention or RetentionConfig())
                for tp in tps
            ]
        )

    def expire_now(self, tp: TopicIdPartition) -> None:
        task = self.rlm.expiration_task(tp)
        assert task is not None
        runs = task.runs
        self.rlm.trigger_expiration(tp)
        poll_until(lambda: task.runs > runs, what="an expiration run")
        assert task.failures == 0

    def copy_now(self, tp: TopicIdPartition) -> None:
        """Runs the copy task and waits until it has copied every closed segment (by its own
        progress: retention may already be deleting the oldest copies)."""
        closed = [s for s in self.logs[tp].closed_segments() if not s.is_empty]
        task = self.rlm.copy_task(tp)
        assert task is not None
        self.rlm.trigger_copy(tp)
        last = closed[-1].next_offset - 1 if closed else -1
        poll_until(
            lambda: task.copied_offset is not None and task.copied_offset >= last,
            what="copies to finish",
        )

    def finished(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        return [m for m in self.rlmm.list_remote_log_segments(tp) if m.state is FINISHED]

    def finished_count(self, tp: TopicIdPartition) -> int:
        try:
            return len(self.finished(tp))
        except Exception:
            return 0

    def close(self) -> None:
        self.rlm.close()
        self.rlmm.close()
        for log in self.logs.values():
            log.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    try:
        yield b
    finally:
        b.close()


def read_all(broker: Broker, tp: TopicIdPartition, start: int) -> list[bytes]:
    values: list[bytes] = []
    offset = start
    end = broker.logs[tp].log_end_offset
    while offset < end:
        records = decode(broker.rlm.read(tp, offset, 300).records)
        assert records, f"no progress at offset {offset}"
        assert records[0].offset == offset
        values.extend(r.value or b"" for r in records)
        offset = records[-1].offset + 1
    return values


def test_tiers_closed_segments_and_reads_across_tiers(broker: Broker) -> None:
    tp = broker.partition("orders", 400)
    log = broker.logs[tp]
    broker.lead(tp)
    broker.copy_now(tp)
    segments = broker.finished(tp)
    # Contiguous, stamped with the tiered epoch, and covering every closed segment.
    assert next(m.start_offset for m in segments) == 0
    for a, b in itertools.pairwise(segments):
        assert b.start_offset == a.end_offset + 1
    assert segments[-1].end_offset == log.active_segment.base_offset - 1
    assert {m.tiered_epoch for m in segments} == {0}
    assert broker.rlmm.remote_log_totals(tp).copy_finished_size_bytes == sum(
        s.size_bytes for s in log.closed_segments()
    )
    # Local retention removes what is in remote storage; every offset still reads the same.
    log.delete_local_segments_up_to(segments[len(segments) // 2].end_offset + 1)
    assert log.local_log_start_offset > 0
    assert read_all(broker, tp, 0) == [f"value-{i}".encode() * 3 for i in range(400)]
    assert broker.rlm.metrics.fetch_requests["orders"] > 0


def test_custom_metadata_over_the_limit_stops_only_that_partition(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    bloated, healthy = broker.partition("bloated", 200), broker.partition("healthy", 200)
    broker.rsm.bloat_topics.add("bloated")
    caplog.set_level(logging.ERROR)
    broker.lead(bloated, healthy)
    broker.copy_now(healthy)
    task = broker.rlm.copy_task(bloated)
    assert task is not None
    poll_until(lambda: task.cancelled and task.runs >= 1, what="the bloated copy task to stop")
    assert "200 bytes, more than remote.log.metadata.custom.metadata.max.bytes=128" in caplog.text
    assert broker.rlm.metrics.copy_errors["bloated"] == 1
    assert broker.finished_count(bloated) == 0
    assert list(broker.rlmm.list_remote_log_segments(bloated)) == []  # abandoned and deleted
    assert broker.real_rsm.object_keys(bloated) == []
    assert broker.finished_count(healthy) > 0


def test_a_failed_upload_is_cleaned_up_and_retried(broker: Broker) -> None:
    tp = broker.partition("flaky", 200)
    broker.rsm.fail_copies = 1
    broker.lead(tp)
    task = broker.rlm.copy_task(tp)
    assert task is not None
    broker.rlm.trigger_copy(tp)
    poll_until(lambda: task.failures == 1, what="the failing run")
    assert broker.rlm.metrics.copy_errors["flaky"] == 1
    broker.copy_now(tp)  # the next run copies everything
    listed = list(broker.rlmm.list_remote_log_segments(tp))
    assert all(m.state is FINISHED for m in listed)
    expected = {f"{m.start_offset:020d}-{m.remote_log_segment_id.id}" for m in listed}
    stored = {Path(k).name.rsplit(".", 1)[0] for k in broker.real_rsm.object_keys(tp)}
    assert stored == expected  # no orphan objects of the failed attempt


def test_remote_reads_return_whole_batches_and_find_timestamps(broker: Broker) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "batches", 0)
    log = Log.open(broker.tmp_path / "batches-0", LogConfig(segment_bytes=1500))
    broker.logs[tp] = log
    for i in range(40):
        records = [
            Record(None, f"value-{10 * i + j}".encode() * 4, timestamp=100_000 + 10 * i + j)
            for j in range(10)
        ]
        log.append_batches(build_batch(records, Codec.GZIP if i % 2 else Codec.NONE), 0)
    stored = bytes(log.read(0, 1 << 30).records)
    broker.lead(tp)
    broker.copy_now(tp)
    log.delete_local_segments_up_to(broker.finished(tp)[-1].end_offset + 1)
    local_start = log.local_log_start_offset
    assert local_start >= 100
    for offset in (0, 5, 57, local_start - 1):
        got = broker.rlm.read(tp, offset, 1)  # less than a batch: still its whole batch
        first = offset - offset % 10
        assert (got.first_offset, got.next_offset) == (first, first + 10)
        assert bytes(got.records) in stored  # the bytes as appended, not re-encoded
        assert [r.offset for r in decode(got.records)] == list(range(first, first + 10))
    found = broker.rlm.find_offset_by_timestamp(tp, 100_057)
    assert found is not None and (found.offset, found.timestamp_ms) == (57, 100_057)
    assert broker.rlm.find_offset_by_timestamp(tp, 100_000 + local_start) is None  # local
    log.set_log_start_offset(60)
    found = broker.rlm.find_offset_by_timestamp(tp, 100_000)
    assert found is not None and found.offset == 60


def test_stop_with_retain_waits_for_and_discards_an_in_flight_copy(broker: Broker) -> None:
    tp = broker.partition("retained", 300)
    broker.lead(tp)
    broker.copy_now(tp)
    copied = broker.finished(tp)
    log = broker.logs[tp]
    for i in range(100):  # more closed segments to copy
        append_record(log, None, b"more" * 10, 5_000 + i, 0)
    log.roll()
    broker.rsm.copy_started.clear()
    broker.rsm.copy_gate = threading.Event()
    broker.rlm.trigger_copy(tp)
    assert broker.rsm.copy_started.wait(10)
    outcome: dict[str, object] = {}
    broker.rsm.events.clear()

    def stop() -> None:
        outcome.update(broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.RETAIN))
        broker.rsm.events.append("stop returned")

    stopper = threading.Thread(target=stop)
    stopper.start()
    task = broker.rlm.copy_task(tp)
    assert task is not None
    poll_until(lambda: task.cancelled or not stopper.is_alive(), what="stop to cancel the task")
    broker.rsm.copy_gate.set()
    stopper.join(30)
    assert not stopper.is_alive() and outcome == {tp: None}
    # stop_partitions returned only after the copy in flight had ended.
    assert broker.rsm.events[:2] == ["copy returned", "stop returned"]
    # The copy stamped with tiered epoch 0 began before the fence at 1: discarded, not finished.
    assert broker.finished(tp) == copied
    assert all(m.state is FINISHED for m in broker.rlmm.list_remote_log_segments(tp))
    # Retain: remote reads go on.
    log.delete_local_segments_up_to(copied[-1].end_offset + 1)
    assert broker.rlm.read(tp, 0, 100).first_offset == 0
    # Idempotent, and an older epoch is a no-op.
    assert broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.RETAIN) == {tp: None}
    assert broker.rlm.stop_partitions([tp], 0, RemoteLogDisablePolicy.DELETE) == {tp: None}
    assert log.log_start_offset == 0


@pytest.mark.parametrize("policy", [RemoteLogDisablePolicy.DELETE, RemoteLogDisablePolicy.RETAIN])
def test_a_copy_run_between_the_stop_event_and_the_task_cancel_copies_nothing(
    broker: Broker, policy: RemoteLogDisablePolicy
) -> None:
    """DisableRemoteTopic raises the epoch before the copy task is cancelled. A run in that
    window must not copy stamped with the stop's epoch: such a segment would outlive the
    deletion for that epoch on a topic that no longer tiers."""
    tp = broker.partition("window", 300)
    tiering = PartitionTiering(tp, 0, TieringState.COPYING)
    broker.rlm.on_leadership_change([TieredPartition(tp, broker.logs[tp], tiering=tiering)])
    broker.copy_now(tp)
    copied = broker.finished(tp)
    log = broker.logs[tp]
    for i in range(100):
        append_record(log, None, b"more" * 10, 5_000 + i, 0)
    log.roll()
    assert tiering.handle_disable_remote_topic(1, policy)
    task = broker.rlm.copy_task(tp)
    assert task is not None
    runs = task.runs
    broker.rsm.copy_started.clear()
    broker.rlm.trigger_copy(tp)
    poll_until(lambda: task.runs > runs, what="a copy run")
    assert task.failures == 0
    assert not broker.rsm.copy_started.is_set()
    assert broker.rlmm.list_remote_log_segments(tp) is not None
    assert list(broker.rlmm.list_remote_log_segments(tp)) == copied
    assert broker.rlm.apply_stop([tp]) == {tp: None}


def test_stop_with_delete_drains_remote_fetches_and_raises_log_start(broker: Broker) -> None:
    tp = broker.partition("deleted", 300)
    log = broker.logs[tp]
    broker.lead(tp)
    broker.copy_now(tp)
    log.delete_local_segments_up_to(broker.finished(tp)[1].end_offset + 1)
    local_start = log.local_log_start_offset

    broker.rsm.fetch_gate = threading.Event()
    result: dict[str, object] = {}
    reader = threading.Thread(target=lambda: result.update(records=broker.rlm.read(tp, 0, 100)))
    reader.start()
    assert broker.rsm.fetch_started.wait(10)
    broker.rsm.events.clear()

    def stop() -> None:
        result.update(stop=broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.DELETE))
        broker.rsm.events.append("stop returned")

    stopper = threading.Thread(target=stop)
    stopper.start()
    # Wait until the stop has shut the gate to new fetches (or, wrongly, returned already).
    poll_until(
        lambda: not stopper.is_alive() or not broker.rlm.accepts_remote_fetches(tp),
        what="stop to shut remote fetches",
    )
    with pytest.raises(OffsetOutOfRangeError):
        broker.rlm.read(tp, 0, 100)  # refused while draining
    broker.rsm.fetch_gate.set()
    reader.join(30)
    stopper.join(30)
    assert result["stop"] == {tp: None}
    assert result["records"].first_offset == 0  # type: ignore[attr-defined]  # the drained fetch
    assert broker.rsm.events == ["fetch returned", "stop returned"]
    assert log.log_start_offset == local_start
    with pytest.raises(OffsetOutOfRangeError):
        broker.rlm.read(tp, 0, 100)
    assert broker.rlm.read(tp, local_start, 100).first_offset == local_start
    assert (
        broker.rlmm.remote_partition_delete_state(tp)
        is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
    )


def test_reenable_resumes_copying_contiguously_with_the_new_epoch(broker: Broker) -> None:
    tp = broker.partition("again", 300)
    log = broker.logs[tp]
    broker.lead(tp)
    broker.copy_now(tp)
    before = broker.finished(tp)
    assert broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.RETAIN) == {tp: None}
    for i in range(150):
        append_record(log, None, b"after" * 10, 9_000 + i, 0)
    log.roll()
    broker.rlm.enable_partitions([tp], 1)
    broker.copy_now(tp)
    after = broker.finished(tp)
    new = after[len(before) :]
    assert new and {m.tiered_epoch for m in new} == {1}
    assert new[0].start_offset == before[-1].end_offset + 1
    for a, b in itertools.pairwise(after):
        assert b.start_offset == a.end_offset + 1


@pytest.mark.parametrize("policy", [RemoteLogDisablePolicy.DELETE, RemoteLogDisablePolicy.RETAIN])
def test_copying_resumed_after_a_delete_stop_does_not_count_what_the_bulk_delete_owns(
    broker: Broker, policy: RemoteLogDisablePolicy
) -> None:
    """As a broker restarted after a stop at epoch 1 and a re-enable finds it: under the delete
    policy the copies stamped 0 are being deleted, so everything is copied again, stamped 1;
    under retain they stay and copying goes on after them."""
    tp = broker.partition("resumed", 300)
    broker.lead(tp)
    broker.copy_now(tp)
    before = broker.finished(tp)
    assert before and {m.tiered_epoch for m in before} == {0}
    broker.rlm.on_leadership_change([], {tp})  # the restart
    tiering = PartitionTiering(tp, 0, TieringState.COPYING)
    tiering.handle_disable_remote_topic(1, policy)
    tiering.handle_reenable(1)
    broker.rlm.on_leadership_change([TieredPartition(tp, broker.logs[tp], tiering=tiering)])
    broker.copy_now(tp)
    again = [m for m in broker.finished(tp) if m.tiered_epoch == 1]
    if policy is RemoteLogDisablePolicy.DELETE:
        assert [(m.start_offset, m.end_offset) for m in again] == [
            (m.start_offset, m.end_offset) for m in before
        ]
    else:
        assert again == []


def test_copy_lag_counts_uncopied_closed_segments_from_the_moment_of_leadership(
    broker: Broker,
) -> None:
    # One copier thread, held by another partition's blocked upload: the partition under test is
    # led but its copy task cannot have run, so its lag must come from the RLMM.
    broker.rlm.close()
    broker.rlm = RemoteLogManager(
        RemoteLogManagerConfig(broker_id=0, copier_threads=1, task_interval_s=3600, stop_wait_s=30),
        broker.rlmm,
        broker.rsm,
        clock=broker.clock,
    )
    blocker, tp = broker.partition("blocker", 200), broker.partition("lagging", 400)
    log = broker.logs[tp]

    def expected_lag(copied_up_to: int) -> list[tuple[int, int]]:
        return [
            (s.base_offset, s.size_bytes)
            for s in log.closed_segments()
            if not s.is_empty and s.next_offset - 1 > copied_up_to
        ]

    def lag() -> list[tuple[int, int]]:
        segments = broker.rlm.copy_lag(tp)
        assert segments is not None
        return [(s.base_offset, s.size_bytes) for s in segments]

    broker.lead(tp)
    broker.copy_now(tp)  # everything closed so far is remote
    copied_up_to = log.active_segment.base_offset - 1
    assert lag() == []
    for i in range(200):
        append_record(log, None, b"later" * 10, 9_000 + i, 0)
    log.roll()
    assert len(expected_lag(copied_up_to)) >= 2

    broker.rsm.copy_gate = threading.Event()
    broker.rsm.copy_started.clear()
    broker.lead(blocker)
    assert broker.rsm.copy_started.wait(30)  # the only copier thread is now busy
    try:
        broker.lead(tp)  # a new leadership: a fresh copy task that has not run
        task = broker.rlm.copy_task(tp)
        assert task is not None and task.copied_offset is None and task.runs == 0
        assert lag() == expected_lag(copied_up_to)
    finally:
        broker.rsm.copy_gate.set()
    broker.copy_now(tp)
    assert lag() == []
    broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.RETAIN)
    assert broker.rlm.copy_lag(tp) is None  # not copying: no lag to report


def test_after_a_delete_stop_only_local_retention_runs(broker: Broker) -> None:
    tp = broker.partition("purged", 400)
    log = broker.logs[tp]
    broker.lead(tp)
    broker.copy_now(tp)
    remote_before = broker.finished(tp)
    assert broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.DELETE) == {tp: None}
    closed_before = len(list(log.closed_segments()))
    broker.rlm.update_retention(tp, RetentionConfig(retention_bytes=4000))
    broker.expire_now(tp)
    assert 0 < len(list(log.closed_segments())) < closed_before  # the local log is kept in bounds
    assert broker.finished(tp) == remote_before  # remote data is left to the bulk delete
    broker.rlm.enable_partitions([tp], 1)
    task = broker.rlm.expiration_task(tp)
    assert task is not None and type(task).__name__ == "RLMExpirationTask" and not task.cancelled


def test_a_failing_periodic_task_keeps_running() -> None:
    class Flaky(PeriodicTask):
        def execute(self) -> None:
            if self.runs == 0:
                raise RuntimeError("first run fails")

    pool = ScheduledPool("test", 2, interval_s=0.01)
    task = Flaky("flaky")
    try:
        pool.schedule(task)
        poll_until(lambda: task.runs >= 3, what="the task to run again after failing")
        assert task.failures == 1
        assert task.cancel(5)
        runs = task.runs
        pool.trigger(task)
        poll_until(pool._executor._work_queue.empty, what="the queue to drain")
        assert task.runs == runs  # cancelled: no more runs
    finally:
        pool.close()


def _remote_bytes(broker: Broker, tp: TopicIdPartition) -> int:
    return broker.rlmm.remote_log_totals(tp).copy_finished_size_bytes


def test_retention_bytes_expires_remote_segments_oldest_first(broker: Broker) -> None:
    tp = broker.partition("sized", 400)
    log = broker.logs[tp]
    limit = 6_000
    broker.lead(tp, retention=RetentionConfig(retention_bytes=limit, local_retention_bytes=2_500))
    broker.copy_now(tp)
    first = broker.finished(tp)
    broker.expire_now(tp)
    after = broker.finished(tp)
    assert after and after[-1] == first[-1] and len(after) < len(first)
    assert after == first[len(first) - len(after) :]  # the oldest went
    local_only = sum(s.size_bytes for s in log.segments() if s.base_offset > after[-1].end_offset)
    total = _remote_bytes(broker, tp) + local_only
    assert total >= limit > total - after[0].segment_size_in_bytes  # Kafka's stopping rule
    assert log.log_start_offset == after[0].start_offset
    with pytest.raises(OffsetOutOfRangeError):
        broker.rlm.read(tp, 0, 100)
    assert broker.rlm.read(tp, log.log_start_offset, 100).first_offset == log.log_start_offset
    # Local retention removed only segments already in remote storage.
    assert log.local_log_start_offset <= after[-1].end_offset + 1
    assert sum(s.size_bytes for s in log.segments()) <= 2_500 + max(
        s.size_bytes for s in log.segments()
    )
    expired_ids = {m.remote_log_segment_id for m in first} - {
        m.remote_log_segment_id for m in after
    }
    keys = "".join(broker.real_rsm.object_keys(tp))
    assert not any(str(i.id) in keys for i in expired_ids)  # their objects are gone


def test_retention_ms_expires_by_record_time(broker: Broker) -> None:
    tp = broker.partition("timed", 300)  # record timestamps 1,000 .. 1,299 ms
    broker.clock.now_s = 1.150  # now = 1,150 ms
    broker.lead(tp, retention=RetentionConfig(retention_ms=100))
    broker.copy_now(tp)
    broker.expire_now(tp)
    # Segments whose newest record is older than 1,050 ms are gone; the rest stay.
    for m in broker.finished(tp):
        assert m.max_timestamp_ms >= 1_050
    assert broker.logs[tp].log_start_offset > 0
    assert broker.logs[tp].log_start_offset <= 51


def test_local_segments_not_yet_copied_are_never_expired_locally(broker: Broker) -> None:
    tp = broker.partition("lagging", 300)
    log = broker.logs[tp]
    broker.rsm.copy_gate = threading.Event()  # copying is stuck
    broker.lead(tp, retention=RetentionConfig(local_retention_bytes=0))
    assert broker.rsm.copy_started.wait(10)
    broker.expire_now(tp)
    assert log.local_log_start_offset == 0  # nothing is in remote storage yet
    broker.rsm.copy_gate.set()
    broker.copy_now(tp)
    broker.expire_now(tp)
    assert log.local_log_start_offset == log.active_segment.base_offset  # all copied ones went
    assert log.log_start_offset == 0  # local expiry never moves the log start


def test_with_copying_stopped_remote_expires_before_local(broker: Broker) -> None:
    """KIP-950 retain: expiry starts at the remote log start; local segments expire only once
    remote storage is empty, so offsets stay contiguous if tiering comes back."""
    tp = broker.partition("retain-expiry", 300)
    log = broker.logs[tp]
    broker.lead(tp, retention=RetentionConfig(retention_bytes=3_000, local_retention_bytes=-1))
    broker.copy_now(tp)
    assert broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.RETAIN) == {tp: None}
    local_before = log.segments()
    broker.expire_now(tp)
    remaining = broker.finished(tp)
    assert remaining
    assert log.log_start_offset == remaining[0].start_offset
    # Local segments are kept while remote storage has data, but for those wholly below the log
    # start, whose records are deleted (Kafka's deleteOldSegments by log start offset).
    assert log.segments() == [s for s in local_before if s.next_offset > log.log_start_offset]
    assert log.local_log_start_offset <= log.log_start_offset
    # Tighten retention until remote storage is empty: then the local log expires too.
    state = broker.rlm._partitions[tp]
    state.partition.retention = RetentionConfig(retention_bytes=0)
    broker.expire_now(tp)
    broker.expire_now(tp)
    assert broker.finished(tp) == []
    assert log.local_log_start_offset == log.log_start_offset == log.active_segment.base_offset


def test_unfinished_copies_and_failed_deletes_are_cleaned_up(
    broker: Broker, tmp_path: Path
) -> None:
    tp = broker.partition("crashed", 300)
    log = broker.logs[tp]
    # A previous leader died mid-copy: COPY_SEGMENT_STARTED metadata and objects in remote storage.
    segment = log.closed_segments()[0]
    orphan = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tp),
        segment.base_offset,
        segment.next_offset - 1,
        -1,
        7,
        1,
        segment.size_bytes,
        {0: segment.base_offset},
    )
    broker.rlmm.add_remote_log_segment_metadata(orphan)
    broker.real_rsm.copy_log_segment_data(orphan, log.segment_data(segment))
    broker.lead(tp)
    broker.copy_now(tp)
    assert orphan.remote_log_segment_id not in {
        m.remote_log_segment_id for m in broker.rlmm.list_remote_log_segments(tp)
    }
    assert str(orphan.remote_log_segment_id.id) not in "".join(broker.real_rsm.object_keys(tp))
    # A delete that failed leaves DELETE_SEGMENT_STARTED; expiration finishes it.
    victim = broker.finished(tp)[0]
    broker.rlmm.update_remote_log_segment_metadata(
        RemoteLogSegmentMetadataUpdate(
            victim.remote_log_segment_id, 2, None, RemoteLogSegmentState.DELETE_SEGMENT_STARTED, 0
        )
    )
    broker.expire_now(tp)
    assert victim.remote_log_segment_id not in {
        m.remote_log_segment_id for m in broker.rlmm.list_remote_log_segments(tp)
    }
    assert str(victim.remote_log_segment_id.id) not in "".join(broker.real_rsm.object_keys(tp))


def test_an_idle_partition_rolls_on_segment_ms_and_is_tiered(broker: Broker) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "idle", 0)
    clock = FakeClock(100.0)
    log = Log.open(broker.tmp_path / "idle-0", LogConfig(segment_ms=1_000), clock=clock)
    broker.logs[tp] = log
    for i in range(10):
        append_record(log, None, b"quiet", 100_000 + i, 0)
    broker.lead(tp)
    task = broker.rlm.copy_task(tp)
    assert task is not None
    poll_until(lambda: task.runs >= 1, what="a first copy run")
    assert broker.finished_count(tp) == 0  # the segment is young: still active
    clock.now_s += 2  # older than segment.ms, and nothing appended since
    broker.rlm.trigger_copy(tp)
    poll_until(lambda: broker.finished_count(tp) == 1, what="the idle segment to be tiered")
    assert broker.finished(tp)[0].end_offset == 9


@pytest.mark.parametrize("module", ["context", "copy_task", "expiration_task", "leader_partition"])
def test_the_rlm_tasks_do_not_depend_on_the_manager_that_schedules_them(module: str) -> None:
    """The tasks and what they are given import nothing of broker.rlm.manager, not even
    deferred into a function or hidden behind ``TYPE_CHECKING``: they reach remote storage
    through the context the manager builds, never through the manager."""
    tree = ast.parse((REPO / "broker" / "rlm" / f"{module}.py").read_text())
    imported = {
        name
        for node in ast.walk(tree)
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
    }
    assert "broker.rlm.model" in imported  # what it may import is seen
    assert not {name for name in imported if name.startswith("broker.rlm.manager")}
