"""The object-deletion engine of the bulk delete job (DESIGN.md section 8): lists the objects of a
partition's tiered epochs below ``E`` and deletes them, in process for small jobs or with PySpark
for large ones. It knows nothing of the RLMM or of the controller: the orchestration that moves
segment and partition states calls it with keys and gets counts back.

Keys are relative to ``remote.storage.root`` (a local path or any fsspec URL) and laid out as
:mod:`tiered.rsm.layout` says. Deleting an object that is already gone is not an error: it counts
as ``missing`` (done). Only filesystems that report a missing object (local, ``memory://``) can
tell; on object stores a DELETE of a missing key succeeds and counts as ``deleted``.

What runs on Spark executors is :func:`_delete_slice` and the helpers it calls: they use only the
standard library and fsspec (the filesystem is rebuilt from ``root`` with
``fsspec.core.url_to_fs``), and this module registers itself with PySpark's cloudpickle to be
shipped by value, so executors need fsspec (and the filesystem's plugin) but not this repository.
Inside each Spark partition the deletes run on a thread pool: object stores answer in milliseconds,
and a thread per core would leave them idle (NOTES.md: 10,000 deletes at 5 ms each take 10.5 s
serially, 0.70 s with a pool inside each partition).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec.core

from tiered.api import RemoteStorageException, TopicIdPartition
from tiered.retry import ExponentialBackoff
from tiered.rsm import layout

logger = logging.getLogger(__name__)

APP_NAME = "tiered-bulk-delete"
DEFAULT_MASTER = "local[*]"
DEFAULT_THREADS = 16
DEFAULT_FAST_PATH_MAX_OBJECTS = 2000
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF = ExponentialBackoff(initial_s=0.5, max_s=30.0)
MIN_KEYS_PER_SLICE = 500
"""Default slicing: no Spark partition smaller than this, ..."""
MAX_KEYS_PER_SLICE = 8000
"""... none larger than this (about 900 KiB of keys: Spark warns about tasks over 1000 KiB)."""

_LOG4J2_PROPERTIES = """\
# Written by controller.jobs.spark_delete: Spark's own logs at warn, on stderr.
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
"""


class BulkDeleteError(RemoteStorageException):
    """A bulk delete job kept failing as a whole (not object by object) after every retry."""


@dataclass(frozen=True)
class DeleteCounts:
    """What a delete did: ``deleted`` objects removed by it, ``missing`` ones already gone (both
    count as done), ``failed`` ones still there, whose keys are ``failed_keys``. ``first_error``
    describes one failure, for logs."""

    deleted: int
    missing: int
    failed: int
    failed_keys: tuple[str, ...] = ()
    first_error: str | None = None

    @property
    def done(self) -> int:
        """Objects that are gone: deleted now or missing already."""
        return self.deleted + self.missing

    def __add__(self, other: DeleteCounts) -> DeleteCounts:
        if not isinstance(other, DeleteCounts):
            return NotImplemented
        return DeleteCounts(
            deleted=self.deleted + other.deleted,
            missing=self.missing + other.missing,
            failed=self.failed + other.failed,
            failed_keys=self.failed_keys + other.failed_keys,
            first_error=self.first_error if self.first_error is not None else other.first_error,
        )


NO_COUNTS = DeleteCounts(0, 0, 0)


# ============================================================================= listing


def _filesystem(root: str) -> tuple[Any, str]:
    """The fsspec filesystem of ``root`` and the root's path in it, without a trailing ``/``."""
    fs, path = fsspec.core.url_to_fs(root)
    return fs, str(path).rstrip("/")


def _relative(base: str, path: str) -> str:
    prefix = base + "/"
    if path.startswith(prefix):
        return path[len(prefix) :]
    # memory:// with an empty root normalizes "/x" and "x" alike (as FsspecRemoteStorageManager).
    return path.lstrip("/") if not base else path


def list_objects_below_epoch(
    root: str, topic: str, topic_id: uuid.UUID, partition: int, tiered_epoch: int
) -> list[str]:
    """Every object key (relative to ``root``, sorted) under the ``te=e/`` prefixes of the
    partition with ``e < tiered_epoch``, whether or not its metadata reached FINISHED. Objects of
    epochs ``>= tiered_epoch`` are never listed. No partition directory: ``[]``."""
    for name, value in (("partition", partition), ("tiered_epoch", tiered_epoch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    tp = TopicIdPartition(topic_id, topic, partition)
    fs, base = _filesystem(root)
    try:
        entries = fs.ls(f"{base}/{layout.partition_prefix(tp)}", detail=False)
    except FileNotFoundError:
        return []
    epochs = sorted(
        {
            e
            for e in (layout.parse_tiered_epoch_dir(str(entry)) for entry in entries)
            if e is not None and e < tiered_epoch
        }
    )
    keys: list[str] = []
    for epoch in epochs:
        prefix = layout.tiered_epoch_prefix(tp, epoch)
        with contextlib.suppress(FileNotFoundError):  # removed since the ls: nothing to list
            keys.extend(_relative(base, str(p)) for p in fs.find(f"{base}/{prefix}"))
    return sorted(keys)


# ============================================================================= deleting
# _delete_slice and everything it calls run on Spark executors: standard library and fsspec only.

_RawCounts = tuple[int, int, int, list[str], str | None]
"""(deleted, missing, failed, failed keys, first error): what a slice sends back to the driver."""


def _delete_all(root: str, keys: Sequence[str], threads: int, latency_s: float) -> _RawCounts:
    """Deletes ``keys`` under ``root`` on ``threads`` threads pulling keys from one iterator."""
    if not keys:
        return 0, 0, 0, [], None
    fs, base = fsspec.core.url_to_fs(root)
    base = str(base).rstrip("/")
    pending = iter(keys)
    lock = threading.Lock()

    def work() -> _RawCounts:
        deleted = missing = 0
        failed: list[str] = []
        first_error: str | None = None
        while True:
            with lock:
                key = next(pending, None)
            if key is None:
                return deleted, missing, len(failed), failed, first_error
            if latency_s > 0:
                time.sleep(latency_s)  # bench/test hook: an object store's round trip
            try:
                fs.rm_file(f"{base}/{key}")
            except FileNotFoundError:
                missing += 1
            except Exception as e:
                failed.append(key)
                if first_error is None:
                    first_error = f"{key}: {type(e).__name__}: {e}"
            else:
                deleted += 1

    workers = max(1, min(threads, len(keys)))
    if workers == 1:
        return work()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="bulk-delete") as pool:
        parts = [f.result() for f in [pool.submit(work) for _ in range(workers)]]
    failed_keys = [k for part in parts for k in part[3]]
    errors = [part[4] for part in parts if part[4] is not None]
    return (
        sum(part[0] for part in parts),
        sum(part[1] for part in parts),
        len(failed_keys),
        failed_keys,
        errors[0] if errors else None,
    )


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
    root: str,
    threads: int,
    latency_s: float,
    fail_task_tokens_dir: str | None,
    keys: Iterable[str],
) -> Iterator[_RawCounts]:
    """The function each Spark task runs on its slice of keys: one small tuple back."""
    if fail_task_tokens_dir is not None and _take_failure_token(fail_task_tokens_dir):
        raise RuntimeError(f"injected task failure (test hook, {fail_task_tokens_dir})")
    yield _delete_all(root, list(keys), threads, latency_s)


def _counts(raw: _RawCounts) -> DeleteCounts:
    deleted, missing, failed, failed_keys, first_error = raw
    return DeleteCounts(deleted, missing, failed, tuple(failed_keys), first_error)


def delete_keys_locally(
    root: str, keys: Sequence[str], threads: int = DEFAULT_THREADS, latency_s: float = 0.0
) -> DeleteCounts:
    """Deletes ``keys`` (relative to ``root``) in this process on a pool of ``threads`` threads.
    A missing object counts as ``missing``; an object whose delete raises counts as ``failed``
    with its key. ``latency_s`` is a bench/test hook: a sleep before each delete, to model an
    object store's round trip on a local directory."""
    _check_threads(threads, latency_s)
    return _counts(_delete_all(root, list(keys), threads, latency_s))


def _check_threads(threads: int, latency_s: float) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    if latency_s < 0:
        raise ValueError(f"latency_s must be >= 0, got {latency_s}")


def default_slices(key_count: int, default_parallelism: int) -> int:
    """Four slices per core (to balance the load), but at least :data:`MIN_KEYS_PER_SLICE` and at
    most :data:`MAX_KEYS_PER_SLICE` keys in each (small tasks: a failed one redoes little, and
    Spark ships each task's keys in the task itself); one slice at least."""
    per_core = 4 * max(1, default_parallelism)
    fewest = -(-key_count // MAX_KEYS_PER_SLICE)
    most = -(-key_count // MIN_KEYS_PER_SLICE)
    return max(1, min(most, max(per_core, fewest)))


@functools.cache
def _ship_by_value() -> None:
    """Executors unpickle :func:`_delete_slice` without importing this repository."""
    cloudpickle: Any = importlib.import_module("pyspark.cloudpickle")  # pyspark only if used
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def delete_keys_with_spark(
    spark: Any,
    root: str,
    keys: Sequence[str],
    *,
    slices: int | None = None,
    threads_per_slice: int = DEFAULT_THREADS,
    latency_s: float = 0.0,
    fail_task_tokens_dir: str | None = None,
) -> DeleteCounts:
    """Deletes ``keys`` with a Spark job: ``parallelize(keys, slices)``, then in each Spark
    partition the thread-pool delete of :func:`delete_keys_locally`. Only per-partition counts
    (and failed keys) come back to the driver, summed. ``slices`` defaults to
    :func:`default_slices`. A Spark failure (a task failing more often than Spark retries it)
    raises the Spark exception.

    Bench/test hooks: ``latency_s`` as in :func:`delete_keys_locally`; ``fail_task_tokens_dir``,
    a directory readable by the executors whose files each make one task raise before deleting
    anything (the file is removed: N files, N failed tasks)."""
    _check_threads(threads_per_slice, latency_s)
    key_list = list(keys)
    if not key_list:
        return NO_COUNTS
    sc = spark.sparkContext
    if slices is None:
        slices = default_slices(len(key_list), int(sc.defaultParallelism))
    elif slices < 1:
        raise ValueError(f"slices must be >= 1, got {slices}")
    _ship_by_value()
    task = functools.partial(
        _delete_slice, root, threads_per_slice, latency_s, fail_task_tokens_dir
    )
    sc.setJobDescription(f"{APP_NAME}: {len(key_list)} objects under {root}")
    try:
        raws = sc.parallelize(key_list, slices).mapPartitions(task).collect()
    finally:
        sc.setJobDescription(None)
    return sum((_counts(raw) for raw in raws), NO_COUNTS)


# ============================================================================= Spark session


class SparkSessionProvider:
    """One long-lived SparkSession, started on the first :meth:`get` (thread-safe; start-up takes
    seconds, so share one provider per process). Settings from NOTES.md: ``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` default to this interpreter (workers otherwise run the system
    python), ``SPARK_LOCAL_IP`` to 127.0.0.1, no UI, no console progress bar, Spark's log4j2 at
    warn. ``master`` is set only when given, or else when neither ``conf`` (``spark.master``) nor
    a ``spark-submit`` launch provides one: then it is ``local[*]``. ``conf`` entries are applied
    last (``spark.driver.extraJavaOptions`` / ``spark.executor.extraJavaOptions`` given there are
    kept, after the log4j2 option)."""

    def __init__(self, master: str | None = None, conf: Mapping[str, str] | None = None) -> None:
        self._master = master
        self._conf = dict(conf or {})
        self._lock = threading.Lock()
        self._session: Any = None
        self._tmpdir: str | None = None
        self.start_seconds: float | None = None
        """How long the session took to start, once started."""

    @property
    def started(self) -> bool:
        return self._session is not None

    def effective_master(self) -> str | None:
        """The master this provider sets on the builder (None: left to conf or spark-submit)."""
        if self._master:
            return self._master
        if "spark.master" in self._conf or os.environ.get("PYSPARK_GATEWAY_PORT"):
            return None  # conf carries it, or spark-submit launched us with its --master
        return DEFAULT_MASTER

    def get(self) -> Any:
        """The session, started if needed."""
        with self._lock:
            if self._session is None:
                self._session = self._start()
            return self._session

    def _start(self) -> Any:
        from pyspark.sql import SparkSession  # noqa: PLC0415 - the JVM only where Spark is used

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        self._tmpdir = tempfile.mkdtemp(prefix="tiered-spark-")
        log4j2 = Path(self._tmpdir) / "log4j2.properties"
        log4j2.write_text(_LOG4J2_PROPERTIES, encoding="utf-8")
        java_option = f"-Dlog4j2.configurationFile={log4j2.as_uri()}"
        builder = SparkSession.builder.appName(APP_NAME)
        master = self.effective_master()
        if master is not None:
            builder = builder.master(master)
        settings = {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            **self._conf,
        }
        for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            settings[key] = " ".join(filter(None, [java_option, self._conf.get(key)]))
        for key, value in settings.items():
            builder = builder.config(key, value)
        started = time.perf_counter()
        try:
            session = builder.getOrCreate()
        except BaseException:
            self._remove_tmpdir()
            raise
        self.start_seconds = time.perf_counter() - started
        logger.info(
            "SparkSession %s started in %.1f s (master %s, python %s)",
            APP_NAME,
            self.start_seconds,
            session.sparkContext.master,
            os.environ["PYSPARK_PYTHON"],
        )
        return session

    def stop(self) -> None:
        """Stops the session if one was started. Idempotent; a later :meth:`get` starts anew."""
        with self._lock:
            session, self._session = self._session, None
            try:
                if session is not None:
                    session.stop()
            finally:
                self._remove_tmpdir()

    def _remove_tmpdir(self) -> None:
        tmpdir, self._tmpdir = self._tmpdir, None
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


# ============================================================================= the deleter


class BulkObjectDeleter:
    """Deletes object keys under ``root``: up to ``fast_path_max_objects`` keys in this process
    on a thread pool (the fast path: no Spark session is started for small jobs), more with a
    Spark job. The path is chosen again on each attempt, so retrying a few failed keys of a large
    job takes the fast path.

    Keys that fail are retried, and only they, up to ``retries`` times with ``backoff`` between
    attempts; those still failing come back in ``failed_keys``. A job that fails as a whole (a
    Spark exception, e.g. a task failing more often than Spark retries it; in ``local`` mode Spark
    does not retry tasks) is retried the same way, and after the last attempt raises
    :class:`BulkDeleteError`. Objects a failed job did delete count as ``missing`` on the retry.

    ``latency_s`` and ``fail_task_tokens_dir`` are bench/test hooks passed to the delete
    functions; ``sleep`` waits between attempts (tests may pass a recording one)."""

    def __init__(
        self,
        root: str,
        spark_provider: SparkSessionProvider,
        *,
        fast_path_max_objects: int = DEFAULT_FAST_PATH_MAX_OBJECTS,
        retries: int = DEFAULT_RETRIES,
        backoff: ExponentialBackoff = DEFAULT_BACKOFF,
        threads: int = DEFAULT_THREADS,
        slices: int | None = None,
        latency_s: float = 0.0,
        fail_task_tokens_dir: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if fast_path_max_objects < 0 or retries < 0:
            raise ValueError("fast_path_max_objects and retries must be >= 0")
        _check_threads(threads, latency_s)
        self.root = root
        self._spark = spark_provider
        self._fast_path_max = fast_path_max_objects
        self._retries = retries
        self._backoff = backoff
        self._threads = threads
        self._slices = slices
        self._latency_s = latency_s
        self._tokens_dir = fail_task_tokens_dir
        self._sleep = sleep

    def delete(self, keys: Sequence[str]) -> DeleteCounts:
        """Deletes ``keys`` (duplicates once); see the class docstring for retries."""
        pending = list(dict.fromkeys(keys))
        requested = len(pending)
        if not pending:
            return NO_COUNTS
        total = NO_COUNTS
        last: DeleteCounts | None = None
        started = time.perf_counter()
        for attempt in range(self._retries + 1):
            if attempt > 0:
                self._sleep(self._backoff.delay_s(attempt - 1))
            try:
                last = self._attempt(pending, attempt)
            except Exception as e:
                if attempt == self._retries:
                    raise BulkDeleteError(
                        f"bulk delete of {len(pending)} objects under {self.root} gave up after "
                        f"{attempt + 1} attempts, the last failing as a whole: {_describe(e)}"
                    ) from e
                logger.warning(
                    "bulk delete of %d objects under %s failed (attempt %d of %d), retrying: %s",
                    len(pending),
                    self.root,
                    attempt + 1,
                    self._retries + 1,
                    _describe(e),
                )
                continue
            total += DeleteCounts(last.deleted, last.missing, 0)
            pending = list(last.failed_keys)
            if not pending:
                break
        first_error = last.first_error if pending and last is not None else None
        result = DeleteCounts(
            total.deleted, total.missing, len(pending), tuple(pending), first_error
        )
        logger.log(
            logging.WARNING if pending else logging.INFO,
            "bulk delete of %d objects under %s: %d deleted, %d already missing, %d failed%s "
            "in %.2f s",
            requested,
            self.root,
            result.deleted,
            result.missing,
            result.failed,
            f" (first: {result.first_error})" if result.failed else "",
            time.perf_counter() - started,
        )
        return result

    def _attempt(self, keys: list[str], attempt: int) -> DeleteCounts:
        use_spark = len(keys) > self._fast_path_max
        path = "Spark" if use_spark else "fast path (in process)"
        started = time.perf_counter()
        if use_spark:
            counts = delete_keys_with_spark(
                self._spark.get(),
                self.root,
                keys,
                slices=self._slices,
                threads_per_slice=self._threads,
                latency_s=self._latency_s,
                fail_task_tokens_dir=self._tokens_dir,
            )
        else:
            counts = delete_keys_locally(self.root, keys, self._threads, self._latency_s)
        logger.info(
            "deleting %d objects under %s via %s (attempt %d): %d deleted, %d missing, "
            "%d failed in %.2f s",
            len(keys),
            self.root,
            path,
            attempt + 1,
            counts.deleted,
            counts.missing,
            counts.failed,
            time.perf_counter() - started,
        )
        return counts


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
