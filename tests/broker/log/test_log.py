"""The broker's local segment log: segments of record batches, sparse indexes, the leader epoch
cache, rolling, deletion, checkpoints and crash recovery (torn tails and a real kill -9). Most
tests append one record per batch, so that they can count records and batches alike; the
batch-specific behaviour (codecs, idempotent producers, the old format) is in
test_log_batches.py."""

from __future__ import annotations

import itertools
import os
import random
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import LeaderEpochCache, Log, LogConfig, OffsetOutOfRangeError
from broker.log.leader_epoch import CHECKPOINT_FILE, decode_entries
from broker.log.log import LOG_START_OFFSET_FILE
from tests.support.batches import LoggedRecord, batch_size, decode, unsynced_config
from tests.support.batches import append_record as append
from tests.support.batches import read_records as read
from tiered.errors import ErrorCode
from tiered.kafka.record_batch import iter_batches
from tiered.kafka.records import Record, build_batch

REPO_ROOT = Path(__file__).resolve().parents[3]
BIG = 1 << 30


class FakeClock:
    """Seconds since the epoch, moved only by the test."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: int) -> None:
        self.now += ms / 1000


def value_for(i: int) -> bytes:
    return f"value-{i}".encode()


def fill(log: Log, count: int, epoch: int = 0, value_size: int = 0) -> list[int]:
    start = log.log_end_offset
    return [
        append(log, f"k{i}".encode(), value_for(i) + b"x" * value_size, 1000 + i, epoch)
        for i in range(start, start + count)
    ]


def small_config(**overrides: object) -> LogConfig:
    return unsynced_config(**{"segment_bytes": 1024, "index_interval_bytes": 128, **overrides})


# --------------------------------------------------------------------------------- segments + reads


def test_append_and_read_across_segments(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    offsets = fill(log, 100, value_size=30)
    assert offsets == list(range(100))
    assert log.log_end_offset == 100
    segments = log.segments()
    assert len(segments) > 7
    for previous, segment in itertools.pairwise(segments):
        assert previous.next_offset == segment.base_offset
        assert previous.size_bytes <= 1024
        assert previous.log_path.stat().st_size == previous.size_bytes
    records = read(log, 0, BIG)
    assert [r.offset for r in records] == list(range(100))
    assert [r.value for r in records] == [value_for(i) + b"x" * 30 for i in range(100)]
    assert read(log, 37, BIG)[0].offset == 37
    at_end = log.read(100, BIG)
    assert (at_end.records, at_end.next_offset) == (b"", 100)
    with pytest.raises(OffsetOutOfRangeError) as e:
        log.read(101, BIG)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.close()


def test_read_respects_max_bytes_but_returns_at_least_one_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 50, value_size=30)
    assert [r.offset for r in read(log, 3, 1)] == [3]
    assert read(log, 3, 0)[0].offset == 3
    one = log.read(3, 1)
    assert (one.first_offset, one.next_offset) == (3, 4)
    # Across a segment boundary, exactly as many batches as fit.
    boundary = log.segments()[1].base_offset
    sizes = [h.size for h in iter_batches(log.read(0, BIG).records)]
    five = sum(sizes[boundary - 2 : boundary + 3])
    got = log.read(boundary - 2, five)
    assert len(got.records) == five and got.next_offset == boundary + 3
    assert [r.offset for r in decode(got.records)] == list(range(boundary - 2, boundary + 3))
    assert [r.offset for r in read(log, boundary - 2, five - 1)] == list(
        range(boundary - 2, boundary + 2)
    )
    log.close()


def test_sparse_index_reads_match_a_linear_scan(tmp_path: Path) -> None:
    rng = random.Random(1234)
    log = Log.open(tmp_path, small_config(segment_bytes=64 * 1024, index_interval_bytes=200))
    model: list[tuple[LoggedRecord, int]] = []  # each record and the size of its batch
    for i in range(3000):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = rng.randbytes(rng.randrange(0, 60))
        ts = 1000 + rng.randrange(0, 5000)
        offset = append(log, key, value, ts, 0)
        model.append((LoggedRecord(offset, ts, 0, key, value), batch_size(key, value)))
    segments = log.segments()
    assert len(segments) >= 2
    # The indexes are sparse, non-trivial, and every entry points at its batch (Kafka's
    # entries: the batch's last offset and its position).
    for segment in segments:
        entries = segment.offset_index_entries
        assert 20 < len(entries) < (segment.next_offset - segment.base_offset) / 2
        data = segment.log_path.read_bytes()
        for rel, position in entries:
            header = next(iter_batches(memoryview(data)[position:]))
            assert header.last_offset == segment.base_offset + rel
        for ts, rel in segment.time_index_entries:
            assert model[segment.base_offset + rel][0].timestamp_ms == ts
        assert segment.max_timestamp_ms == max(
            r.timestamp_ms for r, _ in model[segment.base_offset : segment.next_offset]
        )
    for _ in range(300):
        start = rng.randrange(0, 3000)
        max_bytes = rng.randrange(1, 3000)
        expected: list[LoggedRecord] = []
        used = 0
        for record, size in model[start:]:
            if expected and used + size > max_bytes:
                break
            expected.append(record)
            used += size
        assert read(log, start, max_bytes) == expected, (start, max_bytes)
    log.close()


def test_roll_on_size_happens_before_the_append(tmp_path: Path) -> None:
    size = batch_size(b"k0", value_for(0))
    log = Log.open(tmp_path, small_config(segment_bytes=size * 3))
    fill(log, 3)
    assert len(log.segments()) == 1 and log.active_segment.size_bytes == size * 3
    fill(log, 1)
    assert [s.base_offset for s in log.segments()] == [0, 3]
    # A batch larger than segment_bytes still gets a segment of its own.
    big = append(log, None, b"x" * 1000, 0, 0)
    assert log.active_segment.base_offset == big == 4
    assert read(log, 4, BIG)[0].value == b"x" * 1000
    log.close()


def test_roll_on_segment_ms_uses_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    log = Log.open(tmp_path, small_config(segment_bytes=BIG, segment_ms=60_000), clock=clock)
    clock.advance_ms(120_000)
    fill(log, 1)  # an empty segment never rolls, however old
    assert len(log.segments()) == 1
    clock.advance_ms(1_000_000)
    fill(log, 1)
    assert [s.base_offset for s in log.segments()] == [0, 1]
    clock.advance_ms(60_000)  # exactly segment.ms old: not yet (Kafka rolls when strictly older)
    fill(log, 1)
    assert len(log.segments()) == 2
    clock.advance_ms(1)
    fill(log, 1)
    assert [s.base_offset for s in log.segments()] == [0, 1, 3]
    log.close()


def test_explicit_roll(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config(segment_bytes=BIG))
    first = log.active_segment
    assert log.roll() is first  # empty: nothing to close
    fill(log, 5)
    new = log.roll()
    assert new.base_offset == 5 and log.active_segment is new
    assert log.closed_segments() == [first]
    assert read(log, 0, BIG)[-1].offset == 4
    log.close()


def test_reopen_restores_closed_segments_without_scanning_them(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 200, value_size=20)
    before = [
        (s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms, s.offset_index_entries)
        for s in log.segments()
    ]
    log.close()
    reopened = Log.open(tmp_path, small_config())
    after = [
        (s.base_offset, s.next_offset, s.size_bytes, s.max_timestamp_ms, s.offset_index_entries)
        for s in reopened.segments()
    ]
    assert after == before
    assert [r.offset for r in read(reopened, 0, BIG)] == list(range(200))
    reopened.close()


def test_damaged_index_of_a_closed_segment_is_rebuilt(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 100, value_size=20)
    segment = log.closed_segments()[0]
    entries = segment.offset_index_entries
    assert entries
    index_path = segment.offset_index_path
    log.close()
    index_path.write_bytes(index_path.read_bytes()[:-3])  # not a whole number of entries
    reopened = Log.open(tmp_path, small_config())
    assert reopened.segments()[0].offset_index_entries == entries
    assert len(index_path.read_bytes()) == 8 * len(entries)
    assert [r.offset for r in read(reopened, 0, BIG)] == list(range(100))
    reopened.close()


# --------------------------------------------------------------------------------- leader epochs


def test_leader_epoch_assign_and_lookup() -> None:
    cache = LeaderEpochCache()
    assert cache.epoch_for_offset(0) is None
    assert cache.assign(1, 10)
    assert not cache.assign(1, 20)  # same epoch: ignored
    assert not cache.assign(0, 30)  # older epoch: ignored
    assert cache.assign(3, 20)
    assert cache.assign(4, 35)
    assert cache.assign(6, 35)  # epoch 4 wrote nothing: replaced
    assert cache.entries == [(1, 10), (3, 20), (6, 35)]
    assert cache.latest_epoch == 6
    assert [cache.epoch_for_offset(o) for o in (9, 10, 19, 20, 34, 35, 10**9)] == [
        None,
        1,
        1,
        3,
        3,
        6,
        6,
    ]


def test_epochs_in_range_examples() -> None:
    cache = LeaderEpochCache()
    for epoch, start in [(0, 0), (2, 100), (5, 150), (7, 400)]:
        cache.assign(epoch, start)
    assert cache.epochs_in_range(0, 99) == {0: 0}
    assert cache.epochs_in_range(50, 120) == {0: 50, 2: 100}
    assert cache.epochs_in_range(100, 149) == {2: 100}
    assert cache.epochs_in_range(120, 500) == {2: 120, 5: 150, 7: 400}
    assert cache.epochs_in_range(400, 400) == {7: 400}
    assert cache.epochs_in_range(149, 150) == {2: 149, 5: 150}
    assert decode_entries(cache.encode_range(120, 500)) == [(2, 120), (5, 150), (7, 400)]
    with pytest.raises(ValueError):
        cache.epochs_in_range(10, 9)


def test_leader_epoch_truncation() -> None:
    cache = LeaderEpochCache()
    for epoch, start in [(0, 0), (2, 100), (5, 150), (7, 400)]:
        cache.assign(epoch, start)
    cache.truncate_from_start(120)
    assert cache.entries == [(2, 120), (5, 150), (7, 400)]
    cache.truncate_from_start(150)
    assert cache.entries == [(5, 150), (7, 400)]
    cache.truncate_from_end(400)
    assert cache.entries == [(5, 150)]
    cache.truncate_from_end(10**9)
    assert cache.entries == [(5, 150)]


def test_leader_epoch_checkpoint_persists_atomically(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_FILE
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(3, 17)
    assert path.read_text() == "0\n2\n0 0\n3 17\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [CHECKPOINT_FILE]  # no temp left
    assert LeaderEpochCache(path).entries == [(0, 0), (3, 17)]
    cache.truncate_from_start(5)
    assert LeaderEpochCache(path).entries == [(0, 5), (3, 17)]


def test_log_records_epoch_changes_and_rejects_stale_epochs(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 10, epoch=0)
    fill(log, 10, epoch=2)
    fill(log, 5, epoch=5)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 10), (5, 20)]
    with pytest.raises(ValueError, match="older"):
        append(log, None, b"x", 0, 4)
    assert log.log_end_offset == 25
    assert [r.leader_epoch for r in read(log, 8, BIG)[:4]] == [0, 0, 2, 2]
    log.close()
    assert Log.open(tmp_path, small_config()).leader_epoch_cache.entries == [
        (0, 0),
        (2, 10),
        (5, 20),
    ]


# --------------------------------------------------------------------------------- tiering hooks


def test_segment_data_describes_closed_segments(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    for epoch in range(4):
        fill(log, 15, epoch=epoch, value_size=20)
    closed = log.closed_segments()
    assert len(closed) >= 3 and log.active_segment not in closed
    for segment in closed:
        data = log.segment_data(segment)
        assert Path(data.log_segment) == segment.log_path
        assert Path(data.offset_index) == segment.offset_index_path
        assert Path(data.time_index) == segment.time_index_path
        for path in (data.log_segment, data.offset_index, data.time_index):
            assert Path(path).is_file()
        assert Path(data.log_segment).name == f"{segment.base_offset:020d}.log"
        assert data.producer_snapshot_index is None and data.transaction_index is None
        expected = log.leader_epoch_cache.epochs_in_range(
            segment.base_offset, segment.next_offset - 1
        )
        assert dict(decode_entries(data.leader_epoch_index)) == expected
        # Every epoch that wrote a record in the segment is there, at its first offset in it.
        firsts: dict[int, int] = {}
        for r in read(log, segment.base_offset, BIG):
            if r.offset < segment.next_offset:
                firsts.setdefault(r.leader_epoch, r.offset)
        assert expected == firsts
    with pytest.raises(ValueError):
        log.segment_data(log.active_segment)
    log.close()


def test_deleting_local_segments_advances_local_log_start(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 100, value_size=30)
    segments = log.segments()
    oldest = log.delete_oldest_local_segment()
    assert oldest is segments[0]
    assert not oldest.log_path.exists() and not oldest.offset_index_path.exists()
    assert not oldest.time_index_path.exists()
    assert log.local_log_start_offset == segments[1].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(segments[1].base_offset - 1, BIG)
    assert read(log, segments[1].base_offset, 1)[0].offset == segments[1].base_offset
    # Up to an offset inside segment 3: segments 1 and 2 go, 3 stays.
    assert log.delete_local_segments_up_to(segments[3].base_offset + 1) == 2
    assert log.local_log_start_offset == segments[3].base_offset
    # Exactly at a segment's end offset: that segment goes, the next one stays.
    assert log.delete_local_segments_up_to(segments[3].next_offset - 1) == 0
    assert log.delete_local_segments_up_to(segments[4].next_offset) == 2
    assert log.local_log_start_offset == segments[5].base_offset
    # Never the active segment.
    assert log.delete_local_segments_up_to(10**9) == len(segments) - 6
    assert log.segments() == [segments[-1]]
    assert log.delete_oldest_local_segment() is None
    assert log.local_log_start_offset == segments[-1].base_offset
    assert [r.offset for r in read(log, log.local_log_start_offset, BIG)][-1] == 99
    log.close()
    reopened = Log.open(tmp_path, small_config())
    assert reopened.local_log_start_offset == segments[-1].base_offset
    assert reopened.log_end_offset == 100
    assert fill(reopened, 1) == [100]
    reopened.close()


def test_log_start_offset_is_monotonic_persisted_and_bounded(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    assert log.log_start_offset == 0
    fill(log, 60, value_size=30)
    assert log.set_log_start_offset(20)
    assert not log.set_log_start_offset(10)
    assert log.log_start_offset == 20
    with pytest.raises(ValueError):
        log.set_log_start_offset(61)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(19, BIG)  # logically deleted, whether or not its segment is still on disk
    assert read(log, 20, 1)[0].offset == 20
    assert (tmp_path / LOG_START_OFFSET_FILE).read_text() == "20\n"
    log.close()
    reopened = Log.open(tmp_path, small_config())
    assert reopened.log_start_offset == 20
    # Past the local log start, once local segments are gone (remote data below is allowed).
    reopened.delete_local_segments_up_to(10**9)
    assert reopened.set_log_start_offset(60)
    assert reopened.log_start_offset == 60 >= reopened.local_log_start_offset
    reopened.close()
    assert Log.open(tmp_path, small_config()).log_start_offset == 60


def test_delete_records_raises_the_log_start_and_deletes_the_segments_below_it(
    tmp_path: Path,
) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 100, value_size=30)
    segments = log.segments()
    inside = segments[3].base_offset + 2
    assert log.delete_records(inside) == inside
    # The segments wholly below are gone, files and all; the one holding the new start stays.
    assert log.segments() == segments[3:]
    assert not any(s.log_path.exists() for s in segments[:3])
    assert log.local_log_start_offset == segments[3].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(inside - 1, BIG)
    assert read(log, inside, 1)[0].offset == inside
    # Lower than the log start: nothing changes, the answer is the low watermark.
    assert log.delete_records(5) == inside
    # Negative (but -1) or past the high watermark: refused, nothing changes.
    for offset in (-2, 101):
        with pytest.raises(OffsetOutOfRangeError) as refused:
            log.delete_records(offset)
        assert refused.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
        assert "high watermark 100" in refused.value.message
    assert log.log_start_offset == inside
    # -1: up to the high watermark; the active segment stays, its records unreadable.
    assert log.delete_records(-1) == 100
    assert log.segments() == [segments[-1]]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(99, BIG)
    # Rolled, it holds deleted records only: it goes.
    active = log.roll()
    assert log.segments() == [active] and not segments[-1].log_path.exists()
    assert log.local_log_start_offset == 100
    assert fill(log, 1) == [100]
    log.close()
    reopened = Log.open(tmp_path, small_config())
    assert (reopened.log_start_offset, reopened.log_end_offset) == (100, 101)
    assert [r.offset for r in read(reopened, 100, BIG)] == [100]
    reopened.close()


def test_open_deletes_segments_a_crash_left_below_the_log_start(tmp_path: Path) -> None:
    """The log start is persisted before the segments below it are deleted: a crash in between
    leaves them, and opening the log finishes the deletion."""
    log = Log.open(tmp_path, small_config())
    fill(log, 100, value_size=30)
    segments = log.segments()
    log.close()
    (tmp_path / LOG_START_OFFSET_FILE).write_text(f"{segments[2].next_offset}\n")
    reopened = Log.open(tmp_path, small_config())
    assert reopened.local_log_start_offset == segments[3].base_offset
    assert not any(s.log_path.exists() for s in segments[:3])
    assert [r.offset for r in read(reopened, segments[3].base_offset, BIG)][-1] == 99
    reopened.close()


# --------------------------------------------------------------------------------- recovery


def _batch_at(offset: int, value: bytes = b"v", epoch: int = 1) -> bytes:
    return build_batch(
        [Record(None, value, timestamp=5)], base_offset=offset, partition_leader_epoch=epoch
    )


def _flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 1]) + data[position + 1 :]


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(b"\x00\x00\x00\x40garbage-garbage", id="garbage"),
        pytest.param(_batch_at(30, b"half written value")[:17], id="half-header"),
        pytest.param(_batch_at(30, b"half written value")[:-5], id="half-records"),
        pytest.param(b"\x00\x00", id="partial-length"),
        pytest.param(bytes(100), id="zeros"),  # a power loss extends the file before its data
        pytest.param(_flip(_batch_at(30), 64), id="bad-crc"),
        pytest.param(_batch_at(30)[:16] + b"\x01" + _batch_at(30)[17:], id="bad-magic"),
        pytest.param(_batch_at(31), id="offset-gap"),
        pytest.param(_batch_at(30) + _batch_at(32), id="gap-after-a-good-one"),
    ],
)
def test_recovery_truncates_a_torn_tail(tmp_path: Path, tail: bytes) -> None:
    log = Log.open(tmp_path, small_config(segment_bytes=BIG, index_interval_bytes=64))
    fill(log, 20, epoch=0)
    fill(log, 10, epoch=1)
    active = log.active_segment
    valid_size = active.size_bytes
    log.close()
    with open(active.log_path, "ab") as f:
        f.write(tail)
    assert active.log_path.stat().st_size == valid_size + len(tail)

    reopened = Log.open(tmp_path, small_config(segment_bytes=BIG, index_interval_bytes=64))
    kept = 1 if tail.startswith(_batch_at(30)) else 0  # a whole valid batch before the gap
    assert active.log_path.stat().st_size == valid_size + kept * len(_batch_at(30))
    assert reopened.log_end_offset == 30 + kept
    records = read(reopened, 0, BIG)
    assert [r.offset for r in records] == list(range(30 + kept))
    assert [r.value for r in records[:30]] == [value_for(i) for i in range(30)]
    assert fill(reopened, 3, epoch=1) == [30 + kept + i for i in range(3)]
    assert read(reopened, 29, BIG)[1 + kept].value == value_for(30 + kept)
    reopened.close()
    again = Log.open(tmp_path, small_config(segment_bytes=BIG, index_interval_bytes=64))
    assert [r.offset for r in read(again, 0, BIG)] == list(range(33 + kept))
    again.close()


def test_recovery_rebuilds_indexes_and_drops_epochs_past_the_end(tmp_path: Path) -> None:
    config = small_config(segment_bytes=BIG, index_interval_bytes=64)
    log = Log.open(tmp_path, config)
    fill(log, 40, epoch=0)
    active = log.active_segment
    entries = active.offset_index_entries
    time_entries = active.time_index_entries
    assert len(entries) > 5
    log.close()
    # The crash left an epoch checkpointed whose first record never reached the disk, a stale
    # index entry past the end, and a torn record.
    LeaderEpochCache(tmp_path / CHECKPOINT_FILE).assign(3, 40)
    with open(active.offset_index_path, "ab") as f:
        f.write((45).to_bytes(4, "big") + (10**6).to_bytes(4, "big"))
    with open(active.log_path, "ab") as f:
        f.write(_batch_at(40, b"torn", epoch=3)[:-1])
    reopened = Log.open(tmp_path, config)
    assert reopened.leader_epoch_cache.entries == [(0, 0)]
    assert reopened.active_segment.offset_index_entries == entries
    assert reopened.active_segment.time_index_entries == time_entries
    assert len(active.offset_index_path.read_bytes()) == 8 * len(entries)
    assert fill(reopened, 1, epoch=3) == [40]
    assert reopened.leader_epoch_cache.entries == [(0, 0), (3, 40)]
    reopened.close()


def test_acknowledged_appends_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # kill -9 cannot lose the page cache, so the fsync itself is checked: with
    # flush_every_append, the active .log is fsynced before append returns.
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(str(Path(f"/proc/self/fd/{fd}").readlink()))
        real_fsync(fd)

    log = Log.open(tmp_path, LogConfig(segment_bytes=BIG, index_interval_bytes=64))
    monkeypatch.setattr(os, "fsync", recording_fsync)
    for i in range(20):
        synced.clear()
        append(log, None, value_for(i), i, 0)
        assert str(log.active_segment.log_path) in synced
    # Rolling fsyncs the closed segment's data and both indexes before creating the next one.
    synced.clear()
    closed = log.active_segment
    assert closed.offset_index_entries and closed.time_index_entries
    log.roll()
    for path in (closed.log_path, closed.offset_index_path, closed.time_index_path):
        assert str(path) in synced
    log.close()
    unsynced = Log.open(tmp_path / "other", small_config())
    fill(unsynced, 1)  # the first append checkpoints the new leader epoch (fsynced)
    synced.clear()
    fill(unsynced, 5)
    assert synced == []
    unsynced.close()


def test_recovery_removes_orphans_and_temp_files(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    fill(log, 50, value_size=30)
    oldest = log.segments()[0]
    log.close()
    # A crash after unlinking the oldest .log but before its indexes, and mid-checkpoint.
    oldest.log_path.unlink()
    (tmp_path / (LOG_START_OFFSET_FILE + ".tmp")).write_text("999\n")
    reopened = Log.open(tmp_path, small_config())
    assert not oldest.offset_index_path.exists() and not oldest.time_index_path.exists()
    assert not (tmp_path / (LOG_START_OFFSET_FILE + ".tmp")).exists()
    assert reopened.log_start_offset == 0
    assert reopened.local_log_start_offset == oldest.next_offset
    reopened.close()


def _read_acknowledged(
    proc: subprocess.Popen[bytes], want: int, deadline: float
) -> tuple[list[int], bytes]:
    """Offsets the child printed, reading until ``want`` or ``deadline`` (fails then), and the
    start of a line not read whole yet."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    acked: list[int] = []
    pending = b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while len(acked) < want:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"only {len(acked)} offsets acknowledged before the deadline")
            if not sel.select(remaining):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                pytest.fail(f"appender exited ({proc.wait()}) after {len(acked)} offsets")
            pending += chunk
            *lines, pending = pending.split(b"\n")
            acked += [int(line) for line in lines]
    return acked, pending


@pytest.mark.processes
def test_kill_9_loses_no_acknowledged_record(tmp_path: Path) -> None:
    log_dir = tmp_path / "partition-0"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.log_appender", str(log_dir), "2048"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    try:
        acked, pending = _read_acknowledged(proc, 2000, time.monotonic() + 60)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    # Lines printed before the kill but not yet read are acknowledged too.
    assert proc.stdout is not None
    rest = pending + proc.stdout.read()
    proc.stdout.close()
    acked += [int(line) for line in rest.split(b"\n")[:-1]]
    assert proc.returncode == -signal.SIGKILL
    assert acked == list(range(len(acked)))

    log = Log.open(log_dir, LogConfig(segment_bytes=2048, index_interval_bytes=256))
    assert log.log_end_offset >= len(acked)
    assert len(log.segments()) > 3
    records = read(log, 0, BIG)
    assert [r.offset for r in records] == list(range(log.log_end_offset))
    for r in records:
        assert (r.key, r.value, r.leader_epoch) == (
            f"k{r.offset}".encode(),
            value_for(r.offset),
            r.offset // 50,
        )
    cache = log.leader_epoch_cache
    assert all(cache.epoch_for_offset(r.offset) == r.leader_epoch for r in records)
    assert append(log, b"after", b"restart", 0, 100) == log.log_end_offset - 1
    log.close()


# --------------------------------------------------------------------------------- concurrency


def test_concurrent_appends_reads_and_deletions(tmp_path: Path) -> None:
    log = Log.open(tmp_path, small_config())
    per_thread, writers = 300, 4
    results: dict[int, list[int]] = {}
    errors: list[BaseException] = []
    done = threading.Event()

    def write(n: int) -> None:
        try:
            results[n] = [
                append(log, f"{n}".encode(), f"{n}-{i}".encode(), i, 0) for i in range(per_thread)
            ]
        except BaseException as e:
            errors.append(e)

    def read_and_delete() -> None:
        try:
            while not done.is_set():
                log.delete_oldest_local_segment()
                start = log.local_log_start_offset
                try:
                    got = read(log, start, 4096)
                except OffsetOutOfRangeError:
                    continue  # deleted between the two calls: allowed, retried
                offsets = [r.offset for r in got]
                assert offsets == list(range(start, start + len(offsets)))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    deleter = threading.Thread(target=read_and_delete)
    deleter.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    deleter.join()
    assert errors == []
    all_offsets = sorted(o for offsets in results.values() for o in offsets)
    assert all_offsets == list(range(per_thread * writers))
    for offsets in results.values():
        assert offsets == sorted(offsets)  # each writer's records in its order
    remaining = read(log, log.local_log_start_offset, BIG)
    for r in remaining:
        n = int(r.key or b"-1")
        assert r.value == f"{n}-{results[n].index(r.offset)}".encode()
    log.close()


# --------------------------------------------------------------------------------- model check


@dataclass
class _ModelSegment:
    base: int
    size: int = 0
    created_ms: int = 0


@dataclass
class _Model:
    segment_bytes: int
    segment_ms: int
    records: list[tuple[bytes | None, bytes, int, int]] = field(default_factory=list)
    segments: list[_ModelSegment] = field(default_factory=lambda: [_ModelSegment(0)])
    log_start: int = 0
    epoch: int = 0

    @property
    def end(self) -> int:
        return len(self.records)

    def append(self, key: bytes | None, value: bytes, ts: int, now_ms: int) -> int:
        active = self.segments[-1]
        size = batch_size(key, value)
        if active.size and (
            active.size + size > self.segment_bytes or now_ms - active.created_ms > self.segment_ms
        ):
            self.roll(now_ms)
            active = self.segments[-1]
        active.size += size
        self.records.append((key, value, ts, self.epoch))
        return self.end - 1

    def roll(self, now_ms: int) -> None:
        if self.segments[-1].size:
            self.segments.append(_ModelSegment(self.end, 0, now_ms))
            self._drop_below_log_start()

    def raise_log_start(self, offset: int) -> None:
        """Monotonic; closed segments wholly below the log start go."""
        self.log_start = max(self.log_start, offset)
        self._drop_below_log_start()

    def _drop_below_log_start(self) -> None:
        while len(self.segments) > 1 and self.segments[1].base <= self.log_start:
            self.segments.pop(0)


_OPS = st.one_of(
    st.tuples(
        st.just("append"),
        st.one_of(st.none(), st.binary(max_size=8)),
        st.binary(max_size=120),
        st.booleans(),
    ),
    st.tuples(st.just("roll")),
    st.tuples(st.just("tick"), st.integers(0, 40_000)),
    st.tuples(st.just("delete_oldest")),
    st.tuples(st.just("delete_up_to"), st.integers(0, 400)),
    st.tuples(st.just("set_log_start"), st.integers(0, 400)),
    st.tuples(st.just("delete_records"), st.integers(-3, 400)),
    st.tuples(st.just("reopen")),
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    ops=st.lists(_OPS, max_size=80),
    segment_bytes=st.integers(100, 600),
    index_interval=st.integers(1, 300),
)
def test_log_matches_an_in_memory_model(
    ops: list[tuple[object, ...]], segment_bytes: int, index_interval: int
) -> None:
    clock = FakeClock()
    config = LogConfig(
        segment_bytes=segment_bytes,
        segment_ms=60_000,
        index_interval_bytes=index_interval,
        flush_every_append=False,
    )
    model = _Model(segment_bytes, 60_000)
    model.segments[0].created_ms = int(clock() * 1000)
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp), config, clock=clock)
        try:
            for i, op in enumerate(ops):
                now_ms = int(clock() * 1000)
                match op:
                    case ("append", key, value, bump):
                        assert isinstance(value, bytes) and (key is None or isinstance(key, bytes))
                        model.epoch += 1 if bump else 0
                        expected = model.append(key, value, i, now_ms)
                        assert append(log, key, value, i, model.epoch) == expected
                    case ("roll",):
                        model.roll(now_ms)
                        log.roll()
                    case ("tick", ms):
                        assert isinstance(ms, int)
                        clock.advance_ms(ms)
                    case ("delete_oldest",):
                        if len(model.segments) > 1:
                            model.segments.pop(0)
                        log.delete_oldest_local_segment()
                    case ("delete_up_to", offset):
                        assert isinstance(offset, int)
                        while len(model.segments) > 1 and model.segments[1].base <= offset:
                            model.segments.pop(0)
                        log.delete_local_segments_up_to(offset)
                    case ("set_log_start", offset):
                        assert isinstance(offset, int)
                        if offset > model.end:
                            with pytest.raises(ValueError):
                                log.set_log_start_offset(offset)
                        else:
                            model.raise_log_start(offset)
                            log.set_log_start_offset(offset)
                    case ("delete_records", offset):
                        assert isinstance(offset, int)
                        target = model.end if offset == -1 else offset
                        if not 0 <= target <= model.end:
                            with pytest.raises(OffsetOutOfRangeError):
                                log.delete_records(offset)
                        else:
                            model.raise_log_start(target)
                            assert log.delete_records(offset) == model.log_start
                    case ("reopen",):
                        log.close()
                        log = Log.open(Path(tmp), config, clock=clock)
                        for segment in model.segments:
                            segment.created_ms = now_ms
                _check_against_model(log, model)
        finally:
            log.close()


def _check_against_model(log: Log, model: _Model) -> None:
    assert log.log_end_offset == model.end
    assert [s.base_offset for s in log.segments()] == [s.base for s in model.segments]
    assert [s.size_bytes for s in log.segments()] == [s.size for s in model.segments]
    assert log.local_log_start_offset == model.segments[0].base
    assert log.log_start_offset == model.log_start
    first = max(model.log_start, model.segments[0].base)
    got = read(log, first, BIG)
    expected = [
        LoggedRecord(o, ts, epoch, key, value)
        for o, (key, value, ts, epoch) in enumerate(model.records)
        if o >= first
    ]
    assert got == expected
    if first > 0:
        with pytest.raises(OffsetOutOfRangeError):
            log.read(first - 1, BIG)
    for record in got:
        assert log.leader_epoch_cache.epoch_for_offset(record.offset) == record.leader_epoch
