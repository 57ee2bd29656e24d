"""Snapshots of the KRaft image: the log's own (``Snapshotter``), written on a thread every
``snapshot_interval_records`` records so that writes are not held up by encoding the image, and
the image as one batch kept in memory for followers far behind (``SnapshotCache``)."""

from __future__ import annotations

import logging
import threading
import time

from controller.store.base import MetadataStoreError
from controller.store.kraft.active_log import ActiveLog
from controller.store.kraft.heap import release_free_heap
from controller.store.kraft_log import MetadataLog, MetadataLogError
from tiered.cluster import serde
from tiered.cluster.model import MetadataImage
from tiered.rpc.v1 import metadata_pb2

__all__ = [
    "DEFAULT_SNAPSHOT_INTERVAL_RECORDS",
    "SNAPSHOT_CACHE_S",
    "SnapshotCache",
    "Snapshotter",
]

logger = logging.getLogger(__name__)

DEFAULT_SNAPSHOT_INTERVAL_RECORDS = 20_000
SNAPSHOT_CACHE_S = 30.0
"""How long the image built for followers far behind is kept: long enough for brokers that
start together to share it, short enough not to hold an image-sized batch for good."""


class Snapshotter:
    """Writes snapshots of ``active``'s image into its log: on a thread of its own once
    ``interval_records`` records were committed since the last one, or at once (``snapshot_now``).
    One at a time; a snapshot that falls due while one runs waits for the next commit. Its
    methods but ``snapshot_now`` and ``wait`` are called with ``active.mu`` held."""

    def __init__(self, active: ActiveLog, interval_records: int) -> None:
        self._active = active
        self.interval_records = interval_records
        self._records_since_snapshot = 0
        self._thread: threading.Thread | None = None

    def restart(self, records_since_snapshot: int) -> None:
        """After an election: the log holds ``records_since_snapshot`` records past its newest
        snapshot."""
        self._records_since_snapshot = records_since_snapshot

    def committed(self, log: MetadataLog, records: int) -> None:
        """``records`` more were committed to ``log``: starts a snapshot when one is due."""
        self._records_since_snapshot += records
        if self._records_since_snapshot >= self.interval_records:
            self._start(log)

    def _start(self, log: MetadataLog) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        image = self._active.image.copy()
        self._records_since_snapshot = 0
        self._thread = threading.Thread(
            target=self._write_in_background,
            args=(log, image),
            name="metadata-snapshot",
            daemon=True,
        )
        self._thread.start()

    @staticmethod
    def _write_in_background(log: MetadataLog, image: MetadataImage) -> None:
        started = time.monotonic()
        try:
            log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
        except Exception:
            logger.exception("metadata snapshot at offset %d failed", image.offset)
            return
        release_free_heap()  # the snapshot's batch
        logger.info(
            "metadata snapshot at offset %d (%d topics) written in %.3fs",
            image.offset,
            len(image.topics),
            time.monotonic() - started,
        )

    def snapshot_now(self) -> int:
        """Writes a snapshot of the current image synchronously and returns its offset;
        ``ControllerFencedError`` if not active, ``MetadataStoreError`` if the write fails."""
        with self._active.mu:
            log = self._active.require_active()
            self.stop()
            image = self._active.image.copy()
            self._records_since_snapshot = 0
        try:
            log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
        except (OSError, MetadataLogError) as exc:
            raise MetadataStoreError(f"metadata snapshot failed: {exc}") from exc
        return image.offset

    def wait(self) -> None:
        """Waits for a snapshot in progress to finish."""
        with self._active.mu:
            self.stop()

    def stop(self) -> None:
        """Waits for a snapshot in progress to finish (on resignation, before the log closes).
        The thread takes the log's own lock only, never ``active.mu``, so holding it is safe."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class SnapshotCache:
    """The image as one batch, built for a follower that starts or is far behind and kept for
    those that ask for it meanwhile, ``SNAPSHOT_CACHE_S`` at most. Called with the active log's
    ``mu`` held."""

    def __init__(self) -> None:
        self._batch: metadata_pb2.MetadataRecordBatch | None = None
        self._cached_at = 0.0

    def at(self, offset: int) -> metadata_pb2.MetadataRecordBatch | None:
        """The kept batch if it is the image at ``offset``."""
        batch = self._batch
        return batch if batch is not None and batch.base_offset == offset else None

    def keep(self, batch: metadata_pb2.MetadataRecordBatch) -> None:
        """Keeps ``batch`` unless a newer image is kept already."""
        if self._batch is None or self._batch.base_offset < batch.base_offset:
            self._batch, self._cached_at = batch, time.monotonic()

    def expire(self) -> None:
        """Drops the batch once it was kept ``SNAPSHOT_CACHE_S``."""
        if self._batch is not None and time.monotonic() - self._cached_at > SNAPSHOT_CACHE_S:
            self._batch = None
            release_free_heap()

    def clear(self) -> None:
        self._batch = None
