"""The segment metadata records of one partition: read from the backend on demand (or all at
once for a leader), changed in memory by events, and written back as ops of the partition's
commit."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from tiered.rlmm import keys, serde
from tiered.rlmm.backend import Create, Delete, MetadataStorageBackend, Op, Update


@dataclass(slots=True)
class _SegmentSlot:
    metadata: RemoteLogSegmentMetadata | None
    version: int | None


class SegmentRecords:
    """The segments of one partition read so far, by id. A slot without metadata is a segment the
    backend does not hold (or one deleted in memory, until the commit)."""

    def __init__(
        self, backend: MetadataStorageBackend, tp: TopicIdPartition, complete: bool
    ) -> None:
        """``complete``: every record of the partition is loaded, so absence means absence."""
        self._backend = backend
        self._tp = tp
        self._complete = complete
        self._segments: dict[uuid.UUID, _SegmentSlot] = {}
        self._written: set[uuid.UUID] = set()  # segments whose slot differs from the backend

    def load_all(self) -> None:
        """Reads every segment record of the partition."""
        tp = self._tp
        for bucket in self._backend.list_children(keys.segments_key(tp)):
            for name, stored in self._backend.get_by_prefix(
                f"{keys.segments_key(tp)}/{bucket}"
            ).items():
                metadata = serde.decode_segment_metadata(stored.value)
                self._segments[uuid.UUID(hex=name)] = _SegmentSlot(metadata, stored.version)

    def segment(self, segment_id: uuid.UUID) -> RemoteLogSegmentMetadata | None:
        slot = self._segments.get(segment_id)
        if slot is None:
            slot = self._load_segments([segment_id])[0]
        return slot.metadata

    def segments(self, segment_ids: list[uuid.UUID]) -> list[RemoteLogSegmentMetadata | None]:
        """The metadata of each id, in order, reading the missing ones in one call."""
        return [slot.metadata for slot in self._load_segments(segment_ids)]

    def _load_segments(self, segment_ids: list[uuid.UUID]) -> list[_SegmentSlot]:
        missing = [i for i in segment_ids if i not in self._segments]
        if missing and not self._complete:
            tp = self._tp
            stored = self._backend.get_many([keys.segment_key(tp, i) for i in missing])
            for segment_id, found in zip(missing, stored, strict=True):
                self._segments[segment_id] = (
                    _SegmentSlot(None, None)
                    if found is None
                    else _SegmentSlot(serde.decode_segment_metadata(found.value), found.version)
                )
        return [self._segments.get(i) or _SegmentSlot(None, None) for i in segment_ids]

    def write(
        self, metadata: RemoteLogSegmentMetadata | None, segment_id: uuid.UUID | None = None
    ) -> None:
        """Sets the segment's record to ``metadata``; None (with ``segment_id``) deletes it."""
        segment_id = metadata.remote_log_segment_id.id if metadata is not None else segment_id
        assert segment_id is not None
        slot = self._segments.get(segment_id) or _SegmentSlot(None, None)
        self._segments[segment_id] = _SegmentSlot(metadata, slot.version)
        self._written.add(segment_id)

    def pending_ops(self) -> list[Op]:
        ops: list[Op] = []
        for segment_id in sorted(self._written):
            slot = self._segments[segment_id]
            key = keys.segment_key(self._tp, segment_id)
            if slot.metadata is None:
                if slot.version is not None:
                    ops.append(Delete(key, slot.version))
            elif slot.version is None:
                ops.append(Create(key, serde.encode_segment_metadata(slot.metadata)))
            else:
                ops.append(Update(key, serde.encode_segment_metadata(slot.metadata), slot.version))
        return ops

    def mark_committed(self) -> None:
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
