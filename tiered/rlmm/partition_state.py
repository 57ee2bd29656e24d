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
- A bulk delete marks a partition's old tiered epochs deleting with one write, the partition's
  *delete epoch* E, instead of a DELETE_SEGMENT_STARTED per segment: every read (:meth:`segment`,
  listings, lookups, the copy-finished totals) and every event's transition check sees a segment
  stamped below E as DELETE_SEGMENT_STARTED, whatever its own record says. Its record, the offset
  index and the aggregates keep what was last written for it (the *stored* state), which is what
  a later event's aggregates retract; the copy-finished totals are kept by tiered epoch so that
  those below E are left out in O(1).
"""

from __future__ import annotations

import bisect
import dataclasses
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
        # COPY_SEGMENT_FINISHED (bytes, segments) by tiered epoch: what the delete epoch hides
        self._copy_finished_by_epoch = {
            a.tiered_epoch: (a.size_bytes, a.segment_count)
            for a in record.copy_finished_by_tiered_epoch
        }
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

    @property
    def delete_epoch(self) -> int | None:
        """Segments stamped below this tiered epoch are DELETE_SEGMENT_STARTED (None: none is)."""
        if not self.record.HasField("deleting_below_tiered_epoch"):
            return None
        return self.record.deleting_below_tiered_epoch

    def _effective(
        self, stored: RemoteLogSegmentMetadata | None
    ) -> RemoteLogSegmentMetadata | None:
        """The segment as every reader sees it: below the delete epoch it is deleting."""
        if (
            stored is None
            or stored.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED
            or not self.record.HasField("deleting_below_tiered_epoch")
            or stored.tiered_epoch >= self.record.deleting_below_tiered_epoch
        ):
            return stored
        return dataclasses.replace(stored, state=RemoteLogSegmentState.DELETE_SEGMENT_STARTED)

    def segment(self, segment_id: uuid.UUID) -> RemoteLogSegmentMetadata | None:
        return self._effective(self._segments.segment(segment_id))

    def segments(self, segment_ids: list[uuid.UUID]) -> list[RemoteLogSegmentMetadata | None]:
        """The metadata of each id, in order (None where absent), read in one call."""
        return [self._effective(m) for m in self._segments.segments(segment_ids)]

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
        existing = self._segments.segment(segment_id)
        if not self._check_state_transition(self._effective(existing), metadata.state, metadata):
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
        existing = self._segments.segment(segment_id)
        if existing is None:
            raise RemoteResourceNotFoundException(
                f"no remote log segment metadata for {update.remote_log_segment_id}"
            )
        if not self._check_state_transition(self._effective(existing), update.state, update):
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

    def handle_partition_segments_delete_started_below_epoch(
        self, tiered_epoch: int, event_timestamp_ms: int, broker_id: int
    ) -> list[RemoteLogSegmentMetadata]:
        """Every segment stamped below ``tiered_epoch`` is going: records the partition's delete
        epoch (raising it, never lowering it), which makes them all DELETE_SEGMENT_STARTED at once.
        Copies still in progress are moved one by one too, with an event of their own: the bulk
        removal takes a COPY_SEGMENT_STARTED segment only once it was moved so, because one
        stamped below the delete epoch after this event (a broker still copying) may still be
        writing objects that this event's caller did not see. Returns the segments as they were
        before. Only in DELETE_PARTITION_STARTED; otherwise the event is dropped (logged) and
        none is returned."""
        if not self._check_deleting(tiered_epoch, "marked"):
            return []
        below = [m for m in self.list_remote_log_segments(None) if m.tiered_epoch < tiered_epoch]
        if self.delete_epoch is None or self.delete_epoch < tiered_epoch:
            self._check_copy_finished_by_epoch()
            self.record.deleting_below_tiered_epoch = tiered_epoch
            self.dirty = True
        for m in below:
            stored = self._segments.segment(m.remote_log_segment_id.id)
            if stored is not None and stored.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
                self.handle_remote_log_segment_metadata_update(
                    RemoteLogSegmentMetadataUpdate(
                        m.remote_log_segment_id,
                        event_timestamp_ms,
                        None,
                        RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                        broker_id,
                    )
                )
        return below

    def segments_deleted_below_epoch(self, tiered_epoch: int) -> list[uuid.UUID]:
        """The ids of the segments the bulk removal below ``tiered_epoch`` takes
        (:meth:`_deleting_below`), when the partition is in DELETE_PARTITION_STARTED; none
        otherwise (logged: the event is dropped)."""
        if not self._check_deleting(tiered_epoch, "removed"):
            return []
        ids = self.listed_segment_ids(None)
        return [
            segment_id
            for segment_id, stored in zip(ids, self._segments.segments(ids), strict=True)
            if stored is not None and self._deleting_below(stored, tiered_epoch)
        ]

    def _deleting_below(self, stored: RemoteLogSegmentMetadata, tiered_epoch: int) -> bool:
        """Whether the bulk removal takes a stored segment: stamped below ``tiered_epoch`` and
        DELETE_SEGMENT_STARTED, by its own record or, when COPY_SEGMENT_FINISHED, by the delete
        epoch (a COPY_SEGMENT_STARTED one only after the marking moved it on its own)."""
        if stored.tiered_epoch >= tiered_epoch:
            return False
        delete_epoch = self.delete_epoch
        return stored.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED or (
            stored.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            and delete_epoch is not None
            and stored.tiered_epoch < delete_epoch
        )

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

    def handle_segments_deleted_below_epoch(
        self, tiered_epoch: int, segment_ids: list[uuid.UUID]
    ) -> bool:
        """The objects of these segments (from :meth:`segments_deleted_below_epoch`) are gone:
        removes them as DELETE_SEGMENT_FINISHED would one by one. Those no longer DELETE_SEGMENT_
        STARTED below ``tiered_epoch`` (the partition changed since they were listed) are kept.
        Returns whether any was removed."""
        removed = False
        for stored in self._segments.segments(segment_ids):
            if stored is not None and self._deleting_below(stored, tiered_epoch):
                self._remove_segment(stored)
                removed = True
        return removed

    def _remove_segment(self, existing: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_FINISHED is terminal: nothing of the segment is kept (so no later load
        has to know how to skip it), and so no updated metadata is built either. ``existing`` is
        the stored metadata, whose contribution the aggregates hold."""
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
        if metadata.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
            size, count = self._copy_finished_by_epoch.get(metadata.tiered_epoch, (0, 0))
            self._copy_finished_by_epoch[metadata.tiered_epoch] = (
                size + sign * metadata.segment_size_in_bytes,
                count + sign,
            )
        for epoch in metadata.segment_leader_epochs:
            state = self.epoch(epoch, create=True)
            assert state is not None
            state.aggregates.add(metadata, sign)
            state.dirty = True

    # ----------------------------------------------------------------------------- reads

    def remote_log_segment_metadata(
        self, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset``: the index's floor entry, passing
        over the entries of segments below the delete epoch (deleting, so no longer indexed as
        such), a chunk of them read at once."""
        state = self.epoch(leader_epoch)
        if state is None:
            return None
        for entries in state.index.chunks_at_or_below(offset):
            ids = [segment_id for _start, segment_id in entries]
            for segment_id, metadata in zip(ids, self.segments(ids), strict=True):
                if metadata is None:  # deleted by a writer since this view read the index
                    raise VersionConflictError(
                        f"{self.topic_id_partition}: segment {segment_id} changed while being read",
                        keys.segment_key(self.topic_id_partition, segment_id),
                    )
                if metadata.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                    end = metadata.leader_epoch_end_offset(leader_epoch)
                    return metadata if offset <= end else None
        return None

    def highest_offset_for_epoch(self, leader_epoch: int) -> int | None:
        state = self.epoch(leader_epoch)
        return None if state is None else state.highest_log_offset

    def list_remote_log_segments(self, leader_epoch: int | None) -> list[RemoteLogSegmentMetadata]:
        ordered = self.listed_segment_ids(leader_epoch)
        found = self.segments(ordered)
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

    def remote_log_start_offset(self) -> int | None:
        """The lowest start offset of the segments :meth:`list_remote_log_segments` lists (None
        when it lists none), from each epoch's first index chunk and its unreferenced segments:
        a segment's start offset is its first epoch's entry, unless it is unreferenced there."""
        starts: list[int] = []
        for epoch in self.epochs():
            state = self.epoch(epoch)
            if state is None:
                continue
            first = state.index.first_entry()
            if first is not None:
                starts.append(first[0])
            unreferenced = self.segments(sorted(state.unreferenced))
            starts.extend(m.start_offset for m in unreferenced if m is not None)
        return min(starts, default=None)

    def listed_segment_ids(self, leader_epoch: int | None = None) -> list[uuid.UUID]:
        """The ids of the segments of ``leader_epoch`` (None: of every epoch), each once, in
        index order: (nearly) start offset order, which makes a listing's final sort cheap."""
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
        return ordered

    def remote_log_size(self, leader_epoch: int) -> int:
        state = self.epoch(leader_epoch)
        return 0 if state is None else state.aggregates.size_bytes

    def remote_log_totals(self) -> api.RemoteLogTotals:
        t = self.totals
        hidden_size = hidden_count = 0  # copy-finished below the delete epoch: deleting
        delete_epoch = self.delete_epoch
        if delete_epoch is not None:
            for tiered_epoch, (size, count) in self._copy_finished_by_epoch.items():
                if tiered_epoch < delete_epoch:
                    hidden_size, hidden_count = hidden_size + size, hidden_count + count
        return api.RemoteLogTotals(
            t.size_bytes,
            t.segment_count,
            t.copy_finished_size_bytes - hidden_size,
            t.copy_finished_segment_count - hidden_count,
        )

    def remote_log_below_epoch(self, tiered_epoch: int) -> api.RemoteLogBelowEpoch:
        """Segments stamped below ``tiered_epoch`` and their bytes, from the aggregates: every
        segment but the finished copies stamped ``tiered_epoch`` or later (the only ones
        aggregated by epoch)."""
        by_epoch = self._copy_finished_by_epoch.values()
        if sum(count for _, count in by_epoch) != self.totals.copy_finished_segment_count:
            # a record written before the split by epoch was kept: every segment, at most
            return api.RemoteLogBelowEpoch(self.totals.segment_count, self.totals.size_bytes)
        at_or_above = [
            aggregates
            for epoch, aggregates in self._copy_finished_by_epoch.items()
            if epoch >= tiered_epoch
        ]
        return api.RemoteLogBelowEpoch(
            self.totals.segment_count - sum(count for _, count in at_or_above),
            self.totals.size_bytes - sum(size for size, _ in at_or_above),
        )

    def _check_copy_finished_by_epoch(self) -> None:
        """Rebuilds the copy-finished aggregates by tiered epoch from the stored segments if they
        do not add up to the partition's (a record written before they were kept)."""
        kept = self._copy_finished_by_epoch.values()
        if (sum(size for size, _ in kept), sum(count for _, count in kept)) == (
            self.totals.copy_finished_size_bytes,
            self.totals.copy_finished_segment_count,
        ):
            return
        rebuilt: dict[int, tuple[int, int]] = {}
        for stored in self._segments.segments(self.listed_segment_ids(None)):
            if stored is not None and stored.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                size, count = rebuilt.get(stored.tiered_epoch, (0, 0))
                rebuilt[stored.tiered_epoch] = (size + stored.segment_size_in_bytes, count + 1)
        self._copy_finished_by_epoch = rebuilt
        self.dirty = True

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
        del self.record.copy_finished_by_tiered_epoch[:]
        self.record.copy_finished_by_tiered_epoch.extend(
            store_pb.TieredEpochAggregates(tiered_epoch=e, size_bytes=size, segment_count=count)
            for e, (size, count) in sorted(self._copy_finished_by_epoch.items())
            if count
        )
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
