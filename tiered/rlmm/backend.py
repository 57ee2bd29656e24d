"""The storage backend under the RemoteLogMetadataManager: a small versioned key-value store.

This is the seed's ``MetadataStorageBackend`` (create, update, get, get-by-prefix, remove-by-prefix,
atomic multi) made conditional throughout. Keys are ``/``-separated paths; a key's *children* are the
keys one level below it. Backends are thin and chosen by ``rlmm.backend``; they are imported lazily so
that, for example, kazoo is needed only for ZooKeeper.

Error contract for every method:

- A precondition that does not hold (a create of an existing key, an update or delete at another
  version or of a missing key) raises :class:`VersionConflictError`, and in a :meth:`multi` nothing is
  applied. A lost race is always reported; nothing is silently overwritten.
- Any transport or storage failure (connection lost, disk error, timeout) raises
  :class:`StorageBackendError`, whose subclass :class:`VersionConflictError` is the only one that means
  "the store answered no". After a ``StorageBackendError`` that is not a conflict the outcome of a
  write is unknown; callers re-read before retrying.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

ANY_VERSION = -1
"""An expected version that matches any existing version."""


class StorageBackendError(Exception):
    """The store could not be reached or failed; the outcome of a write is unknown."""


class VersionConflictError(StorageBackendError):
    """A version precondition did not hold: someone else wrote first."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class Versioned:
    value: bytes
    version: int


@dataclass(frozen=True, slots=True)
class Create:
    """Create ``key`` (version 0); fails if it exists."""

    key: str
    value: bytes


@dataclass(frozen=True, slots=True)
class Update:
    """Replace the value of ``key`` if its version is ``expected_version`` (or ANY_VERSION)."""

    key: str
    value: bytes
    expected_version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete ``key`` (which must have no children) if its version matches."""

    key: str
    expected_version: int = ANY_VERSION


@dataclass(frozen=True, slots=True)
class Check:
    """Assert that ``key`` exists at ``expected_version``; writes nothing."""

    key: str
    expected_version: int


Op = Create | Update | Delete | Check

WatchCallback = Callable[[str, int | None], None]
"""Called with the key and its new version (None once deleted)."""


def parent_of(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else ""


def validate_key(key: str) -> str:
    if not key or key.startswith("/") or key.endswith("/") or "//" in key:
        raise ValueError(f"invalid metadata store key {key!r}: use 'a/b/c' with no empty parts")
    return key


class MetadataStorageBackend(abc.ABC):
    """A versioned key-value store with atomic conditional multi-writes."""

    @abc.abstractmethod
    def get(self, key: str) -> Versioned | None:
        """The value and version of ``key``, or None if absent."""

    def get_many(self, keys: Sequence[str]) -> list[Versioned | None]:
        """``get`` of each key, in order; backends override this to pipeline the reads."""
        return [self.get(key) for key in keys]

    @abc.abstractmethod
    def get_by_prefix(self, parent: str) -> dict[str, Versioned]:
        """The children of ``parent`` by child *name* (last path part), with values and versions.
        Not a snapshot across children: each is read at some point during the call."""

    @abc.abstractmethod
    def list_children(self, parent: str) -> list[str]:
        """The names of the children of ``parent``, sorted. Empty if it has none or is absent."""

    def create(self, key: str, value: bytes) -> None:
        """Creates ``key``; raises VersionConflictError if it exists."""
        self.multi([Create(key, value)])

    def update(self, key: str, value: bytes, expected_version: int = ANY_VERSION) -> None:
        """Replaces ``key``'s value; raises VersionConflictError if absent or at another version."""
        self.multi([Update(key, value, expected_version)])

    @abc.abstractmethod
    def multi(self, ops: Sequence[Op]) -> None:
        """Applies ``ops`` in order, atomically: all of them or, on any failed precondition, none
        (VersionConflictError naming the first failing key). A Create whose ancestors are missing
        creates them, empty, inside the same transaction; ancestors are never created outside it.
        A Delete of a key that still has children is a VersionConflictError."""

    @contextlib.contextmanager
    def grouped(self) -> Iterator[None]:
        """Makes the writes of the block durable together when it exits, where the backend can
        (one commit instead of one each). Each ``multi`` inside stays atomic and fails alone on
        a failed precondition; the others' changes are visible to this instance at once. If the
        commit at the exit fails it raises :class:`StorageBackendError` and none of the block's
        writes happened: a caller that acted on them must forget that. Other writers of this
        instance wait for the block; keep it short and take no lock that such a writer may hold
        while writing. Nested blocks belong to the outermost. The default commits each write
        when it returns, as outside a block."""
        yield

    @abc.abstractmethod
    def remove_by_prefix(self, key: str) -> None:
        """Removes ``key`` and everything below it. Idempotent but NOT atomic: a crash part-way
        leaves a subset, and a repeat call finishes the job."""

    @abc.abstractmethod
    def watch(self, key: str, callback: WatchCallback) -> None:
        """Calls ``callback(key, version)`` after ``key`` is changed or deleted by another writer.
        Writes made through this same backend instance may or may not be notified (the writer
        knows). Delivery may lag the write; :meth:`deliver_watches` delivers what is due now where
        the backend polls. One callback per key; watching again replaces it."""

    @abc.abstractmethod
    def unwatch(self, key: str) -> None:
        """Stops calling the callback for ``key``."""

    def deliver_watches(self, key: str) -> None:  # noqa: B027 - a no-op for push backends
        """Delivers, synchronously, a pending notification for the watched ``key`` (polling
        backends); a no-op where the store pushes notifications."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the connection. Idempotent."""
