"""The KRaft-mode metadata log: an fsync'd, append-only log of ``MetadataRecordBatch`` frames with
snapshots, in one directory owned by whichever controller holds its OS file lock.

Layout of ``directory``::

    {base_offset:020d}.log     segment files; base_offset = offset of the first record in the file
    {offset:020d}.snapshot     the whole image as of ``offset`` (the last record it covers)
    .lock                      flock'ed (LOCK_EX) by the writer from election to exit

Every batch and every snapshot is one frame: a 4-byte big-endian payload length, a 4-byte
``zlib.crc32`` of the payload, then the payload (a serialized ``MetadataRecordBatch``). The records
of a batch have consecutive offsets from its ``base_offset``; batches follow each other without
gaps, across segment files too.

Recovery (``open``) loads the newest valid snapshot (a corrupt one falls back to the previous
one), then scans every segment. A bad frame at the end of the last segment (a write torn by a
crash) is truncated away with a warning; a bad frame followed by a valid one, or in any segment
but the last, is corruption of acknowledged data and ``open`` refuses with ``CorruptLogError``.

Retention keeps the newest two snapshots and the log after the older of them, so that a corrupt
newest snapshot can still fall back to the previous one plus the log; segments wholly covered by
the older kept snapshot are deleted.

This module knows frames and batches, not the meaning of records (that is ``tiered.cluster.serde``).
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import logging
import os
import struct
import threading
import zlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import DecodeError

from tiered.durable import TEMP_SUFFIX, atomic_write, fdatasync, fsync_dir, write_all
from tiered.rpc.v1 import metadata_pb2

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "HEADER_SIZE",
    "LOCK_FILE",
    "CorruptLogError",
    "LogNotWritableError",
    "MetadataLog",
    "MetadataLogError",
    "OffsetBelowLogStart",
    "decode_frame",
    "encode_frame",
    "segment_file_name",
    "snapshot_file_name",
]

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
LOCK_FILE = ".lock"
SEGMENT_SUFFIX = ".log"
SNAPSHOT_SUFFIX = ".snapshot"
_CORRUPT_SUFFIX = ".corrupt"
_KEEP_SNAPSHOTS = 2

_HEADER = struct.Struct(">II")  # payload length, crc32(payload)
HEADER_SIZE = _HEADER.size
_BASE_OFFSET_TAG = b"\x08"  # field 1 (base_offset), varint: how every batch at offset > 0 begins
_RECORDS_TAG = 0x12  # field 2 (records), length-delimited: how the batch at offset 0 begins

Batch = metadata_pb2.MetadataRecordBatch
BatchCallback = Callable[[metadata_pb2.MetadataRecordBatch], None]


class MetadataLogError(Exception):
    """The metadata log cannot do what was asked."""


class CorruptLogError(MetadataLogError):
    """The log's files are corrupt in a way recovery must not paper over (acknowledged batches
    would be lost); an operator has to look."""


class LogNotWritableError(MetadataLogError):
    """An append or snapshot on a log that is read-only, closed, not locked by this process, or
    failed by an earlier I/O error (reopen it to recover)."""


class OffsetBelowLogStart(MetadataLogError):  # noqa: N818 - the name the protocol uses
    """The batches asked for were deleted by snapshot retention: send the snapshot instead."""

    def __init__(self, offset: int, log_start_offset: int) -> None:
        super().__init__(f"offset {offset} is below the log start offset {log_start_offset}")
        self.offset = offset
        self.log_start_offset = log_start_offset


# --------------------------------------------------------------------------------- files


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def encode_frame(payload: bytes) -> bytes:
    """length | crc32 | payload."""
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_frame(data: bytes, pos: int = 0) -> tuple[Batch, int] | None:
    """The batch framed at ``pos`` and the position after its frame, or None if no complete,
    CRC-valid, parseable, non-empty frame starts there."""
    if len(data) - pos < HEADER_SIZE:
        return None
    length, crc = _HEADER.unpack_from(data, pos)
    start = pos + HEADER_SIZE
    end = start + length
    if length == 0 or end > len(data):
        return None
    payload = data[start:end]
    if zlib.crc32(payload) != crc:
        return None
    batch = Batch()
    try:
        batch.ParseFromString(payload)
    except DecodeError:
        return None
    return batch, end


def _peek_frame(data: bytes, pos: int) -> tuple[int, int] | None:
    """(the batch's base offset, the position after the frame) of a complete, CRC-valid frame at
    ``pos`` whose payload starts as ``MetadataRecordBatch`` serializes (field 1, ``base_offset``,
    omitted when 0, then the records), without parsing the records; None otherwise."""
    if len(data) - pos < HEADER_SIZE:
        return None
    length, crc = _HEADER.unpack_from(data, pos)
    start = pos + HEADER_SIZE
    end = start + length
    if length == 0 or end > len(data) or zlib.crc32(memoryview(data)[start:end]) != crc:
        return None
    first = data[start]
    if first == _RECORDS_TAG:
        return 0, end
    if first != _BASE_OFFSET_TAG[0]:
        return None
    value, shift, i = 0, 0, start + 1
    while i < end and shift < 64:
        byte = data[i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, end
        shift += 7
        i += 1
    return None


def _numbered(directory: Path, suffix: str) -> list[tuple[int, Path]]:
    found = []
    for path in directory.iterdir():
        name = path.name
        if name.endswith(suffix) and len(name) == 20 + len(suffix) and name[:20].isdigit():
            found.append((int(name[:20]), path))
    return sorted(found)


def _find_valid_frame(data: bytes, start: int, min_base_offset: int) -> int | None:
    """The position of the first valid frame at or after ``start`` holding a batch at
    ``min_base_offset`` or later: evidence that a bad frame before it is not a torn tail."""
    i = start + HEADER_SIZE
    while True:
        idx = data.find(_BASE_OFFSET_TAG, i)
        if idx < 0:
            return None
        pos = idx - HEADER_SIZE
        decoded = decode_frame(data, pos)
        if decoded is not None and decoded[0].records and decoded[0].base_offset >= min_base_offset:
            return pos
        i = idx + 1


@dataclass
class _Segment:
    base_offset: int
    path: Path
    size: int = 0  # bytes of valid frames
    end_offset: int = -1  # the offset after its last record
    offsets: array[int] = field(default_factory=lambda: array("q"))  # base offset per batch
    positions: array[int] = field(default_factory=lambda: array("q"))  # file position per batch

    def __post_init__(self) -> None:
        if self.end_offset < 0:
            self.end_offset = self.base_offset


# --------------------------------------------------------------------------------- the log


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
        self._lock_fd: int | None = None
        self._opened = False
        self._closed = False
        self._read_only = True
        self._failed: BaseException | None = None
        self._segments: list[_Segment] = []
        self._bases: list[int] = []  # segment base offsets, for bisect
        self._snapshots: list[int] = []  # valid snapshot offsets, ascending
        self._snapshot_offset = -1  # the one recovery used
        self._log_start_offset = 0
        self._end_offset = 0
        self._active_fd: int | None = None

    # ----------------------------------------------------------------------------- lock

    @property
    def lock_path(self) -> Path:
        return self.directory / LOCK_FILE

    @property
    def holds_lock(self) -> bool:
        return self._lock_fd is not None

    def acquire_lock(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Takes the directory's exclusive flock, polling every ``poll_s`` until it is free;
        False if ``stop`` is set first. The lock lasts until ``release_lock`` or this process
        dies (the kernel drops it then, which is how a standby takes over)."""
        with self._mu:
            if self._lock_fd is not None:
                return True
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while not stop.is_set():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    stop.wait(poll_s)
                    continue
                with contextlib.suppress(OSError):  # the pid is for humans only
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                with self._mu:
                    self._lock_fd, fd = fd, -1
                return True
            return False
        finally:
            if fd >= 0:
                os.close(fd)

    def release_lock(self) -> None:
        """Idempotent. Close the log first: appends need the lock."""
        with self._mu:
            fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def lock_is_held_elsewhere(self) -> bool:
        """Whether some other open file description (another process, or another ``MetadataLog``
        of this one) holds the lock. A probe with a shared lock, so probes never block writers
        for longer than a poll interval of theirs."""
        if self._lock_fd is not None:
            return False
        try:
            fd = os.open(self.lock_path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # also drops the probe's shared lock
        return False

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
            if not read_only and self._lock_fd is None:
                raise LogNotWritableError(
                    f"opening {self.directory} for writing needs its lock ({LOCK_FILE})"
                )
            self._read_only = read_only
            try:
                self._recover(on_snapshot, on_batch)
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

    def _recover(self, on_snapshot: BatchCallback | None, on_batch: BatchCallback | None) -> None:
        if not self._read_only:
            self.directory.mkdir(parents=True, exist_ok=True)
            for leftover in self.directory.glob(f"*{TEMP_SUFFIX}"):
                leftover.unlink(missing_ok=True)
        elif not self.directory.is_dir():
            return  # nothing written yet
        segments = _numbered(self.directory, SEGMENT_SUFFIX)
        snapshot = self._load_snapshot()
        snap_offset = -1 if snapshot is None else snapshot.base_offset
        first_needed = snap_offset + 1
        if segments and segments[0][0] > first_needed:
            raise CorruptLogError(
                f"{self.directory}: the log starts at offset {segments[0][0]} but "
                + (
                    f"the newest valid snapshot covers only up to {snap_offset}"
                    if snapshot is not None
                    else "there is no valid snapshot"
                )
                + f": offsets {first_needed}..{segments[0][0] - 1} are missing"
            )
        if snapshot is not None and on_snapshot is not None:
            on_snapshot(snapshot)

        expected: int | None = None
        for i, (base, path) in enumerate(segments):
            if expected is not None and base != expected:
                raise CorruptLogError(
                    f"{path}: segment starts at offset {base}, the previous one ends at {expected}"
                )
            segment = self._scan_segment(
                base, path, last=i == len(segments) - 1, snap_offset=snap_offset, on_batch=on_batch
            )
            self._segments.append(segment)
            self._bases.append(base)
            expected = segment.end_offset

        self._end_offset = first_needed if expected is None else expected
        if self._end_offset < first_needed:
            raise CorruptLogError(
                f"{self.directory}: the log ends at offset {self._end_offset} but the snapshot "
                f"covers up to {snap_offset}"
            )
        self._log_start_offset = self._segments[0].base_offset if self._segments else first_needed
        self._snapshot_offset = snap_offset
        if not self._read_only and self._segments:
            self._active_fd = os.open(self._segments[-1].path, os.O_WRONLY | os.O_APPEND)

    def _load_snapshot(self) -> Batch | None:
        snapshots = _numbered(self.directory, SNAPSHOT_SUFFIX)
        chosen: Batch | None = None
        for offset, path in reversed(snapshots):
            if chosen is not None:
                self._snapshots.append(offset)
                continue
            try:
                data = path.read_bytes()
            except FileNotFoundError:  # read-only: retention deleted it meanwhile
                continue
            decoded = decode_frame(data)
            if decoded is not None and decoded[1] == len(data) and decoded[0].base_offset == offset:
                chosen = decoded[0]
                self._snapshots.append(offset)
                continue
            logger.warning(
                "metadata snapshot %s is corrupt (%d bytes); falling back to an older one",
                path,
                len(data),
            )
            if not self._read_only:
                path.replace(path.with_name(path.name + _CORRUPT_SUFFIX))
        self._snapshots.reverse()
        return chosen

    def _scan_segment(
        self,
        base: int,
        path: Path,
        *,
        last: bool,
        snap_offset: int,
        on_batch: BatchCallback | None,
    ) -> _Segment:
        data = path.read_bytes()
        segment = _Segment(base, path)
        pos, expected = 0, base
        ahead: tuple[int, int] | None = None  # _peek_frame(data, pos), when already known
        while pos < len(data):
            if expected <= snap_offset:
                # A batch wholly covered by the snapshot is indexed without being parsed (a log
                # keeps up to a segment of such history: 100k one-topic batches took ~0.5 s of
                # CPU to parse, half of that to peek at). Its frame must be intact (CRC) and be
                # followed by an intact frame, whose base offset says where this batch ends;
                # the image comes from the snapshot, not from these batches.
                head = ahead if ahead is not None else _peek_frame(data, pos)
                ahead = None
                if head is not None and head[0] == expected:
                    ahead = _peek_frame(data, head[1])
                    if ahead is not None and expected < ahead[0] <= snap_offset + 1:
                        segment.offsets.append(expected)
                        segment.positions.append(pos)
                        expected, pos = ahead[0], head[1]
                        continue
                    ahead = None
            decoded = decode_frame(data, pos)
            if decoded is None or decoded[0].base_offset != expected or not decoded[0].records:
                break
            batch, end = decoded
            count = len(batch.records)
            if expected <= snap_offset < expected + count - 1:
                raise CorruptLogError(
                    f"{path}: the snapshot at offset {snap_offset} ends inside the batch at "
                    f"offset {expected} (snapshots are taken at batch boundaries)"
                )
            segment.offsets.append(expected)
            segment.positions.append(pos)
            if expected > snap_offset and on_batch is not None:
                on_batch(batch)
            expected += count
            pos = end
        segment.size, segment.end_offset = pos, expected
        if pos == len(data):
            return segment

        # A bad frame at ``pos``: a torn tail only if nothing valid follows it.
        if not last:
            raise CorruptLogError(
                f"{path}: bad frame at byte {pos} (offset {expected}) of a segment that is not "
                "the last: acknowledged batches are corrupt; refusing to open"
            )
        later = _find_valid_frame(data, pos + 1, expected)
        if later is not None:
            raise CorruptLogError(
                f"{path}: bad frame at byte {pos} (offset {expected}) followed by a valid frame at "
                f"byte {later}: acknowledged batches are corrupt; refusing to open"
            )
        dropped = len(data) - pos
        if self._read_only:
            logger.debug("%s: ignoring %d bytes after byte %d (being written?)", path, dropped, pos)
            return segment
        logger.warning(
            "metadata log %s: truncating a torn tail at byte %d (offset %d): %d bytes dropped",
            path,
            pos,
            expected,
            dropped,
        )
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, pos)
            os.fsync(fd)
        finally:
            os.close(fd)
        return segment

    # ----------------------------------------------------------------------------- writes

    def _check_writable(self) -> None:
        if not self._opened or self._closed:
            raise LogNotWritableError(f"the metadata log {self.directory} is not open")
        if self._read_only:
            raise LogNotWritableError(f"the metadata log {self.directory} is open read-only")
        if self._lock_fd is None:
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

    def _segment_for(self, frame_bytes: int) -> _Segment:
        if self._segments and self._active_fd is not None:
            active = self._segments[-1]
            if active.size == 0 or active.size + frame_bytes <= self.segment_bytes:
                return active
        return self._roll()

    def _roll(self) -> _Segment:
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
        segment = _Segment(base, path)
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
                    data = self._pread(segment.path, start, ends[n - 1] - start)
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

    @staticmethod
    def _pread(path: Path, position: int, length: int) -> bytes:
        fd = os.open(path, os.O_RDONLY)
        try:
            chunks = []
            while length > 0:
                chunk = os.pread(fd, length, position)
                if not chunk:
                    raise CorruptLogError(f"{path}: ends before byte {position + length}")
                chunks.append(chunk)
                position += len(chunk)
                length -= len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

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
