"""SQLite backend: one database file shared by the processes of one host.

WAL mode lets readers run beside the one writer; ``BEGIN IMMEDIATE`` makes each multi a single
serialized transaction, and ``busy_timeout`` turns cross-process lock contention into waiting instead
of errors. Watches poll ``PRAGMA data_version``, which changes only when another connection commits,
so checking a watched key costs one pragma unless something really changed.

Opening is serialized across processes by an ``flock`` on ``{path}.open-lock``: switching a new
database to WAL and creating the schema take locks for which SQLite may answer "database is
locked" at once instead of calling the busy handler, so brokers of one host starting together
could fail to open the file they share.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

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

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (
    key TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    value BLOB NOT NULL,
    version INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_parent ON kv (parent, key);
"""


class SqliteBackend(MetadataStorageBackend):
    def __init__(self, path: str, busy_timeout_ms: int = 30_000) -> None:
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            with _open_lock(path):
                self._db = sqlite3.connect(
                    path,
                    timeout=busy_timeout_ms / 1000,
                    isolation_level=None,
                    check_same_thread=False,
                )
                self._db.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
                self._db.execute("PRAGMA journal_mode=WAL")
                # NORMAL in WAL mode is durable against process crashes; FULL also survives power
                # loss on the last transaction, which is what "returns once durable" promises.
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as e:
            raise StorageBackendError(f"cannot open sqlite metadata store {path}: {e}") from e
        self._path = path
        self._lock = threading.RLock()
        self._watches: dict[str, WatchCallback] = {}
        self._watched_versions: dict[str, int | None] = {}
        self._watch_data_version: dict[str, int] = {}
        self._closed = False
        # While a group (``grouped``) is open: its writes, noted for the watches once committed,
        # and the data version, which no other connection can change until the group commits.
        self._group_written: dict[str, int | None] | None = None
        self._group_data_version = 0

    def __repr__(self) -> str:
        return f"SqliteBackend({self._path!r})"

    def get(self, key: str) -> Versioned | None:
        row = self._query_one("SELECT value, version FROM kv WHERE key = ?", (validate_key(key),))
        return None if row is None else Versioned(_blob(row[0]), _int(row[1]))

    def get_many(self, keys: Sequence[str]) -> list[Versioned | None]:
        found: dict[str, Versioned] = {}
        for start in range(0, len(keys), 500):
            batch = [validate_key(k) for k in keys[start : start + 500]]
            marks = ",".join("?" * len(batch))
            rows = self._query_all(
                f"SELECT key, value, version FROM kv WHERE key IN ({marks})", tuple(batch)
            )
            found.update({str(k): Versioned(_blob(v), _int(n)) for k, v, n in rows})
        return [found.get(key) for key in keys]

    def get_by_prefix(self, parent: str) -> dict[str, Versioned]:
        rows = self._query_all(
            "SELECT key, value, version FROM kv WHERE parent = ? ORDER BY key", (parent,)
        )
        return {str(k).rsplit("/", 1)[-1]: Versioned(_blob(v), _int(n)) for k, v, n in rows}

    def list_children(self, parent: str) -> list[str]:
        rows = self._query_all("SELECT key FROM kv WHERE parent = ? ORDER BY key", (parent,))
        return [str(k).rsplit("/", 1)[-1] for (k,) in rows]

    def multi(self, ops: Sequence[Op]) -> None:
        written: dict[str, int | None] = {}
        with self._lock, self._transaction():
            for op in ops:
                self._apply(op, written)
        self._note_written(written)

    @contextlib.contextmanager
    def grouped(self) -> Iterator[None]:
        """One ``BEGIN IMMEDIATE`` transaction for the block, each write a savepoint in it: one
        fsync for all. Holds this instance's lock throughout."""
        with self._lock:
            if self._group_written is not None:
                yield
                return
            self._check_open()
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._group_data_version = self._data_version()
            except sqlite3.Error as e:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StorageBackendError(f"sqlite metadata store {self._path}: {e}") from e
            written: dict[str, int | None] = {}
            self._group_written = written
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException as e:
                if self._db.in_transaction:  # a failed COMMIT leaves the transaction open
                    self._db.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise StorageBackendError(f"sqlite metadata store {self._path}: {e}") from e
                raise
            finally:
                self._group_written = None
            self._note_written(written)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """One atomic write: a transaction of its own, or a savepoint of the open group (whose
        other writes it leaves alone if it fails). Called under the lock."""
        self._check_open()
        grouped = self._group_written is not None
        try:
            self._db.execute("SAVEPOINT write" if grouped else "BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                if grouped:
                    self._db.execute("ROLLBACK TO write")
                    self._db.execute("RELEASE write")
                else:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("RELEASE write" if grouped else "COMMIT")
        except sqlite3.Error as e:
            if not grouped and self._db.in_transaction:  # a failed COMMIT leaves it open
                self._db.execute("ROLLBACK")
            raise StorageBackendError(f"sqlite metadata store {self._path}: {e}") from e

    def _note_written(self, written: dict[str, int | None]) -> None:
        """Our own writes of watched keys are not news to their watches (once committed)."""
        with self._lock:
            if self._group_written is not None:
                self._group_written.update(written)
                return
            for key, version in written.items():
                if key in self._watches:
                    self._watched_versions[key] = version

    def _apply(self, op: Op, written: dict[str, int | None]) -> None:
        key = validate_key(op.key)
        row = self._db.execute("SELECT version FROM kv WHERE key = ?", (key,)).fetchone()
        current = None if row is None else int(row[0])
        if isinstance(op, Create):
            if current is not None:
                raise VersionConflictError(f"{key} already exists", key)
            self._create_ancestors(key)
            self._db.execute(
                "INSERT INTO kv (key, parent, value, version) VALUES (?, ?, ?, 0)",
                (key, parent_of(key), op.value),
            )
            written[key] = 0
            return
        _check_version(key, current, op.expected_version)
        assert current is not None
        if isinstance(op, Update):
            self._db.execute(
                "UPDATE kv SET value = ?, version = ? WHERE key = ?", (op.value, current + 1, key)
            )
            written[key] = current + 1
        elif isinstance(op, Delete):
            if self._db.execute("SELECT 1 FROM kv WHERE parent = ? LIMIT 1", (key,)).fetchone():
                raise VersionConflictError(f"{key} still has children", key)
            self._db.execute("DELETE FROM kv WHERE key = ?", (key,))
            written[key] = None
        elif not isinstance(op, Check):  # pragma: no cover - exhaustive over Op
            raise TypeError(f"unknown op {op!r}")

    def _create_ancestors(self, key: str) -> None:
        parent = parent_of(key)
        missing: list[str] = []
        while parent:
            if self._db.execute("SELECT 1 FROM kv WHERE key = ?", (parent,)).fetchone():
                break
            missing.append(parent)
            parent = parent_of(parent)
        for ancestor in reversed(missing):
            self._db.execute(
                "INSERT INTO kv (key, parent, value, version) VALUES (?, ?, x'', 0)",
                (ancestor, parent_of(ancestor)),
            )

    def remove_by_prefix(self, key: str) -> None:
        key = validate_key(key)
        # '/' is 0x2F and '0' is 0x30: the range holds exactly the keys below `key`.
        with self._lock, self._transaction():
            self._db.execute(
                "DELETE FROM kv WHERE key = ? OR (key >= ? AND key < ?)",
                (key, key + "/", key + "0"),
            )

    def watch(self, key: str, callback: WatchCallback) -> None:
        with self._lock:
            self._watches[validate_key(key)] = callback
            current = self.get(key)
            self._watched_versions[key] = None if current is None else current.version
            self._watch_data_version[key] = self._data_version()

    def unwatch(self, key: str) -> None:
        with self._lock:
            self._watches.pop(key, None)
            self._watched_versions.pop(key, None)
            self._watch_data_version.pop(key, None)

    def deliver_watches(self, key: str) -> None:
        with self._lock:
            callback = self._watches.get(key)
            if callback is None:
                return
            grouped = self._group_written is not None
            data_version = self._group_data_version if grouped else self._data_version()
            if data_version == self._watch_data_version.get(key):
                return
            self._watch_data_version[key] = data_version
            current = self.get(key)
            version = None if current is None else current.version
            if version == self._watched_versions.get(key):
                return
            self._watched_versions[key] = version
        callback(key, version)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._db.close()

    def _data_version(self) -> int:
        row = self._query_one("PRAGMA data_version", ())
        assert row is not None
        return _int(row[0])

    def _check_open(self) -> None:
        if self._closed:
            raise StorageBackendError(f"sqlite metadata store {self._path} is closed")

    def _query_one(self, sql: str, args: tuple[object, ...]) -> tuple[object, ...] | None:
        with self._lock:
            self._check_open()
            try:
                row: tuple[object, ...] | None = self._db.execute(sql, args).fetchone()
                return row
            except sqlite3.Error as e:
                raise StorageBackendError(f"sqlite metadata store {self._path}: {e}") from e

    def _query_all(self, sql: str, args: tuple[object, ...]) -> list[tuple[object, ...]]:
        with self._lock:
            self._check_open()
            try:
                return list(self._db.execute(sql, args).fetchall())
            except sqlite3.Error as e:
                raise StorageBackendError(f"sqlite metadata store {self._path}: {e}") from e


def _check_version(key: str, current: int | None, expected: int) -> None:
    if current is None:
        raise VersionConflictError(f"{key} does not exist", key)
    if expected not in (ANY_VERSION, current):
        raise VersionConflictError(f"{key} is at version {current}, expected {expected}", key)


def _blob(value: object) -> bytes:
    assert isinstance(value, bytes | bytearray | memoryview), value
    return bytes(value)


def _int(value: object) -> int:
    assert isinstance(value, int), value
    return value


@contextlib.contextmanager
def _open_lock(path: str) -> Iterator[None]:
    """Holds an exclusive ``flock`` on ``{path}.open-lock`` (blocking) while a process opens and
    initializes the database; released on exit, and by the kernel if the process dies."""
    fd = os.open(f"{path}.open-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
