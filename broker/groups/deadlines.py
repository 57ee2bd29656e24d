"""The group coordinator's one timer: keyed deadlines (a member's session, a group's join and
sync phases, the initial rebalance delay), as Kafka's coordinator timer keys them.

Scheduling a key again replaces its deadline; cancelling drops it. One thread runs the actions
that fall due, in deadline order; an action that raises is logged and the thread goes on. Tests
drive it with their own clock instead (``start=False`` and :meth:`run_due`).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

__all__ = ["Deadlines"]

log = logging.getLogger(__name__)


@dataclass(order=True)
class _Entry:
    due: float
    order: int
    key: Hashable = field(compare=False)
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Deadlines:
    """Thread-safe. ``clock`` is in seconds."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
        name: str = "group-deadlines",
    ) -> None:
        self._clock = clock
        self._lock = threading.Condition()
        self._heap: list[_Entry] = []
        self._by_key: dict[Hashable, _Entry] = {}
        self._order = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def schedule(self, key: Hashable, delay_s: float, action: Callable[[], None]) -> None:
        """Runs ``action`` ``delay_s`` from now, unless ``key`` is scheduled again or cancelled
        before then."""
        with self._lock:
            self._drop(key)
            entry = _Entry(self._clock() + max(delay_s, 0.0), next(self._order), key, action)
            self._by_key[key] = entry
            heapq.heappush(self._heap, entry)
            self._lock.notify()

    def cancel(self, key: Hashable) -> None:
        with self._lock:
            self._drop(key)

    def scheduled(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._by_key

    def run_due(self) -> int:
        """Runs every action due now (those scheduled by them too, if due); how many ran."""
        ran = 0
        while (entry := self._pop_due()) is not None:
            self._execute(entry)
            ran += 1
        return ran

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._heap.clear()
            self._by_key.clear()
            self._lock.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _drop(self, key: Hashable) -> None:
        entry = self._by_key.pop(key, None)
        if entry is not None:
            entry.cancelled = True

    def _pop_due(self) -> _Entry | None:
        with self._lock:
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap)
            if not self._heap or self._heap[0].due > self._clock():
                return None
            entry = heapq.heappop(self._heap)
            del self._by_key[entry.key]
            return entry

    @staticmethod
    def _execute(entry: _Entry) -> None:
        try:
            entry.action()
        except Exception:
            log.exception("group deadline %r failed", entry.key)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._closed:
                    while self._heap and self._heap[0].cancelled:
                        heapq.heappop(self._heap)
                    if self._heap and self._heap[0].due <= self._clock():
                        break
                    self._lock.wait(self._heap[0].due - self._clock() if self._heap else None)
                if self._closed:
                    return
            self.run_due()
