"""A segment's two sparse indexes, in memory and in their files (Kafka's OffsetIndex and
TimeIndex, same entry layouts):

- ``.index``: ``relative_offset u32 | position u32``: the last offset of a batch, relative to
  the segment's base offset, and the batch's position in the ``.log``;
- ``.timeindex``: ``timestamp_ms i64 | relative_offset u32``: the segment's max timestamp so far
  and the last offset of the batch holding it, added with an offset entry when it has grown.

``LogSegment`` decides when an entry is due (every ``index.interval.bytes``). The module-level
lookups serve the same files once they are remote objects.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from tiered.durable import write_all

_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")


class SegmentIndexes:
    """Both indexes of one segment. Invariant: the in-memory entries equal the files' contents
    (once flushed). Not thread-safe: the owning segment's log serializes calls."""

    def __init__(self, base_offset: int, offset_path: Path, time_path: Path) -> None:
        self._base_offset = base_offset
        self.offset_path = offset_path
        self.time_path = time_path
        # Arrays, not lists of tuples: a 1 GiB segment at 4 KiB intervals has ~260k entries.
        self._rel_offsets = array("I")
        self._positions = array("I")
        self._timestamps = array("q")
        self._time_rel_offsets = array("I")
        self._offset_fd = -1
        self._time_fd = -1
        self._dirty = False

    def open_files(self, *, truncate: bool) -> None:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if truncate else 0)
        self._offset_fd = os.open(self.offset_path, flags, 0o644)
        self._time_fd = os.open(self.time_path, flags, 0o644)

    def close(self) -> None:
        for fd in (self._offset_fd, self._time_fd):
            if fd >= 0:
                os.close(fd)
        self._offset_fd = self._time_fd = -1

    @property
    def offset_entries(self) -> list[tuple[int, int]]:
        """``(relative_offset, position)`` pairs, in file order."""
        return list(zip(self._rel_offsets, self._positions, strict=True))

    @property
    def time_entries(self) -> list[tuple[int, int]]:
        """``(timestamp_ms, relative_offset)`` pairs, in file order."""
        return list(zip(self._timestamps, self._time_rel_offsets, strict=True))

    @property
    def last_position(self) -> int:
        """Position of the last indexed batch, 0 if none: where a scan for the segment's end may
        start."""
        return self._positions[-1] if self._positions else 0

    @property
    def last_time_entry(self) -> tuple[int, int] | None:
        """``(max timestamp, absolute offset)`` of the last time entry."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self._base_offset + self._time_rel_offsets[-1]

    def add(
        self,
        last_offset: int,
        position: int,
        max_timestamp_ms: int,
        offset_of_max_timestamp: int,
        *,
        write: bool,
    ) -> None:
        """Indexes the batch at ``position`` ending at ``last_offset``, and the segment's max
        timestamp if it grew since the last time entry. ``write`` also appends to the files
        (recovery rewrites them whole instead)."""
        rel = last_offset - self._base_offset
        self._rel_offsets.append(rel)
        self._positions.append(position)
        new_time_entry = not self._timestamps or max_timestamp_ms > self._timestamps[-1]
        if new_time_entry:
            self._timestamps.append(max_timestamp_ms)
            self._time_rel_offsets.append(offset_of_max_timestamp - self._base_offset)
        if write:
            os.write(self._offset_fd, _OFFSET_ENTRY.pack(rel, position))
            if new_time_entry:
                os.write(
                    self._time_fd,
                    _TIME_ENTRY.pack(self._timestamps[-1], self._time_rel_offsets[-1]),
                )
            self._dirty = True

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch ending at or before ``offset`` (0 if none): no
        batch between it and the batch holding ``offset`` is skipped by starting there."""
        i = bisect.bisect_right(self._rel_offsets, offset - self._base_offset)
        return self._positions[i - 1] if i else 0

    def lookup_time(self, timestamp_ms: int) -> int:
        """The offset of the last time entry whose timestamp is at most ``timestamp_ms`` (the
        base offset if none): every batch before its batch has smaller timestamps."""
        i = bisect.bisect_right(self._timestamps, timestamp_ms)
        return self._base_offset + (self._time_rel_offsets[i - 1] if i else 0)

    def reset(self) -> None:
        del self._rel_offsets[:]
        del self._positions[:]
        del self._timestamps[:]
        del self._time_rel_offsets[:]

    def flush(self) -> None:
        if self._dirty:
            os.fsync(self._offset_fd)
            os.fsync(self._time_fd)
            self._dirty = False

    def rewrite_files(self) -> None:
        """Replaces both files' contents with the in-memory entries, fsynced."""
        offsets = b"".join(
            _OFFSET_ENTRY.pack(r, p)
            for r, p in zip(self._rel_offsets, self._positions, strict=True)
        )
        times = b"".join(
            _TIME_ENTRY.pack(t, r)
            for t, r in zip(self._timestamps, self._time_rel_offsets, strict=True)
        )
        for fd, data in ((self._offset_fd, offsets), (self._time_fd, times)):
            os.ftruncate(fd, 0)
            write_all(fd, data)
            os.fsync(fd)
        self._dirty = False

    def load(self, data_size: int) -> bool:
        """Reads both files into memory; False (entries left empty) if either is missing or
        inconsistent with itself or with a ``.log`` of ``data_size`` bytes."""
        self.reset()
        if not self._load(data_size):
            self.reset()
            return False
        return True

    def _load(self, data_size: int) -> bool:
        try:
            offset_data = self.offset_path.read_bytes()
            time_data = self.time_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(offset_data) % _OFFSET_ENTRY.size or len(time_data) % _TIME_ENTRY.size:
            return False
        previous_rel, previous_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(offset_data):
            if rel <= previous_rel or pos <= previous_pos or pos >= data_size:
                return False
            self._rel_offsets.append(rel)
            self._positions.append(pos)
            previous_rel, previous_pos = rel, pos
        # Time entries are added only with offset entries, never past their offset.
        if len(time_data) // _TIME_ENTRY.size > len(self._rel_offsets):
            return False
        previous_ts = None
        for ts, rel in _TIME_ENTRY.iter_unpack(time_data):
            if (previous_ts is not None and ts <= previous_ts) or rel > previous_rel:
                return False
            self._timestamps.append(ts)
            self._time_rel_offsets.append(rel)
            previous_ts = ts
        return True


def offset_index_floor_position(index: bytes, base_offset: int, offset: int) -> int:
    """In the bytes of a segment's ``.index`` (as uploaded to remote storage), the position of
    the last indexed batch ending at or before ``offset``: where a scan for it may start."""
    i = _floor_entry(index, _OFFSET_ENTRY, offset - base_offset)
    return 0 if i < 0 else int(_OFFSET_ENTRY.unpack_from(index, i * _OFFSET_ENTRY.size)[1])


def time_index_floor_offset(index: bytes, base_offset: int, timestamp_ms: int) -> int:
    """In the bytes of a segment's ``.timeindex``, the offset of the last entry whose timestamp
    is at most ``timestamp_ms`` (the base offset if none), as :meth:`SegmentIndexes.lookup_time`."""
    i = _floor_entry(index, _TIME_ENTRY, timestamp_ms)
    if i < 0:
        return base_offset
    return base_offset + int(_TIME_ENTRY.unpack_from(index, i * _TIME_ENTRY.size)[1])


def _floor_entry(index: bytes, entry: struct.Struct, key: int) -> int:
    """Binary search over fixed-size entries (keyed by their first field) without decoding them
    all: the last entry whose key is <= ``key``, -1 if none."""
    lo, hi = 0, len(index) // entry.size
    while lo < hi:
        mid = (lo + hi) // 2
        if entry.unpack_from(index, mid * entry.size)[0] <= key:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1
