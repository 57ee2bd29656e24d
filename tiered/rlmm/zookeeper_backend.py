"""ZooKeeper backend (kazoo): keys are znodes under the connect string's chroot.

Each multi is one ZooKeeper transaction. Missing ancestors of a created key are created inside that
same transaction (after an ``exists`` read), never beforehand, so a crash can not leave parents
behind without the data they were made for. Reads retry through an injected ``RetryPolicy``
(:data:`~tiered.retry_policies.ZOOKEEPER_RLMM_READ_RETRY`). Writes are never sent twice: a
transaction whose answer was lost (the connection dropped, as when the ZooKeeper leader dies, or
the wait timed out) may have committed, so it is read back once the session is back; only if that
does not show it committed is its outcome reported unknown (the caller re-reads).
Every request waits at most the session timeout: kazoo queues requests made while disconnected and
would otherwise block until the server is back. Many keys are read at once by ZooKeeper's multiRead
(``tiered.zk_multi_read``), or one async get each on a server without it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from tiered.retry import RetryPolicy
from tiered.retry_policies import ZOOKEEPER_RLMM_READ_RETRY
from tiered.rlmm.backend import (
    ANY_VERSION,
    Check,
    Create,
    Delete,
    MetadataStorageBackend,
    Op,
    StorageBackendError,
    Update,
    VersionConflictError,
    Versioned,
    WatchCallback,
    parent_of,
    validate_key,
)
from tiered.security.zookeeper_acl import ZooKeeperAuthenticationError
from tiered.security.zookeeper_auth import NO_SECURITY, ZooKeeperSecurity
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient, first_failure
from tiered.zk_multi_read import BulkReader

_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError)
_ASYNC_BATCH = 1000


# A read may be sent again once the connection is back (or a new session is up); a client that
# was closed is not coming back.
_READ_RETRIED: tuple[type[Exception], ...] = (
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
)


def _read_retriable(error: Exception) -> bool:
    return not isinstance(error, ConnectionClosedError)


class ZooKeeperBackend(MetadataStorageBackend):
    def __init__(
        self,
        connect: str,
        session_timeout_s: float = 10.0,
        connect_timeout_s: float = 15.0,
        read_retry: RetryPolicy = ZOOKEEPER_RLMM_READ_RETRY,
        security: ZooKeeperSecurity = NO_SECURITY,
    ) -> None:
        self._zk = ZkClient(connect, session_timeout_s, security)
        self._chroot = self._zk.chroot
        self._reader = BulkReader(self._zk)
        self._read_retry = read_retry
        self._known_paths: set[str] = set()
        self._lock = threading.Lock()
        self._watch_tokens: dict[str, object] = {}
        try:
            self._zk.start(connect_timeout_s)
        except ZooKeeperAuthenticationError as e:
            raise StorageBackendError(f"{e} (RLMM, ZooKeeper at {connect})") from e
        except TRANSPORT_ERRORS as e:
            raise StorageBackendError(f"cannot connect to ZooKeeper at {connect}: {e}") from e
        self._closed = False

    def __repr__(self) -> str:
        return f"ZooKeeperBackend({self._zk.connect!r})"

    def _path(self, key: str) -> str:
        return f"{self._chroot}/{validate_key(key)}"

    def _parent_path(self, parent: str) -> str:
        return f"{self._chroot}/{validate_key(parent)}" if parent else self._chroot or "/"

    def _check_open(self) -> None:
        if self._closed:
            raise StorageBackendError(f"ZooKeeper metadata store {self._zk.connect} is closed")

    def _read(self, start: Callable[..., Any], *args: Any) -> Any:
        """A read under the retry policy."""
        return self._read_retry(
            lambda: self._zk.wait(start(*args)),
            retry_on=_READ_RETRIED,
            retry_if=_read_retriable,
        )

    def get(self, key: str) -> Versioned | None:
        path = self._path(key)
        try:
            data, stat = self._read(self._zk.kazoo.get_async, path)
        except NoNodeError:
            return None
        except TRANSPORT_ERRORS as e:
            raise StorageBackendError(f"ZooKeeper get {path}: {e}") from e
        return Versioned(bytes(data), int(stat.version))

    def get_many(self, keys: Sequence[str]) -> list[Versioned | None]:
        return self._get_paths([self._path(k) for k in keys])

    def _get_paths(self, paths: Sequence[str]) -> list[Versioned | None]:
        try:
            found = self._reader.retrying(lambda: self._reader.read(paths))
        except TRANSPORT_ERRORS as e:
            raise StorageBackendError(f"ZooKeeper get of {len(paths)} znodes: {e}") from e
        return [None if z is None else Versioned(*z) for z in found]

    def list_children(self, parent: str) -> list[str]:
        path = self._parent_path(parent)
        try:
            children: list[str] = self._read(self._zk.kazoo.get_children_async, path)
        except NoNodeError:
            return []
        except TRANSPORT_ERRORS as e:
            raise StorageBackendError(f"ZooKeeper get_children {path}: {e}") from e
        return sorted(children)

    def get_by_prefix(self, parent: str) -> dict[str, Versioned]:
        names = self.list_children(parent)
        base = self._parent_path(parent).rstrip("/")
        values = self._get_paths([f"{base}/{name}" for name in names])
        # A child removed between the listing and its read is left out.
        return {name: v for name, v in zip(names, values, strict=True) if v is not None}

    def multi(self, ops: Sequence[Op]) -> None:
        self._check_open()
        if not ops:
            return
        failure = self._try_multi(ops, trust_known_paths=True)
        if failure is not None and failure[2] and isinstance(failure[1], NoNodeError):
            # A create found no parent: the cached ancestors may have been removed by another
            # writer. The failed transaction applied nothing, so build it again from fresh reads.
            failure = self._try_multi(ops, trust_known_paths=False)
        if failure is not None:
            key, error, _ = failure
            if isinstance(error, _CONFLICTS):
                raise VersionConflictError(
                    f"{key}: {type(error).__name__}", key.removeprefix(self._chroot + "/")
                )
            raise StorageBackendError(f"ZooKeeper transaction failed at {key}: {error!r}")

    def _try_multi(
        self, ops: Sequence[Op], trust_known_paths: bool
    ) -> tuple[str, Exception, bool] | None:
        """Commits ``ops`` as one transaction; the failed ``(path, error, is_create)``, None if it
        committed."""
        txn = self._zk.kazoo.transaction()
        keys: list[str] = []  # the key behind each transaction op, for error messages
        created: set[str] = set()
        try:
            for op in ops:
                path = self._path(op.key)
                if isinstance(op, Create):
                    for ancestor in self._missing_ancestors(path, created, trust_known_paths):
                        txn.create(ancestor, b"")
                        keys.append(ancestor)
                        created.add(ancestor)
                    txn.create(path, op.value)
                    created.add(path)
                elif isinstance(op, Update):
                    txn.set_data(path, op.value, version=op.expected_version)
                elif isinstance(op, Delete):
                    txn.delete(path, version=op.expected_version)
                elif isinstance(op, Check):
                    txn.check(path, version=op.expected_version)
                keys.append(path)
        except TRANSPORT_ERRORS as e:  # an ancestor's read failed: nothing was sent
            raise StorageBackendError(f"ZooKeeper transaction ({len(keys)} ops): {e}") from e
        try:
            results = self._zk.wait(txn.commit_async())
        except TRANSPORT_ERRORS as e:
            if not self._committed_after_all(ops):
                raise StorageBackendError(
                    f"ZooKeeper transaction ({len(keys)} ops), outcome unknown: {e!r}"
                ) from e
            results = []  # its answer was lost, but it committed
        failure = first_failure(results)
        with self._lock:
            if failure is not None:
                self._known_paths.clear()  # an ancestor we believed in may be gone
            else:
                self._known_paths.update(created)
        if failure is None:
            return None
        index, error = failure
        return keys[index], error, keys[index] in created

    def _committed_after_all(self, ops: Sequence[Op]) -> bool:
        """Whether a transaction whose answer was lost committed, read back once the session is
        back (the reads wait for it; ``sync`` first, so the server we read from has applied
        whatever the leader committed). ZooKeeper applies a transaction whole and versions only
        grow: if every key it creates or updates holds its value at the version it gave, it
        committed. Anything else (not committed, overwritten since, unreadable) counts as no."""
        writes = [op for op in ops if isinstance(op, Create | Update)]
        if not writes:
            return False
        try:
            self._read(self._zk.kazoo.sync_async, self._path(writes[0].key))
            found = self._get_paths([self._path(op.key) for op in writes])
        except StorageBackendError:
            return False
        except TRANSPORT_ERRORS:
            return False
        for op, stored in zip(writes, found, strict=True):
            if stored is None or stored.value != op.value:
                return False
            if isinstance(op, Create) and stored.version != 0:
                return False
            if (
                isinstance(op, Update)
                and op.expected_version != ANY_VERSION
                and stored.version != op.expected_version + 1
            ):
                return False
        return True

    def _missing_ancestors(
        self, path: str, created: set[str], trust_known_paths: bool = True
    ) -> list[str]:
        missing: list[str] = []
        ancestor = parent_of(path)
        while ancestor and ancestor != self._chroot and ancestor not in created:
            if trust_known_paths and ancestor in self._known_paths:
                break
            if self._read(self._zk.kazoo.exists_async, ancestor) is not None:
                with self._lock:
                    self._known_paths.add(ancestor)
                break
            missing.append(ancestor)
            ancestor = parent_of(ancestor)
        return list(reversed(missing))

    def remove_by_prefix(self, key: str) -> None:
        root = self._path(key)
        try:
            levels = self._subtree_levels(root)
            for level in reversed(levels):  # leaves first
                for start in range(0, len(level), _ASYNC_BATCH):
                    pending = [
                        self._zk.kazoo.delete_async(p) for p in level[start : start + _ASYNC_BATCH]
                    ]
                    for async_result in pending:
                        with contextlib.suppress(NoNodeError):
                            self._zk.wait(async_result)
        except NotEmptyError as e:
            raise VersionConflictError(f"{root}: written to while being removed", key) from e
        except TRANSPORT_ERRORS as e:
            raise StorageBackendError(f"ZooKeeper remove {root}: {e}") from e
        finally:
            with self._lock:
                self._known_paths = {p for p in self._known_paths if not p.startswith(root)}

    def _subtree_levels(self, root: str) -> list[list[str]]:
        """The paths of the subtree at ``root``, grouped by depth (root first)."""
        if self._read(self._zk.kazoo.exists_async, root) is None:
            return []
        levels = [[root]]
        while True:
            pending = [(p, self._zk.kazoo.get_children_async(p)) for p in levels[-1]]
            below: list[str] = []
            for parent, async_result in pending:
                try:
                    below.extend(f"{parent}/{c}" for c in self._zk.wait(async_result))
                except NoNodeError:
                    continue
            if not below:
                return levels
            levels.append(below)

    def watch(self, key: str, callback: WatchCallback) -> None:
        self._check_open()
        path = self._path(key)
        token = object()
        with self._lock:
            self._watch_tokens[key] = token
        first = True

        def on_change(_data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            nonlocal first
            if self._watch_tokens.get(key) is not token:
                return False  # unwatched or replaced: kazoo stops calling
            if first:  # kazoo calls once at registration with the current state
                first = False
                return None
            callback(key, None if stat is None else int(stat.version))
            return None

        try:
            self._zk.kazoo.DataWatch(path, on_change)
        except TRANSPORT_ERRORS as e:
            raise StorageBackendError(f"ZooKeeper watch {path}: {e}") from e

    def unwatch(self, key: str) -> None:
        with self._lock:
            self._watch_tokens.pop(key, None)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._watch_tokens.clear()
        self._zk.close()


# The version sentinel is ZooKeeper's own "any version".
assert ANY_VERSION == -1
