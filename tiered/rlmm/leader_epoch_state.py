"""The segments of one leader epoch (Kafka's ``RemoteLogLeaderEpochState``): its offset index, its
unreferenced segments, its highest copied offset and its aggregates, and the backend writes a
change to them implies."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from tiered.api import RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from tiered.rlmm import keys
from tiered.rlmm.backend import Create, Delete, MetadataStorageBackend, Op, Update, Versioned
from tiered.rlmm.offset_index import OffsetIndex
from tiered.rpc.v1 import rlmm_store_pb2 as store_pb

_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


class _TrackedSet(set[uuid.UUID]):
    """A set that remembers what was added and removed since the last commit, so that a write
    costs what it changed, not the size of the set (a bulk delete marks every segment)."""

    def __init__(self, items: Iterable[uuid.UUID] = ()) -> None:
        super().__init__(items)
        self.added: set[uuid.UUID] = set()
        self.removed: set[uuid.UUID] = set()

    def add(self, item: uuid.UUID) -> None:
        if item in self:
            return
        super().add(item)
        if item in self.removed:
            self.removed.discard(item)
        else:
            self.added.add(item)

    def discard(self, item: object) -> None:
        if not isinstance(item, uuid.UUID) or item not in self:
            return
        super().discard(item)
        if item in self.added:
            self.added.discard(item)
        else:
            self.removed.add(item)

    def committed(self) -> None:
        self.added.clear()
        self.removed.clear()


@dataclass(slots=True)
class Aggregates:
    """Sizes and counts of the listed segments, all of them and the COPY_SEGMENT_FINISHED ones,
    kept up to date with every transition (of an epoch, or of a whole partition)."""

    size_bytes: int = 0
    segment_count: int = 0
    copy_finished_size_bytes: int = 0
    copy_finished_segment_count: int = 0

    def add(self, m: RemoteLogSegmentMetadata, sign: int) -> None:
        self.size_bytes += sign * m.segment_size_in_bytes
        self.segment_count += sign
        if m.state is _FINISHED:
            self.copy_finished_size_bytes += sign * m.segment_size_in_bytes
            self.copy_finished_segment_count += sign


class RemoteLogLeaderEpochState:
    """The segments of one leader epoch: the offset index of COPY_SEGMENT_FINISHED segments, the
    unreferenced ones (copying, deleting, or replaced by a later copy of the same offsets), the
    highest copied offset, and the size of everything listed."""

    def __init__(
        self,
        backend: MetadataStorageBackend,
        tp: TopicIdPartition,
        leader_epoch: int,
        record: store_pb.LeaderEpochStateRecord,
        version: int | None,
        index: OffsetIndex,
        unreferenced: set[uuid.UUID] | None,
    ) -> None:
        self._backend = backend
        self._tp = tp
        self.leader_epoch = leader_epoch
        self.highest_log_offset: int | None = (
            record.highest_log_offset if record.HasField("highest_log_offset") else None
        )
        self.aggregates = Aggregates(
            record.size_bytes,
            record.segment_count,
            record.copy_finished_size_bytes,
            record.copy_finished_segment_count,
        )
        self.version = version
        self.index = index
        self._unreferenced = None if unreferenced is None else _TrackedSet(unreferenced)
        self.dirty = version is None

    @classmethod
    def create(
        cls, backend: MetadataStorageBackend, tp: TopicIdPartition, leader_epoch: int
    ) -> RemoteLogLeaderEpochState:
        """An epoch the backend does not hold yet; committing creates it."""
        return cls(
            backend,
            tp,
            leader_epoch,
            store_pb.LeaderEpochStateRecord(),
            None,
            OffsetIndex(backend, tp, leader_epoch, []),
            set(),
        )

    @classmethod
    def open(
        cls,
        backend: MetadataStorageBackend,
        tp: TopicIdPartition,
        leader_epoch: int,
        stored: Versioned,
    ) -> RemoteLogLeaderEpochState:
        """A lazily loading view of the epoch whose record the backend returned as ``stored``."""
        return cls(
            backend,
            tp,
            leader_epoch,
            store_pb.LeaderEpochStateRecord.FromString(stored.value),
            stored.version,
            OffsetIndex(backend, tp, leader_epoch, None),
            None,
        )

    @classmethod
    def load(
        cls,
        backend: MetadataStorageBackend,
        tp: TopicIdPartition,
        leader_epoch: int,
        stored: Versioned,
    ) -> RemoteLogLeaderEpochState:
        """Everything the backend holds for the epoch whose record is ``stored``, for a leader's
        in-memory cache."""
        index = OffsetIndex.load(backend, tp, leader_epoch)
        unreferenced = {
            uuid.UUID(hex=n) for n in backend.list_children(keys.unreferenced_key(tp, leader_epoch))
        }
        return cls(
            backend,
            tp,
            leader_epoch,
            store_pb.LeaderEpochStateRecord.FromString(stored.value),
            stored.version,
            index,
            unreferenced,
        )

    @property
    def unreferenced(self) -> set[uuid.UUID]:
        if self._unreferenced is None:
            names = self._backend.list_children(keys.unreferenced_key(self._tp, self.leader_epoch))
            self._unreferenced = _TrackedSet(uuid.UUID(hex=n) for n in names)
        return self._unreferenced

    def handle_segment_with_copy_segment_started_state(self, segment_id: uuid.UUID) -> None:
        self.unreferenced.add(segment_id)

    def handle_segment_with_copy_segment_finished_state(
        self, start_offset: int, segment_id: uuid.UUID, leader_epoch_end_offset: int
    ) -> None:
        # A new leader may copy again what a lagging predecessor copied, as a superset: segments
        # mapped at or above this start offset are replaced while this one reaches at least as far.
        last = self.index.last_entry()
        while (
            last is not None
            and last[0] >= start_offset
            and self.highest_log_offset is not None
            and self.highest_log_offset <= leader_epoch_end_offset
        ):
            self.index.remove(*last)
            self.unreferenced.add(last[1])
            last = self.index.last_entry()
        replaced = self.index.put(start_offset, segment_id)
        if replaced is not None and replaced != segment_id:
            self.unreferenced.add(replaced)
        self.unreferenced.discard(segment_id)
        if self.highest_log_offset is None or leader_epoch_end_offset > self.highest_log_offset:
            self.highest_log_offset = leader_epoch_end_offset
        self.dirty = True

    def handle_segment_with_delete_segment_started_state(
        self, start_offset: int, segment_id: uuid.UUID
    ) -> None:
        self.index.remove(start_offset, segment_id)
        self.unreferenced.add(segment_id)

    def handle_segment_with_delete_segment_finished_state(
        self, start_offset: int, segment_id: uuid.UUID
    ) -> None:
        self.index.remove(start_offset, segment_id)
        self.unreferenced.discard(segment_id)

    def detach(self, start_offset: int, segment_id: uuid.UUID) -> None:
        """Forgets the segment entirely (it is being re-added with other epochs)."""
        self.handle_segment_with_delete_segment_finished_state(start_offset, segment_id)

    def encode(self) -> bytes:
        record = store_pb.LeaderEpochStateRecord(
            size_bytes=self.aggregates.size_bytes,
            segment_count=self.aggregates.segment_count,
            copy_finished_size_bytes=self.aggregates.copy_finished_size_bytes,
            copy_finished_segment_count=self.aggregates.copy_finished_segment_count,
        )
        if self.highest_log_offset is not None:
            record.highest_log_offset = self.highest_log_offset
        return record.SerializeToString()

    def pending_ops(self) -> list[Op]:
        ops: list[Op] = []
        key = keys.epoch_key(self._tp, self.leader_epoch)
        if self.version is None:
            ops.append(Create(key, self.encode()))
        elif self.dirty:
            ops.append(Update(key, self.encode(), self.version))
        ops.extend(self.index.pending_ops())
        if self._unreferenced is not None:
            for segment_id in sorted(self._unreferenced.added):
                key = keys.unreferenced_segment_key(self._tp, self.leader_epoch, segment_id)
                ops.append(Create(key, b""))
            for segment_id in sorted(self._unreferenced.removed):
                key = keys.unreferenced_segment_key(self._tp, self.leader_epoch, segment_id)
                ops.append(Delete(key))
        return ops

    def mark_committed(self) -> None:
        if self.version is None:
            self.version = 0
        elif self.dirty:
            self.version += 1
        self.dirty = False
        self.index.mark_committed()
        if self._unreferenced is not None:
            self._unreferenced.committed()
