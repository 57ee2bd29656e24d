"""One leader epoch's offset index (Kafka's ``offsetToId``): start offset -> segment id, stored as
bounded chunks so that a write rewrites one chunk, not the whole index."""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tiered.api import TopicIdPartition
from tiered.rlmm import keys
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

CHUNK_CAPACITY = 256
"""Index entries per chunk: about 6.5 KB of protobuf. Appending rewrites the last chunk, so small
chunks keep writes cheap; a million segments still make only ~4,000 chunk names per epoch."""


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

    @classmethod
    def load(
        cls, backend: MetadataStorageBackend, tp: TopicIdPartition, leader_epoch: int
    ) -> OffsetIndex:
        """Every chunk of the epoch's index, read now (for a leader's in-memory cache)."""
        chunks = {
            int(n): _Chunk.decode(v)
            for n, v in backend.get_by_prefix(keys.index_key(tp, leader_epoch)).items()
        }
        return cls(backend, tp, leader_epoch, chunks, chunks)

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

    def chunks_at_or_below(self, offset: int) -> Iterator[list[tuple[int, uuid.UUID]]]:
        """The entries with start offsets <= ``offset``, greatest first, a chunk at a time (the
        first holds the floor entry): a reader passing over entries reads each chunk once."""
        i = bisect.bisect_right(self._keys, offset) - 1
        while i >= 0:
            chunk = self._chunk(self._keys[i])
            j = bisect.bisect_right(chunk.offsets, offset)
            if j:
                yield list(zip(chunk.offsets[j - 1 :: -1], chunk.ids[j - 1 :: -1], strict=True))
            i -= 1

    def first_entry(self) -> tuple[int, uuid.UUID] | None:
        if not self._keys:
            return None
        chunk = self._chunk(self._keys[0])
        return chunk.offsets[0], chunk.ids[0]

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
