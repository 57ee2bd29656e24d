"""Fetches waiting for data (Kafka's fetch purgatory), without a thread per waiting request.

A Fetch that found fewer than ``min_bytes`` parks here with what it still misses. Appends to a
partition it reads (``appended``, called after each append) count against that; once enough
bytes arrived, or at ``max_wait_ms``, it completes: its ``complete`` callable reads again and
answers. One timer thread keeps the deadlines; the completions, which read the log,
run on a small pool so that neither the appending thread nor the timer waits for them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["FetchWaits"]

log = logging.getLogger(__name__)

_R = TypeVar("_R")


@dataclass(eq=False)
class _Waiter(Generic[_R]):
    partitions: Collection[Hashable]
    missing_bytes: int
    complete: Callable[[], _R]
    future: Future[_R] = field(default_factory=Future)
    done: bool = False


class FetchWaits(Generic[_R]):
    """Thread-safe. ``close`` cancels the fetches still waiting (their connections close)."""

    def __init__(
        self, completion_threads: int = 4, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self._lock = threading.Condition(threading.RLock())  # _fire runs under it too
        self._by_partition: dict[Hashable, set[_Waiter[_R]]] = {}
        self._deadlines: list[tuple[float, int, _Waiter[_R]]] = []
        self._order = itertools.count()  # ties on a deadline never compare waiters
        self._closed = False
        self._completions = ThreadPoolExecutor(
            completion_threads, thread_name_prefix="kafka-fetch-wake"
        )
        self._timer = threading.Thread(target=self._expire, name="kafka-fetch-timer", daemon=True)
        self._timer.start()

    def park(
        self,
        partitions: Collection[Hashable],
        missing_bytes: int,
        wait_s: float,
        complete: Callable[[], _R],
        changed_meanwhile: Callable[[], bool],
    ) -> Future[_R]:
        """A future of ``complete()``, called once ``missing_bytes`` were appended to
        ``partitions`` or ``wait_s`` passed. ``changed_meanwhile`` is asked once the waiter is
        registered: an append between the caller's read and now was not counted, so a True
        completes it at once."""
        waiter: _Waiter[_R] = _Waiter(partitions, missing_bytes, complete)
        with self._lock:
            if self._closed:
                waiter.future.cancel()
                return waiter.future
            for partition in partitions:
                self._by_partition.setdefault(partition, set()).add(waiter)
            heapq.heappush(self._deadlines, (self._clock() + wait_s, next(self._order), waiter))
            self._lock.notify()
        if changed_meanwhile():
            self._fire([waiter])
        return waiter.future

    def appended(self, partition: Hashable, size_bytes: int) -> None:
        """``size_bytes`` were appended to ``partition``: wakes the waiters that now have
        enough."""
        ready: list[_Waiter[_R]] = []
        with self._lock:
            for waiter in self._by_partition.get(partition, ()):
                waiter.missing_bytes -= size_bytes
                if waiter.missing_bytes <= 0:
                    ready.append(waiter)
        self._fire(ready)

    def waiting(self) -> int:
        """How many fetches wait now."""
        with self._lock:
            return len({w for waiters in self._by_partition.values() for w in waiters})

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pending = [w for _, _, w in self._deadlines if not w.done]
            self._deadlines.clear()
            self._by_partition.clear()
            self._lock.notify()
        for waiter in pending:
            waiter.future.cancel()
        self._timer.join(5.0)
        self._completions.shutdown(wait=False, cancel_futures=True)

    def _fire(self, waiters: list[_Waiter[_R]]) -> None:
        claimed: list[_Waiter[_R]] = []
        with self._lock:
            for waiter in waiters:
                if waiter.done:
                    continue
                waiter.done = True
                claimed.append(waiter)
                for partition in waiter.partitions:
                    others = self._by_partition.get(partition)
                    if others is not None:
                        others.discard(waiter)
                        if not others:
                            del self._by_partition[partition]
        for waiter in claimed:
            try:
                self._completions.submit(self._complete, waiter)
            except RuntimeError:  # closed meanwhile: the listener is stopping
                waiter.future.cancel()

    @staticmethod
    def _complete(waiter: _Waiter[_R]) -> None:
        if not waiter.future.set_running_or_notify_cancel():
            return  # cancelled by close
        try:
            result = waiter.complete()
        except Exception as e:  # the connection then closes, as for a handler that raised
            log.exception("a waiting Kafka fetch failed to complete")
            waiter.future.set_exception(e)
            return
        waiter.future.set_result(result)

    def _expire(self) -> None:
        with self._lock:
            while not self._closed:
                if not self._deadlines:
                    self._lock.wait()
                    continue
                deadline, _, waiter = self._deadlines[0]
                if waiter.done:
                    heapq.heappop(self._deadlines)  # woken by appends before its deadline
                    continue
                delay = deadline - self._clock()
                if delay > 0:
                    self._lock.wait(delay)
                    continue
                heapq.heappop(self._deadlines)
                self._fire([waiter])
