"""One partition's remote log metadata: Kafka's ``RemoteLogMetadataCache`` over records loaded
from the backend, with a ``RemoteLogLeaderEpochState`` per epoch (``leader_epoch_state``, with its
``offset_index``) and the segment records (``segment_records``).

The same code serves both read paths. A partition leader keeps a fully loaded instance in memory
and applies each event to it; any other process opens a lazily loading instance per call, which
reads only the records that call needs (one epoch record for ``remote_log_size``, one index chunk
for a lookup). Such a view is not a snapshot: the caller re-reads the partition record afterwards
and retries if its version moved, which every write does.

Either way an event is applied in memory first, which records the backend writes it implies;
:meth:`PartitionMetadataState.pending_ops` turns them into one atomic multi whose first op is the
partition record at the version this instance read. That precondition is what serializes writers
and fences a deposed leader; after a failed commit the instance must be discarded.

Differences from Kafka, each because Kafka's behaviour loses track of a segment:

- When COPY_SEGMENT_FINISHED maps a start offset that already maps to another segment (which Kafka's
  replacement loop keeps when the new segment ends lower), the displaced segment becomes
  unreferenced; Kafka overwrites it and it is no longer listed anywhere, so nothing deletes it.
- Aggregates (``remote_log_size``, partition totals) are maintained with every transition instead
  of summed over a listing (KIP-852 left the method to implementations; this one is O(1)).
"""

from __future__ import annotations

import bisect
import logging
import uuid

from tiered import api
from tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)
from tiered.rlmm import keys, serde
from tiered.rlmm.backend import (
    Create,
    MetadataStorageBackend,
    Op,
    Update,
    VersionConflictError,
)
from tiered.rlmm.leader_epoch_state import Aggregates, RemoteLogLeaderEpochState
from tiered.rlmm.segment_records import SegmentRecords
from tiered.rpc.v1 import rlmm_store_pb2 as store_pb

log = logging.getLogger(__name__)


class PartitionMetadataState:
    """The remote log metadata of one partition, as read from the backend at one version."""

    def __init__(
        self,
        backend: MetadataStorageBackend,
        tp: TopicIdPartition,
        record: store_pb.PartitionStateRecord,
        version: int | None,
        complete: bool,
    ) -> None:
        self._backend = backend
        self.topic_id_partition = tp
        self.record = record
        self.version = version
        # complete: every record of the partition is loaded, so absence means absence.
        self._complete = complete
        self._segments = SegmentRecords(backend, tp, complete)
        self._epochs: dict[int, RemoteLogLeaderEpochState | None] = {}
        self._epoch_names: list[int] | None = None
        self.totals = Aggregates(
            record.size_bytes,
            record.segment_count,
            record.copy_finished_size_bytes,
            record.copy_finished_segment_count,
        )
        self.dirty = version is None

    # ----------------------------------------------------------------------------- construction

    @classmethod
    def read_record(
        cls, backend: MetadataStorageBackend, tp: TopicIdPartition
    ) -> tuple[store_pb.PartitionStateRecord, int] | None:
        stored = backend.get(keys.partition_key(tp))
        if stored is None:
            return None
        return store_pb.PartitionStateRecord.FromString(stored.value), stored.version

    @classmethod
    def open(
        cls, backend: MetadataStorageBackend, tp: TopicIdPartition
    ) -> PartitionMetadataState | None:
        """A lazily loading view, or None if the backend has no such partition."""
        found = cls.read_record(backend, tp)
        if found is None:
            return None
        return cls(backend, tp, found[0], found[1], complete=False)

    @classmethod
    def create(
        cls, backend: MetadataStorageBackend, tp: TopicIdPartition
    ) -> PartitionMetadataState:
        """A partition the backend does not hold yet; committing creates it."""
        record = store_pb.PartitionStateRecord(
            topic_id_partition=serde.topic_id_partition_to_proto(tp)
        )
        return cls(backend, tp, record, None, complete=True)

    @classmethod
    def load(
        cls, backend: MetadataStorageBackend, tp: TopicIdPartition
    ) -> PartitionMetadataState | None:
        """Everything the backend holds for the partition, for a leader's in-memory cache."""
        found = cls.read_record(backend, tp)
        if found is None:
            return None
        state = cls(backend, tp, found[0], found[1], complete=True)
        epoch_records = backend.get_by_prefix(keys.epochs_key(tp))
        state._epoch_names = sorted(int(name) for name in epoch_records)
        for name, stored in epoch_records.items():
            epoch = int(name)
            state._epochs[epoch] = RemoteLogLeaderEpochState.load(backend, tp, epoch, stored)
        state._segments.load_all()
        return state

    # ----------------------------------------------------------------------------- record access

    @property
    def delete_state(self) -> RemotePartitionDeleteState | None:
        if not self.record.HasField("delete_state"):
            return None
        return serde.delete_state_from_proto(self.record.delete_state)

    @property
    def is_deleted(self) -> bool:
        return self.delete_state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED

    def segment(self, segment_id: uuid.UUID) -> RemoteLogSegmentMetadata | None:
        return self._segments.segment(segment_id)

    def segments(self, segment_ids: list[uuid.UUID]) -> list[RemoteLogSegmentMetadata | None]:
        """The metadata of each id, in order (None where absent), read in one call."""
        return self._segments.segments(segment_ids)

    def epochs(self) -> list[int]:
        if self._epoch_names is None:
            names = self._backend.list_children(keys.epochs_key(self.topic_id_partition))
            self._epoch_names = sorted(int(n) for n in names)
        return list(self._epoch_names)

    def epoch(self, leader_epoch: int, create: bool = False) -> RemoteLogLeaderEpochState | None:
        if leader_epoch not in self._epochs:
            self._epochs[leader_epoch] = self._open_epoch(leader_epoch)
        state = self._epochs[leader_epoch]
        if state is None and create:
            state = RemoteLogLeaderEpochState.create(
                self._backend, self.topic_id_partition, leader_epoch
            )
            self._epochs[leader_epoch] = state
            if self._epoch_names is not None:
                bisect.insort(self._epoch_names, leader_epoch)
        return state

    def _open_epoch(self, leader_epoch: int) -> RemoteLogLeaderEpochState | None:
        if self._complete:
            return None
        tp = self.topic_id_partition
        stored = self._backend.get(keys.epoch_key(tp, leader_epoch))
        if stored is None:
            return None
        return RemoteLogLeaderEpochState.open(self._backend, tp, leader_epoch, stored)

    # ----------------------------------------------------------------------------- events

    def handle_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> bool:
        """A segment copy is starting (Kafka's ``addCopyInProgressSegment``). False if dropped."""
        if metadata.state is not RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(
                f"segment {metadata.remote_log_segment_id} must be added in state "
                f"COPY_SEGMENT_STARTED, not {metadata.state.name}"
            )
        segment_id = metadata.remote_log_segment_id.id
        existing = self.segment(segment_id)
        if not self._check_state_transition(existing, metadata.state, metadata):
            return False
        if existing is not None:  # a retried add: forget where it was listed before
            self._retract(existing)
            for epoch, start in existing.segment_leader_epochs.items():
                state = self.epoch(epoch)
                if state is not None:
                    state.detach(start, segment_id)
        for epoch in metadata.segment_leader_epochs:
            state = self.epoch(epoch, create=True)
            assert state is not None
            state.handle_segment_with_copy_segment_started_state(segment_id)
        self._contribute(metadata)
        self._segments.write(metadata)
        return True

    def handle_remote_log_segment_metadata_update(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> bool:
        """Moves a segment to the update's state. False if the transition was dropped."""
        segment_id = update.remote_log_segment_id.id
        existing = self.segment(segment_id)
        if existing is None:
            raise RemoteResourceNotFoundException(
                f"no remote log segment metadata for {update.remote_log_segment_id}"
            )
        if not self._check_state_transition(existing, update.state, update):
            return False
        if update.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            self._remove_segment(existing)
            return True
        updated = existing.create_with_updates(update)
        for epoch, start in updated.segment_leader_epochs.items():
            state = self.epoch(epoch, create=True)
            assert state is not None
            if update.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                state.handle_segment_with_copy_segment_finished_state(
                    start, segment_id, updated.leader_epoch_end_offset(epoch)
                )
            else:
                state.handle_segment_with_delete_segment_started_state(start, segment_id)
        self._retract(existing)
        self._contribute(updated)
        self._segments.write(updated)
        return True

    def segments_below_epoch_to_delete(self, tiered_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """The segments stamped below ``tiered_epoch``, when the partition is in
        DELETE_PARTITION_STARTED (they all go); none otherwise (logged: the event is dropped)."""
        if not self._check_deleting(tiered_epoch, "marked"):
            return []
        return [m for m in self.list_remote_log_segments(None) if m.tiered_epoch < tiered_epoch]

    def _check_deleting(self, tiered_epoch: int, what: str) -> bool:
        if self.delete_state is RemotePartitionDeleteState.DELETE_PARTITION_STARTED:
            return True
        log.error(
            "Partition %s: segments below tiered epoch %d can only be %s in bulk in "
            "DELETE_PARTITION_STARTED, not %s; dropping the event",
            self.topic_id_partition,
            tiered_epoch,
            what,
            self.delete_state.name if self.delete_state else None,
        )
        return False

    def handle_partition_segments_deleted_below_epoch(self, tiered_epoch: int, limit: int) -> int:
        """The objects of the partition's DELETE_SEGMENT_STARTED segments stamped below
        ``tiered_epoch`` are gone: removes up to ``limit`` of them, as DELETE_SEGMENT_FINISHED
        would one by one. Returns how many were removed; 0 when none is left, and when the
        partition is not in DELETE_PARTITION_STARTED (logged: the event is dropped)."""
        if not self._check_deleting(tiered_epoch, "removed"):
            return 0
        removed = 0
        for metadata in self._deleting_below_epoch(tiered_epoch):
            if removed == limit:
                break
            self._remove_segment(metadata)
            removed += 1
        return removed

    def _deleting_below_epoch(self, tiered_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """The DELETE_SEGMENT_STARTED segments stamped below ``tiered_epoch``: every such segment
        is listed in the unreferenced set of each of its leader epochs."""
        candidates: set[uuid.UUID] = set()
        for epoch in self.epochs():
            state = self.epoch(epoch)
            if state is not None:
                candidates.update(state.unreferenced)
        return [
            m
            for m in self.segments(list(candidates))
            if m is not None
            and m.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED
            and m.tiered_epoch < tiered_epoch
        ]

    def _remove_segment(self, existing: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_FINISHED is terminal: nothing of the segment is kept (so no later load
        has to know how to skip it), and so no updated metadata is built either."""
        segment_id = existing.remote_log_segment_id.id
        for epoch, start in existing.segment_leader_epochs.items():
            state = self.epoch(epoch, create=True)
            assert state is not None
            state.handle_segment_with_delete_segment_finished_state(start, segment_id)
        self._retract(existing)
        self._segments.write(None, segment_id)

    def handle_remote_partition_delete_metadata(
        self, metadata: RemotePartitionDeleteMetadata
    ) -> bool:
        """Records a partition deletion step. False if the transition was dropped."""
        current = self.delete_state
        if not RemotePartitionDeleteState.is_valid_transition(current, metadata.state):
            log.error(
                "Partition %s: remote partition delete state %s can not move to %s; dropping %s",
                self.topic_id_partition,
                current.name if current else None,
                metadata.state.name,
                metadata,
            )
            return False
        if (
            metadata.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
            and self.totals.segment_count > 0
        ):
            # KIP-950: a disablement's deletion removes the segments of older tiered epochs only.
            # Segments remain when tiering was re-enabled meanwhile: the partition lives on, with
            # no deletion in progress, so that a later disablement can mark it again.
            log.info(
                "Partition %s: remote deletion finished with %d newer segments kept",
                self.topic_id_partition,
                self.totals.segment_count,
            )
            self.record.ClearField("delete_state")
        else:
            self.record.delete_state = serde.delete_state_to_proto(metadata.state)
        self.record.delete_event_timestamp_ms = metadata.event_timestamp_ms
        self.record.delete_broker_id = metadata.broker_id
        self.dirty = True
        return True

    def _check_state_transition(
        self,
        existing: RemoteLogSegmentMetadata | None,
        target: RemoteLogSegmentState,
        event: object,
    ) -> bool:
        source = existing.state if existing is not None else None
        if RemoteLogSegmentState.is_valid_transition(source, target):
            return True
        log.error(
            "Partition %s: segment state %s can not move to %s; dropping %s",
            self.topic_id_partition,
            source.name if source else None,
            target.name,
            event,
        )
        return False

    def _contribute(self, metadata: RemoteLogSegmentMetadata) -> None:
        self._aggregate(metadata, +1)

    def _retract(self, metadata: RemoteLogSegmentMetadata) -> None:
        self._aggregate(metadata, -1)

    def _aggregate(self, metadata: RemoteLogSegmentMetadata, sign: int) -> None:
        self.totals.add(metadata, sign)
        self.dirty = True
        for epoch in metadata.segment_leader_epochs:
            state = self.epoch(epoch, create=True)
            assert state is not None
            state.aggregates.add(metadata, sign)
            state.dirty = True

    # ----------------------------------------------------------------------------- reads

    def remote_log_segment_metadata(
        self, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        state = self.epoch(leader_epoch)
        if state is None:
            return None
        entry = state.index.floor_entry(offset)
        if entry is None:
            return None
        metadata = self.segment(entry[1])
        if metadata is None:  # deleted by a writer since this view read the index
            raise VersionConflictError(
                f"{self.topic_id_partition}: segment {entry[1]} changed while being read",
                keys.segment_key(self.topic_id_partition, entry[1]),
            )
        return metadata if offset <= metadata.leader_epoch_end_offset(leader_epoch) else None

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        state = self.epoch(leader_epoch)
        return None if state is None else state.highest_log_offset

    def list_remote_log_segments(self, leader_epoch: int | None) -> list[RemoteLogSegmentMetadata]:
        # Index order is (nearly) start offset order, which makes the final sort cheap.
        ordered: list[uuid.UUID] = []
        seen: set[uuid.UUID] = set()
        epochs = self.epochs() if leader_epoch is None else [leader_epoch]
        for epoch in epochs:
            state = self.epoch(epoch)
            if state is None:
                continue
            for segment_id in (*state.index.segment_ids(), *state.unreferenced):
                if segment_id not in seen:
                    seen.add(segment_id)
                    ordered.append(segment_id)
        found = self._segments.segments(ordered)
        missing = [i for i, m in zip(ordered, found, strict=True) if m is None]
        if missing:  # deleted by a writer since this view listed them
            raise VersionConflictError(
                f"{self.topic_id_partition}: {len(missing)} listed segments changed while being read",
                keys.segment_key(self.topic_id_partition, missing[0]),
            )
        segments = [m for m in found if m is not None]
        # Ties (replaced copies of the same offsets) break on the id, so every path agrees.
        segments.sort(key=lambda m: (m.start_offset, m.remote_log_segment_id.id.int))
        return segments

    def remote_log_size(self, leader_epoch: int) -> int:
        state = self.epoch(leader_epoch)
        return 0 if state is None else state.aggregates.size_bytes

    def remote_log_totals(self) -> api.RemoteLogTotals:
        t = self.totals
        return api.RemoteLogTotals(
            t.size_bytes, t.segment_count, t.copy_finished_size_bytes, t.copy_finished_segment_count
        )

    # ----------------------------------------------------------------------------- commit

    def pending_ops(self) -> list[Op]:
        """The backend writes that make it hold this state, as one atomic multi: the partition
        record first (its version is the precondition), then parents before children."""
        if not self.dirty:
            return []
        tp = self.topic_id_partition
        t = self.totals
        self.record.size_bytes = t.size_bytes
        self.record.segment_count = t.segment_count
        self.record.copy_finished_size_bytes = t.copy_finished_size_bytes
        self.record.copy_finished_segment_count = t.copy_finished_segment_count
        encoded = self.record.SerializeToString()
        ops: list[Op] = [
            Create(keys.partition_key(tp), encoded)
            if self.version is None
            else Update(keys.partition_key(tp), encoded, self.version)
        ]
        ops.extend(self._segments.pending_ops())
        for state in self._epochs.values():
            if state is not None:
                ops.extend(state.pending_ops())
        return ops

    def mark_committed(self) -> None:
        """The ops from :meth:`pending_ops` were applied: adopt the versions they produced."""
        if self.dirty:
            self.version = 0 if self.version is None else self.version + 1
            self.dirty = False
        self._segments.mark_committed()
        for state in self._epochs.values():
            if state is not None:
                state.mark_committed()
