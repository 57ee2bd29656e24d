"""Recovery of a metadata log directory: the newest valid snapshot, then every segment scanned
and indexed, with a torn tail truncated and corruption of acknowledged batches refused.

``recover`` loads the newest valid snapshot (a corrupt one falls back to the previous one), then
scans every segment. A bad frame at the end of the last segment (a write torn by a crash) is
truncated away with a warning; a bad frame followed by a valid one, or in any segment but the
last, is corruption of acknowledged data and ``recover`` refuses with ``CorruptLogError``.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from controller.store.kraft_log.errors import CorruptLogError
from controller.store.kraft_log.frames import (
    Batch,
    BatchCallback,
    decode_frame,
    find_valid_frame,
    peek_frame,
)
from controller.store.kraft_log.segments import (
    CORRUPT_SUFFIX,
    SEGMENT_SUFFIX,
    SNAPSHOT_SUFFIX,
    Segment,
    numbered,
)
from tiered.durable import TEMP_SUFFIX

logger = logging.getLogger(__name__)


@dataclass
class RecoveredLog:
    """What recovery found: the indexed segments and the valid snapshots of a directory."""

    segments: list[Segment] = field(default_factory=list)
    snapshots: list[int] = field(default_factory=list)  # valid snapshot offsets, ascending
    snapshot_offset: int = -1  # the one recovery used
    log_start_offset: int = 0
    end_offset: int = 0


def recover(
    directory: Path,
    *,
    read_only: bool,
    on_snapshot: BatchCallback | None,
    on_batch: BatchCallback | None,
) -> RecoveredLog:
    """Recovers ``directory`` and replays it: ``on_snapshot`` with the newest valid snapshot,
    then ``on_batch`` with every batch after it, in order. Writable recovery removes leftover
    temporary files, renames corrupt snapshots aside and truncates a torn tail; read-only
    recovery stops before it. Raises ``CorruptLogError`` or ``OSError``."""
    recovered = RecoveredLog()
    if not read_only:
        directory.mkdir(parents=True, exist_ok=True)
        for leftover in directory.glob(f"*{TEMP_SUFFIX}"):
            leftover.unlink(missing_ok=True)
    elif not directory.is_dir():
        return recovered  # nothing written yet
    segments = numbered(directory, SEGMENT_SUFFIX)
    snapshot = _load_snapshot(directory, recovered.snapshots, read_only=read_only)
    snap_offset = -1 if snapshot is None else snapshot.base_offset
    first_needed = snap_offset + 1
    if segments and segments[0][0] > first_needed:
        raise CorruptLogError(
            f"{directory}: the log starts at offset {segments[0][0]} but "
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
        segment = _scan_segment(
            base,
            path,
            last=i == len(segments) - 1,
            snap_offset=snap_offset,
            on_batch=on_batch,
            read_only=read_only,
        )
        recovered.segments.append(segment)
        expected = segment.end_offset

    recovered.end_offset = first_needed if expected is None else expected
    if recovered.end_offset < first_needed:
        raise CorruptLogError(
            f"{directory}: the log ends at offset {recovered.end_offset} but the snapshot "
            f"covers up to {snap_offset}"
        )
    recovered.log_start_offset = (
        recovered.segments[0].base_offset if recovered.segments else first_needed
    )
    recovered.snapshot_offset = snap_offset
    return recovered


def _load_snapshot(directory: Path, valid: list[int], *, read_only: bool) -> Batch | None:
    """The newest valid snapshot; fills ``valid`` with the offsets of the valid ones."""
    snapshots = numbered(directory, SNAPSHOT_SUFFIX)
    chosen: Batch | None = None
    for offset, path in reversed(snapshots):
        if chosen is not None:
            valid.append(offset)
            continue
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # read-only: retention deleted it meanwhile
            continue
        decoded = decode_frame(data)
        if decoded is not None and decoded[1] == len(data) and decoded[0].base_offset == offset:
            chosen = decoded[0]
            valid.append(offset)
            continue
        logger.warning(
            "metadata snapshot %s is corrupt (%d bytes); falling back to an older one",
            path,
            len(data),
        )
        if not read_only:
            path.replace(path.with_name(path.name + CORRUPT_SUFFIX))
    valid.reverse()
    return chosen


def _scan_segment(
    base: int,
    path: Path,
    *,
    last: bool,
    snap_offset: int,
    on_batch: BatchCallback | None,
    read_only: bool,
) -> Segment:
    data = path.read_bytes()
    segment = Segment(base, path)
    pos, expected = 0, base
    ahead: tuple[int, int] | None = None  # peek_frame(data, pos), when already known
    while pos < len(data):
        if expected <= snap_offset:
            # A batch wholly covered by the snapshot is indexed without being parsed (a log
            # keeps up to a segment of such history, which a start-up need not decode). Its
            # frame must be intact (CRC) and be followed by an intact frame, whose base offset
            # says where this batch ends; the image comes from the snapshot, not from these
            # batches.
            head = ahead if ahead is not None else peek_frame(data, pos)
            ahead = None
            if head is not None and head[0] == expected:
                ahead = peek_frame(data, head[1])
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
    later = find_valid_frame(data, pos + 1, expected)
    if later is not None:
        raise CorruptLogError(
            f"{path}: bad frame at byte {pos} (offset {expected}) followed by a valid frame at "
            f"byte {later}: acknowledged batches are corrupt; refusing to open"
        )
    dropped = len(data) - pos
    if read_only:
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
