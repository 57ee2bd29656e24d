"""One partition's remote log metadata: Kafka's ``RemoteLogMetadataCache`` and
``RemoteLogLeaderEpochState`` over records loaded from the backend.

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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

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
    Delete,
    MetadataStorageBackend,
    Op,
    Update,
    VersionConflictError,
    Versioned,
)
from tiered.rpc.v1 import rlmm_store_pb2 as store_pb

log = logging.getLogger(__name__)

CHUNK_CAPACITY = 256
"""Index entries per chunk: about 6.5 KB of protobuf. Appending rewrites the last chunk, so small
chunks keep writes cheap; a million segments still make only ~4,000 chunk names per epoch."""

_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED


@dataclass(slots=True)
class _Chunk:
    offsets: list[int]
    ids: list[uuid.UUID]
    version: int | None  # None: not yet in the backend
    dirty: bool = False

    def encode(self) -> bytes:
        return store_pb.OffsetIndexChunkRecord(
            start_offsets=self.offsets, segment_ids=[i.bytes for i in self.ids]
        ).SerializeToString()

    @classmethod
    def decode(cls, stored: Versioned) -> _Chunk:
        record = store_pb.OffsetIndexChunkRecord.FromString(stored.value)
        return cls(
            list(record.start_offsets),
            [uuid.UUID(bytes=b) for b in record.segment_ids],
            stored.version,
        )


class OffsetIndex:
    """One epoch's start offset -> segment id map (Kafka's ``offsetToId``), kept as sorted chunks of
    at most CHUNK_CAPACITY entries. A chunk is named by an offset no greater than any of its entries
    and greater than every entry of the chunks before it."""

    def __init__(
        self,
        backend: MetadataStorageBackend,
        tp: TopicIdPartition,
        leader_epoch: int,
        chunk_offsets: Iterable[int] | None,
        loaded: dict[int, _Chunk] | None = None,
    ) -> None:
        """``chunk_offsets`` None: list the chunks from the backend on first use."""
        self._backend = backend
        self._tp = tp
        self._epoch = leader_epoch
        self._names: list[int] | None = None if chunk_offsets is None else sorted(chunk_offsets)
        self._chunks: dict[int, _Chunk] = dict(loaded or {})
        self._deleted: dict[int, int] = {}  # chunk name -> stored version, to delete

    @property
    def _keys(self) -> list[int]:
        if self._names is None:
            listed = self._backend.list_children(keys.index_key(self._tp, self._epoch))
            self._names = sorted(int(n) for n in listed)
        return self._names

    def _chunk(self, name: int) -> _Chunk:
        chunk = self._chunks.get(name)
        if chunk is None:
            stored = self._backend.get(keys.chunk_key(self._tp, self._epoch, name))
            if stored is None:  # renamed or emptied by a writer since this view listed it
                raise VersionConflictError(
                    f"offset index chunk {name} of {self._tp} epoch {self._epoch} changed "
                    "while being read",
                    keys.chunk_key(self._tp, self._epoch, name),
                )
            chunk = self._chunks[name] = _Chunk.decode(stored)
        return chunk

    def __bool__(self) -> bool:
        return bool(self._keys)

    def floor_entry(self, offset: int) -> tuple[int, uuid.UUID] | None:
        """The entry with the greatest start offset <= ``offset``."""
        i = bisect.bisect_right(self._keys, offset) - 1
        while i >= 0:
            chunk = self._chunk(self._keys[i])
            j = bisect.bisect_right(chunk.offsets, offset) - 1
            if j >= 0:
                return chunk.offsets[j], chunk.ids[j]
            i -= 1
        return None

    def last_entry(self) -> tuple[int, uuid.UUID] | None:
        if not self._keys:
            return None
        chunk = self._chunk(self._keys[-1])
        return chunk.offsets[-1], chunk.ids[-1]

    def segment_ids(self) -> Iterator[uuid.UUID]:
        for name in list(self._keys):
            yield from self._chunk(name).ids

    def put(self, offset: int, segment_id: uuid.UUID) -> uuid.UUID | None:
        """Maps ``offset`` to ``segment_id``; returns the id it replaced, if any."""
        if not self._keys:
            self._add_chunk(offset, _Chunk([offset], [segment_id], None, dirty=True))
            return None
        i = bisect.bisect_right(self._keys, offset) - 1
        if i < 0:  # below every chunk: the first chunk now starts here
            i = 0
            self._rename(self._keys[0], offset)
        name = self._keys[i]
        chunk = self._chunk(name)
        j = bisect.bisect_left(chunk.offsets, offset)
        chunk.dirty = True
        if j < len(chunk.offsets) and chunk.offsets[j] == offset:
            replaced = chunk.ids[j]
            chunk.ids[j] = segment_id
            return replaced
        chunk.offsets.insert(j, offset)
        chunk.ids.insert(j, segment_id)
        if len(chunk.offsets) > CHUNK_CAPACITY:
            self._split(i, appended=j == len(chunk.offsets) - 1)
        return None

    def remove(self, offset: int, segment_id: uuid.UUID) -> bool:
        """Removes the entry if ``offset`` maps to ``segment_id`` (Kafka's ``remove(key, value)``)."""
        i = bisect.bisect_right(self._keys, offset) - 1
        if i < 0:
            return False
        name = self._keys[i]
        chunk = self._chunk(name)
        j = bisect.bisect_left(chunk.offsets, offset)
        if j == len(chunk.offsets) or chunk.offsets[j] != offset or chunk.ids[j] != segment_id:
            return False
        del chunk.offsets[j], chunk.ids[j]
        chunk.dirty = True
        if not chunk.offsets:
            self._drop_chunk(i)
        return True

    def _add_chunk(self, name: int, chunk: _Chunk) -> None:
        bisect.insort(self._keys, name)
        self._chunks[name] = chunk

    def _drop_chunk(self, i: int) -> None:
        name = self._keys.pop(i)
        chunk = self._chunks.pop(name)
        if chunk.version is not None:
            self._deleted[name] = chunk.version

    def _rename(self, old: int, new: int) -> None:
        chunk = self._chunk(old)
        self._drop_chunk(self._keys.index(old))
        self._add_chunk(new, _Chunk(chunk.offsets, chunk.ids, None, dirty=True))

    def _split(self, i: int, appended: bool) -> None:
        chunk = self._chunk(self._keys[i])
        # Appending to the last chunk (the usual case: offsets grow) starts a fresh chunk so that
        # chunks fill up completely; anything else splits in half.
        cut = (
            len(chunk.offsets) - 1
            if appended and i == len(self._keys) - 1
            else len(chunk.offsets) // 2
        )
        tail = _Chunk(chunk.offsets[cut:], chunk.ids[cut:], None, dirty=True)
        del chunk.offsets[cut:], chunk.ids[cut:]
        self._add_chunk(tail.offsets[0], tail)

    def pending_ops(self) -> list[Op]:
        ops: list[Op] = [
            Delete(keys.chunk_key(self._tp, self._epoch, name), version)
            for name, version in self._deleted.items()
        ]
        for name in self._names or ():  # never listed: nothing in it was touched
            chunk = self._chunks.get(name)
            if chunk is None or not chunk.dirty:
                continue
            key = keys.chunk_key(self._tp, self._epoch, name)
            if chunk.version is None:
                ops.append(Create(key, chunk.encode()))
            else:
                ops.append(Update(key, chunk.encode(), chunk.version))
        return ops

    def mark_committed(self) -> None:
        self._deleted.clear()
        for chunk in self._chunks.values():
            if chunk.dirty:
                chunk.version = 0 if chunk.version is None else chunk.version + 1
                chunk.dirty = False


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
class _Aggregates:
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
        self.aggregates = _Aggregates(
            record.size_bytes,
            record.segment_count,
            record.copy_finished_size_bytes,
            record.copy_finished_segment_count,
        )
        self.version = version
        self.index = index
        self._unreferenced = None if unreferenced is None else _TrackedSet(unreferenced)
        self.dirty = version is None

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


@dataclass(slots=True)
class _SegmentSlot:
    metadata: RemoteLogSegmentMetadata | None
    version: int | None


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
        self._segments: dict[uuid.UUID, _SegmentSlot] = {}
        self._written: set[uuid.UUID] = set()  # segments whose slot differs from the backend
        self._epochs: dict[int, RemoteLogLeaderEpochState | None] = {}
        self._epoch_names: list[int] | None = None
        self.totals = _Aggregates(
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
        state = cls.open(backend, tp)
        if state is None:
            return None
        epoch_records = backend.get_by_prefix(keys.epochs_key(tp))
        state._epoch_names = sorted(int(name) for name in epoch_records)
        for name, stored in epoch_records.items():
            epoch = int(name)
            chunks = {
                int(n): _Chunk.decode(v)
                for n, v in backend.get_by_prefix(keys.index_key(tp, epoch)).items()
            }
            index = OffsetIndex(backend, tp, epoch, chunks, chunks)
            unreferenced = {
                uuid.UUID(hex=n) for n in backend.list_children(keys.unreferenced_key(tp, epoch))
            }
            state._epochs[epoch] = RemoteLogLeaderEpochState(
                backend,
                tp,
                epoch,
                store_pb.LeaderEpochStateRecord.FromString(stored.value),
                stored.version,
                index,
                unreferenced,
            )
        for bucket in backend.list_children(keys.segments_key(tp)):
            for name, stored in backend.get_by_prefix(f"{keys.segments_key(tp)}/{bucket}").items():
                metadata = serde.decode_segment_metadata(stored.value)
                state._segments[uuid.UUID(hex=name)] = _SegmentSlot(metadata, stored.version)
        state._complete = True
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
        slot = self._segments.get(segment_id)
        if slot is None:
            slot = self._load_segments([segment_id])[0]
        return slot.metadata

    def _load_segments(self, segment_ids: list[uuid.UUID]) -> list[_SegmentSlot]:
        missing = [i for i in segment_ids if i not in self._segments]
        if missing and not self._complete:
            tp = self.topic_id_partition
            stored = self._backend.get_many([keys.segment_key(tp, i) for i in missing])
            for segment_id, found in zip(missing, stored, strict=True):
                self._segments[segment_id] = (
                    _SegmentSlot(None, None)
                    if found is None
                    else _SegmentSlot(serde.decode_segment_metadata(found.value), found.version)
                )
        return [self._segments.get(i) or _SegmentSlot(None, None) for i in segment_ids]

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
            tp = self.topic_id_partition
            state = RemoteLogLeaderEpochState(
                self._backend,
                tp,
                leader_epoch,
                store_pb.LeaderEpochStateRecord(),
                None,
                OffsetIndex(self._backend, tp, leader_epoch, []),
                set(),
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
        return RemoteLogLeaderEpochState(
            self._backend,
            tp,
            leader_epoch,
            store_pb.LeaderEpochStateRecord.FromString(stored.value),
            stored.version,
            OffsetIndex(self._backend, tp, leader_epoch, None),
            None,
        )

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
        self._write_segment(metadata)
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
        updated = existing.create_with_updates(update)
        for epoch, start in updated.segment_leader_epochs.items():
            state = self.epoch(epoch, create=True)
            assert state is not None
            if update.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                state.handle_segment_with_copy_segment_finished_state(
                    start, segment_id, updated.leader_epoch_end_offset(epoch)
                )
            elif update.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
                state.handle_segment_with_delete_segment_started_state(start, segment_id)
            else:
                state.handle_segment_with_delete_segment_finished_state(start, segment_id)
        self._retract(existing)
        if update.state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
            # Terminal: nothing is kept, so no later load has to know how to skip it.
            self._write_segment(None, segment_id)
        else:
            self._contribute(updated)
            self._write_segment(updated)
        return True

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

    def _write_segment(
        self, metadata: RemoteLogSegmentMetadata | None, segment_id: uuid.UUID | None = None
    ) -> None:
        segment_id = metadata.remote_log_segment_id.id if metadata is not None else segment_id
        assert segment_id is not None
        slot = self._segments.get(segment_id) or _SegmentSlot(None, None)
        self._segments[segment_id] = _SegmentSlot(metadata, slot.version)
        self._written.add(segment_id)

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
        found = [slot.metadata for slot in self._load_segments(ordered)]
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
        for segment_id in sorted(self._written):
            slot = self._segments[segment_id]
            key = keys.segment_key(tp, segment_id)
            if slot.metadata is None:
                if slot.version is not None:
                    ops.append(Delete(key, slot.version))
            elif slot.version is None:
                ops.append(Create(key, serde.encode_segment_metadata(slot.metadata)))
            else:
                ops.append(Update(key, serde.encode_segment_metadata(slot.metadata), slot.version))
        for state in self._epochs.values():
            if state is not None:
                ops.extend(state.pending_ops())
        return ops

    def mark_committed(self) -> None:
        """The ops from :meth:`pending_ops` were applied: adopt the versions they produced."""
        if self.dirty:
            self.version = 0 if self.version is None else self.version + 1
            self.dirty = False
        for segment_id in self._written:
            slot = self._segments[segment_id]
            if slot.metadata is None:
                del self._segments[segment_id]
                if not self._complete:
                    self._segments[segment_id] = _SegmentSlot(None, None)
            else:
                version = 0 if slot.version is None else slot.version + 1
                self._segments[segment_id] = _SegmentSlot(slot.metadata, version)
        self._written.clear()
        for state in self._epochs.values():
            if state is not None:
                state.mark_committed()
