"""The object deleter of the fsspec RemoteStorageManager: what the bulk delete job runs, in the
controller for small jobs and on Spark executors for large ones (docs/internals/bulk-delete.md).

It is a small picklable value (the root URL and two settings) that rebuilds the filesystem with
``fsspec.core.url_to_fs`` where it runs, so executors need fsspec (and the filesystem's plugin)
and the ``tiered`` library, not the controller. The deletes of one call run
on a thread pool: object stores answer in milliseconds, and a thread per core, waiting out one
answer after another, would leave them idle.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import fsspec.core

from tiered.api import DeleteOutcome, RemoteObjectDeleter, RemoteStorageException

DEFAULT_DELETE_THREADS = 16


@dataclass(frozen=True)
class FsspecObjectDeleter(RemoteObjectDeleter):
    """Deletes keys (relative to ``root``, the handles the fsspec RSM lists) on ``threads``
    threads pulling keys from one iterator. Deleting a key that is already gone counts as
    ``missing``; only filesystems that report a missing object (local, ``memory://``) can tell,
    on object stores a DELETE of a missing key succeeds and counts as ``deleted``."""

    root: str
    threads: int = DEFAULT_DELETE_THREADS

    def __post_init__(self) -> None:
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {self.threads!r}")

    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        keys = list(handles)
        if not keys:
            return DeleteOutcome()
        try:
            fs, path = fsspec.core.url_to_fs(self.root)
        except Exception as e:
            raise RemoteStorageException(
                f"no filesystem for {self.root!r}: {type(e).__name__}: {e}"
            ) from e
        base = str(path).rstrip("/")
        pending = iter(keys)
        lock = threading.Lock()

        def work() -> DeleteOutcome:
            deleted = missing = 0
            failed: list[str] = []
            first_error: str | None = None
            while True:
                with lock:
                    key = next(pending, None)
                if key is None:
                    return DeleteOutcome(deleted, missing, tuple(failed), first_error)
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

        workers = min(self.threads, len(keys))
        if workers == 1:
            return work()
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rsm-delete") as pool:
            parts = [f.result() for f in [pool.submit(work) for _ in range(workers)]]
        return sum(parts, DeleteOutcome())
