"""Leadership of the KRaft store: election, resignation, and who the active controller is.

There is no consensus: the active controller is whoever holds the log directory's OS lock, held
from ``elect`` to ``resign`` or process death, and a standby on the same host (same directory)
takes over when the kernel drops the lock of a dead one. An election recovers the image from the
log, then commits a ControllerEpochRecord raising the epoch and names itself in
``controller.json`` for those that cannot hold the lock. ``leadership_lost`` is never set while
this process holds the lock.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

from controller.store.base import MetadataStoreError
from controller.store.kraft.active_log import ActiveLog
from controller.store.kraft.replay import recover
from controller.store.kraft.snapshots import SnapshotCache, Snapshotter
from controller.store.kraft.writes import FencedWriter
from controller.store.kraft_log import MetadataLog
from tiered.cluster import serde
from tiered.durable import atomic_write

__all__ = ["CONTROLLER_FILE", "Leadership"]

logger = logging.getLogger(__name__)

CONTROLLER_FILE = "controller.json"


class Leadership:
    """This process's leadership of ``active``'s directory. An election installs the log and its
    image in ``active`` and restarts ``snapshotter``'s count; a resignation waits for its
    snapshot, drops ``cache`` and wakes followers. ``lost`` is the store's ``leadership_lost``
    (cleared by each election)."""

    def __init__(
        self,
        active: ActiveLog,
        writer: FencedWriter,
        snapshotter: Snapshotter,
        cache: SnapshotCache,
        lost: threading.Event,
        *,
        segment_bytes: int,
        lock_poll_s: float,
    ) -> None:
        self._active = active
        self._writer = writer
        self._snapshotter = snapshotter
        self._cache = cache
        self._lost = lost
        self._segment_bytes = segment_bytes
        self._lock_poll_s = lock_poll_s
        self._closed = False

    @property
    def _directory(self) -> Path:
        return self._active.directory

    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        """``MetadataStore.elect``: waits for the lock (None if ``stop`` is set first), recovers
        the image unless it holds the log already, and commits the next controller epoch."""
        active = self._active
        with active.mu:
            if self._closed:
                raise MetadataStoreError("the metadata store is closed")
            log = active.log
        if log is None:
            log = MetadataLog(self._directory, segment_bytes=self._segment_bytes)
            try:
                if not log.acquire_lock(stop, self._lock_poll_s):
                    return None
            except OSError as exc:
                raise MetadataStoreError(f"cannot lock {log.lock_path}: {exc}") from exc
            try:
                image = recover(log)
            except BaseException:
                log.close()
                log.release_lock()
                raise
            with active.mu:
                active.log, active.image = log, image
                self._cache.clear()
                self._snapshotter.restart(image.offset - log.snapshot_offset)
        with active.mu:
            epoch = active.image.controller_epoch + 1
            try:
                self._writer.commit([serde.controller_epoch_record(controller_id, epoch, endpoint)])
                self._write_controller_file(controller_id, endpoint, epoch)
            except BaseException:
                self.resign_locked()
                raise
            self._lost.clear()
            logger.info(
                "controller %d is active with controller epoch %d (metadata log %s, offset %d)",
                controller_id,
                epoch,
                self._directory,
                active.image.offset,
            )
            return epoch

    def _write_controller_file(self, controller_id: int, endpoint: str, epoch: int) -> None:
        """``controller.json``: how standbys and tools, which cannot hold the lock, name the
        active controller."""
        data = {"controller_id": controller_id, "endpoint": endpoint, "controller_epoch": epoch}
        try:
            atomic_write(self._directory / CONTROLLER_FILE, json.dumps(data).encode())
        except OSError as exc:
            raise MetadataStoreError(f"cannot write {CONTROLLER_FILE}: {exc}") from exc

    def resign(self) -> None:
        with self._active.mu:
            self.resign_locked()

    def resign_locked(self) -> None:
        """Closes the log and releases its lock, if held. Caller holds ``active.mu``."""
        active = self._active
        log, active.log = active.log, None
        self._cache.clear()
        active.appended.notify_all()
        if log is None:
            return
        self._snapshotter.stop()
        log.close()
        log.release_lock()
        logger.info("resigned: released %s", log.lock_path)

    def close(self) -> None:
        """Resigns; ``elect`` refuses from then on."""
        with self._active.mu:
            self.resign_locked()
            self._closed = True

    def active_controller(self) -> tuple[int, str] | None:
        """From ``controller.json``, written by each newly elected controller; None if nobody
        holds the lock (the last active controller died or resigned) or nobody was ever elected."""
        with self._active.mu:
            if (
                self._active.log is None
                and not MetadataLog(self._directory).lock_is_held_elsewhere()
            ):
                return None
        try:
            data = json.loads((self._directory / CONTROLLER_FILE).read_text())
            return int(data["controller_id"]), str(data["endpoint"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MetadataStoreError(f"cannot read {CONTROLLER_FILE}: {exc}") from exc
