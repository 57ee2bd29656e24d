"""``KRaftMetadataStore``: the ``MetadataStore`` contract over an embedded metadata log, and the
``MetadataLogSource`` brokers follow, put together from its parts (leadership, fenced writes,
snapshots, follower reads, replay)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from controller.store.base import MetadataLogSource, MetadataStore
from controller.store.kraft.active_log import ActiveLog
from controller.store.kraft.follower_reads import (
    DEFAULT_MAX_BATCHES_PER_READ,
    DEFAULT_MAX_BYTES_PER_READ,
    FollowerReads,
)
from controller.store.kraft.leadership import Leadership
from controller.store.kraft.replay import read_only_replay
from controller.store.kraft.snapshots import (
    DEFAULT_SNAPSHOT_INTERVAL_RECORDS,
    SnapshotCache,
    Snapshotter,
)
from controller.store.kraft.writes import FencedWriter
from controller.store.kraft_log import DEFAULT_SEGMENT_BYTES
from tiered.cluster.model import BrokerRegistration, MetadataImage
from tiered.properties import int_property
from tiered.rpc.v1 import metadata_pb2

__all__ = ["KRaftMetadataStore"]


class KRaftMetadataStore(MetadataStore, MetadataLogSource):
    """The ``MetadataStore`` contract over a ``MetadataLog`` in ``directory``, and a
    ``MetadataLogSource`` for the controller's FetchMetadata stream (``read_batches``; also
    ``end_offset``). Liveness of brokers comes from their heartbeats to the controller, not from
    here; ``leadership_lost`` is never set while this process holds the lock.
    """

    mode = "kraft"

    def __init__(
        self,
        directory: Path | str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        snapshot_interval_records: int = DEFAULT_SNAPSHOT_INTERVAL_RECORDS,
        lock_poll_s: float = 0.1,
    ) -> None:
        super().__init__()
        if snapshot_interval_records < 1:
            raise ValueError("snapshot_interval_records must be >= 1")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.snapshot_interval_records = snapshot_interval_records
        self.lock_poll_s = lock_poll_s
        self._active = ActiveLog(self.directory)
        self._snapshotter = Snapshotter(self._active, snapshot_interval_records)
        cache = SnapshotCache()
        self.writes: FencedWriter = FencedWriter(self._active, self._snapshotter)
        self._follower_reads = FollowerReads(self._active, cache, snapshot_interval_records)
        self._leadership = Leadership(
            self._active,
            self.writes,
            self._snapshotter,
            cache,
            self.leadership_lost,
            segment_bytes=segment_bytes,
            lock_poll_s=lock_poll_s,
        )

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> KRaftMetadataStore:
        """``metadata.log.dir`` (required), ``metadata.log.segment.bytes`` (default 64 MiB),
        ``metadata.log.snapshot.interval.records`` (default 20000)."""
        directory = (config.get("metadata.log.dir") or "").strip()
        if not directory:
            raise ValueError("metadata.log.dir is required for metadata.store=kraft")
        return cls(
            directory,
            segment_bytes=int_property(
                config, "metadata.log.segment.bytes", DEFAULT_SEGMENT_BYTES, 1024
            ),
            snapshot_interval_records=int_property(
                config,
                "metadata.log.snapshot.interval.records",
                DEFAULT_SNAPSHOT_INTERVAL_RECORDS,
                1,
            ),
        )

    # ----------------------------------------------------------------------------- leadership

    @property
    def is_active(self) -> bool:
        return self._active.is_active

    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        return self._leadership.elect(controller_id, endpoint, stop)

    def resign(self) -> None:
        self._leadership.resign()

    def active_controller(self) -> tuple[int, str] | None:
        """From ``controller.json``, written by each newly elected controller; None if nobody
        holds the lock (the last active controller died or resigned) or nobody was ever elected."""
        return self._leadership.active_controller()

    # ----------------------------------------------------------------------------- reads

    def load(self) -> MetadataImage:
        """A copy of the image while active; otherwise (a standby) a replay of the log without
        its lock."""
        with self._active.mu:
            if self._active.log is not None:
                return self._active.image.copy()
        return read_only_replay(self.directory, self.segment_bytes)

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (0 before the first election of a fresh log)."""
        return self._active.end_offset

    def read_batches(
        self,
        from_offset: int,
        max_wait_s: float,
        *,
        max_batches: int = DEFAULT_MAX_BATCHES_PER_READ,
        max_bytes: int = DEFAULT_MAX_BYTES_PER_READ,
    ) -> tuple[list[metadata_pb2.MetadataRecordBatch], bool]:
        """For FetchMetadata (``FollowerReads.read_batches``)."""
        return self._follower_reads.read_batches(
            from_offset, max_wait_s, max_batches=max_batches, max_bytes=max_bytes
        )

    # ----------------------------------------------------------------------------- brokers

    def register_broker(self, registration: BrokerRegistration) -> None:
        self.writes.register_broker(registration)

    # ----------------------------------------------------------------------------- snapshots

    def snapshot_now(self) -> int:
        """Writes a snapshot of the current image synchronously; returns its offset. For tests
        and operators; the store snapshots on its own every ``snapshot_interval_records``."""
        return self._snapshotter.snapshot_now()

    def wait_for_snapshot(self) -> None:
        """Waits for a snapshot in progress to finish (tests)."""
        self._snapshotter.wait()

    # ----------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        self._leadership.close()
