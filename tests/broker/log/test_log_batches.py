"""What the log does with Kafka record batches v2 beyond storing single records: every codec
stored and read back byte-exact, multi-record batches read whole, produce validation, idempotent
producers (duplicates, sequence and epoch errors, across restarts), timestamp lookups, and the
refusal of the old record format."""

from __future__ import annotations

import os
import random
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.log import Log, LogConfig, LogSegment, UnsupportedLogFormatError
from broker.log.batches import DEFAULT_WINDOW_BYTES
from broker.log.producer_state import BATCHES_TO_RETAIN, snapshot_path
from tests.support.batches import batch, decode, unsynced_config
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.compression import Codec
from tiered.kafka.record_batch import (
    BatchHeader,
    assign_offsets,
    iter_batches,
    parse_batch_header,
)
from tiered.kafka.records import Record, build_batch

BIG = 1 << 30
NOW_MS = 1_700_000_000_000


class FakeClock:
    def __init__(self, now_ms: int = NOW_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / 1000


def config(**overrides: object) -> LogConfig:
    return unsynced_config(**{"segment_bytes": 4096, "index_interval_bytes": 256, **overrides})


def records(count: int, start: int = 0, size: int = 20) -> list[Record]:
    return [
        Record(
            f"k{i}".encode() if i % 3 else None,
            f"value-{i}".encode().ljust(size, b"."),
            headers=(("h", f"{i}".encode()), ("null", None)),
            timestamp=NOW_MS + i,
        )
        for i in range(start, start + count)
    ]


def producer_batch(
    first_seq: int, count: int = 2, *, producer_id: int = 7, epoch: int = 0, ts: int = NOW_MS
) -> bytes:
    return build_batch(
        [Record(None, f"seq-{first_seq + i}".encode(), timestamp=ts) for i in range(count)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=first_seq,
    )


def as_stored(data: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The batch as the log stores it: the producer's bytes with offsets and epoch assigned."""
    stored = bytearray(data)
    assign_offsets(stored, parse_batch_header(stored), base_offset, leader_epoch)
    return bytes(stored)


# --------------------------------------------------------------------------------- appends, reads


@pytest.mark.parametrize("codec", list(Codec), ids=lambda c: c.name.lower())
def test_every_codec_is_stored_and_read_back_byte_exact(tmp_path: Path, codec: Codec) -> None:
    log = Log.open(tmp_path, config(segment_bytes=1000), clock=FakeClock())
    sent = [build_batch(records(10, start=10 * i), codec) for i in range(30)]
    for i, data in enumerate(sent):
        info = log.append_batches(data, leader_epoch=3)
        assert (info.first_offset, info.last_offset, info.record_count) == (10 * i, 10 * i + 9, 10)
        assert info.max_timestamp_ms == NOW_MS + 10 * i + 9
    assert len(log.segments()) > 2
    expected = b"".join(as_stored(data, 10 * i, 3) for i, data in enumerate(sent))
    assert log.read(0, BIG).records == expected
    log.close()
    reopened = Log.open(tmp_path, config(segment_bytes=1000), clock=FakeClock())
    assert reopened.read(0, BIG).records == expected
    got = decode(reopened.read(0, BIG).records)
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in got] == [
        (i, r.key, r.value, r.timestamp) for i, r in enumerate(records(300))
    ]
    reopened.close()


def test_a_read_inside_a_batch_returns_that_whole_batch(tmp_path: Path) -> None:
    log = Log.open(tmp_path, config(segment_bytes=BIG), clock=FakeClock())
    for i in range(20):
        log.append_batches(build_batch(records(10, start=10 * i), Codec.LZ4), 0)
    for offset in (0, 5, 9, 10, 137, 199):
        got = log.read(offset, 1)  # smaller than any batch: still one whole batch (KIP-74)
        first = offset - offset % 10
        assert (got.first_offset, got.next_offset) == (first, first + 10)
        assert [r.offset for r in decode(got.records)] == list(range(first, first + 10))
    sizes = [h.size for h in iter_batches(log.read(0, BIG).records)]
    two = log.read(15, sizes[1] + sizes[2] + sizes[3] - 1)
    assert (two.first_offset, two.next_offset) == (10, 30)
    assert len(two.records) == sizes[1] + sizes[2]
    log.close()


def test_a_read_of_large_batches_reads_its_bytes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index finds the batch before the one asked for; walking from there must not read a
    whole answer's worth twice (only small header windows besides the answer itself)."""
    log = Log.open(tmp_path, config(segment_bytes=BIG), clock=FakeClock())
    value = bytes(200_000)
    for i in range(12):
        log.append_batches(build_batch([Record(None, value, (), i)] * 5, Codec.NONE), 0)
    reads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, size: int, position: int) -> bytes:
        reads.append(size)
        return real_pread(fd, size, position)

    monkeypatch.setattr(os, "pread", counting_pread)
    offset, answers = 0, 0
    while offset < log.log_end_offset:
        got = log.read(offset, 3 * 1024 * 1024)
        assert got.first_offset == offset
        offset, answers = got.next_offset, answers + 1
    big = [size for size in reads if size > DEFAULT_WINDOW_BYTES]
    assert len(big) == answers and answers == 4  # three 1 MB batches per answer
    assert sum(reads) < 1.1 * 12 * len(build_batch([Record(None, value, (), 0)] * 5))
    log.close()


def test_one_append_may_carry_several_batches(tmp_path: Path) -> None:
    log = Log.open(tmp_path, config(), clock=FakeClock())
    payload = build_batch(records(3)) + build_batch(records(4, start=3), Codec.ZSTD)
    info = log.append_batches(payload, 0)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 6, 7)
    assert [h.base_offset for h in iter_batches(log.read(0, BIG).records)] == [0, 3]
    log.close()


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        pytest.param(lambda b: b[:-1], ErrorCode.CORRUPT_MESSAGE, id="truncated"),
        pytest.param(
            lambda b: b[:-3] + bytes([b[-3] ^ 1]) + b[-2:], ErrorCode.CORRUPT_MESSAGE, id="crc"
        ),
        pytest.param(lambda b: b[:16] + b"\x01" + b[17:], ErrorCode.INVALID_RECORD, id="magic-1"),
        pytest.param(lambda b: b"\x00" * 12, ErrorCode.CORRUPT_MESSAGE, id="short"),
    ],
)
def test_a_bad_batch_is_refused_and_nothing_is_written(
    tmp_path: Path, damage: Callable[[bytes], bytes], code: ErrorCode
) -> None:
    log = Log.open(tmp_path, config(), clock=FakeClock())
    log.append_batches(batch(None, b"first"), 0)
    good = build_batch(records(2))
    with pytest.raises(TieredError) as e:
        log.append_batches(good + damage(good), 0)  # the good batch before it is not written
    assert e.value.code is code
    assert log.log_end_offset == 1 and log.active_segment.size_bytes == len(batch(None, b"first"))
    with pytest.raises(TieredError) as e:
        log.append_batches(b"", 0)
    assert e.value.code is ErrorCode.INVALID_RECORD
    log.close()


# --------------------------------------------------------------------------------- idempotence


def test_a_retried_batch_is_not_written_twice(tmp_path: Path) -> None:
    log = Log.open(tmp_path, config(), clock=FakeClock())
    log.append_batches(batch(None, b"someone else"), 0)
    sent = [producer_batch(2 * i) for i in range(BATCHES_TO_RETAIN + 1)]
    first = [log.append_batches(data, 0) for data in sent]
    assert [i.first_offset for i in first] == list(range(1, 13, 2))
    end = log.log_end_offset
    for original, data in list(zip(first, sent, strict=True))[1:]:  # the last five
        retry = log.append_batches(data, 0)
        assert retry.duplicate and retry.record_count == 0
        assert (retry.first_offset, retry.last_offset) == (
            original.first_offset,
            original.last_offset,
        )
    assert log.log_end_offset == end
    # The sixth-last is forgotten: its retry is out of order, as in Kafka.
    with pytest.raises(TieredError) as e:
        log.append_batches(sent[0], 0)
    assert e.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()


def crash(log: Log) -> None:
    """Closes the log as a kill -9 would leave it: without the snapshot a clean close writes."""
    end = log.log_end_offset
    rolled = snapshot_path(log.directory, end).exists()
    log.close()
    if not rolled:
        snapshot_path(log.directory, end).unlink()


@pytest.mark.parametrize("clean", [True, False], ids=["closed", "crashed"])
def test_duplicates_are_recognised_after_a_restart(tmp_path: Path, clean: bool) -> None:
    # About three batches a segment: the producer's last five span a roll (a snapshot) and the
    # active segment (replayed from its headers).
    cfg = config(segment_bytes=300)
    log = Log.open(tmp_path, cfg, clock=FakeClock())
    sent = [producer_batch(3 * i, 3) for i in range(12)]
    first = [log.append_batches(data, 0) for data in sent]
    assert len(log.segments()) > 3
    assert snapshot_path(tmp_path, log.active_segment.base_offset).exists()
    end = log.log_end_offset
    if clean:
        log.close()
    else:
        crash(log)
    reopened = Log.open(tmp_path, cfg, clock=FakeClock())
    for original, data in list(zip(first, sent, strict=True))[-BATCHES_TO_RETAIN:]:
        retry = reopened.append_batches(data, 0)
        assert retry.duplicate and retry.first_offset == original.first_offset
    assert reopened.log_end_offset == end
    state = reopened.producer(7)
    assert state is not None and state.last_sequence == 35 and state.producer_epoch == 0
    assert reopened.append_batches(producer_batch(36), 0).first_offset == end
    reopened.close()


def test_opening_replays_only_the_headers_after_the_newest_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = config(segment_bytes=300)
    log = Log.open(tmp_path, cfg, clock=FakeClock())
    for i in range(20):
        log.append_batches(producer_batch(2 * i), 0)
    last_base = log.active_segment.base_offset
    segments = len(log.segments())
    assert log.log_end_offset > last_base
    crash(log)
    replayed: list[int] = []
    real = LogSegment.batch_headers

    def spy(segment: LogSegment, from_offset: int) -> Iterator[BatchHeader]:
        replayed.append(segment.base_offset)
        return real(segment, from_offset)

    monkeypatch.setattr(LogSegment, "batch_headers", spy)
    reopened = Log.open(tmp_path, cfg, clock=FakeClock())
    assert segments > 3 and replayed == [last_base]
    reopened.close()
    replayed.clear()
    # Without any snapshot every local batch header is read (still no record).
    for path in tmp_path.glob("*.snapshot"):
        path.unlink()
    again = Log.open(tmp_path, cfg, clock=FakeClock())
    assert len(replayed) == segments
    assert again.append_batches(producer_batch(2 * 19), 0).duplicate
    again.close()


def test_sequence_and_epoch_errors(tmp_path: Path) -> None:
    log = Log.open(tmp_path, config(), clock=FakeClock())
    # A producer the log does not know may start at any sequence (Kafka accepts it too).
    assert log.append_batches(producer_batch(10), 0).first_offset == 0
    end = log.log_end_offset
    for bad in (producer_batch(13), producer_batch(11), producer_batch(0)):
        with pytest.raises(TieredError) as e:
            log.append_batches(bad, 0)
        assert e.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert "producer 7" in e.value.message
    # A new epoch starts at sequence 0, and fences the old one.
    with pytest.raises(TieredError) as e:
        log.append_batches(producer_batch(12, epoch=1), 0)
    assert e.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.append_batches(producer_batch(0, epoch=1), 0).first_offset == end
    with pytest.raises(TieredError) as e:
        log.append_batches(producer_batch(12, epoch=0), 0)
    assert e.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    # Two batches of one producer in one append: checked in order; one bad, nothing written.
    end = log.log_end_offset
    with pytest.raises(TieredError):
        log.append_batches(producer_batch(2, epoch=1) + producer_batch(5, epoch=1), 0)
    assert log.log_end_offset == end
    info = log.append_batches(producer_batch(2, epoch=1) + producer_batch(4, epoch=1), 0)
    assert (info.first_offset, info.last_offset) == (end, end + 3)
    # Sequences wrap from int32 max to 0.
    wrap = producer_batch(2**31 - 2, 2, producer_id=9)
    log.append_batches(wrap, 0)
    log.append_batches(producer_batch(0, producer_id=9), 0)
    # A producer batch must carry a sequence.
    with pytest.raises(TieredError) as e:
        log.append_batches(producer_batch(-1, producer_id=10), 0)
    assert e.value.code is ErrorCode.INVALID_RECORD
    log.close()


def test_idle_producers_expire_at_a_roll(tmp_path: Path) -> None:
    clock = FakeClock()
    cfg = config(producer_id_expiration_ms=60_000, segment_bytes=300)
    log = Log.open(tmp_path, cfg, clock=clock)
    log.append_batches(producer_batch(0, ts=NOW_MS), 0)
    log.append_batches(producer_batch(0, producer_id=8, ts=NOW_MS + 50_000), 0)
    clock.now_ms += 70_000
    log.roll()
    assert log.producer(7) is None and log.producer(8) is not None
    log.close()


# --------------------------------------------------------------------------------- timestamps


def test_offset_for_timestamp_matches_a_linear_scan(tmp_path: Path) -> None:
    rng = random.Random(7)
    log = Log.open(tmp_path, config(segment_bytes=2000, index_interval_bytes=100))
    model: list[tuple[int, int]] = []  # (offset, timestamp) of every record
    for _ in range(120):
        batch_records = [
            Record(None, b"x" * rng.randrange(0, 30), timestamp=NOW_MS + rng.randrange(0, 5000))
            for _ in range(rng.randrange(1, 6))
        ]
        info = log.append_batches(build_batch(batch_records, rng.choice(list(Codec))), 2)
        model += [(info.first_offset + i, r.timestamp) for i, r in enumerate(batch_records)]
    assert len(log.segments()) > 3
    log.set_log_start_offset(40)
    for target in [
        NOW_MS - 1,
        NOW_MS + 5000,
        *(NOW_MS + rng.randrange(0, 5000) for _ in range(100)),
    ]:
        expected = next(((ts, o) for o, ts in model if o >= 40 and ts >= target), None)
        found = log.offset_for_timestamp(target)
        assert (None if found is None else (found.timestamp_ms, found.offset)) == expected, target
        assert found is None or found.leader_epoch == 2
    log.close()


# --------------------------------------------------------------------------------- old format


def _old_format_record(offset: int, value: bytes) -> bytes:
    """A record as the broker stored it before Kafka batches (length, zlib crc, fields)."""
    body = struct.pack(">qqii", offset, NOW_MS, 0, -1) + struct.pack(">i", len(value)) + value
    return struct.pack(">II", 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("closed_segments", [0, 2])
def test_an_old_format_directory_is_refused_untouched(tmp_path: Path, closed_segments: int) -> None:
    directory = tmp_path / "orders-0"
    directory.mkdir()
    base = 0
    for _ in range(closed_segments + 1):
        data = b"".join(_old_format_record(base + i, b"v" * 40) for i in range(10))
        (directory / f"{base:020d}.log").write_bytes(data)
        base += 10
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    with pytest.raises(UnsupportedLogFormatError) as e:
        Log.open(directory, config())
    assert e.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert str(directory) in e.value.message and "old record format" in e.value.message
    assert {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix == ".log"} == before
