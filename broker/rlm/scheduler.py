"""Periodic tasks on a bounded thread pool: Kafka's RemoteLogManager scheduled thread pools.

A :class:`ScheduledPool` runs each registered :class:`PeriodicTask` every ``interval_s`` on one of
``size`` worker threads. A task never runs concurrently with itself, so a slow copy delays only its
own partition's next run. Cancelling a task stops future runs; :meth:`PeriodicTask.cancel` can wait
for a run in flight to finish, which is what ``stop_partitions`` relies on.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

log = logging.getLogger(__name__)


class PeriodicTask:
    """A template: subclasses implement :meth:`execute`; :meth:`run` guards it so that a failing
    iteration is logged and the task runs again at its next period (a background loop survives)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._cancelled = threading.Event()
        self._idle = threading.Condition()
        self._running = False
        self.runs = 0
        self.failures = 0

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def execute(self) -> None:
        raise NotImplementedError

    def run(self) -> None:
        with self._idle:
            if self._cancelled.is_set() or self._running:
                return
            self._running = True
        try:
            self.execute()
        except Exception:
            self.failures += 1
            log.exception("%s: run failed; retrying at the next period", self.name)
        finally:
            self.runs += 1
            with self._idle:
                self._running = False
                self._idle.notify_all()

    def cancel(self, wait_s: float | None = None) -> bool:
        """Stops future runs; with ``wait_s``, waits that long for a run in flight to end.
        True if no run is in flight any more."""
        self._cancelled.set()
        with self._idle:
            if wait_s is None:
                return not self._running
            return self._idle.wait_for(lambda: not self._running, timeout=wait_s)


class ScheduledPool:
    def __init__(self, name: str, size: int, interval_s: float) -> None:
        if size < 1:
            raise ValueError(f"{name}: thread pool size must be >= 1, got {size}")
        self.name = name
        self.interval_s = interval_s
        self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix=name)
        self._heap: list[tuple[float, int, PeriodicTask]] = []
        self._live: dict[PeriodicTask, tuple[float, int]] = {}  # each task's one valid entry
        self._running: set[PeriodicTask] = set()
        self._rerun: set[PeriodicTask] = set()
        self._order = itertools.count()
        self._wakeup = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"{name}-scheduler", daemon=True)
        self._thread.start()

    def schedule(self, task: PeriodicTask, delay_s: float = 0.0) -> None:
        """Runs ``task`` after ``delay_s``, then every ``interval_s``. A task has one place in the
        schedule: scheduling it again only brings its next run forward, and a request while it
        runs makes it run once more right after."""
        with self._wakeup:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            if task in self._running:
                self._rerun.add(task)
                return
            self._push(task, time.monotonic() + delay_s)

    def trigger(self, task: PeriodicTask) -> None:
        """Runs ``task`` as soon as a thread is free (it stays on its period afterwards)."""
        self.schedule(task, 0.0)

    def _push(self, task: PeriodicTask, due: float) -> None:
        current = self._live.get(task)
        if current is not None and current[0] <= due:
            return  # already due no later than that
        entry = (due, next(self._order), task)
        self._live[task] = entry[:2]
        heapq.heappush(self._heap, entry)
        self._wakeup.notify()

    def _loop(self) -> None:
        while True:
            with self._wakeup:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    timeout = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._wakeup.wait(timeout)
                if self._closed:
                    return
                due, order, task = heapq.heappop(self._heap)
                if self._live.get(task) != (due, order):
                    continue  # superseded by an earlier run of the same task
                del self._live[task]
                if task.cancelled:
                    continue
                self._running.add(task)
            try:
                future = self._executor.submit(task.run)
            except RuntimeError:
                return  # executor shut down
            future.add_done_callback(self._rescheduler(task))

    def _rescheduler(self, task: PeriodicTask) -> Callable[[Future[None]], None]:
        return lambda _done: self._reschedule(task)

    def _reschedule(self, task: PeriodicTask) -> None:
        with self._wakeup:
            self._running.discard(task)
            again = task in self._rerun
            self._rerun.discard(task)
            if not task.cancelled and not self._closed:
                self._push(task, time.monotonic() + (0.0 if again else self.interval_s))

    def close(self, wait: bool = True) -> None:
        with self._wakeup:
            self._closed = True
            for _, _, task in self._heap:
                task.cancel()
            self._heap.clear()
            self._live.clear()
            self._wakeup.notify_all()
        self._executor.shutdown(wait=wait, cancel_futures=True)
        self._thread.join(timeout=5)
