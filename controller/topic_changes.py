"""A version number of what a describe of topics shows, raised by every change to it (a topic
written, a broker's disable ack counted, a delete job's progress persisted), for watchers that
wait for the next change instead of polling. Thread-safe; its lock is its own, so raising it
under the term's lock costs a watcher nothing until that lock is released."""

from __future__ import annotations

import threading

__all__ = ["TopicChanges"]


class TopicChanges:
    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._version = 0

    @property
    def version(self) -> int:
        return self._version

    def changed(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    def wait(self, seen: int, timeout_s: float, gone: threading.Event) -> int:
        """Waits up to ``timeout_s`` for a version other than ``seen``, or for ``gone`` (the
        watcher's client left: set it, then ``wake``); returns the current version."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != seen or gone.is_set(), timeout_s)
            return self._version

    def wake(self) -> None:
        """Wakes every waiter to look at its ``gone`` again."""
        with self._changed:
            self._changed.notify_all()
