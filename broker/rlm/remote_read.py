"""Reads of remote segments. A remote segment's ``.log`` object is the local segment file as it
was uploaded, Kafka record batches v2; its ``.index`` and ``.timeindex`` objects locate a
position, and batch headers do the rest (``broker.log.batches.BatchWalker``), as for a local
segment: a fetch returns whole batches as bytes without decoding them, and only a timestamp
lookup decodes the records of the one batch it stops in.

Bytes that do not frame as batches (damage in remote storage) raise
``RemoteStorageException``.
"""

from __future__ import annotations

import threading

from broker.log import BatchRead, Log, TimestampOffset
from broker.log.batches import BatchWalker
from broker.log.segment_index import offset_index_floor_position, time_index_floor_offset
from tiered.api import (
    IndexType,
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageManager,
    TopicIdPartition,
)
from tiered.kafka.record_batch import RecordBatchError


class FetchGate:
    """Counts a partition's remote reads in flight; once closed (its remote data is about to be
    deleted) it refuses new ones and can be drained."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._in_flight = 0
        self._open = True

    @property
    def is_open(self) -> bool:
        return self._open

    def enter(self) -> bool:
        with self._cond:
            if not self._open:
                return False
            self._in_flight += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def close_and_drain(self, timeout_s: float) -> bool:
        with self._cond:
            self._open = False
            return self._cond.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)

    def reopen(self) -> None:
        with self._cond:
            self._open = True


# Read past max_bytes, so that the batch holding the offset (after the indexed one) and the
# header that no longer fits come in the same request.
REMOTE_READ_SLACK = 64 * 1024
_SEARCH_WINDOW = 1024 * 1024


def read_remote(
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
    tp: TopicIdPartition,
    log: Log,
    offset: int,
    max_bytes: int,
) -> BatchRead:
    """Whole batches from ``offset`` (below the local log start) out of the remote segment
    holding it, found by the leader epoch that wrote it. ``RemoteResourceNotFoundException`` if
    no copied segment holds it."""
    epoch = log.leader_epoch_cache.epoch_for_offset(offset)
    metadata = None if epoch is None else rlmm.remote_log_segment_metadata(tp, epoch, offset)
    if metadata is None:
        raise RemoteResourceNotFoundException(
            f"no remote segment of {tp} holds offset {offset} (leader epoch {epoch})"
        )
    return read_remote_batches(rsm, metadata, offset, max_bytes)


def find_remote_timestamp(
    rlmm: RemoteLogMetadataManager,
    rsm: RemoteStorageManager,
    tp: TopicIdPartition,
    log: Log,
    timestamp_ms: int,
) -> TimestampOffset | None:
    """ListOffsets by timestamp over the copied segments below the local log start, from the
    log start offset on: the first record whose timestamp is at least ``timestamp_ms``."""
    start, local_start = log.log_start_offset, log.local_log_start_offset
    for metadata in rlmm.list_remote_log_segments(tp):
        if metadata.start_offset >= local_start:
            break  # the local log serves these offsets
        if (
            metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            or metadata.end_offset < start
            or metadata.max_timestamp_ms < timestamp_ms
        ):
            continue
        found = find_remote_offset_by_timestamp(
            rsm, metadata, timestamp_ms, max(start, metadata.start_offset)
        )
        if found is not None:
            ts, offset = found
            return TimestampOffset(ts, offset, log.leader_epoch_cache.epoch_for_offset(offset))
    return None


def read_remote_batches(
    rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, offset: int, max_bytes: int
) -> BatchRead:
    """Whole batches of the remote segment from the one holding ``offset`` while they fit in
    ``max_bytes``, at least one (KIP-74). Usually a single ranged read after the index."""
    position = offset_index_floor_position(
        rsm.fetch_index(metadata, IndexType.OFFSET), metadata.start_offset, offset
    )
    walker = _walker(rsm, metadata, max_bytes + REMOTE_READ_SLACK)
    try:
        first = walker.find(position, offset)
        read = None if first is None else walker.read(first, max_bytes, min_one=True)
    except RecordBatchError as e:
        raise _damaged(metadata, e) from e
    if read is None:
        raise RemoteStorageException(
            f"remote segment {metadata.remote_log_segment_id} has no batch holding offset "
            f"{offset} (its offsets: {metadata.start_offset}..{metadata.end_offset})"
        )
    return read


def find_remote_offset_by_timestamp(
    rsm: RemoteStorageManager,
    metadata: RemoteLogSegmentMetadata,
    timestamp_ms: int,
    starting_offset: int,
) -> tuple[int, int] | None:
    """``(timestamp, offset)`` of the first record of the remote segment at or after
    ``starting_offset`` whose timestamp is at least ``timestamp_ms``, as for a local segment:
    the time index, the offset index, batch headers, that batch's records."""
    start = max(
        time_index_floor_offset(
            rsm.fetch_index(metadata, IndexType.TIMESTAMP), metadata.start_offset, timestamp_ms
        ),
        starting_offset,
    )
    position = offset_index_floor_position(
        rsm.fetch_index(metadata, IndexType.OFFSET), metadata.start_offset, start
    )
    try:
        return _walker(rsm, metadata, _SEARCH_WINDOW).search_timestamp(
            position, timestamp_ms, starting_offset
        )
    except RecordBatchError as e:
        raise _damaged(metadata, e) from e


def _walker(
    rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata, window_bytes: int
) -> BatchWalker:
    def read_at(position: int, size: int) -> bytes:
        return rsm.fetch_log_segment(metadata, position, position + size - 1)

    return BatchWalker(read_at, metadata.segment_size_in_bytes, window_bytes)


def _damaged(metadata: RemoteLogSegmentMetadata, error: RecordBatchError) -> RemoteStorageException:
    return RemoteStorageException(
        f"remote segment {metadata.remote_log_segment_id} does not hold valid batches: {error}"
    )
