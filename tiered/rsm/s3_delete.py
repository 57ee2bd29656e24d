"""The object deleter of the fsspec RemoteStorageManager on S3: what the bulk delete job runs, in
the controller for small jobs and on Spark executors for large ones (docs/internals/bulk-delete.md).

It deletes with DeleteObjects, at most :data:`MAX_KEYS_PER_REQUEST` keys a request (S3's limit),
requests running on a thread pool. S3 answers a DeleteObjects request per key: a key throttled or
hit by an internal error comes back in the answer's ``Errors`` and only those keys are sent again;
a whole request answered 503 SlowDown or 5xx, or lost with its connection, is sent again whole.
Both wait the backoff of the storage's one :class:`~tiered.retry.RetryPolicy`. S3 reports a key
that was already gone as deleted, so missing objects count as deleted.

It is a small picklable value: the :class:`~tiered.rsm.s3.S3Settings` (endpoint, region, CA file
and the path of a credentials file, never the credentials: an executor reads its host's own
``remote.storage.s3.executor.credentials.file``) and two settings. Executors need the ``tiered``
library and s3fs, and that file.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tiered.api import DeleteOutcome, RemoteObjectDeleter, RemoteStorageException
from tiered.retry import RetryPolicy
from tiered.rsm.fsspec_delete import DEFAULT_DELETE_THREADS
from tiered.rsm.s3 import TRANSIENT_ERROR_CODES, S3Settings, describe_error, is_transient
from tiered.rsm.settings import DEFAULT_RETRY_POLICY

__all__ = ["MAX_KEYS_PER_REQUEST", "S3ObjectDeleter"]

logger = logging.getLogger(__name__)

MAX_KEYS_PER_REQUEST = 1000
"""S3's limit on the keys of one DeleteObjects request."""
_MISSING_CODES = frozenset({"NoSuchKey"})

_filesystems: dict[tuple[int, S3Settings, int], Any] = {}
_filesystems_lock = threading.Lock()


def _filesystem(settings: S3Settings, connections: int) -> Any:
    """One s3fs filesystem per process and settings: a deleter is called many times (each
    fast-path delete of a job), and a new filesystem opens new connections. Keyed by pid too: a
    forked Spark worker builds its own."""
    key = (os.getpid(), settings, connections)
    with _filesystems_lock:
        fs = _filesystems.get(key)
        if fs is None:
            fs = _filesystems[key] = settings.filesystem(pool_connections=connections)
        return fs


@dataclass(frozen=True)
class S3ObjectDeleter(RemoteObjectDeleter):
    """Deletes keys relative to the S3 root of ``settings`` (the handles the fsspec RSM lists)
    with DeleteObjects requests on ``threads`` threads, retrying with ``retry``."""

    settings: S3Settings
    threads: int = DEFAULT_DELETE_THREADS
    retry: RetryPolicy = DEFAULT_RETRY_POLICY

    def __post_init__(self) -> None:
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be an int >= 1, got {self.threads!r}")

    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        keys = list(handles)
        if not keys:
            return DeleteOutcome()
        try:
            fs = _filesystem(self.settings, self.threads)
        except Exception as e:
            raise RemoteStorageException(
                f"no S3 filesystem for {self.settings!r}: "
                f"{type(e).__name__}: {self.settings.redact(str(e))}"
            ) from None
        requests = [
            keys[start : start + MAX_KEYS_PER_REQUEST]
            for start in range(0, len(keys), MAX_KEYS_PER_REQUEST)
        ]
        workers = min(self.threads, len(requests))
        if workers == 1:
            return sum((self._delete_request(fs, r) for r in requests), DeleteOutcome())
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rsm-delete") as pool:
            return sum(pool.map(lambda r: self._delete_request(fs, r), requests), DeleteOutcome())

    def _object_key(self, handle: str) -> str:
        prefix = self.settings.prefix
        return f"{prefix}/{handle}" if prefix else handle

    def _handle(self, object_key: str) -> str:
        prefix = self.settings.prefix
        return object_key[len(prefix) + 1 :] if prefix else object_key

    def _delete_request(self, fs: Any, handles: list[str]) -> DeleteOutcome:
        """One request's keys, sent again (only those still failing) while the policy allows."""
        pending = handles
        missing = 0
        failed: list[str] = []
        first_error: str | None = None
        last_error: str | None = None
        for _ in self.retry.attempts():
            try:
                answer = fs.call_s3(
                    "delete_objects",
                    Bucket=self.settings.bucket,
                    Delete={
                        "Objects": [{"Key": self._object_key(h)} for h in pending],
                        "Quiet": True,
                    },
                )
            except Exception as e:
                last_error = f"{pending[0]}: {self.settings.redact(describe_error(e))}"
                if is_transient(e):
                    logger.debug("DeleteObjects of %d keys failed, retrying: %s", len(pending), e)
                    continue
                break
            again: list[str] = []
            for error in answer.get("Errors") or ():
                handle = self._handle(str(error.get("Key", "")))
                code = str(error.get("Code", ""))
                if code in _MISSING_CODES:
                    missing += 1
                    continue
                described = self.settings.redact(f"{handle}: {code}: {error.get('Message', '')}")
                if code in TRANSIENT_ERROR_CODES:
                    again.append(handle)
                    last_error = described
                else:
                    failed.append(handle)
                    first_error = first_error or described
            pending = again
            if not pending:
                break
        failed.extend(pending)  # still failing when the policy gave up
        if pending:
            first_error = first_error or last_error
        deleted = len(handles) - missing - len(failed)
        return DeleteOutcome(deleted, missing, tuple(failed), first_error if failed else None)
