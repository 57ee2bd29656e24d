"""DeleteRecords on a tiered partition, in-process (real logs, a sqlite RLMM, a directory as
remote storage): the log start rises on the log, the expiration task deletes the remote segments
wholly below it (Kafka's ``isSegmentBreachByLogStartOffset``) under copying and under a retain
stop, and leaves them to the bulk delete under a delete stop; reads below it are refused."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log import OffsetOutOfRangeError
from tests.broker.rlm.test_rlm import Broker
from tests.support.batches import append_record
from tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from tiered.config import RemoteLogDisablePolicy


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    try:
        yield b
    finally:
        b.close()


def tiered(broker: Broker, topic: str) -> tuple[TopicIdPartition, list[RemoteLogSegmentMetadata]]:
    """A led partition whose closed segments are all in remote storage and whose oldest ones are
    there only (the local log keeps the last two closed segments)."""
    tp = broker.partition(topic, 400)
    broker.lead(tp)
    broker.copy_now(tp)
    remote = broker.finished(tp)
    assert len(remote) > 4
    broker.logs[tp].delete_local_segments_up_to(remote[-2].start_offset)
    return tp, remote


def object_ids(broker: Broker, tp: TopicIdPartition) -> str:
    return "".join(broker.real_rsm.object_keys(tp))


def assert_refused_below(broker: Broker, tp: TopicIdPartition, start: int) -> None:
    with pytest.raises(OffsetOutOfRangeError):
        broker.rlm.read(tp, start - 1, 100)
    assert broker.rlm.read(tp, start, 100).first_offset == start


def test_remote_segments_wholly_below_the_new_log_start_are_expired(broker: Broker) -> None:
    tp, remote = tiered(broker, "purged")
    log = broker.logs[tp]
    new_start = remote[2].start_offset + 3  # inside the third remote-only segment
    assert new_start < log.local_log_start_offset
    assert log.delete_records(new_start) == new_start
    assert_refused_below(broker, tp, new_start)  # at once, before any expiration run
    broker.expire_now(tp)
    assert broker.finished(tp) == remote[2:]
    ids = object_ids(broker, tp)
    assert not any(str(m.remote_log_segment_id.id) in ids for m in remote[:2])
    assert all(str(m.remote_log_segment_id.id) in ids for m in remote[2:])
    # The remote log start is the first segment still listed; the log start stays where asked.
    first = next(iter(broker.rlmm.list_remote_log_segments(tp)))
    assert first.start_offset == remote[2].start_offset
    assert log.log_start_offset == new_start
    assert_refused_below(broker, tp, new_start)
    found = broker.rlm.find_offset_by_timestamp(tp, 0)
    assert found is not None and found.offset == new_start


def test_delete_records_to_the_high_watermark_empties_remote_storage(broker: Broker) -> None:
    tp, _ = tiered(broker, "emptied")
    log = broker.logs[tp]
    end = log.log_end_offset
    assert log.delete_records(-1) == end
    assert log.segments() == [log.active_segment]
    broker.expire_now(tp)
    assert broker.finished(tp) == [] and object_ids(broker, tp) == ""
    # Tiering goes on: the active segment, which straddles the new start, is copied once closed.
    straddling = log.active_segment.base_offset
    assert straddling < end
    for i in range(60):
        append_record(log, None, b"later" * 10, 5_000 + i, 0)
    log.roll()
    broker.copy_now(tp)
    copied = broker.finished(tp)
    assert copied and copied[0].start_offset == straddling
    assert_refused_below(broker, tp, end)


def test_under_a_retain_stop_the_expiration_task_deletes_them_too(broker: Broker) -> None:
    tp, remote = tiered(broker, "retained")
    log = broker.logs[tp]
    assert broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.RETAIN) == {tp: None}
    local_before = log.segments()
    new_start = remote[1].end_offset + 1  # the start of the third segment, exactly
    assert log.delete_records(new_start) == new_start
    broker.expire_now(tp)
    assert broker.finished(tp) == remote[2:]
    assert log.segments() == local_before  # all above the new start: kept while remote has data
    assert_refused_below(broker, tp, new_start)
    # Tiering on again: copying resumes contiguously after what remote storage holds.
    for i in range(60):
        append_record(log, None, b"later" * 10, 5_000 + i, 0)
    log.roll()
    broker.rlm.enable_partitions([tp], 1)
    broker.copy_now(tp)
    after = broker.finished(tp)
    assert after[: len(remote) - 2] == remote[2:]
    for a, b in itertools.pairwise(after):
        assert b.start_offset == a.end_offset + 1


def test_under_a_delete_stop_remote_data_is_left_to_the_bulk_delete(broker: Broker) -> None:
    tp, remote = tiered(broker, "deleting")
    log = broker.logs[tp]
    assert broker.rlm.stop_partitions([tp], 1, RemoteLogDisablePolicy.DELETE) == {tp: None}
    local_start = log.log_start_offset
    assert local_start == log.local_log_start_offset  # the delete stop raised it
    assert log.delete_records(3) == local_start  # below the log start: nothing to do
    second = log.segments()[1]
    new_start = second.base_offset + 1
    assert log.delete_records(new_start) == new_start
    assert log.local_log_start_offset == second.base_offset
    broker.expire_now(tp)  # the local retention task, under a delete stop
    assert broker.finished(tp) == remote  # untouched by the broker: the job deletes them
    with pytest.raises(OffsetOutOfRangeError):
        broker.rlm.read(tp, new_start - 1, 100)
    assert broker.rlm.read(tp, new_start, 100).first_offset == new_start


def test_a_copy_in_flight_below_the_new_log_start_leaves_nothing_below_it(
    broker: Broker,
) -> None:
    tp = broker.partition("racing", 300)
    log = broker.logs[tp]
    broker.rsm.copy_gate = threading.Event()
    broker.lead(tp)
    assert broker.rsm.copy_started.wait(10)  # the first segment's copy waits at the gate
    new_start = log.closed_segments()[2].base_offset
    assert log.delete_records(new_start) == new_start  # its files go meanwhile
    broker.rsm.copy_gate.set()
    broker.copy_now(tp)
    task = broker.rlm.copy_task(tp)
    assert task is not None and task.failures == 0  # a deleted segment is no failed copy
    assert broker.rlm.metrics.copy_errors["racing"] == 0
    broker.expire_now(tp)
    listed = list(broker.rlmm.list_remote_log_segments(tp))
    assert listed and all(m.end_offset >= new_start for m in listed)
    ids = object_ids(broker, tp)
    keys = broker.real_rsm.object_keys(tp)
    assert len(keys) == 4 * len(listed)  # no object of a segment not listed
    assert all(str(m.remote_log_segment_id.id) in ids for m in listed)


def test_a_remote_read_overtaken_by_the_deletion_is_out_of_range(broker: Broker) -> None:
    tp, remote = tiered(broker, "overtaken")
    log = broker.logs[tp]
    broker.rsm.fetch_gate = threading.Event()
    failures: list[Exception] = []

    def read() -> None:
        try:
            broker.rlm.read(tp, 0, 100)
        except Exception as e:
            failures.append(e)

    reader = threading.Thread(target=read)
    reader.start()
    assert broker.rsm.fetch_started.wait(10)  # past the log start check, reading the segment
    assert log.delete_records(remote[2].start_offset) == remote[2].start_offset
    broker.expire_now(tp)  # the segment being read is deleted
    broker.rsm.fetch_gate.set()
    reader.join(30)
    assert len(failures) == 1 and isinstance(failures[0], OffsetOutOfRangeError), failures
