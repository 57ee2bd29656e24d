"""One segment of a partition's local log: a ``.log`` data file and two sparse indexes, laid out
as Kafka lays them out.

Files, named by the segment's base offset (``{base_offset:020d}``):

- ``.log``: Kafka record batches v2, one after another, offsets contiguous from the base offset;
- ``.index`` and ``.timeindex``: see ``broker.log.segment_index``. As Kafka's
  ``LogSegment.append``, an entry is added before a batch once more than
  ``index_interval_bytes`` were appended since the previous one: (the batch's last offset, its
  position), and (the segment's max timestamp so far, the last offset of its batch).

A segment is not thread-safe: ``broker.log.log.Log`` serializes every call under its lock.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from broker.log.batches import DEFAULT_WINDOW_BYTES, BatchRead, BatchWalker
from broker.log.errors import CorruptSegmentError, UnsupportedLogFormatError
from broker.log.segment_index import SegmentIndexes
from tiered.durable import fsync_dir
from tiered.kafka.record_batch import (
    MAGIC_POSITION,
    MAGIC_V2,
    BatchHeader,
    Buffer,
    RecordBatchError,
)

LOG_SUFFIX = ".log"
OFFSET_INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"

_U32_MAX = 2**32 - 1
_RECOVERY_WINDOW = 1024 * 1024
# The broker's record format before Kafka batches: length u32 | zlib crc32 u32 | offset i64 | ...
_OLD_RECORD_PREFIX = struct.Struct(">IIq")
_OLD_RECORD_MAX = 64 * 1024 * 1024

_log = logging.getLogger(__name__)


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    """``directory/{base_offset:020d}{suffix}``: zero padding makes names sort by offset."""
    return directory / f"{base_offset:020d}{suffix}"


class LogSegment:
    """A segment's files plus the in-memory state needed to append and read.

    Invariants: batches hold offsets ``base_offset .. next_offset - 1`` in order with no gaps;
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
        self._indexes = SegmentIndexes(
            base_offset,
            segment_path(directory, base_offset, OFFSET_INDEX_SUFFIX),
            segment_path(directory, base_offset, TIME_INDEX_SUFFIX),
        )
        self._size = 0
        self._next_offset = base_offset
        self._max_timestamp_ms = -1
        self._offset_of_max_timestamp = base_offset
        self._bytes_since_index_entry = 0
        self._log_fd = -1
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
        segment._indexes.open_files(truncate=True)
        # The new files' directory entries must survive a crash before any batch is acknowledged.
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
        reads the headers after the last index entry. A batch that does not frame or follow on
        in such a segment raises ``CorruptSegmentError``.

        A segment that does not start with a v2 batch, such as one in the broker's old record
        format, raises ``UnsupportedLogFormatError`` (KAFKA_STORAGE_ERROR) and is left as it is;
        only a last segment whose first batch is torn is truncated.
        """
        segment = cls(directory, base_offset, index_interval_bytes, created_ms)
        segment._log_fd = os.open(segment.log_path, os.O_RDWR)
        try:
            segment._check_format(torn_allowed=recover)
            if recover:
                segment._indexes.open_files(truncate=False)
                segment.recover()
            else:
                segment._load_clean()
        except BaseException:
            segment.close()
            raise
        return segment

    def close(self) -> None:
        """Releases the file descriptors without flushing. Idempotent."""
        if self._log_fd >= 0:
            os.close(self._log_fd)
        self._log_fd = -1
        self._indexes.close()
        self._closed = True

    def delete(self, *, sync: bool = True) -> None:
        """Closes and removes the segment's files. The ``.log`` goes first: once it is gone the
        segment no longer exists for ``Log.open``, which removes orphaned index files. With
        ``sync=False`` the caller fsyncs the directory, once for many segments."""
        self.close()
        for path in (self.log_path, self.offset_index_path, self.time_index_path):
            path.unlink(missing_ok=True)
        if sync:
            fsync_dir(self.log_path.parent)

    # ----------------------------------------------------------------------------- properties

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def next_offset(self) -> int:
        """The base offset the next appended batch must carry (one past the last offset)."""
        return self._next_offset

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def max_timestamp_ms(self) -> int:
        """Largest batch max timestamp in the segment, -1 when empty."""
        return self._max_timestamp_ms

    @property
    def created_ms(self) -> int:
        """When this segment was created or opened, by the log's clock (drives ``segment.ms``)."""
        return self._created_ms

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    @property
    def offset_index_path(self) -> Path:
        return self._indexes.offset_path

    @property
    def time_index_path(self) -> Path:
        return self._indexes.time_path

    @property
    def offset_index_entries(self) -> list[tuple[int, int]]:
        """``(relative last offset, position)`` pairs, in file order."""
        return self._indexes.offset_entries

    @property
    def time_index_entries(self) -> list[tuple[int, int]]:
        """``(timestamp_ms, relative offset)`` pairs, in file order."""
        return self._indexes.time_entries

    # ----------------------------------------------------------------------------- data path

    def append(self, parts: Sequence[Buffer], headers: Sequence[BatchHeader]) -> int:
        """Writes ``parts`` (in order: whole batches, possibly split anywhere into pieces, so a
        batch's rewritten header goes beside its record bytes without copying them) whose
        ``headers`` (positions in the joined parts) carry their final offsets, the first one
        :attr:`next_offset`; returns the position written at. Not durable until :meth:`flush`
        or :meth:`flush_data`."""
        self._check_open()
        if not headers or headers[0].base_offset != self._next_offset:
            raise ValueError(f"batches must start at offset {self._next_offset}")
        if headers[-1].last_offset - self._base_offset > _U32_MAX:
            raise ValueError(f"offset {headers[-1].last_offset} does not fit {self._base_offset}")
        position = self._size
        size = sum(len(part) for part in parts)
        if position + size > _U32_MAX:
            raise ValueError(f"segment {self._base_offset} would exceed 4 GiB")
        # pwrite at our own size: a failed partial write is overwritten by the next append
        # and never counted, so the segment never serves half a batch.
        _pwrite_all(self._log_fd, parts, position)
        for header in headers:
            self._index_batch(header, position + header.position, write=True)
        self._size += size
        self._next_offset = headers[-1].last_offset + 1
        return position

    def read(self, offset: int, max_bytes: int, *, min_one: bool = True) -> BatchRead | None:
        """Whole batches from the one holding ``offset`` (or the first after it) while they fit
        in ``max_bytes``; with ``min_one`` the first even if it alone is larger (KIP-74). None
        past the segment's last offset, or when nothing fits."""
        self._check_open()
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        offset = max(offset, self._base_offset)
        if offset >= self._next_offset:
            return None
        walker = self._walker()
        first = walker.find(self._indexes.lookup(offset), offset)
        if first is None:
            return None
        return walker.read(first, max_bytes, min_one=min_one)

    def find_offset_by_timestamp(
        self, timestamp_ms: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record at or after ``starting_offset`` whose
        timestamp is at least ``timestamp_ms``, as Kafka's ``LogSegment.findOffsetByTimestamp``:
        the time index, then the offset index, then batch headers, then that batch's records."""
        self._check_open()
        if self._max_timestamp_ms < timestamp_ms or starting_offset >= self._next_offset:
            return None
        start = max(self._indexes.lookup_time(timestamp_ms), starting_offset)
        return self._walker().search_timestamp(
            self._indexes.lookup(start), timestamp_ms, starting_offset
        )

    def batch_headers(self, from_offset: int) -> Iterator[BatchHeader]:
        """The headers of the batches holding ``from_offset`` and after, in order."""
        self._check_open()
        for header in self._walker().headers(self._indexes.lookup(from_offset)):
            if header.last_offset >= from_offset:
                yield header

    def flush(self) -> None:
        """Makes the data and both indexes durable (fsync)."""
        self.flush_data()
        self._indexes.flush()

    def flush_data(self) -> None:
        """Makes the ``.log`` durable. Enough for an acknowledged batch: the indexes of the last
        segment are rebuilt from the data by :meth:`recover` after a crash."""
        self._check_open()
        os.fsync(self._log_fd)

    # ----------------------------------------------------------------------------- recovery

    def recover(self) -> int:
        """Scans the ``.log`` from the start and keeps the longest valid prefix, as Kafka's
        ``LogSegment.recover``: stops at the first torn batch, one failing its CRC, or one whose
        offsets do not follow on, truncates the file there, and rewrites both indexes from the
        kept batches. Everything is fsynced before returning, so a later crash cannot resurrect
        the torn bytes. Returns the number of bytes truncated.
        """
        self._check_open()
        self._reset_state()
        file_size = os.fstat(self._log_fd).st_size
        walker = BatchWalker(self._read_at, file_size, _RECOVERY_WINDOW)
        while self._size < file_size:
            try:
                header = walker.verified(self._size, self._next_offset)
            except RecordBatchError as e:
                _log.warning("%s: truncating at %d: %s", self.log_path, self._size, e)
                break
            self._index_batch(header, header.position, write=False)
            self._size = header.end
            self._next_offset = header.last_offset + 1
        truncated = file_size - self._size
        if truncated:
            os.ftruncate(self._log_fd, self._size)
        os.fsync(self._log_fd)
        self._indexes.rewrite_files()
        return truncated

    # ----------------------------------------------------------------------------- internals

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"segment {self._base_offset} is closed")

    def _read_at(self, position: int, size: int) -> bytes:
        return os.pread(self._log_fd, size, position)

    def _walker(self) -> BatchWalker:
        # Headers are walked in small windows: the index finds the batch *before* the one
        # holding an offset (its entries are keyed by last offsets, as Kafka's), which may be
        # a MiB long, so a window sized for the whole answer would be read twice. The answer
        # itself is then one read from its first batch (BatchWalker.read).
        return BatchWalker(self._read_at, self._size, DEFAULT_WINDOW_BYTES)

    def _reset_state(self) -> None:
        self._size = 0
        self._next_offset = self._base_offset
        self._max_timestamp_ms = -1
        self._offset_of_max_timestamp = self._base_offset
        self._bytes_since_index_entry = 0
        self._indexes.reset()

    def _index_batch(self, header: BatchHeader, position: int, *, write: bool) -> None:
        """Kafka's rule, shared by appends and recovery so that a rebuilt index equals the one
        written live: a new max timestamp is remembered, and an index entry is added for this
        batch once more than ``index_interval_bytes`` were appended since the last one."""
        if header.max_timestamp > self._max_timestamp_ms:
            self._max_timestamp_ms = header.max_timestamp
            self._offset_of_max_timestamp = header.last_offset
        if self._bytes_since_index_entry > self._index_interval_bytes:
            self._indexes.add(
                header.last_offset,
                position,
                self._max_timestamp_ms,
                self._offset_of_max_timestamp,
                write=write,
            )
            self._bytes_since_index_entry = 0
        self._bytes_since_index_entry += header.size

    def _check_format(self, *, torn_allowed: bool) -> None:
        """Refuses a segment whose first bytes are not a v2 batch header, unless it is a last
        segment whose first batch was torn (``torn_allowed``; recovery truncates it then): a
        record of the old format is always refused."""
        head = self._read_at(0, MAGIC_POSITION + 1)
        if len(head) <= MAGIC_POSITION or head[MAGIC_POSITION] == MAGIC_V2:
            return
        if torn_allowed and not self._starts_with_old_record():
            return
        raise UnsupportedLogFormatError(
            f"{self.log_path}: not Kafka record batches v2 (magic byte {head[MAGIC_POSITION]} "
            f"at position {MAGIC_POSITION}, {MAGIC_V2} expected). Data directories written in the "
            f"broker's old record format are not readable: move {self.log_path.parent} away "
            f"or delete it"
        )

    def _starts_with_old_record(self) -> bool:
        length, crc, offset = _OLD_RECORD_PREFIX.unpack(self._read_at(0, _OLD_RECORD_PREFIX.size))
        if offset != self._base_offset or not 28 <= length <= _OLD_RECORD_MAX:
            return False
        body = self._read_at(8, length - 4)
        return bool(len(body) == length - 4 and zlib.crc32(body) == crc)

    def _load_clean(self) -> None:
        """Loads a cleanly closed segment: trusts consistent index files, then reads the headers
        after the last offset-index entry to learn the next offset and the max timestamp."""
        self._size = os.fstat(self._log_fd).st_size
        self._indexes.open_files(truncate=False)
        if self._indexes.load(self._size) and self._resume_after_index():
            return
        _log.warning("%s: index files inconsistent, rebuilding", self.log_path)
        self._reset_state()
        self._size = os.fstat(self._log_fd).st_size
        for header in self._closed_headers(0):
            self._follow_on(header)
            self._index_batch(header, header.position, write=False)
            self._next_offset = header.last_offset + 1
        self._indexes.rewrite_files()

    def _resume_after_index(self) -> bool:
        """Reads the headers from the last indexed batch to the end. False if that batch does
        not end where its index entry says (a stale index, to be rebuilt)."""
        entries = self._indexes.offset_entries
        last_time = self._indexes.last_time_entry
        if last_time is not None:
            self._max_timestamp_ms, self._offset_of_max_timestamp = last_time
        for i, header in enumerate(self._closed_headers(self._indexes.last_position)):
            if i == 0 and entries:
                if header.last_offset != self._base_offset + entries[-1][0]:
                    return False
            else:
                self._follow_on(header)
            if header.max_timestamp > self._max_timestamp_ms:
                self._max_timestamp_ms = header.max_timestamp
                self._offset_of_max_timestamp = header.last_offset
            self._next_offset = header.last_offset + 1
        return True

    def _closed_headers(self, position: int) -> Iterator[BatchHeader]:
        """The headers of a closed segment from ``position``: its data must frame as batches,
        else ``CorruptSegmentError``."""
        try:
            yield from BatchWalker(self._read_at, self._size, _RECOVERY_WINDOW).headers(position)
        except RecordBatchError as e:
            raise CorruptSegmentError(f"{self.log_path}: {e}") from e

    def _follow_on(self, header: BatchHeader) -> None:
        if header.base_offset != self._next_offset or header.last_offset_delta < 0:
            raise CorruptSegmentError(
                f"{self.log_path}: batch at {header.position} holds offsets "
                f"{header.base_offset}..{header.last_offset}, {self._next_offset} expected"
            )


def _pwrite_all(fd: int, parts: Sequence[Buffer], position: int) -> None:
    """``os.pwritev`` until every byte of ``parts`` is written at ``position``."""
    views = [memoryview(part) for part in parts if len(part)]
    while views:
        written = os.pwritev(fd, views, position)
        position += written
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]
