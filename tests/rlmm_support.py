"""Builders and fixtures shared by the RemoteLogMetadataManager tests."""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tiered import rlmm
from tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tiered.rlmm.backend import MetadataStorageBackend, Op
from tiered.rlmm.manager import StoreRemoteLogMetadataManager

SEG_SIZE = 1024 * 1024
BROKER_0 = 0
BROKER_1 = 1

COPY_SEGMENT_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
COPY_SEGMENT_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
DELETE_SEGMENT_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED
DELETE_SEGMENT_FINISHED = RemoteLogSegmentState.DELETE_SEGMENT_FINISHED


def new_tp(topic: str = "foo", partition: int = 0) -> TopicIdPartition:
    return TopicIdPartition(uuid.uuid4(), topic, partition)


def segment(
    tp: TopicIdPartition,
    epochs: dict[int, int],
    start: int,
    end: int,
    size: int = SEG_SIZE,
    custom: CustomMetadata | None = None,
    tiered_epoch: int = 0,
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId.generate_new(tp),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=-1,
        broker_id=BROKER_0,
        event_timestamp_ms=int(time.time() * 1000),
        segment_size_in_bytes=size,
        segment_leader_epochs=epochs,
        custom_metadata=custom,
        tiered_epoch=tiered_epoch,
    )


def update_of(
    metadata: RemoteLogSegmentMetadata,
    state: RemoteLogSegmentState,
    custom: CustomMetadata | None = None,
) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(
        remote_log_segment_id=metadata.remote_log_segment_id,
        event_timestamp_ms=int(time.time() * 1000),
        custom_metadata=custom,
        state=state,
        broker_id=BROKER_1,
    )


def upsert(
    manager: StoreRemoteLogMetadataManager,
    tp: TopicIdPartition,
    epochs: dict[int, int],
    start: int,
    end: int,
    state: RemoteLogSegmentState,
    size: int = SEG_SIZE,
) -> RemoteLogSegmentMetadata:
    """Adds a segment and moves it straight to ``state`` (Kafka's ``upsertSegmentState``)."""
    metadata = segment(tp, epochs, start, end, size)
    manager.add_remote_log_segment_metadata(metadata)
    if state is COPY_SEGMENT_STARTED:
        return metadata
    current = metadata
    for step in (COPY_SEGMENT_FINISHED, DELETE_SEGMENT_STARTED, DELETE_SEGMENT_FINISHED):
        if state is DELETE_SEGMENT_STARTED and step is COPY_SEGMENT_FINISHED:
            continue  # Kafka's lifecycle test goes STARTED -> DELETE_SEGMENT_STARTED directly
        update = update_of(current, step)
        manager.update_remote_log_segment_metadata(update)
        current = current.create_with_updates(update)
        if step is state:
            break
    return current


def listing(
    manager: StoreRemoteLogMetadataManager, tp: TopicIdPartition, epoch: int | None = None
) -> list[RemoteLogSegmentMetadata]:
    return list(manager.list_remote_log_segments(tp, epoch))


@dataclass
class Store:
    """One backing store and a way to open managers on it, as separate processes would."""

    kind: str
    config: dict[str, str]
    opened: list[StoreRemoteLogMetadataManager] = field(default_factory=list)

    def manager(self, broker_id: int = BROKER_0, **kwargs: object) -> StoreRemoteLogMetadataManager:
        base = rlmm.create({**self.config, "broker.id": str(broker_id)})
        if kwargs:
            base.close()
            base = StoreRemoteLogMetadataManager(
                rlmm.create_backend(self.config),
                broker_id=broker_id,
                **kwargs,  # type: ignore[arg-type]
            )
        self.opened.append(base)
        return base

    def backend(self) -> MetadataStorageBackend:
        return rlmm.create_backend(self.config)

    def close(self) -> None:
        for manager in self.opened:
            manager.close()


def make_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if kind == "sqlite":
        return Store(
            kind, {"rlmm.backend": "sqlite", "rlmm.sqlite.path": str(tmp_path / "rlmm.db")}
        )
    connect = request.getfixturevalue("zk_connect")
    return Store(kind, {"rlmm.backend": "zookeeper", "rlmm.zookeeper.connect": connect})


@pytest.fixture(params=["sqlite", "zookeeper"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = make_store(request.param, tmp_path, request)
    try:
        yield s
    finally:
        s.close()


class RecordingBackend(MetadataStorageBackend):
    """Passes everything through and records each multi, to assert what a write touches."""

    def __init__(self, inner: MetadataStorageBackend) -> None:
        self.inner = inner
        self.multis: list[list[Op]] = []
        self.before_multi: Callable[[Sequence[Op]], None] | None = None

    def get(self, key: str):  # type: ignore[no-untyped-def]
        return self.inner.get(key)

    def get_many(self, keys: Sequence[str]):  # type: ignore[no-untyped-def]
        return self.inner.get_many(keys)

    def get_by_prefix(self, parent: str):  # type: ignore[no-untyped-def]
        return self.inner.get_by_prefix(parent)

    def list_children(self, parent: str) -> list[str]:
        return self.inner.list_children(parent)

    def multi(self, ops: Sequence[Op]) -> None:
        if self.before_multi is not None:
            hook, self.before_multi = self.before_multi, None
            hook(ops)
        self.multis.append(list(ops))
        self.inner.multi(ops)

    def remove_by_prefix(self, key: str) -> None:
        self.inner.remove_by_prefix(key)

    def watch(self, key, callback) -> None:  # type: ignore[no-untyped-def]
        self.inner.watch(key, callback)

    def unwatch(self, key: str) -> None:
        self.inner.unwatch(key)

    def deliver_watches(self, key: str) -> None:
        self.inner.deliver_watches(key)

    def close(self) -> None:
        self.inner.close()


class FailingCommit:
    """A sqlite3 connection (a ``SqliteBackend``'s ``_db``) whose next COMMIT fails, as a full
    disk or an I/O error can make it."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.armed = True

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.armed:
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")
        return self._db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)
