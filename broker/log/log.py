"""A partition's local log: a directory of segments holding Kafka record batches v2 as they
arrived, the leader epoch cache, the idempotent producers' state and the log start offset
checkpoint.

Appends do no per-record work: each batch of a produce payload is checked by its header and CRC,
given its offsets in place and written; reads return whole batches as bytes.

Offsets (all maintained under one lock):

- ``log_start_offset``: the first offset the partition serves from either tier; persisted in
  ``log-start-offset-checkpoint``. It may be below the local log start (older data is remote) or
  inside the oldest local segment, never above the log end. No closed segment lies wholly below
  it: raising it deletes them, as Kafka's deleteOldSegments by log start offset does, and so
  does a roll that closes such a segment (``Log.open`` finishes a deletion a crash cut short).
- ``local_log_start_offset``: base offset of the oldest local segment.
- ``log_end_offset``: the offset the next append gets.

Durability: with ``flush_every_append`` (the default) ``append_batches`` returns only once the
batches are fsynced, so an acknowledged batch survives a crash. A segment is fsynced (data and
indexes) before the next one is created, which is why ``Log.open`` recovers only the last
segment.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.log.batches import BatchRead, prepare_produce
from broker.log.errors import CorruptCheckpointError, CorruptLogError, OffsetOutOfRangeError
from broker.log.leader_epoch import CHECKPOINT_FILE, LeaderEpochCache
from broker.log.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerState,
    ProducerStateManager,
)
from broker.log.results import AppendInfo, TimestampOffset
from broker.log.segment import LOG_SUFFIX, OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from tiered.api import LogSegmentData
from tiered.config import TopicConfig
from tiered.durable import TEMP_SUFFIX, atomic_write, fsync_dir
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.record_batch import RecordBatchError, assigned_offsets_pieces

LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
DELETE_TO_HIGH_WATERMARK = -1
"""DeleteRecords' offset meaning "everything below the high watermark" (Kafka's
``DeleteRecordsRequest.HIGH_WATERMARK``)."""
_MAX_SEGMENT_BYTES = 2**31 - 1  # positions in the offset index are u32; Kafka caps at int32 too
_REL_OFFSET_MAX = 2**32 - 1

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Per-partition log settings (Kafka's topic configs of the same names)."""

    segment_bytes: int = 1024**3
    """``segment.bytes``: roll before an append that would make the active segment larger."""
    segment_ms: int = 7 * 24 * 3600 * 1000
    """``segment.ms``: roll before an append once the active segment is older than this."""
    index_interval_bytes: int = 4096
    """``index.interval.bytes``: bytes appended between two sparse index entries."""
    flush_every_append: bool = True
    """fsync every append, so that an acknowledged batch is a durable one."""
    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    """``producer.id.expiration.ms``: an idempotent producer idle this long is forgotten."""

    @classmethod
    def of(cls, topic: TopicConfig) -> LogConfig:
        """The log settings of a partition of a topic with these configs."""
        return cls(segment_bytes=topic.segment_bytes, segment_ms=topic.segment_ms)

    def __post_init__(self) -> None:
        if not 0 < self.segment_bytes <= _MAX_SEGMENT_BYTES:
            raise ValueError(f"segment_bytes must be in 1..{_MAX_SEGMENT_BYTES}")
        if self.segment_ms <= 0:
            raise ValueError("segment_ms must be > 0")
        if self.index_interval_bytes <= 0:
            raise ValueError("index_interval_bytes must be > 0")


class Log:
    """One partition directory. Every public method is thread-safe (one lock per log).

    Construct with :meth:`open`.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Callable[[], float],
        segments: list[LogSegment],
        epoch_cache: LeaderEpochCache,
        log_start_offset: int,
        producers: ProducerStateManager,
    ) -> None:
        self._dir = directory
        self._config = config
        self._clock = clock
        self._segments = segments
        self._epochs = epoch_cache
        self._log_start_offset = log_start_offset
        self._producers = producers
        self._lock = threading.RLock()
        self._closed = False

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Log:
        """Opens (creating if needed) the log in ``directory`` and recovers it.

        Segments load in base-offset order; only the last one is scanned and truncated at its
        first torn or corrupt batch (see ``LogSegment.recover``): the others were fsynced before
        their successor was created. Leader epochs starting at or past the recovered log end are
        dropped. The producers' state is the newest snapshot's plus the batch headers after it.
        ``clock`` returns seconds since the epoch (``time.time``); tests inject a fake.

        A directory of the broker's old record format raises ``UnsupportedLogFormatError``
        (KAFKA_STORAGE_ERROR) and is left untouched.
        """
        config = config or LogConfig()
        directory.mkdir(parents=True, exist_ok=True)
        now_ms = int(clock() * 1000)
        # A leftover temp file is a checkpoint whose rename never happened: the old one stands.
        for tmp in directory.glob(f"*{TEMP_SUFFIX}"):
            tmp.unlink()
        bases = sorted(int(p.stem) for p in directory.glob(f"*{LOG_SUFFIX}") if p.stem.isdigit())
        base_set = set(bases)
        # Index files whose .log is gone belong to a segment deleted just before a crash.
        for suffix in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            for index in directory.glob(f"*{suffix}"):
                if index.stem.isdigit() and int(index.stem) not in base_set:
                    index.unlink()
        log_start_offset = _read_log_start_offset(directory / LOG_START_OFFSET_FILE)
        segments: list[LogSegment] = []
        try:
            for i, base in enumerate(bases):
                segments.append(
                    LogSegment.open(
                        directory,
                        base,
                        config.index_interval_bytes,
                        now_ms,
                        recover=i == len(bases) - 1,
                    )
                )
            for previous, segment in itertools.pairwise(segments):
                if previous.next_offset != segment.base_offset:
                    raise CorruptLogError(
                        f"{directory}: segment {previous.base_offset} ends at "
                        f"{previous.next_offset} but the next starts at {segment.base_offset}"
                    )
            if not segments:
                segments.append(
                    LogSegment.create(
                        directory, log_start_offset or 0, config.index_interval_bytes, now_ms
                    )
                )
        except BaseException:
            for segment in segments:
                segment.close()
            raise
        log_end_offset = segments[-1].next_offset
        if log_start_offset is None:
            log_start_offset = segments[0].base_offset
            atomic_write(directory / LOG_START_OFFSET_FILE, _encode_offset(log_start_offset))
        elif log_start_offset > log_end_offset:
            # Only possible if records were lost (flush_every_append off): keep the invariant.
            _log.warning(
                "%s: log start offset %d beyond recovered log end %d; lowering it",
                directory,
                log_start_offset,
                log_end_offset,
            )
            log_start_offset = log_end_offset
            atomic_write(directory / LOG_START_OFFSET_FILE, _encode_offset(log_start_offset))
        # A crash between persisting a raised log start and deleting the segments below it.
        while len(segments) > 1 and segments[0].next_offset <= log_start_offset:
            segments.pop(0).delete()
        epoch_cache = LeaderEpochCache(directory / CHECKPOINT_FILE)
        # An epoch may have been checkpointed just before its first batch was lost in a crash.
        epoch_cache.truncate_from_end(log_end_offset)
        producers = _load_producers(directory, config, segments, now_ms)
        return cls(directory, config, clock, segments, epoch_cache, log_start_offset, producers)

    # ----------------------------------------------------------------------------- offsets

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self._epochs

    @property
    def log_start_offset(self) -> int:
        with self._lock:
            return self._log_start_offset

    @property
    def local_log_start_offset(self) -> int:
        with self._lock:
            return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        with self._lock:
            return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        with self._lock:
            return self._segments[-1]

    def segments(self) -> list[LogSegment]:
        """Every local segment, oldest first, the active one last."""
        with self._lock:
            return list(self._segments)

    def closed_segments(self) -> list[LogSegment]:
        """Every local segment except the active one, oldest first: the ones that may be copied
        to remote storage or deleted."""
        with self._lock:
            return self._segments[:-1]

    # ----------------------------------------------------------------------------- data path

    def append_batches(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Appends a produce payload of one or more Kafka record batches v2, stored as they are
        but for their offsets and leader epoch; durable on return if ``flush_every_append``.

        Each batch is checked first (``batches.prepare_produce``: CRC, magic 2, Kafka's produce
        rules; ``TieredError`` CORRUPT_MESSAGE or INVALID_RECORD) and so are the producers'
        sequences (``ProducerStateManager.check_append``: INVALID_PRODUCER_EPOCH,
        OUT_OF_ORDER_SEQUENCE_NUMBER); a failure writes nothing. If a batch is the retry of one
        already appended, nothing is written and the original offsets are returned
        (``duplicate``), as Kafka's broker does.

        Before each batch, rolls if the (non-empty) active segment would exceed
        ``segment_bytes`` or is older than ``segment_ms``. A new ``leader_epoch`` is recorded in
        the epoch cache (and its checkpoint) before the batches are written; an epoch below the
        latest one raises ``ValueError``: a deposed leader must not write.
        """
        try:
            view, headers = prepare_produce(records)
        except RecordBatchError as e:
            raise TieredError(ErrorCode(e.error_code.value), str(e)) from e
        with self._lock:
            self._check_open()
            latest = self._epochs.latest_epoch
            if leader_epoch < 0 or (latest is not None and leader_epoch < latest):
                raise ValueError(f"leader epoch {leader_epoch} is older than {latest}")
            duplicate = self._producers.check_append(headers)
            if duplicate is not None:
                return AppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.max_timestamp,
                    self._log_start_offset,
                    record_count=0,
                    duplicate=True,
                )
            first = self._segments[-1].next_offset
            if latest is None or leader_epoch > latest:
                self._epochs.assign(leader_epoch, first)
            rolled = False
            for header in headers:
                # One batch at a time, as Kafka's producers send them: each goes where it fits.
                active = self._segments[-1]
                if self._should_roll(active, header.size, header.last_offset_delta + 1):
                    active, rolled = self._roll_locked(), True
                pieces = assigned_offsets_pieces(view, header, active.next_offset, leader_epoch)
                stored = dataclasses.replace(
                    header,
                    position=0,
                    base_offset=active.next_offset,
                    partition_leader_epoch=leader_epoch,
                )
                active.append(pieces, [stored])
                self._producers.update([stored])
            if self._config.flush_every_append:
                self._segments[-1].flush_data()
            return AppendInfo(
                first,
                self._segments[-1].next_offset - 1,
                max(h.max_timestamp for h in headers),
                self._log_start_offset,
                record_count=sum(h.records_count for h in headers),
                rolled=rolled,
            )

    def read(self, offset: int, max_bytes: int) -> BatchRead:
        """Whole batches from the one holding ``offset``, across segments, while they fit in
        ``max_bytes``; the first batch is returned even if it alone is larger (KIP-74), so a
        reader always progresses. The first batch may start below ``offset``: readers skip the
        records before it, as Kafka's consumers do.

        Returns empty records at the log end. Raises ``OffsetOutOfRangeError`` if ``offset`` is
        beyond the log end or below what the local log serves: the local log start offset, or
        the log start offset when retention has moved it above that (logically deleted).
        """
        with self._lock:
            self._check_open()
            first_served = max(self._segments[0].base_offset, self._log_start_offset)
            end = self._segments[-1].next_offset
            if offset < first_served or offset > end:
                raise OffsetOutOfRangeError(
                    f"offset {offset} outside the local log [{first_served}, {end}]"
                )
            parts: list[memoryview] = []
            first_offset = next_offset = offset
            budget = max_bytes
            for segment in self._segments[self._segment_index(offset) :]:
                got = segment.read(next_offset, budget, min_one=not parts)
                if got is None:
                    break
                if not parts:
                    first_offset = got.first_offset
                parts.append(got.records)
                next_offset = got.next_offset
                budget -= len(got.records)
                # Stop when the budget is spent or this segment stopped early because its next
                # batch did not fit: the next segment's batches must not jump that gap.
                if budget <= 0 or next_offset < segment.next_offset:
                    break
            records = parts[0] if len(parts) == 1 else memoryview(b"".join(parts))
            return BatchRead(records, first_offset, next_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        """ListOffsets by timestamp over the local log, as Kafka's: the first record at or after
        the first offset the local log serves whose timestamp is at least ``timestamp_ms``;
        None if there is none. Segments are skipped by their max timestamp, batches by their
        header; only the batch holding the answer is decoded."""
        with self._lock:
            self._check_open()
            start = max(self._segments[0].base_offset, self._log_start_offset)
            for segment in self._segments:
                if segment.next_offset <= start or segment.max_timestamp_ms < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(timestamp_ms, start)
                if found is not None:
                    ts, offset = found
                    return TimestampOffset(ts, offset, self._epochs.epoch_for_offset(offset))
            return None

    def producer(self, producer_id: int) -> ProducerState | None:
        """The idempotent producer's state (epoch, last batches), None if not known here."""
        with self._lock:
            return self._producers.producer(producer_id)

    def roll(self) -> LogSegment:
        """Closes the active segment (fsynced) and starts a new one at the log end; returns the
        new active segment. A no-op returning the active segment if it is empty."""
        with self._lock:
            self._check_open()
            return self._roll_locked()

    def roll_if_due(self) -> bool:
        """Rolls a non-empty active segment older than ``segment_ms``, with no append needed, so
        that an idle partition's data is closed and can be tiered. True if it rolled."""
        with self._lock:
            self._check_open()
            active = self._segments[-1]
            if active.is_empty or not self._should_roll(active, 0, 0):
                return False
            self._roll_locked()
            return True

    def flush(self) -> None:
        """fsyncs the active segment (data and indexes)."""
        with self._lock:
            self._check_open()
            self._segments[-1].flush()

    # ----------------------------------------------------------------------------- tiering

    def segment_data(self, segment: LogSegment) -> LogSegmentData:
        """What ``RemoteStorageManager.copy_log_segment_data`` needs for a closed segment: its
        file paths and the leader epochs of its offset range in checkpoint format. Raises
        ``ValueError`` for the active segment or one no longer in this log."""
        with self._lock:
            if segment not in self._segments[:-1]:
                raise ValueError(
                    f"segment {segment.base_offset} is not a closed segment of {self._dir}"
                )
            return LogSegmentData(
                log_segment=str(segment.log_path),
                offset_index=str(segment.offset_index_path),
                time_index=str(segment.time_index_path),
                leader_epoch_index=self._epochs.encode_range(
                    segment.base_offset, segment.next_offset - 1
                ),
                producer_snapshot_index=None,
                transaction_index=None,
            )

    def delete_oldest_local_segment(self) -> LogSegment | None:
        """Deletes the oldest local segment unless it is the active one; returns it (closed,
        files removed) or None. Advances ``local_log_start_offset``."""
        with self._lock:
            self._check_open()
            if len(self._segments) < 2:
                return None
            segment = self._segments.pop(0)
            segment.delete()
            self._after_local_deletion()
            return segment

    def delete_local_segments_up_to(self, offset: int) -> int:
        """Deletes, oldest first, every closed segment whose records are all below ``offset``;
        never the active segment. Returns how many were deleted."""
        with self._lock:
            self._check_open()
            return self._delete_segments_below(offset)

    def set_log_start_offset(self, offset: int) -> bool:
        """Raises the log start offset to ``offset`` and persists it atomically, then deletes
        the closed segments wholly below it. Monotonic: a lower or equal value is ignored
        (returns False). It may pass the local log start (remote data below it); beyond the log
        end raises ``ValueError``."""
        with self._lock:
            self._check_open()
            end = self._segments[-1].next_offset
            if offset > end:
                raise ValueError(f"log start offset {offset} beyond log end {end}")
            if offset <= self._log_start_offset:
                return False
            atomic_write(self._dir / LOG_START_OFFSET_FILE, _encode_offset(offset))
            self._log_start_offset = offset
            if not self._delete_segments_below(offset):
                self._truncate_epochs_from_start()
            return True

    def delete_records(self, offset: int) -> int:
        """Kafka's DeleteRecords on the leader: the log start offset rises to ``offset``
        (``DELETE_TO_HIGH_WATERMARK``, -1: the high watermark, which is the log end with one
        replica), durably, and the closed segments wholly below it go. Returns the log start
        offset after it (the low watermark). An offset at or below the log start changes
        nothing; a negative one or one past the high watermark raises
        ``OffsetOutOfRangeError``."""
        with self._lock:
            self._check_open()
            high_watermark = self._segments[-1].next_offset
            target = high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
            if not 0 <= target <= high_watermark:
                raise OffsetOutOfRangeError(
                    f"cannot delete records of {self._dir.name} below offset {offset}: valid "
                    f"offsets are 0 to the high watermark {high_watermark}, or "
                    f"{DELETE_TO_HIGH_WATERMARK} (the high watermark)"
                )
            self.set_log_start_offset(target)
            return self._log_start_offset

    def close(self) -> None:
        """fsyncs the active segment, snapshots the producers' state (so that opening replays
        nothing) and closes every file. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                self._segments[-1].flush()
                self._producers.take_snapshot()
            finally:
                for segment in self._segments:
                    segment.close()
                self._closed = True

    # ----------------------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"log {self._dir} is closed")

    def _should_roll(self, active: LogSegment, size: int, offsets: int) -> bool:
        # An empty segment never rolls: a batch larger than segment_bytes still gets a home,
        # and an idle partition does not pile up empty segments.
        if active.is_empty:
            return False
        if active.size_bytes + size > self._config.segment_bytes:
            return True
        if active.next_offset + offsets - 1 - active.base_offset > _REL_OFFSET_MAX:
            return True
        # Strictly older, as Kafka's timeWaitedForRoll > segment.ms.
        return int(self._clock() * 1000) - active.created_ms > self._config.segment_ms

    def _roll_locked(self) -> LogSegment:
        active = self._segments[-1]
        if active.is_empty:
            return active
        # Durable before the successor exists: Log.open then needs to recover only the last one.
        active.flush()
        now_ms = int(self._clock() * 1000)
        new = LogSegment.create(
            self._dir, active.next_offset, self._config.index_interval_bytes, now_ms
        )
        self._segments.append(new)
        # Kafka's snapshot at roll: opening the log then replays the active segment's headers only.
        self._producers.remove_expired(now_ms)
        self._producers.take_snapshot()
        # Records deleted up to the high watermark: the segment closed now holds only those.
        self._delete_segments_below(self._log_start_offset)
        return new

    def _segment_index(self, offset: int) -> int:
        """Index of the segment holding ``offset`` (the active one at the log end)."""
        lo, hi = 0, len(self._segments) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._segments[mid].base_offset <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _delete_segments_below(self, offset: int) -> int:
        deleted = 0
        while len(self._segments) > 1 and self._segments[0].next_offset <= offset:
            self._segments.pop(0).delete(sync=False)
            deleted += 1
        if deleted:
            fsync_dir(self._dir)
            self._after_local_deletion()
        return deleted

    def _after_local_deletion(self) -> None:
        self._truncate_epochs_from_start()
        self._producers.delete_snapshots_below(self._segments[0].base_offset)

    def _truncate_epochs_from_start(self) -> None:
        # Keep epochs for everything still held anywhere locally or served: local segments may
        # still have to be copied with their epochs.
        self._epochs.truncate_from_start(min(self._log_start_offset, self._segments[0].base_offset))


def _load_producers(
    directory: Path, config: LogConfig, segments: list[LogSegment], now_ms: int
) -> ProducerStateManager:
    """The producers' state: the newest snapshot's, then the headers of the batches after it
    (all local batches without one), never their records."""
    producers = ProducerStateManager(directory, config.producer_id_expiration_ms)
    log_end_offset = segments[-1].next_offset
    snapshot = producers.load(log_end_offset)
    replay_from = max(segments[0].base_offset, snapshot or 0)
    for segment in segments:
        if segment.next_offset > replay_from:
            producers.update(segment.batch_headers(replay_from))
    producers.map_end_offset = log_end_offset
    producers.remove_expired(now_ms)
    producers.delete_snapshots_below(segments[0].base_offset)
    return producers


def _encode_offset(offset: int) -> bytes:
    return f"{offset}\n".encode("ascii")


def _read_log_start_offset(path: Path) -> int | None:
    try:
        text = path.read_text("ascii")
    except FileNotFoundError:
        return None
    try:
        offset = int(text.strip())
    except ValueError as e:
        raise CorruptCheckpointError(f"{path}: {text!r} is not an offset") from e
    if offset < 0:
        raise CorruptCheckpointError(f"{path}: negative offset {offset}")
    return offset
