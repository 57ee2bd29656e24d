"""Runs the active controller's bulk-delete jobs (KIP-950's delete policy), durably.

One job deletes a topic's remote data stamped with tiered epochs below E. It is a small template
whose steps are each safe to repeat, so a controller that dies anywhere leaves a job the next
controller simply runs again from its last persisted progress:

1. per partition: the partition moves to DELETE_PARTITION_STARTED, every segment stamped < E to
   DELETE_SEGMENT_STARTED (``handle_partition_segments_delete_started_below_epoch``: one read of
   the partition and one write of its record, the delete epoch), and the storage plugin names
   the objects of those segments from their metadata (``object_handles_of``: no listing);
2. meanwhile, the partitions marked so far have their objects deleted by the plugin's deleter
   (on the job's engine; a missing object counts as deleted), and once
   they are gone, on a third thread, the metadata of their DELETE_SEGMENT_STARTED segments below
   E removed in bulk (``handle_partition_segments_deleted_below_epoch``;
   :mod:`controller.jobs.delete_pipeline`);
3. the sweep: the plugin lists each partition's objects of epochs < E, which now holds only what
   the metadata did not know (a copy that died before its metadata, temporary files), and those
   are deleted; again until a listing comes back empty;
4. per partition: DELETE_PARTITION_FINISHED.

The engine, Spark or in process, is chosen once, when the job starts, for every delete of it
(the sweep's and the retries' included): Spark for a job of more than
``bulk.delete.fast.path.max.objects`` objects. The job counts them without reading a segment nor
listing: the RLMM's count of each partition's segments below E (O(1) from its aggregates) times
the objects the storage plugin stores per segment. A later attempt starts the job over from its
persisted progress, so it counts, and chooses, again: what is left.

Listing comes after the bulk of the deletes because an object store lists a page of keys per
request, so listing everything first would cost as many round trips as there are pages of
objects, one after another.

Progress (objects known, found and deleted, segments, partitions done) is persisted in the
controller's metadata store after each step. A resumed attempt names the metadata's objects
again, though an earlier attempt may have deleted them; its count of deleted objects is then the
larger of what was recorded and what this attempt saw gone, so progress never counts an object
twice. Data stamped E or later is never listed nor touched.

A SCHEDULED job (a delete delay) waits for its wall-clock ``starts_at_ms`` in the queue, without
a hold nor an attempt; a job that became finished meanwhile (CANCELLED) is dropped, and so is one
whose save the supervisor refuses as a transition the job states do not allow.

A deleted topic's job (every epoch: E is one past the topic's last) may be held back before it
starts (``hold``: the controller waits for the brokers to drop the partitions). An object a late
copy uploaded meanwhile is found by the sweep, which ends only on an empty listing; a segment it
recorded after the job read the metadata fails the attempt, and the next attempt deletes it.

The job reaches remote storage only through the configured RemoteStorageManager's
:class:`~tiered.api.RemoteStorageBulkDeleter` capability, and the RLMM through
:class:`~tiered.api.BulkDeleteRemoteLogMetadataManager`. With an RSM lacking the capability every
attempt fails with :class:`BulkDeleteUnsupportedError`, recorded as the job's last error.
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from controller.jobs.delete_pipeline import Counting, DeletePipeline, JobProgress
from controller.jobs.spark_delete import EngineChoice
from tiered import failpoints
from tiered.api import (
    BulkDeleteRemoteLogMetadataManager,
    DeleteOutcome,
    RemoteLogBelowEpoch,
    RemoteLogSegmentMetadata,
    RemoteObjectDeleter,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageBulkDeleter,
    RemoteStorageException,
    RemoteStorageManager,
    TopicIdPartition,
    missing_capability,
)
from tiered.cluster.model import (
    DeleteJob,
    DeleteJobState,
    DeletionEstimate,
    InvalidDeleteJobTransition,
    PartitionDeletionEstimate,
)
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import DELETE_JOB_BACKOFF, DELETE_JOB_HOLD_BACKOFF

log = logging.getLogger(__name__)

CONTROLLER_BROKER_ID = -1  # the id the controller writes RLMM events with
MAX_SWEEPS = 5
"""Listings of a sweep that may still find objects before the attempt fails (objects that keep
appearing below E mean a writer the job can not outrun; the next attempt tries again)."""


SWEEP_LISTINGS = 8
"""Partitions the sweep lists at once."""

SCHEDULE_RECHECK_S = 60.0
"""The longest a scheduled job sleeps before the wall clock is read again (it may be set)."""


class BulkDeleteUnsupportedError(RemoteStorageException):
    """The configured RemoteStorageManager does not implement the bulk delete capability."""


def bulk_deleter_of(storage: RemoteStorageManager) -> RemoteStorageBulkDeleter:
    """``storage`` as the bulk delete capability, or :class:`BulkDeleteUnsupportedError` naming
    its class and the missing capability."""
    if isinstance(storage, RemoteStorageBulkDeleter):
        return storage
    raise BulkDeleteUnsupportedError(
        missing_capability(
            storage,
            RemoteStorageBulkDeleter,
            "list_objects_below_epoch, object_deleter",
            "the delete policy can not delete its remote data",
        )
    )


# Why a job must wait before its next attempt, or None when it may run (called from the
# runner's thread, before each attempt).
JobHold = Callable[[DeleteJob], str | None]


def never_held(job: DeleteJob) -> str | None:
    return None


class ObjectsLeftError(RemoteStorageException):
    """Objects kept appearing below the epoch through every listing of the sweep, or segments of
    a deleted topic were added after the job listed them (a copy that was still running); the
    next attempt deletes them."""


class DeleteEngine(Protocol):
    """Deletes handles with a storage plugin's deleter (:class:`BulkObjectDeleter`), where
    ``choose`` said for the job."""

    def choose(self, object_count: int) -> EngineChoice: ...

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        handles: Sequence[str],
        engine: EngineChoice,
        on_progress: Callable[[Sequence[str]], None] | None = None,
    ) -> DeleteOutcome: ...


@dataclass
class _PartitionWork:
    tp: TopicIdPartition
    segments: list[RemoteLogSegmentMetadata]
    handles: list[str]


class _LiveProgress:
    """Counts, per partition, the objects the engine reports gone while it deletes (a Spark job
    reports each finished slice), so that a describe shows a large delete advance."""

    def __init__(
        self,
        job: Callable[[], DeleteJob],
        handles: Mapping[int, Sequence[str]],
        counting: Counting,
        observe: Callable[[DeleteJob], None],
    ) -> None:
        self._job = job
        self._partition_of = {h: p for p, hs in handles.items() for h in hs}
        self._counting = counting
        self._observe = observe
        self._gone: set[str] = set()
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()

    def objects_gone(self, handles: Sequence[str]) -> None:
        with self._lock:
            for handle in handles:
                partition = self._partition_of.get(handle)
                if partition is not None and handle not in self._gone:
                    self._gone.add(handle)
                    self._counts[partition] = self._counts.get(partition, 0) + 1
            job = self._job()
            progress = tuple(
                replace(
                    p,
                    objects_deleted=self._counting(
                        p.objects_deleted, self._counts.get(p.partition, 0)
                    ),
                )
                if p.partition in self._counts
                else p
                for p in job.progress
            )
            self._observe(replace(job, progress=progress))


class DeleteJobRunner:
    def __init__(
        self,
        rlmm: BulkDeleteRemoteLogMetadataManager,
        storage: RemoteStorageManager,
        engine: DeleteEngine,
        persist: Callable[[DeleteJob], None],
        backoff: ExponentialBackoff = DELETE_JOB_BACKOFF,
        clock: Callable[[], float] = time.time,
        hold: JobHold = never_held,
        hold_backoff: ExponentialBackoff = DELETE_JOB_HOLD_BACKOFF,
    ) -> None:
        self._rlmm = rlmm
        self._storage = storage
        self._engine = engine
        self._persist = persist
        self._backoff = backoff
        self._clock = clock
        self._hold = hold
        self._hold_backoff = hold_backoff
        # Both owned by the runner's thread, under the lock: each failing job's backoff, from its
        # first failure in this runner until it is done; each held job's backoff, from its first
        # hold in a row, and why it is held (the last time).
        self._failures: dict[tuple[object, int], Backoff] = {}
        self._holds: dict[tuple[object, int], tuple[Backoff, str]] = {}
        self._cond = threading.Condition()
        self._queue: deque[DeleteJob] = deque()
        self._latest: dict[tuple[object, int], DeleteJob] = {}
        self._not_before: dict[tuple[object, int], float] = {}
        self._stopping = False
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------------- lifecycle

    def start(self, jobs: Sequence[DeleteJob] = ()) -> None:
        """Starts the worker with the jobs a newly active controller found unfinished."""
        with self._cond:
            self._stopping = False
            for job in jobs:
                if not job.state.finished:
                    self._enqueue(job)
            self._thread = threading.Thread(target=self._run, name="delete-jobs", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stops after the current step (a deposed controller's writes are fenced anyway)."""
        with self._cond:
            self._stopping = True
            self._queue.clear()
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def submit(self, job: DeleteJob) -> None:
        with self._cond:
            self._enqueue(job)
            self._cond.notify_all()

    def _enqueue(self, job: DeleteJob) -> None:
        self._latest[job.key] = job
        self._queue.append(job)

    def progress(self, job: DeleteJob) -> DeleteJob:
        """The freshest view of a job (in-memory progress runs ahead of the durable one); a held
        job shows why as its last error."""
        with self._cond:
            latest = self._latest.get(job.key, job)
            held = self._holds.get(job.key)
            return latest if held is None else replace(latest, last_error=held[1])

    # ----------------------------------------------------------------------------- worker

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not self._ready():
                    self._cond.wait(self._wait_s())
                if self._stopping:
                    return
                job = self._next()
                if job.state.finished:
                    continue  # cancelled while queued
                if self._waits_for_start(job):
                    continue
            if self._held(job):
                continue
            try:
                self.run_job(job)
            except InvalidDeleteJobTransition as e:  # cancelled while it started: nothing ran
                log.info("Delete job of %s not run: %s", job.topic, e)
            except Exception as e:  # the job stays RUNNING and is retried with backoff
                latest = self.progress(job)
                failed = replace(latest, last_error=f"{type(e).__name__}: {e}")
                log.warning(
                    "Delete job of %s below tiered epoch %d failed (attempt %d): %s",
                    job.topic,
                    job.tiered_epoch,
                    failed.attempts,
                    e,
                )
                try:
                    self._save(failed)
                except Exception:
                    log.exception("Could not record the failure of %s", job.key)
                with self._cond:
                    if not self._stopping:
                        backoff = self._failures.setdefault(job.key, Backoff(self._backoff))
                        self._not_before[job.key] = time.monotonic() + backoff.next_delay()
                        self._queue.append(failed)
            else:
                with self._cond:
                    self._failures.pop(job.key, None)

    def _held(self, job: DeleteJob) -> bool:
        """Asks ``hold``; a held job goes back to the queue, shown with its reason as its last
        error (in memory only: waiting is no failure and costs no attempt)."""
        try:
            reason = self._hold(job)
        except Exception as e:  # e.g. a deposed term: try again later
            reason = f"{type(e).__name__}: {e}"
        with self._cond:
            if reason is None:
                self._holds.pop(job.key, None)
                return False
            previous = self._holds.get(job.key)
            backoff = Backoff(self._hold_backoff) if previous is None else previous[0]
            self._holds[job.key] = (backoff, reason)
            if previous is None:
                log.info(
                    "Delete job of %s below tiered epoch %d: %s",
                    job.topic,
                    job.tiered_epoch,
                    reason,
                )
            if not self._stopping:
                self._not_before[job.key] = time.monotonic() + backoff.next_delay()
                self._queue.append(job)
            return True

    def _waits_for_start(self, job: DeleteJob) -> bool:
        """A SCHEDULED job before its ``starts_at_ms`` goes back to the queue until then (under
        the condition's lock)."""
        if job.state is not DeleteJobState.SCHEDULED or job.starts_at_ms is None:
            return False
        wait_s = (job.starts_at_ms - self._now_ms()) / 1000
        if wait_s <= 0:
            return False
        self._not_before[job.key] = time.monotonic() + min(wait_s, SCHEDULE_RECHECK_S)
        self._queue.append(job)
        return True

    def _ready(self) -> bool:
        now = time.monotonic()
        return any(self._not_before.get(j.key, 0.0) <= now for j in self._queue)

    def _wait_s(self) -> float | None:
        if not self._queue:
            return None
        now = time.monotonic()
        return max(0.0, min(self._not_before.get(j.key, 0.0) for j in self._queue) - now)

    def _next(self) -> DeleteJob:
        now = time.monotonic()
        for job in list(self._queue):
            if self._not_before.get(job.key, 0.0) <= now:
                self._queue.remove(job)
                return self._latest.get(job.key, job)
        raise AssertionError("no job is ready")

    def _observe(self, job: DeleteJob) -> None:
        """Progress seen within a step: shown by :meth:`progress`, persisted with the step."""
        with self._cond:
            self._latest[job.key] = job

    def _save(self, job: DeleteJob) -> DeleteJob:
        self._persist(job)
        with self._cond:
            self._latest[job.key] = job
        return job

    # ----------------------------------------------------------------------------- one job

    def run_job(self, job: DeleteJob) -> DeleteJob:
        started = time.monotonic()
        tracker = JobProgress(job, self._save)
        job = tracker.save(lambda j: j.with_state(DeleteJobState.RUNNING, attempts=j.attempts + 1))
        log.info(
            "Delete job of %s below tiered epoch %d: attempt %d, %d partitions",
            job.topic,
            job.tiered_epoch,
            job.attempts,
            job.partition_count,
        )
        storage = bulk_deleter_of(self._storage)
        deleter = storage.object_deleter()
        engine = self._choose_engine(storage, tracker)
        work: list[_PartitionWork] = []

        def remove_metadata(items: Sequence[_PartitionWork]) -> None:
            for item in items:
                self._rlmm.handle_partition_segments_deleted_below_epoch(item.tp, job.tiered_epoch)

        # Three threads, each step after the one it needs: marking (this one), deleting the
        # objects marked, removing the metadata of the objects deleted; the sweep's listings,
        # which need only the objects gone, overlap the last removals.
        with DeletePipeline(remove_metadata, f"remove-{job.topic}") as removals:

            def delete_batch(items: Sequence[_PartitionWork]) -> None:
                handles = {item.tp.partition: item.handles for item in items}
                self._delete_objects(deleter, engine, tracker, handles, max)
                for item in items:
                    if item.segments:
                        removals.submit(item)

            with DeletePipeline(delete_batch, f"delete-{job.topic}") as pipeline:
                for p in range(job.partition_count):
                    if tracker.of(p).done:
                        continue
                    item = self._start_partition(storage, job, p)
                    tracker.handle_objects_named({p: len(item.handles)})
                    if not work:
                        failpoints.hit("controller.delete_job.listed")
                    work.append(item)
                    pipeline.submit(item)
            failpoints.hit("controller.delete_job.known_objects_deleted")
            self._sweep(storage, deleter, engine, tracker, [item.tp for item in work])
        failpoints.hit("controller.delete_job.objects_deleted")

        for item in work:
            self._finish_partition(item)
            if job.topic_deleted:
                self._check_metadata_removed(item.tp)
            tracker.handle_partition_done(item.tp.partition, len(item.segments))
        job = tracker.save(lambda j: j.with_state(DeleteJobState.DONE, last_error=""))
        log.info(
            "Delete job of %s below tiered epoch %d done in %.1fs: %d objects, %d segments",
            job.topic,
            job.tiered_epoch,
            time.monotonic() - started,
            sum(p.objects_deleted for p in job.progress),
            sum(p.segments_deleted for p in job.progress),
        )
        return job

    def estimate(self, job: DeleteJob, partitions: Sequence[int] | None = None) -> DeletionEstimate:
        """What ``job`` would delete from ``partitions`` (default: every one), from the RLMM's
        aggregates alone, in O(partitions): each partition's segments stamped below the job's
        epoch and their recorded bytes, and their objects as the storage plugin counts a
        segment's (``objects_per_segment``). A partition without remote metadata counts zero
        (the sweep lists what it holds, if anything). :class:`BulkDeleteUnsupportedError` as
        every attempt of a job over a plugin without the capability."""
        per_segment = bulk_deleter_of(self._storage).objects_per_segment()
        estimates = []
        for p in range(job.partition_count) if partitions is None else partitions:
            tp = TopicIdPartition(job.topic_id, job.topic, p)
            try:
                below = self._rlmm.remote_log_below_epoch(tp, job.tiered_epoch)
            except RemoteResourceNotFoundException:
                below = RemoteLogBelowEpoch(0, 0)
            estimates.append(
                PartitionDeletionEstimate(
                    p, below.segment_count * per_segment, below.size_bytes, below.segment_count
                )
            )
        return DeletionEstimate(job.tiered_epoch, tuple(estimates))

    def _choose_engine(
        self, storage: RemoteStorageBulkDeleter, tracker: JobProgress
    ) -> EngineChoice:
        """The engine of the whole attempt, from its objects as the RLMM's totals count them:
        the segments below the epoch of each partition not done yet, times the objects the
        plugin stores per segment. Logged: the one line that says where the job deletes."""
        job = tracker.job
        left = [p for p in range(job.partition_count) if not tracker.of(p).done]
        objects = self.estimate(job, left).objects
        engine = self._engine.choose(objects)
        log.info(
            "Bulk delete of topic %s below tiered epoch %d: %d objects, %s",
            job.topic,
            job.tiered_epoch,
            objects,
            engine.reason,
        )
        return engine

    def _delete_objects(
        self,
        deleter: RemoteObjectDeleter,
        engine: EngineChoice,
        tracker: JobProgress,
        handles: Mapping[int, Sequence[str]],
        counting: Counting,
    ) -> None:
        """Deletes ``handles`` (by partition) with the engine, counts them into the progress and
        persists it; raises once that is done if some could not be deleted."""
        every = [h for hs in handles.values() for h in hs]
        if not every:
            return
        live = _LiveProgress(lambda: tracker.job, handles, counting, self._observe)
        result = self._engine.delete(deleter, every, engine, live.objects_gone)
        failed = set(result.failed_handles)
        tracker.handle_objects_gone(
            {p: sum(1 for h in hs if h not in failed) for p, hs in handles.items()}, counting
        )
        if result.failed:
            raise RuntimeError(
                f"{result.failed} of {len(every)} objects could not be deleted "
                f"(first: {sorted(failed)[:3]})"
            )

    def _sweep(
        self,
        storage: RemoteStorageBulkDeleter,
        deleter: RemoteObjectDeleter,
        engine: EngineChoice,
        tracker: JobProgress,
        partitions: Sequence[TopicIdPartition],
    ) -> None:
        """Lists the partitions' objects below the epoch and deletes them, until a listing finds
        none (:data:`MAX_SWEEPS` listings at most)."""
        job = tracker.job

        def below_epoch(tp: TopicIdPartition) -> list[str]:
            return self._objects_below_epoch(storage, tp, job.tiered_epoch)

        for _ in range(MAX_SWEEPS):
            # an object store answers a listing a page a request: the partitions' go in parallel
            with ThreadPoolExecutor(min(len(partitions), SWEEP_LISTINGS) or 1) as pool:
                listed = list(pool.map(below_epoch, partitions))
            found = {
                tp.partition: handles
                for tp, handles in zip(partitions, listed, strict=True)
                if handles
            }
            if not found:
                return
            tracker.handle_objects_named(
                {p: tracker.of(p).objects_deleted + len(handles) for p, handles in found.items()}
            )
            log.info(
                "Delete job of %s below tiered epoch %d: %d objects the metadata did not name",
                job.topic,
                job.tiered_epoch,
                sum(len(h) for h in found.values()),
            )
            self._delete_objects(deleter, engine, tracker, found, operator.add)
        raise ObjectsLeftError(
            f"objects of {job.topic} below tiered epoch {job.tiered_epoch} were found again by "
            f"each of {MAX_SWEEPS} listings after deleting them"
        )

    @staticmethod
    def _objects_below_epoch(
        storage: RemoteStorageBulkDeleter, tp: TopicIdPartition, tiered_epoch: int
    ) -> list[str]:
        return [h for batch in storage.list_objects_below_epoch(tp, tiered_epoch) for h in batch]

    def _check_metadata_removed(self, tp: TopicIdPartition) -> None:
        """``ObjectsLeftError`` unless DELETE_PARTITION_FINISHED removed the partition's metadata
        (it stays when segments were added after the listing)."""
        try:
            self._rlmm.remote_partition_delete_state(tp)
        except RemoteResourceNotFoundException:
            return
        raise ObjectsLeftError(
            f"partition {tp}: segments of the deleted topic were added after the listing; "
            "deleting them in the next attempt"
        )

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _start_partition(
        self, storage: RemoteStorageBulkDeleter, job: DeleteJob, partition: int
    ) -> _PartitionWork:
        tp = TopicIdPartition(job.topic_id, job.topic, partition)
        segments: list[RemoteLogSegmentMetadata] = []
        try:
            state = self._rlmm.remote_partition_delete_state(tp)
            if state is None:
                self._put_partition_state(tp, RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
                state = RemotePartitionDeleteState.DELETE_PARTITION_MARKED
            if state is RemotePartitionDeleteState.DELETE_PARTITION_MARKED:
                self._put_partition_state(tp, RemotePartitionDeleteState.DELETE_PARTITION_STARTED)
            segments = self._rlmm.handle_partition_segments_delete_started_below_epoch(
                tp, job.tiered_epoch
            )
        except RemoteResourceNotFoundException:
            pass  # no remote metadata: only orphan objects, if any, are left to delete
        return _PartitionWork(tp, segments, storage.object_handles_of(segments))

    def _finish_partition(self, item: _PartitionWork) -> None:
        try:
            if self._rlmm.remote_partition_delete_state(item.tp) is not None:
                self._put_partition_state(
                    item.tp, RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
                )
        except RemoteResourceNotFoundException:
            pass  # already finished and removed

    def _put_partition_state(self, tp: TopicIdPartition, state: RemotePartitionDeleteState) -> None:
        self._rlmm.put_remote_partition_delete_metadata(
            RemotePartitionDeleteMetadata(tp, state, self._now_ms(), CONTROLLER_BROKER_ID)
        )
