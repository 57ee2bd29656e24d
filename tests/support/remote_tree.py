"""Remote trees laid out as :mod:`tiered.rsm.layout` says, for the bulk delete tests, and ways to
look at them and to make objects undeletable without privileges (the tests run as root). A tree
lives in a local directory or in an :class:`ObjectStore` (an S3 bucket)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Protocol

from tiered.api import RemoteStorageBulkDeleter, TopicIdPartition

TOPIC = "orders"
SUFFIXES = ("log", "index", "timeindex", "epochs")


class ObjectStore(Protocol):
    """Objects by key below a root, e.g. tests.support.s3.S3Store."""

    def write_many(self, objects: dict[str, bytes]) -> None: ...

    def keys(self) -> set[str]: ...


def write_objects(root: Path | ObjectStore, objects: dict[str, bytes]) -> None:
    if isinstance(root, Path):
        for key, data in objects.items():
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            (root / key).write_bytes(data)
    else:
        root.write_many(objects)


def build_tree(
    root: Path | ObjectStore,
    topic_id: uuid.UUID,
    partitions: tuple[int, ...] = (0, 1),
    epochs: tuple[int, ...] = (0, 1, 2),
    segments: int = 3,
    topic: str = TOPIC,
) -> dict[tuple[int, int], list[str]]:
    """Objects with the real naming; returns the keys by (partition, epoch)."""
    keys: dict[tuple[int, int], list[str]] = {}
    for partition in partitions:
        for epoch in epochs:
            found = keys.setdefault((partition, epoch), [])
            for n in range(segments):
                segment_id = uuid.uuid4()
                for suffix in SUFFIXES:
                    name = f"{n * 100:020d}-{segment_id}.{suffix}"
                    found.append(f"{topic}-{topic_id}/{partition}/te={epoch}/{name}")
    write_objects(root, {key: b"x" for found in keys.values() for key in found})
    return keys


def listed(
    storage: RemoteStorageBulkDeleter,
    topic_id: uuid.UUID,
    partition: int,
    tiered_epoch: int,
    topic: str = TOPIC,
) -> list[str]:
    """Every handle ``storage`` lists for the partition below ``tiered_epoch``, batches joined."""
    tp = TopicIdPartition(topic_id, topic, partition)
    return [h for batch in storage.list_objects_below_epoch(tp, tiered_epoch) for h in batch]


def remaining(root: Path | ObjectStore) -> set[str]:
    if not isinstance(root, Path):
        return root.keys()
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def block(root: Path, key: str) -> None:
    """Replaces the object ``key`` by a non-empty directory: no delete of it as a file works."""
    path = root / key
    path.unlink()
    path.mkdir()
    (path / "inside").write_bytes(b"x")


def unblock(root: Path, key: str) -> None:
    path = root / key
    (path / "inside").unlink()
    path.rmdir()
