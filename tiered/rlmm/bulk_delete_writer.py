"""The bulk delete job's events on the RemoteLogMetadataManager
(:class:`~tiered.api.BulkDeleteRemoteLogMetadataManager`): a batch of segment updates, a
partition's segments below a tiered epoch marked deleting (one write of the partition's delete
epoch, :mod:`tiered.rlmm.partition_state`) and, once their objects are gone, removed in bulk.
The manager holds a :class:`BulkDeleteWriter` and routes these events to it; the writer owns the
partitions its markings left open for their removal, and commits through the manager's writes.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    TopicIdPartition,
)
from tiered.rlmm import keys
from tiered.rlmm.backend import MetadataStorageBackend, StorageBackendError
from tiered.rlmm.partition_state import PartitionMetadataState

log = logging.getLogger(__name__)

MARKED_KEPT = 64
"""Marked partitions kept open for their removal, at most (a job marks the next partitions while
the engine deletes the earlier ones' objects)."""


class MarkedPartitions:
    """Partitions just marked, as the marking read and wrote them: their removal starts from
    one still at the stored version instead of reading every segment again."""

    def __init__(self) -> None:
        self._states: dict[TopicIdPartition, PartitionMetadataState] = {}
        self._lock = threading.Lock()

    def keep(self, state: PartitionMetadataState) -> None:
        with self._lock:
            self._states.pop(state.topic_id_partition, None)
            self._states[state.topic_id_partition] = state
            while len(self._states) > MARKED_KEPT:  # the oldest first
                del self._states[next(iter(self._states))]

    def take(
        self, backend: MetadataStorageBackend, tp: TopicIdPartition
    ) -> PartitionMetadataState | None:
        """The partition as its marking left it, if nobody has written to it since."""
        with self._lock:
            state = self._states.pop(tp, None)
        if state is None:
            return None
        try:
            stored = backend.get(keys.partition_key(tp))
        except StorageBackendError:
            return None  # the write opens the partition afresh, and reports what fails then
        return state if stored is not None and stored.version == state.version else None


def _apply_updates(
    chunk: Sequence[RemoteLogSegmentMetadataUpdate], state: PartitionMetadataState
) -> bool:
    """Applies a chunk of one partition's segment updates; a segment already gone is skipped."""
    applied = False
    state.segments([u.remote_log_segment_id.id for u in chunk])  # one read for the chunk
    for u in chunk:
        if state.segment(u.remote_log_segment_id.id) is None:
            log.info("%s is gone already; skipping %s", u.remote_log_segment_id, u)
            continue
        applied = state.handle_remote_log_segment_metadata_update(u) or applied
    return applied


def _remove_segments(
    tiered_epoch: int, segment_ids: list[uuid.UUID], state: PartitionMetadataState
) -> bool:
    return state.handle_segments_deleted_below_epoch(tiered_epoch, segment_ids)


def _check_partition_and_epoch(tp: object, tiered_epoch: object) -> None:
    if not isinstance(tp, TopicIdPartition):
        raise TypeError(f"expected TopicIdPartition, got {tp!r}")
    if isinstance(tiered_epoch, bool) or not isinstance(tiered_epoch, int):
        raise TypeError(f"tiered_epoch must be an int, got {tiered_epoch!r}")
    if tiered_epoch < 0:
        raise ValueError(f"tiered_epoch must be >= 0, got {tiered_epoch}")


class PartitionWrites(Protocol):
    """The manager's writes of one partition, as :class:`BulkDeleteWriter` commits through them."""

    def __call__(
        self,
        tp: TopicIdPartition,
        applies: Iterable[Callable[[PartitionMetadataState], bool]],
        opened: PartitionMetadataState | None = None,
    ) -> PartitionMetadataState | None:
        """Each of ``applies`` in turn, each committed as one write when it applies anything;
        outside a leader's cache starting from ``opened`` if given, and returning the view as
        the last write left it (None for a partition led here)."""


class BulkDeleteWriter:
    """The bulk delete job's events for one manager: ``write_many`` is the manager's writes,
    ``broker_id`` the broker its markings are stamped with. Thread-safe as those writes are."""

    def __init__(
        self, backend: MetadataStorageBackend, broker_id: int, write_many: PartitionWrites
    ) -> None:
        self._backend = backend
        self._broker_id = broker_id
        self._write_many = write_many
        self._marked = MarkedPartitions()

    def update_remote_log_segment_metadata_batch(
        self, updates: Sequence[RemoteLogSegmentMetadataUpdate], batch_size: int = 256
    ) -> None:
        """Applies many updates, each batch of ``batch_size`` of one partition's updates in one
        atomic write (the bulk-delete job moves thousands of segments at once); the contract is
        :class:`~tiered.api.BulkDeleteRemoteLogMetadataManager`'s."""
        by_partition: dict[TopicIdPartition, list[RemoteLogSegmentMetadataUpdate]] = {}
        for update in updates:
            if not isinstance(update, RemoteLogSegmentMetadataUpdate):
                raise TypeError(f"expected RemoteLogSegmentMetadataUpdate, got {update!r}")
            by_partition.setdefault(update.topic_id_partition, []).append(update)
        for tp, pending in by_partition.items():
            chunks = [pending[i : i + batch_size] for i in range(0, len(pending), batch_size)]
            self._write_many(tp, [functools.partial(_apply_updates, chunk) for chunk in chunks])

    def handle_partition_segments_delete_started_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> list[RemoteLogSegmentMetadata]:
        """The contract is :class:`~tiered.api.BulkDeleteRemoteLogMetadataManager`'s. One read
        of the partition and one write, of its record whatever the number of segments: the
        partition's delete epoch marks them all (:mod:`tiered.rlmm.partition_state`), and only
        copies still in progress, if any, get records of their own in that write."""
        _check_partition_and_epoch(topic_id_partition, tiered_epoch)
        below: list[RemoteLogSegmentMetadata] = []

        def mark(state: PartitionMetadataState) -> bool:
            below[:] = state.handle_partition_segments_delete_started_below_epoch(
                tiered_epoch, int(time.time() * 1000), self._broker_id
            )
            return state.dirty

        marked = self._write_many(topic_id_partition, [mark])
        if marked is not None:
            self._marked.keep(marked)
        return list(below)

    def handle_partition_segments_deleted_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int, batch_size: int = 1024
    ) -> None:
        """The contract is :class:`~tiered.api.BulkDeleteRemoteLogMetadataManager`'s. The
        partition is listed once and kept open; each batch of ``batch_size`` of the segments
        found is one atomic write, which removes them by key (no segment record is rewritten, so
        a batch stays far below ZooKeeper's request size limit). Listing again after the last
        batch finds nothing unless the partition changed meanwhile (a lost race reloads it)."""
        _check_partition_and_epoch(topic_id_partition, tiered_epoch)
        found: list[uuid.UUID] = []

        def listing(state: PartitionMetadataState) -> bool:
            found[:] = state.segments_deleted_below_epoch(tiered_epoch)
            return False

        def batches() -> Iterator[Callable[[PartitionMetadataState], bool]]:
            yield listing
            while found:
                pending = list(found)
                for i in range(0, len(pending), batch_size):
                    yield functools.partial(
                        _remove_segments, tiered_epoch, pending[i : i + batch_size]
                    )
                yield listing

        opened = self._marked.take(self._backend, topic_id_partition)
        self._write_many(topic_id_partition, batches(), opened)
