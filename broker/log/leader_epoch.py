"""The leader epoch cache: which leader epoch wrote which offsets.

Entries are ``(epoch, start_offset)``: epoch ``e`` covers offsets from its start offset up to the
next entry's start offset (exclusive), the last entry up to the log end. Epochs strictly increase
and start offsets strictly increase, so every entry covers at least one offset once records exist.

The checkpoint file and :meth:`LeaderEpochCache.encode_range` use Kafka's text format::

    0                 (version)
    N                 (entry count)
    epoch start_offset   (N lines)
"""

from __future__ import annotations

import bisect
import itertools
import threading
from pathlib import Path

from broker.log.errors import CorruptCheckpointError
from tiered.durable import atomic_write

CHECKPOINT_FILE = "leader-epoch-checkpoint"
_VERSION = 0


def encode_entries(entries: list[tuple[int, int]]) -> bytes:
    """Kafka's leader-epoch checkpoint text for ``entries``."""
    lines = [str(_VERSION), str(len(entries))]
    lines += [f"{epoch} {start}" for epoch, start in entries]
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_entries(data: bytes) -> list[tuple[int, int]]:
    """Parses :func:`encode_entries` output; ``CorruptCheckpointError`` if it is malformed."""
    try:
        lines = data.decode("ascii").splitlines()
        if int(lines[0]) != _VERSION:
            raise CorruptCheckpointError(f"unknown leader epoch checkpoint version {lines[0]!r}")
        count = int(lines[1])
        if len(lines) != 2 + count:
            raise CorruptCheckpointError(f"{count} entries declared, {len(lines) - 2} present")
        entries = []
        for line in lines[2:]:
            epoch, start = line.split(" ")
            entries.append((int(epoch), int(start)))
    except (UnicodeDecodeError, IndexError, ValueError) as e:
        raise CorruptCheckpointError(f"malformed leader epoch checkpoint: {e}") from e
    for (e1, s1), (e2, s2) in itertools.pairwise(entries):
        if e2 <= e1 or s2 <= s1:
            raise CorruptCheckpointError(f"entries out of order: {(e1, s1)} then {(e2, s2)}")
    return entries


class LeaderEpochCache:
    """Epoch → start offset entries, optionally persisted to a checkpoint file.

    With a ``checkpoint_path`` every change is written atomically (temp file, fsync, rename)
    before the method returns, and an existing checkpoint is loaded at construction.
    Thread-safe.
    """

    def __init__(self, checkpoint_path: Path | None = None) -> None:
        self._path = checkpoint_path
        self._lock = threading.Lock()
        self._epochs: list[int] = []
        self._starts: list[int] = []
        if checkpoint_path is not None and checkpoint_path.exists():
            for epoch, start in decode_entries(checkpoint_path.read_bytes()):
                self._epochs.append(epoch)
                self._starts.append(start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        """A copy of the ``(epoch, start_offset)`` entries, oldest first."""
        with self._lock:
            return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        with self._lock:
            return self._epochs[-1] if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Records that ``epoch`` starts at ``start_offset``. Returns whether anything changed.

        Ignored unless ``epoch`` is greater than the latest epoch. Entries whose start offset is
        >= ``start_offset`` are replaced: those epochs wrote nothing (their range would be empty),
        and keeping them would break the strictly increasing start offsets.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch and start_offset must be >= 0, got {epoch}, {start_offset}")
        with self._lock:
            if self._epochs and epoch <= self._epochs[-1]:
                return False
            while self._starts and self._starts[-1] >= start_offset:
                self._epochs.pop()
                self._starts.pop()
            self._epochs.append(epoch)
            self._starts.append(start_offset)
            self._persist()
            return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the last entry starting at or before it. None if the
        offset precedes every entry."""
        with self._lock:
            i = bisect.bisect_right(self._starts, offset)
            return self._epochs[i - 1] if i else None

    def epochs_in_range(self, start: int, end: int) -> dict[int, int]:
        """Each epoch covering any offset in ``[start, end]`` (inclusive), mapped to the first
        offset it covers inside the range: ``max(its start offset, start)``. This is what a
        segment spanning ``[start, end]`` reports as ``segment_leader_epochs``."""
        if end < start:
            raise ValueError(f"empty range [{start}, {end}]")
        with self._lock:
            return dict(self._range(start, end))

    def encode_range(self, start: int, end: int) -> bytes:
        """The checkpoint-format bytes of :meth:`epochs_in_range` (the remote leader-epoch index
        of a segment, ``LogSegmentData.leader_epoch_index``)."""
        if end < start:
            raise ValueError(f"empty range [{start}, {end}]")
        with self._lock:
            return encode_entries(self._range(start, end))

    def truncate_from_start(self, offset: int) -> None:
        """Forgets offsets below ``offset`` (the log start moved up): removes the entries that end
        before it and moves the start of the epoch covering ``offset`` up to ``offset``."""
        with self._lock:
            i = bisect.bisect_right(self._starts, offset)
            if i == 0 or (i == 1 and self._starts[0] == offset):
                return
            del self._epochs[: i - 1]
            del self._starts[: i - 1]
            self._starts[0] = offset
            self._persist()

    def truncate_from_end(self, end_offset: int) -> None:
        """Removes entries starting at or after ``end_offset`` (the log end moved down, e.g. a torn
        tail was cut off during recovery): those epochs no longer wrote anything."""
        with self._lock:
            i = bisect.bisect_left(self._starts, end_offset)
            if i == len(self._starts):
                return
            del self._epochs[i:]
            del self._starts[i:]
            self._persist()

    def _range(self, start: int, end: int) -> list[tuple[int, int]]:
        first = max(bisect.bisect_right(self._starts, start) - 1, 0)
        return [
            (epoch, max(epoch_start, start))
            for epoch, epoch_start in zip(self._epochs[first:], self._starts[first:], strict=True)
            if epoch_start <= end
        ]

    def _persist(self) -> None:
        if self._path is not None:
            atomic_write(
                self._path, encode_entries(list(zip(self._epochs, self._starts, strict=True)))
            )
