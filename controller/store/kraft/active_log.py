"""What the KRaft store's parts share: the log this process writes while it is the active
controller, the image its records make, the one lock that orders both, and the fence every
write and follower read passes (``require_active``)."""

from __future__ import annotations

import threading
from pathlib import Path

from controller.store.base import ControllerFencedError
from controller.store.kraft_log import MetadataLog
from tiered.cluster.model import MetadataImage

__all__ = ["ActiveLog"]


class ActiveLog:
    """``log`` is open for writing while this process holds ``directory``'s lock, None otherwise;
    ``image`` is what the log's records make, its offset the last record's. ``mu`` guards both:
    every part reads and changes them under it. ``appended`` (a condition on ``mu``) is notified
    after each commit and on resignation, so that a follower waiting for records wakes up."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.mu = threading.RLock()
        self.appended = threading.Condition(self.mu)
        self.log: MetadataLog | None = None
        self.image = MetadataImage()

    @property
    def is_active(self) -> bool:
        log = self.log
        return log is not None and log.holds_lock

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (0 before the first election of a fresh log)."""
        with self.mu:
            return self.image.offset + 1

    def require_active(self) -> MetadataLog:
        """The log to write or read, or ``ControllerFencedError`` unless this process holds its
        lock. Callers hold ``mu``."""
        log = self.log
        if log is None or not log.holds_lock:
            raise ControllerFencedError(
                f"not the active controller of {self.directory} (its lock is not held here)"
            )
        return log
