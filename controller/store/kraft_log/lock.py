"""The metadata log directory's OS file lock: whichever process holds it is the log's writer."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path

LOCK_FILE = ".lock"


class DirectoryLock:
    """The exclusive flock on ``{directory}/.lock``. ``guard`` is the owning log's mutex: the
    lock's state changes under it, so an append that found the lock held completes before a
    ``release`` gives it up."""

    def __init__(self, directory: Path, guard: threading.RLock) -> None:
        self.directory = directory
        self.path = directory / LOCK_FILE
        self._guard = guard
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, stop: threading.Event, poll_s: float) -> bool:
        """Takes the directory's exclusive flock, polling every ``poll_s`` until it is free;
        False if ``stop`` is set first. The lock lasts until ``release`` or this process
        dies (the kernel drops it then, which is how a standby takes over)."""
        with self._guard:
            if self._fd is not None:
                return True
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while not stop.is_set():
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    stop.wait(poll_s)
                    continue
                with contextlib.suppress(OSError):  # the pid is for humans only
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                with self._guard:
                    self._fd, fd = fd, -1
                return True
            return False
        finally:
            if fd >= 0:
                os.close(fd)

    def release(self) -> None:
        """Idempotent."""
        with self._guard:
            fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def is_held_elsewhere(self) -> bool:
        """Whether some other open file description (another process, or another ``MetadataLog``
        of this one) holds the lock. A probe with a shared lock, so probes never
        block writers for longer than a poll interval of theirs."""
        if self._fd is not None:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # also drops the probe's shared lock
        return False
