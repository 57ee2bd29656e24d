"""Overlaps a delete job's steps: while the controller marks one partition's segments
DELETE_SEGMENT_STARTED and reads their metadata (in this process), the engine deletes the objects
of the partitions marked before it (requests to the object store, from Spark's executors or a
thread pool), and the metadata of those whose objects are gone is removed in bulk.

Partitions are handed over as they are marked. Whenever the deleting side is free it takes
everything handed over so far as one batch: a job starts deleting after its first partition, and
runs as few engine jobs as the marking allows (one a partition when marking is the slower half,
a few large ones when it is not).

:class:`JobProgress` is the job's progress both sides change: each change is persisted under one
lock, so that neither writes over the other's counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Generic, TypeVar

from tiered.cluster.model import DeleteJob, PartitionDeleteProgress

__all__ = ["Counting", "DeletePipeline", "JobProgress"]

T = TypeVar("T")
Counting = Callable[[int, int], int]
"""How a step's objects gone add to a partition's recorded count: ``operator.add`` for objects
no earlier attempt can have counted (those a listing found), ``max`` for those named from the
metadata (an earlier attempt may have deleted and counted them)."""


class JobProgress:
    """A running job and its per-partition progress. Each ``handle_*`` event persists the
    change through ``save`` (which returns the job as saved) before it returns."""

    def __init__(self, job: DeleteJob, save: Callable[[DeleteJob], DeleteJob]) -> None:
        self._save = save
        self._lock = threading.Lock()
        progress = {p.partition: p for p in job.progress}
        for p in range(job.partition_count):
            progress.setdefault(p, PartitionDeleteProgress(p))
        self._progress = progress
        self._job = replace(job, progress=self._ordered())

    @property
    def job(self) -> DeleteJob:
        with self._lock:
            return self._job

    def of(self, partition: int) -> PartitionDeleteProgress:
        with self._lock:
            return self._progress[partition]

    def handle_objects_named(self, named: Mapping[int, int]) -> DeleteJob:
        """A partition's metadata or a listing named objects: its total is at least ``named``."""
        return self._change(named, lambda k, n: replace(k, objects_total=max(k.objects_total, n)))

    def handle_objects_gone(self, gone: Mapping[int, int], counting: Counting) -> DeleteJob:
        return self._change(
            gone, lambda k, n: replace(k, objects_deleted=counting(k.objects_deleted, n))
        )

    def handle_partition_done(self, partition: int, segments_deleted: int) -> DeleteJob:
        return self._change(
            {partition: segments_deleted},
            lambda k, n: replace(k, segments_deleted=n, done=True),
        )

    def _change(
        self,
        values: Mapping[int, int],
        change: Callable[[PartitionDeleteProgress, int], PartitionDeleteProgress],
    ) -> DeleteJob:
        with self._lock:
            for p, value in values.items():
                self._progress[p] = change(self._progress[p], value)
            self._job = self._save(replace(self._job, progress=self._ordered()))
            return self._job

    def save(self, change: Callable[[DeleteJob], DeleteJob]) -> DeleteJob:
        """Persists a change to the job itself (its state, attempts, last error)."""
        with self._lock:
            self._job = self._save(change(self._job))
            self._progress = {p.partition: p for p in self._job.progress}
            return self._job

    def _ordered(self) -> tuple[PartitionDeleteProgress, ...]:
        return tuple(self._progress[p] for p in sorted(self._progress))


class DeletePipeline(Generic[T]):
    """Runs ``delete_batch`` on one thread over the items :meth:`submit` hands over, each call
    with every item submitted since the previous one began. The first failure stops the rest (the
    attempt has failed; the next one starts over from the persisted progress) and is raised by
    :meth:`submit` or :meth:`close`. As a context manager, leaving with an exception abandons
    what was not started and waits for the batch in flight."""

    def __init__(self, delete_batch: Callable[[Sequence[T]], None], name: str) -> None:
        self._delete_batch = delete_batch
        self._cond = threading.Condition()
        self._pending: list[T] = []
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, item: T) -> None:
        with self._cond:
            self._raise_failure()
            self._pending.append(item)
            self._cond.notify()

    def close(self) -> None:
        """Waits until everything submitted is deleted; raises the first failure."""
        self._stop(abandon=False)
        with self._cond:
            self._raise_failure()

    def __enter__(self) -> DeletePipeline[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.close()
        else:
            self._stop(abandon=True)

    def _stop(self, abandon: bool) -> None:
        with self._cond:
            self._closed = True
            if abandon:
                self._pending.clear()
            self._cond.notify()
        self._thread.join()

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
                if self._error is not None:
                    continue
            try:
                self._delete_batch(batch)
            except BaseException as e:  # raised to the job's thread
                with self._cond:
                    if self._error is None:
                        self._error = e
