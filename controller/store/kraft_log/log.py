"""The KRaft-mode metadata log itself: appends, snapshots with their retention, and reads, over a
directory that ``recovery`` opened and whose ``lock`` makes this process the writer.

Retention keeps the newest two snapshots and the log after the older of them, so that a corrupt
newest snapshot can still fall back to the previous one plus the log; segments wholly covered by
the older kept snapshot are deleted.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from controller.store.kraft_log.errors import (
    CorruptLogError,
    LogNotWritableError,
    MetadataLogError,
    OffsetBelowLogStart,
)
from controller.store.kraft_log.frames import (
    HEADER_SIZE,
    Batch,
    BatchCallback,
    decode_frame,
    encode_frame,
)
from controller.store.kraft_log.lock import LOCK_FILE, DirectoryLock
from controller.store.kraft_log.recovery import RecoveredLog, recover
from controller.store.kraft_log.segments import (
    DEFAULT_SEGMENT_BYTES,
    Segment,
    pread,
    segment_file_name,
    snapshot_file_name,
)
from tiered.durable import atomic_write, fdatasync, fsync_dir, write_all
from tiered.rpc.v1 import metadata_pb2

logger = logging.getLogger(__name__)

_KEEP_SNAPSHOTS = 2


class MetadataLog:
    """Append-only record log in ``directory``. Thread-safe.

    Life cycle of the writer: ``acquire_lock`` → ``open`` (recovery + replay through the
    callbacks) → ``append`` / ``read`` / ``write_snapshot`` → ``close`` → ``release_lock``.
    A reader that does not hold the lock may ``open(read_only=True)``: it replays without
    repairing anything and cannot write.
    """

    def __init__(
        self, directory: Path | str, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES
    ) -> None:
        if segment_bytes <= HEADER_SIZE:
            raise ValueError(f"segment_bytes must be > {HEADER_SIZE}, got {segment_bytes}")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self._mu = threading.RLock()
        self._lock = DirectoryLock(self.directory, self._mu)
        self._opened = False
        self._closed = False
        self._read_only = True
        self._failed: BaseException | None = None
        self._segments: list[Segment] = []
        self._bases: list[int] = []  # segment base offsets, for bisect
        self._snapshots: list[int] = []  # valid snapshot offsets, ascending
        self._snapshot_offset = -1  # the one recovery used
        self._log_start_offset = 0
        self._end_offset = 0
        self._active_fd: int | None = None

    # ----------------------------------------------------------------------------- lock

    @property
    def lock_path(self) -> Path:
        return self._lock.path

    @property
    def holds_lock(self) -> bool:
        return self._lock.held

    def acquire_lock(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Makes this process the writer, polling every ``poll_s`` until the lock is free; False
        if ``stop`` is set first (``DirectoryLock.acquire``)."""
        return self._lock.acquire(stop, poll_s)

    def release_lock(self) -> None:
        """Idempotent. Close the log first: appends need the lock."""
        self._lock.release()

    def lock_is_held_elsewhere(self) -> bool:
        """Whether another process, or another ``MetadataLog`` of this one, holds the lock
        (``DirectoryLock.is_held_elsewhere``)."""
        return self._lock.is_held_elsewhere()

    # ----------------------------------------------------------------------------- state

    @property
    def end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._end_offset

    @property
    def log_start_offset(self) -> int:
        """The first offset ``read`` can serve; older ones are only in snapshots."""
        return self._log_start_offset

    @property
    def snapshot_offset(self) -> int:
        """The offset of the newest snapshot (the one recovery used, or written since); -1 if none."""
        return self._snapshots[-1] if self._snapshots else -1

    def segment_paths(self) -> list[Path]:
        with self._mu:
            return [s.path for s in self._segments]

    # ----------------------------------------------------------------------------- recovery

    def open(
        self,
        *,
        on_snapshot: BatchCallback | None = None,
        on_batch: BatchCallback | None = None,
        read_only: bool = False,
    ) -> None:
        """Recovers the log and replays it: ``on_snapshot`` with the newest valid snapshot (a
        batch whose ``base_offset`` is the last offset it covers), then ``on_batch`` with every
        batch after it, in order. Writable opens need the lock and truncate a torn tail; read-only
        opens stop before it. Raises ``CorruptLogError`` (after possibly having replayed some
        batches: discard what the callbacks built) or ``OSError``."""
        with self._mu:
            if self._opened:
                raise MetadataLogError("the metadata log is already open")
            if not read_only and not self._lock.held:
                raise LogNotWritableError(
                    f"opening {self.directory} for writing needs its lock ({LOCK_FILE})"
                )
            self._read_only = read_only
            try:
                self._adopt(
                    recover(
                        self.directory,
                        read_only=read_only,
                        on_snapshot=on_snapshot,
                        on_batch=on_batch,
                    )
                )
            except BaseException:
                self._reset()
                raise
            self._opened = True

    def _reset(self) -> None:
        if self._active_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._active_fd)
        self._active_fd = None
        self._segments, self._bases, self._snapshots = [], [], []
        self._end_offset = self._log_start_offset = 0
        self._snapshot_offset = -1

    def _adopt(self, recovered: RecoveredLog) -> None:
        self._segments = recovered.segments
        self._bases = [s.base_offset for s in recovered.segments]
        self._snapshots = recovered.snapshots
        self._snapshot_offset = recovered.snapshot_offset
        self._log_start_offset = recovered.log_start_offset
        self._end_offset = recovered.end_offset
        if not self._read_only and self._segments:
            self._active_fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)

    # ----------------------------------------------------------------------------- writes

    def _check_writable(self) -> None:
        if not self._opened or self._closed:
            raise LogNotWritableError(f"the metadata log {self.directory} is not open")
        if self._read_only:
            raise LogNotWritableError(f"the metadata log {self.directory} is open read-only")
        if not self._lock.held:
            raise LogNotWritableError(f"this process does not hold {self.lock_path}")
        if self._failed is not None:
            raise LogNotWritableError(
                f"the metadata log {self.directory} failed ({self._failed!r}); reopen it"
            )

    def append(self, records: Sequence[metadata_pb2.MetadataRecord]) -> int:
        """Writes ``records`` as one batch and fsyncs it; returns its base offset. Once this
        returns the batch is durable. On an ``OSError`` the batch may or may not be on disk (a
        reopen decides) and the log refuses further writes until reopened."""
        if not records:
            raise ValueError("a batch needs at least one record")
        with self._mu:
            self._check_writable()
            base = self._end_offset
            payload = Batch(base_offset=base, records=records).SerializeToString()
            frame = encode_frame(payload)
            try:
                segment = self._segment_for(len(frame))
                assert self._active_fd is not None
                write_all(self._active_fd, frame)
                fdatasync(self._active_fd)
            except OSError as exc:
                self._failed = exc
                logger.error("metadata log %s: append failed: %r", self.directory, exc)
                raise
            segment.offsets.append(base)
            segment.positions.append(segment.size)
            segment.size += len(frame)
            segment.end_offset = self._end_offset = base + len(records)
            return base

    def _segment_for(self, frame_bytes: int) -> Segment:
        if self._segments and self._active_fd is not None:
            active = self._segments[-1]
            if active.size == 0 or active.size + frame_bytes <= self.segment_bytes:
                return active
        return self._roll()

    def _roll(self) -> Segment:
        base = self._end_offset
        path = self.directory / segment_file_name(base)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fsync_dir(self.directory)
        except OSError:
            os.close(fd)
            raise
        if self._active_fd is not None:
            os.close(self._active_fd)  # fsynced by its last append
        self._active_fd = fd
        segment = Segment(base, path)
        self._segments.append(segment)
        self._bases.append(base)
        return segment

    def write_snapshot(
        self,
        offset: int,
        records: Sequence[metadata_pb2.MetadataRecord] | metadata_pb2.MetadataRecordBatch,
    ) -> None:
        """Atomically writes the whole image as of ``offset`` (the last offset of a batch, as
        ``MetadataImage.offset`` is), then applies retention: the newest two snapshots stay, with
        the log after the older of them. A snapshot not newer than the newest one is skipped.
        ``records`` may be a ready batch (``base_offset`` = ``offset``; saves a copy of every
        record). May run on another thread than appends."""
        with self._mu:
            self._check_writable()
            if offset <= self.snapshot_offset:
                return
            if not self._log_start_offset - 1 <= offset < self._end_offset:
                raise ValueError(
                    f"snapshot offset {offset} is outside the log "
                    f"[{self._log_start_offset - 1}, {self._end_offset - 1}]"
                )
            if not self._is_batch_end(offset):
                raise ValueError(f"snapshot offset {offset} is not the last offset of a batch")
        if isinstance(records, Batch):
            if records.base_offset != offset:
                raise ValueError(f"snapshot batch at {records.base_offset}, not at {offset}")
            payload = records.SerializeToString()
        else:
            payload = Batch(base_offset=offset, records=records).SerializeToString()
        atomic_write(self.directory / snapshot_file_name(offset), encode_frame(payload))
        with self._mu:
            if self._closed:
                return
            bisect.insort(self._snapshots, offset)
            self._apply_retention()

    def _is_batch_end(self, offset: int) -> bool:
        following = offset + 1
        if following in (self._end_offset, self._log_start_offset):
            return True
        si = bisect.bisect_right(self._bases, following) - 1
        if si < 0:
            return False
        offsets = self._segments[si].offsets
        bi = bisect.bisect_left(offsets, following)
        return bi < len(offsets) and offsets[bi] == following

    def _apply_retention(self) -> None:
        while len(self._snapshots) > _KEEP_SNAPSHOTS:
            old = self._snapshots.pop(0)
            (self.directory / snapshot_file_name(old)).unlink(missing_ok=True)
        if len(self._snapshots) < _KEEP_SNAPSHOTS:
            return  # a corrupt snapshot would fall back to a replay from offset 0
        floor = self._snapshots[0] + 1  # the oldest kept snapshot needs the log from here on
        while len(self._segments) > 1 and self._segments[1].base_offset <= floor:
            doomed = self._segments.pop(0)
            self._bases.pop(0)
            doomed.path.unlink(missing_ok=True)
            fsync_dir(self.directory)  # one by one, oldest first: never a gap after a crash
            logger.info("metadata log: deleted %s (covered by a snapshot)", doomed.path.name)
        self._log_start_offset = self._segments[0].base_offset

    # ----------------------------------------------------------------------------- reads

    def read(
        self, from_offset: int, max_batches: int, max_bytes: int | None = None
    ) -> list[metadata_pb2.MetadataRecordBatch]:
        """Up to ``max_batches`` batches from the one holding ``from_offset`` on (a follower asks
        for the offset after the last it applied, a batch boundary). ``max_bytes`` bounds the
        frames read, at least one batch is returned. Empty at the log end; ``OffsetBelowLogStart``
        when retention deleted ``from_offset``."""
        with self._mu:
            if not self._opened or self._closed:
                raise MetadataLogError(f"the metadata log {self.directory} is not open")
            if from_offset < self._log_start_offset:
                raise OffsetBelowLogStart(from_offset, self._log_start_offset)
            result: list[metadata_pb2.MetadataRecordBatch] = []
            if from_offset >= self._end_offset or max_batches <= 0:
                return result
            budget = max_bytes
            si = bisect.bisect_right(self._bases, from_offset) - 1
            bi = max(0, bisect.bisect_right(self._segments[si].offsets, from_offset) - 1)
            while si < len(self._segments) and len(result) < max_batches:
                segment = self._segments[si]
                n = min(len(segment.offsets) - bi, max_batches - len(result))
                if n > 0:
                    start = segment.positions[bi]
                    ends = [
                        segment.positions[j] if j < len(segment.offsets) else segment.size
                        for j in range(bi + 1, bi + n + 1)
                    ]
                    if budget is not None:
                        fit = bisect.bisect_right(ends, start + budget)
                        n = max(fit, 1 if not result else 0)
                    if n == 0:
                        break
                    data = pread(segment.path, start, ends[n - 1] - start)
                    pos = 0
                    for _ in range(n):
                        decoded = decode_frame(data, pos)
                        if decoded is None:
                            raise CorruptLogError(
                                f"{segment.path}: frame at byte {start + pos} no longer reads back"
                            )
                        result.append(decoded[0])
                        pos = decoded[1]
                    if budget is not None:
                        budget -= len(data)
                        if budget <= 0:
                            break
                si, bi = si + 1, 0
            return result

    # ----------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Closes the files (appends were fsynced already). Keeps the lock: ``release_lock``.
        Idempotent."""
        with self._mu:
            if self._closed:
                return
            self._closed = True
            if self._active_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._active_fd)
                self._active_fd = None
