"""One segment of a partition's local log: a ``.log`` data file and two sparse indexes.

Files, named by the segment's base offset (``{base_offset:020d}``):

- ``.log``: records in ``broker.log.records`` format, offsets contiguous from the base offset;
- ``.index``: ``relative_offset u32 | position u32`` entries, one each time at least
  ``index_interval_bytes`` have been appended since the previous entry;
- ``.timeindex``: ``timestamp_ms i64 | relative_offset u32`` entries written at the same moments
  when the segment's max timestamp has grown: (max timestamp so far, offset holding it), as Kafka.

A segment is not thread-safe: ``broker.log.log.Log`` serializes every call under its lock.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from array import array
from pathlib import Path

from broker.log.errors import CorruptRecordError
from broker.log.records import Record, encode_record, read_record
from tiered.durable import fsync_dir

LOG_SUFFIX = ".log"
OFFSET_INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_U32_MAX = 2**32 - 1
_READ_BUFFER = 64 * 1024

_log = logging.getLogger(__name__)


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    """``directory/{base_offset:020d}{suffix}``: zero padding makes names sort by offset."""
    return directory / f"{base_offset:020d}{suffix}"


class LogSegment:
    """A segment's files plus the in-memory state needed to append and read.

    Invariants: records hold offsets ``base_offset .. next_offset - 1`` in order with no gaps;
    ``size_bytes`` is the length of valid data (nothing past it is ever read); the in-memory
    indexes equal the index files' contents.

    Use :meth:`create` for a new segment and :meth:`open` for one found on disk.
    """

    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int
    ) -> None:
        if base_offset < 0:
            raise ValueError(f"base_offset must be >= 0, got {base_offset}")
        if index_interval_bytes <= 0:
            raise ValueError(f"index_interval_bytes must be > 0, got {index_interval_bytes}")
        self._base_offset = base_offset
        self._index_interval_bytes = index_interval_bytes
        self._created_ms = created_ms
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        self.offset_index_path = segment_path(directory, base_offset, OFFSET_INDEX_SUFFIX)
        self.time_index_path = segment_path(directory, base_offset, TIME_INDEX_SUFFIX)
        self._size = 0
        self._next_offset = base_offset
        self._max_timestamp_ms = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index_entry = 0
        # Arrays, not lists of tuples: a 1 GiB segment at 4 KiB intervals has ~260k entries.
        self._index_rel_offsets = array("I")
        self._index_positions = array("I")
        self._time_timestamps = array("q")
        self._time_rel_offsets = array("I")
        self._indexes_dirty = False
        self._log_fd = -1
        self._offset_index_fd = -1
        self._time_index_fd = -1
        self._closed = False

    # ----------------------------------------------------------------------------- lifecycle

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int
    ) -> LogSegment:
        """Creates an empty segment. Raises ``FileExistsError`` if its ``.log`` exists (a log never
        reuses a base offset, so that would mean two segments claim the same offsets)."""
        segment = cls(directory, base_offset, index_interval_bytes, created_ms)
        segment._log_fd = os.open(segment.log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        segment._open_index_fds(truncate=True)
        # The new files' directory entries must survive a crash before any record is acknowledged.
        fsync_dir(directory)
        return segment

    @classmethod
    def open(
        cls,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        created_ms: int,
        *,
        recover: bool,
    ) -> LogSegment:
        """Opens a segment found on disk.

        ``recover=True`` (the last segment after a restart, which may have been cut mid-write):
        see :meth:`recover`. ``recover=False`` (a segment that was flushed and closed before the
        next one was created): loads the indexes, rebuilding them if they are inconsistent, and
        scans only the data after the last index entry. A record that fails validation in such a
        segment raises ``CorruptRecordError``: dropping it would silently lose acknowledged data
        from the middle of the log.
        """
        segment = cls(directory, base_offset, index_interval_bytes, created_ms)
        segment._log_fd = os.open(segment.log_path, os.O_RDWR)
        try:
            if recover:
                segment._open_index_fds(truncate=False)
                segment.recover()
            else:
                segment._load_clean()
        except BaseException:
            segment.close()
            raise
        return segment

    def close(self) -> None:
        """Releases the file descriptors without flushing. Idempotent."""
        for fd in (self._log_fd, self._offset_index_fd, self._time_index_fd):
            if fd >= 0:
                os.close(fd)
        self._log_fd = self._offset_index_fd = self._time_index_fd = -1
        self._closed = True

    def delete(self) -> None:
        """Closes and removes the segment's files. The ``.log`` goes first: once it is gone the
        segment no longer exists for ``Log.open``, which removes orphaned index files."""
        self.close()
        for path in (self.log_path, self.offset_index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        fsync_dir(self.log_path.parent)

    # ----------------------------------------------------------------------------- properties

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def next_offset(self) -> int:
        """The offset the next appended record must carry (one past the last record)."""
        return self._next_offset

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def max_timestamp_ms(self) -> int:
        """Largest record timestamp in the segment, -1 when empty."""
        return self._max_timestamp_ms

    @property
    def created_ms(self) -> int:
        """When this segment was created or opened, by the log's clock (drives ``segment.ms``)."""
        return self._created_ms

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    @property
    def offset_index_entries(self) -> list[tuple[int, int]]:
        """``(relative_offset, position)`` pairs, in file order."""
        return list(zip(self._index_rel_offsets, self._index_positions, strict=True))

    @property
    def time_index_entries(self) -> list[tuple[int, int]]:
        """``(timestamp_ms, relative_offset)`` pairs, in file order."""
        return list(zip(self._time_timestamps, self._time_rel_offsets, strict=True))

    # ----------------------------------------------------------------------------- data path

    def append(self, record: Record) -> int:
        """Writes ``record`` at the end of the segment; returns its position.

        ``record.offset`` must equal :attr:`next_offset`. Not durable until :meth:`flush` or
        :meth:`flush_data`.
        """
        self._check_open()
        if record.offset != self._next_offset:
            raise ValueError(f"offset {record.offset} appended, {self._next_offset} expected")
        if record.offset - self._base_offset > _U32_MAX:
            raise ValueError(f"offset {record.offset} does not fit segment {self._base_offset}")
        data = encode_record(record)
        position = self._size
        if position + len(data) > _U32_MAX:
            raise ValueError(f"segment {self._base_offset} would exceed 4 GiB")
        written = 0
        while written < len(data):
            # pwrite at our own size: a failed partial write is overwritten by the next append
            # and never counted, so the segment never serves half a record.
            written += os.pwrite(self._log_fd, data[written:], position + written)
        self._size += len(data)
        self._next_offset += 1
        self._index_record(record, position, len(data), write=True)
        return position

    def read(self, start_offset: int, max_bytes: int, *, min_one: bool = True) -> list[Record]:
        """Records from the first one with offset >= ``start_offset``, in order, while their
        encoded sizes sum to at most ``max_bytes``.

        With ``min_one`` the first record is returned even if it alone exceeds ``max_bytes``, so a
        reader with a small budget still makes progress (Kafka's fetch does the same).
        """
        self._check_open()
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        target = max(start_offset, self._base_offset)
        if target >= self._next_offset:
            return []
        position = self._lookup_position(target)
        records: list[Record] = []
        used = 0
        with open(self.log_path, "rb", buffering=_READ_BUFFER) as f:
            f.seek(position)
            while position < self._size:
                record, end = read_record(f, position)
                if record.offset >= target:
                    size = end - position
                    if used + size > max_bytes and (records or not min_one):
                        break
                    records.append(record)
                    used += size
                position = end
        return records

    def flush(self) -> None:
        """Makes the data and both indexes durable (fsync)."""
        self.flush_data()
        if self._indexes_dirty:
            os.fsync(self._offset_index_fd)
            os.fsync(self._time_index_fd)
            self._indexes_dirty = False

    def flush_data(self) -> None:
        """Makes the ``.log`` durable. Enough for an acknowledged record: the indexes of the last
        segment are rebuilt from the data by :meth:`recover` after a crash."""
        self._check_open()
        os.fsync(self._log_fd)

    # ----------------------------------------------------------------------------- recovery

    def recover(self) -> int:
        """Scans the ``.log`` from the start and keeps the longest valid prefix: stops at the first
        torn or corrupt record, or one whose offset breaks the contiguous sequence, truncates the
        file there, and rewrites both indexes from the kept records. Everything is fsynced before
        returning, so a later crash cannot resurrect the torn bytes.

        Returns the number of bytes truncated.
        """
        self._check_open()
        self._reset_state()
        file_size = os.fstat(self._log_fd).st_size
        position = 0
        with open(self.log_path, "rb", buffering=_READ_BUFFER) as f:
            while position < file_size:
                try:
                    record, end = read_record(f, position)
                except CorruptRecordError as e:
                    _log.warning("%s: truncating at %d: %s", self.log_path, position, e)
                    break
                if record.offset != self._next_offset:
                    _log.warning(
                        "%s: truncating at %d: offset %d where %d was expected",
                        self.log_path,
                        position,
                        record.offset,
                        self._next_offset,
                    )
                    break
                self._index_record(record, position, end - position, write=False)
                self._size = end
                self._next_offset += 1
                position = end
        truncated = file_size - self._size
        if truncated:
            os.ftruncate(self._log_fd, self._size)
        os.fsync(self._log_fd)
        self._rewrite_index_files()
        return truncated

    # ----------------------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"segment {self._base_offset} is closed")

    def _reset_state(self) -> None:
        self._size = 0
        self._next_offset = self._base_offset
        self._max_timestamp_ms = -1
        self._offset_of_max_timestamp = self._base_offset
        self._bytes_since_index_entry = 0
        del self._index_rel_offsets[:]
        del self._index_positions[:]
        del self._time_timestamps[:]
        del self._time_rel_offsets[:]

    def _open_index_fds(self, *, truncate: bool) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if truncate else 0)
        self._offset_index_fd = os.open(self.offset_index_path, flags, 0o644)
        self._time_index_fd = os.open(self.time_index_path, flags, 0o644)

    def _index_record(self, record: Record, position: int, size: int, *, write: bool) -> None:
        """Updates the max timestamp and adds index entries after ``record`` was appended at
        ``position``: the rule is shared by appends and recovery so a rebuilt index equals the one
        written live."""
        if record.timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = record.timestamp_ms
            self._offset_of_max_timestamp = record.offset
        if self._bytes_since_index_entry >= self._index_interval_bytes:
            rel = record.offset - self._base_offset
            self._index_rel_offsets.append(rel)
            self._index_positions.append(position)
            new_time_entry = (
                not self._time_timestamps or self._max_timestamp_ms > self._time_timestamps[-1]
            )
            if new_time_entry:
                self._time_timestamps.append(self._max_timestamp_ms)
                self._time_rel_offsets.append(self._offset_of_max_timestamp - self._base_offset)
            if write:
                os.write(self._offset_index_fd, _OFFSET_ENTRY.pack(rel, position))
                if new_time_entry:
                    os.write(
                        self._time_index_fd,
                        _TIME_ENTRY.pack(self._time_timestamps[-1], self._time_rel_offsets[-1]),
                    )
                self._indexes_dirty = True
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += size

    def _rewrite_index_files(self) -> None:
        for fd, data in (
            (
                self._offset_index_fd,
                b"".join(
                    _OFFSET_ENTRY.pack(r, p)
                    for r, p in zip(self._index_rel_offsets, self._index_positions, strict=True)
                ),
            ),
            (
                self._time_index_fd,
                b"".join(
                    _TIME_ENTRY.pack(t, r)
                    for t, r in zip(self._time_timestamps, self._time_rel_offsets, strict=True)
                ),
            ),
        ):
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        self._indexes_dirty = False

    def _lookup_position(self, offset: int) -> int:
        """Position of the last indexed record with offset <= ``offset`` (0 if none): where a scan
        for ``offset`` may start without missing it."""
        i = bisect.bisect_right(self._index_rel_offsets, offset - self._base_offset)
        return self._index_positions[i - 1] if i else 0

    def _load_clean(self) -> None:
        """Loads a cleanly closed segment: trusts consistent index files, then scans the data after
        the last offset-index entry to learn the next offset and the max timestamp."""
        self._size = os.fstat(self._log_fd).st_size
        if not self._load_index_files():
            _log.warning("%s: index files inconsistent, rebuilding", self.log_path)
            self._open_index_fds(truncate=False)
            self._rebuild_clean()
            return
        self._open_index_fds(truncate=False)
        start_position = self._index_positions[-1] if self._index_positions else 0
        self._next_offset = self._base_offset + (
            self._index_rel_offsets[-1] if self._index_rel_offsets else 0
        )
        # The last time-index entry holds the max timestamp of every record before the last
        # offset-index entry's record (both are written at the same moments); the scan covers
        # the rest, including the entry's record itself.
        if self._time_timestamps:
            self._max_timestamp_ms = self._time_timestamps[-1]
            self._offset_of_max_timestamp = self._base_offset + self._time_rel_offsets[-1]
        self._bytes_since_index_entry = 0
        position = start_position
        with open(self.log_path, "rb", buffering=_READ_BUFFER) as f:
            f.seek(position)
            while position < self._size:
                record, end = read_record(f, position)
                if record.offset != self._next_offset:
                    raise CorruptRecordError(
                        f"{self.log_path}: offset {record.offset} at {position}, "
                        f"{self._next_offset} expected"
                    )
                if record.timestamp_ms > self._max_timestamp_ms:
                    self._max_timestamp_ms = record.timestamp_ms
                    self._offset_of_max_timestamp = record.offset
                self._bytes_since_index_entry += end - position
                self._next_offset += 1
                position = end

    def _rebuild_clean(self) -> None:
        """Full scan of a closed segment that must be intact; rewrites both indexes."""
        self._reset_state()
        file_size = os.fstat(self._log_fd).st_size
        position = 0
        with open(self.log_path, "rb", buffering=_READ_BUFFER) as f:
            while position < file_size:
                record, end = read_record(f, position)
                if record.offset != self._next_offset:
                    raise CorruptRecordError(
                        f"{self.log_path}: offset {record.offset} at {position}, "
                        f"{self._next_offset} expected"
                    )
                self._index_record(record, position, end - position, write=False)
                self._size = end
                self._next_offset += 1
                position = end
        self._rewrite_index_files()

    def _load_index_files(self) -> bool:
        """Reads both index files into memory; False if either is missing or inconsistent with
        itself or the data file (then the caller rebuilds them)."""
        try:
            offset_data = self.offset_index_path.read_bytes()
            time_data = self.time_index_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(offset_data) % _OFFSET_ENTRY.size or len(time_data) % _TIME_ENTRY.size:
            return False
        previous_rel, previous_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(offset_data):
            if rel <= previous_rel or pos <= previous_pos or pos >= self._size:
                return False
            self._index_rel_offsets.append(rel)
            self._index_positions.append(pos)
            previous_rel, previous_pos = rel, pos
        # Time entries are written only together with offset entries, never past their offset.
        if len(time_data) // _TIME_ENTRY.size > len(self._index_rel_offsets):
            return False
        previous_ts = None
        for ts, rel in _TIME_ENTRY.iter_unpack(time_data):
            if (previous_ts is not None and ts <= previous_ts) or rel > previous_rel:
                return False
            self._time_timestamps.append(ts)
            self._time_rel_offsets.append(rel)
            previous_ts = ts
        return True


def offset_index_floor_position(index: bytes, base_offset: int, offset: int) -> int:
    """In the bytes of a segment's ``.index`` (as uploaded to remote storage), the position of the
    last indexed record with offset <= ``offset``: where a scan for ``offset`` may start."""
    entries = len(index) // _OFFSET_ENTRY.size
    lo, hi = 0, entries  # binary search over fixed-size entries, without decoding them all
    target = offset - base_offset
    while lo < hi:
        mid = (lo + hi) // 2
        relative, _ = _OFFSET_ENTRY.unpack_from(index, mid * _OFFSET_ENTRY.size)
        if relative <= target:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return 0
    return int(_OFFSET_ENTRY.unpack_from(index, (lo - 1) * _OFFSET_ENTRY.size)[1])
