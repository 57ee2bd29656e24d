"""The object-deletion engine of the bulk delete job (docs/internals/bulk-delete.md): deletes what
the storage plugin listed, in process for small jobs or with PySpark for large ones, the job's size
deciding once for all its deletes (:meth:`BulkObjectDeleter.choose`). It knows nothing of the RLMM,
of the controller, nor of how objects are stored: it takes the handles a
:class:`~tiered.api.RemoteStorageBulkDeleter` listed and that storage's picklable
:class:`~tiered.api.RemoteObjectDeleter`, and gives counts back.

What runs on Spark executors is :func:`_delete_slice` (this module registers itself with
PySpark's cloudpickle to be shipped by value, so executors do not need the controller) and the
storage's deleter, unpickled there: executors need the ``tiered`` library and the storage plugin
(for the fsspec one, :mod:`tiered.rsm.fsspec_delete`: fsspec and the filesystem's own plugin).
Each Spark partition hands its slice of handles to the deleter in one call; the deleter runs it
as its store likes best (the fsspec one on a thread pool).

The session comes from :class:`~controller.jobs.spark_session.SparkSessionProvider`
(:mod:`controller.jobs.spark_session`: started in the background when the controller becomes
active on a cluster master, restarted when lost), re-exported here.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.jobs.spark_session import (
    APP_NAME,
    DEFAULT_MASTER,
    SparkSessionProvider,
    SparkSessionUnavailableError,
)
from tiered.api import DeleteOutcome, RemoteObjectDeleter, RemoteStorageException
from tiered.retry import RetryPolicy
from tiered.retry_policies import BULK_DELETE_RETRY

__all__ = [
    "APP_NAME",
    "DEFAULT_FAST_PATH_MAX_OBJECTS",
    "DEFAULT_MASTER",
    "FAST_PATH_KEY",
    "BulkDeleteError",
    "BulkObjectDeleter",
    "EngineChoice",
    "SparkSessionProvider",
    "SparkSessionUnavailableError",
    "default_slices",
    "delete_with_spark",
    "spark_task",
    "split_slices",
]

logger = logging.getLogger(__name__)

FAST_PATH_KEY = "bulk.delete.fast.path.max.objects"
DEFAULT_FAST_PATH_MAX_OBJECTS = 2000
MIN_KEYS_PER_SLICE = 500
"""Default slicing: no Spark partition smaller than this, ..."""
MAX_KEYS_PER_SLICE = 8000
"""... none larger than this (about 900 KiB of keys: Spark warns about tasks over 1000 KiB)."""


class BulkDeleteError(RemoteStorageException):
    """A bulk delete job kept failing as a whole (not object by object) after every retry."""


# ============================================================================= Spark job
# _delete_slice and what it calls run on Spark executors.


def _take_failure_token(tokens_dir: str) -> bool:
    """Test hook: removes one file of ``tokens_dir`` if any is left; True if this call did.
    Removal is atomic, so each token fails exactly one task, whichever process runs it."""
    with contextlib.suppress(FileNotFoundError):
        for token in sorted(Path(tokens_dir).iterdir()):
            try:
                token.unlink()
            except FileNotFoundError:
                continue  # another task took it
            return True
    return False


def _delete_slice(
    deleter: RemoteObjectDeleter,
    fail_task_tokens_dir: str | None,
    finished: Any,
    slices: Iterable[tuple[int, list[str]]],
) -> Iterator[DeleteOutcome]:
    """The function each Spark task runs on its numbered slice of handles: one small outcome
    back, and the slice's failed handles added to the ``finished`` accumulator (if any), which
    the driver reads while the job runs."""
    for index, handles in slices:
        if fail_task_tokens_dir is not None and _take_failure_token(fail_task_tokens_dir):
            raise RuntimeError(f"injected task failure (test hook, {fail_task_tokens_dir})")
        outcome = deleter.delete_objects(handles)
        if finished is not None:
            finished.add({index: outcome.failed_handles})
        yield outcome


class _FinishedSlices:
    """Spark accumulator parameter: slice index to the slice's failed handles. Spark merges the
    updates of successful tasks only, each once, as they finish; a merge makes a new dict, so
    the driver's progress thread reads a complete one."""

    def zero(self, value: dict[int, tuple[str, ...]]) -> dict[int, tuple[str, ...]]:
        return {}

    def addInPlace(  # noqa: N802 - PySpark's AccumulatorParam names it so
        self, value: dict[int, tuple[str, ...]], update: dict[int, tuple[str, ...]]
    ) -> dict[int, tuple[str, ...]]:
        return {**value, **update}


ProgressCallback = Callable[[Sequence[str]], None]
"""Told, from a driver thread while a Spark job runs, the handles of each finished slice that
are gone (deleted or already missing). A handle may be told again by a retry."""

PROGRESS_INTERVAL_S = 0.5


class _ProgressReporter:
    """Reads a job's ``finished`` accumulator every :data:`PROGRESS_INTERVAL_S` on its own
    thread and tells ``on_progress`` of each newly finished slice; :meth:`close` reports what
    is left and stops it. A failing callback is logged, never fatal to the job."""

    def __init__(
        self, finished: Any, slices: Sequence[list[str]], on_progress: ProgressCallback
    ) -> None:
        self._finished = finished
        self._slices = slices
        self._on_progress = on_progress
        self._told: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bulk-delete-progress", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(PROGRESS_INTERVAL_S):
            self._report()

    def _report(self) -> None:
        finished: dict[int, tuple[str, ...]] = self._finished.value
        for index in sorted(finished.keys() - self._told):
            self._told.add(index)
            failed = set(finished[index])
            try:
                self._on_progress([h for h in self._slices[index] if h not in failed])
            except Exception:
                logger.exception("bulk delete progress callback failed")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._report()


def split_slices(handles: Sequence[str], slices: int) -> list[list[str]]:
    """``handles`` in ``slices`` contiguous slices of nearly equal size (none empty)."""
    count = max(1, min(slices, len(handles)))
    n = len(handles)
    return [list(handles[i * n // count : (i + 1) * n // count]) for i in range(count)]


def default_slices(key_count: int, default_parallelism: int) -> int:
    """Four slices per core (to balance the load), but at least :data:`MIN_KEYS_PER_SLICE` and at
    most :data:`MAX_KEYS_PER_SLICE` keys in each (small tasks: a failed one redoes little, and
    Spark ships each task's keys in the task itself); one slice at least."""
    per_core = 4 * max(1, default_parallelism)
    fewest = -(-key_count // MAX_KEYS_PER_SLICE)
    most = -(-key_count // MIN_KEYS_PER_SLICE)
    return max(1, min(most, max(per_core, fewest)))


def spark_task(
    deleter: RemoteObjectDeleter, fail_task_tokens_dir: str | None, finished: Any
) -> Callable[[Iterable[tuple[int, list[str]]]], Iterator[DeleteOutcome]]:
    """What each Spark task runs, as it is pickled and shipped to the executors: the deleter
    inside it carries settings, never credentials (an S3 one names the file its executor reads:
    :class:`~tiered.rsm.s3.S3Settings`)."""
    _ship_by_value()
    return functools.partial(_delete_slice, deleter, fail_task_tokens_dir, finished)


@functools.cache
def _ship_by_value() -> None:
    """Executors unpickle :func:`_delete_slice` without importing the controller."""
    cloudpickle: Any = importlib.import_module("pyspark.cloudpickle")  # pyspark only if used
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def delete_with_spark(
    spark: Any,
    deleter: RemoteObjectDeleter,
    handles: Sequence[str],
    *,
    slices: int | None = None,
    fail_task_tokens_dir: str | None = None,
    on_progress: ProgressCallback | None = None,
) -> DeleteOutcome:
    """Deletes ``handles`` with a Spark job: the handles cut into ``slices`` slices, one Spark
    partition each, and in each one ``deleter.delete_objects`` call on its slice. Only the
    outcomes (counts and failed handles) come back to the driver, summed. ``slices`` defaults to
    :func:`default_slices`. A Spark failure (a task failing more often than Spark retries it, or
    a deleter raising) raises the Spark exception. ``on_progress`` hears of each slice done
    while the job runs (see :data:`ProgressCallback`).

    Test hook ``fail_task_tokens_dir``: a directory readable by the executors whose files each
    make one task raise before deleting anything (the file is removed: N files, N failed tasks)."""
    handle_list = list(handles)
    if not handle_list:
        return DeleteOutcome()
    sc = spark.sparkContext
    if slices is None:
        slices = default_slices(len(handle_list), int(sc.defaultParallelism))
    elif slices < 1:
        raise ValueError(f"slices must be >= 1, got {slices}")
    parts = split_slices(handle_list, slices)
    finished = sc.accumulator({}, _FinishedSlices()) if on_progress is not None else None
    task = spark_task(deleter, fail_task_tokens_dir, finished)
    reporter = _ProgressReporter(finished, parts, on_progress) if on_progress is not None else None
    sc.setJobDescription(f"{APP_NAME}: {len(handle_list)} objects with {deleter!r}")
    try:
        # One element per Spark partition: slice i is partition i, as the progress reads it.
        numbered = sc.parallelize(list(enumerate(parts)), len(parts))
        outcomes = numbered.mapPartitions(task).collect()
    finally:
        sc.setJobDescription(None)
        if reporter is not None:
            reporter.close()
    return sum(outcomes, DeleteOutcome())


# ============================================================================= the engine


@dataclass(frozen=True)
class EngineChoice:
    """Where every delete of one job runs (:meth:`BulkObjectDeleter.choose`)."""

    on_spark: bool
    reason: str
    """The choice and why, for the job's log line: ``engine Spark (MASTER) since N > KEY=MAX``
    or ``engine in process (no Spark) since N <= KEY=MAX``."""


class BulkObjectDeleter:
    """Deletes the objects of a storage plugin by handle, where :meth:`choose` says for the whole
    job: a job of up to ``fast_path_max_objects`` objects in this process, in calls of the
    plugin's deleter (the fast path: no Spark session is started for small jobs), a larger one
    with Spark jobs. A job hands its objects over in several batches (as its partitions are
    marked, then what its sweep lists), each smaller than the job: deciding per batch would run
    a large job in process, a batch at a time. Retries of failed handles stay on the job's
    engine too (on Spark a small job once the session is up).

    Handles that fail are retried, and only they, within the attempts of ``retry`` (sleeping its
    backoff in between); those still failing come back in ``failed_handles``. A job that fails as
    a whole (a Spark exception, e.g. a task failing more often than Spark retries it; in
    ``local`` mode Spark does not retry tasks; or the deleter raising) is retried the same way,
    and when its last attempt fails so raises :class:`BulkDeleteError`. Objects a failed job did
    delete count as ``missing`` on the retry.

    ``fail_task_tokens_dir`` is a test hook passed to :func:`delete_with_spark`; tests give
    ``retry`` a recording ``sleep``."""

    def __init__(
        self,
        spark_provider: SparkSessionProvider,
        *,
        fast_path_max_objects: int = DEFAULT_FAST_PATH_MAX_OBJECTS,
        retry: RetryPolicy = BULK_DELETE_RETRY,
        slices: int | None = None,
        fail_task_tokens_dir: str | None = None,
    ) -> None:
        if fast_path_max_objects < 0:
            raise ValueError(f"fast_path_max_objects must be >= 0, not {fast_path_max_objects}")
        self._spark = spark_provider
        self._fast_path_max = fast_path_max_objects
        self._retry = retry
        self._slices = slices
        self._tokens_dir = fail_task_tokens_dir

    def choose(self, object_count: int) -> EngineChoice:
        """The engine of a job of ``object_count`` objects in all (counted when it starts)."""
        limit = f"{FAST_PATH_KEY}={self._fast_path_max}"
        if object_count > self._fast_path_max:
            master = self._spark.master_description()
            return EngineChoice(True, f"engine Spark ({master}) since {object_count} > {limit}")
        return EngineChoice(False, f"engine in process (no Spark) since {object_count} <= {limit}")

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        handles: Sequence[str],
        engine: EngineChoice,
        on_progress: ProgressCallback | None = None,
    ) -> DeleteOutcome:
        """Deletes ``handles`` (duplicates once) with ``deleter`` on the job's ``engine``; see
        the class docstring. ``on_progress`` hears of the handles gone while a Spark job runs
        (not on the fast path, which is quick)."""
        pending = list(dict.fromkeys(handles))
        requested = len(pending)
        if not pending:
            return DeleteOutcome()
        total = DeleteOutcome()
        last: DeleteOutcome | None = None
        failure: Exception | None = None
        tries = 0
        started = time.perf_counter()
        for attempt in self._retry.attempts():
            tries = attempt + 1
            try:
                last = self._attempt(deleter, pending, attempt, engine, on_progress)
            except Exception as e:
                failure = e
                logger.warning(
                    "bulk delete of %d objects with %r failed as a whole (attempt %d of %s): %s",
                    len(pending),
                    deleter,
                    tries,
                    self._retry.max_tries or "unbounded",
                    _describe(e),
                )
                continue
            failure = None
            total += DeleteOutcome(last.deleted, last.missing)
            pending = list(last.failed_handles)
            if not pending:
                break
        if failure is not None:
            raise BulkDeleteError(
                f"bulk delete of {len(pending)} objects with {deleter!r} gave up after "
                f"{tries} attempts, the last failing as a whole: {_describe(failure)}"
            ) from failure
        first_error = last.first_error if pending and last is not None else None
        result = DeleteOutcome(total.deleted, total.missing, tuple(pending), first_error)
        logger.log(
            logging.WARNING if pending else logging.INFO,
            "bulk delete of %d objects with %r: %d deleted, %d already missing, %d failed%s "
            "in %.2f s",
            requested,
            deleter,
            result.deleted,
            result.missing,
            result.failed,
            f" (first: {result.first_error})" if result.failed else "",
            time.perf_counter() - started,
        )
        return result

    def _attempt(
        self,
        deleter: RemoteObjectDeleter,
        handles: list[str],
        attempt: int,
        engine: EngineChoice,
        on_progress: ProgressCallback | None = None,
    ) -> DeleteOutcome:
        path = "Spark" if engine.on_spark else "fast path (in process)"
        started = time.perf_counter()
        if engine.on_spark:
            spark = self._spark.get()  # up, or the rest of its start (logged)
            try:
                outcome = delete_with_spark(
                    spark,
                    deleter,
                    handles,
                    slices=self._slices,
                    fail_task_tokens_dir=self._tokens_dir,
                    on_progress=on_progress,
                )
            except Exception:
                self._spark.check_soon()  # a lost application is restarted sooner
                raise
        else:
            outcome = deleter.delete_objects(handles)
        logger.info(
            "deleting %d objects with %r via %s (attempt %d): %d deleted, %d missing, "
            "%d failed in %.2f s",
            len(handles),
            deleter,
            path,
            attempt + 1,
            outcome.deleted,
            outcome.missing,
            outcome.failed,
            time.perf_counter() - started,
        )
        return outcome


_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt): ")


def _describe(error: BaseException) -> str:
    """One line about ``error``: Spark's errors carry stack traces (Java and Python) in their
    message; keep the first line and the last ``SomeError: message`` line (the root cause)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return f"{type(error).__name__} (no message)"
    head = f"{type(error).__name__}: {lines[0]}"
    causes = [line for line in lines[1:] if _EXCEPTION_LINE.match(line)]
    text = f"{head} ... {causes[-1]}" if causes else head
    return text if len(text) <= 1000 else text[:997] + "..."
