"""RemoteStorageManagers that store objects their own way, for the bulk delete tests, loaded
through ``remote.log.storage.manager.class.name``:

- :class:`FlatRsm` keeps every object as one file of a flat directory, ``{test.flat.dir}/objects/
  {topic_id}.{partition}.e{tiered_epoch}.{start_offset}.{segment_id}.{suffix}`` (no ``te=``
  prefixes), and implements the bulk delete capability over it. Its handles are the file
  names (a segment's four are named from its metadata, the rest listed). Every bulk call is
  recorded, wherever it runs (the controller or a Spark executor), as a line of
  ``{test.flat.dir}/calls.log``: ``list {topic_id}-{partition} {tiered_epoch} {pid}`` and
  ``delete {count} {pid}``.
- :class:`CopyOnlyRsm` stores the same way but lacks the capability.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tiered.api import (
    CustomMetadata,
    DeleteOutcome,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteObjectDeleter,
    RemoteResourceNotFoundException,
    RemoteStorageBulkDeleter,
    RemoteStorageManager,
    TopicIdPartition,
)

DIR_CONFIG = "test.flat.dir"
COPIED_SUFFIXES = ("log", IndexType.OFFSET.value, IndexType.TIMESTAMP.value, "epochs")
LIST_BATCH = 7  # small, so that a partition's listing comes in several batches
_NAME = re.compile(r"(?P<topic_id>[0-9a-f-]{36})\.(?P<partition>\d+)\.e(?P<epoch>\d+)\..+")


def _record(directory: Path, line: str) -> None:
    with (directory / "calls.log").open("a", encoding="utf-8") as f:
        f.write(f"{line} {os.getpid()}\n")


def recorded_calls(directory: Path) -> list[list[str]]:
    """The calls recorded so far, each line split into words."""
    path = directory / "calls.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


class CopyOnlyRsm(RemoteStorageManager):
    def __init__(self, config: Mapping[str, object]) -> None:
        self.directory = Path(str(config[DIR_CONFIG]))
        self.objects = self.directory / "objects"
        self.objects.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def name_of(metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        tp = metadata.topic_id_partition
        return (
            f"{tp.topic_id}.{tp.partition}.e{metadata.tiered_epoch}.{metadata.start_offset}."
            f"{metadata.remote_log_segment_id.id}.{suffix}"
        )

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> CustomMetadata | None:
        sources = {
            IndexType.OFFSET.value: Path(segment_data.offset_index).read_bytes(),
            IndexType.TIMESTAMP.value: Path(segment_data.time_index).read_bytes(),
            IndexType.LEADER_EPOCH.value: bytes(segment_data.leader_epoch_index),
            "log": Path(segment_data.log_segment).read_bytes(),
        }
        for suffix, data in sources.items():
            (self.objects / self.name_of(metadata, suffix)).write_bytes(data)
        return None

    def _read(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> bytes:
        try:
            return (self.objects / self.name_of(metadata, suffix)).read_bytes()
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundException(str(e)) from e

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        data = self._read(metadata, "log")
        return data[start_position : None if end_position is None else end_position + 1]

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self._read(metadata, index_type.value)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        for suffix in ("log", *(t.value for t in IndexType)):
            (self.objects / self.name_of(metadata, suffix)).unlink(missing_ok=True)


class FlatRsm(CopyOnlyRsm, RemoteStorageBulkDeleter):
    def list_objects_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> Iterator[list[str]]:
        tp = topic_id_partition
        _record(self.directory, f"list {tp.topic_id}-{tp.partition} {tiered_epoch}")
        names = []
        for name in sorted(p.name for p in self.objects.iterdir()):
            match = _NAME.fullmatch(name)
            if (
                match is not None
                and match["topic_id"] == str(tp.topic_id)
                and int(match["partition"]) == tp.partition
                and int(match["epoch"]) < tiered_epoch
            ):
                names.append(name)
        for start in range(0, len(names), LIST_BATCH):
            yield names[start : start + LIST_BATCH]

    def object_handles_of(self, segments: Sequence[RemoteLogSegmentMetadata]) -> list[str]:
        return [self.name_of(m, suffix) for m in segments for suffix in COPIED_SUFFIXES]

    def objects_per_segment(self) -> int:
        return len(COPIED_SUFFIXES)

    def object_deleter(self) -> FlatDeleter:
        return FlatDeleter(str(self.directory))


@dataclass(frozen=True)
class FlatDeleter(RemoteObjectDeleter):
    directory: str

    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        directory = Path(self.directory)
        _record(directory, f"delete {len(handles)}")
        deleted = missing = 0
        for name in handles:
            try:
                (directory / "objects" / name).unlink()
            except FileNotFoundError:
                missing += 1
            else:
                deleted += 1
        return DeleteOutcome(deleted, missing)
