"""A RemoteStorageManager over any fsspec filesystem (local directory, ``memory://``, ``s3://``...).

Objects are laid out as :mod:`tiered.rsm.layout` says (docs/design.md §3.3).

Upload protocol: the indexes are written first and the ``.log`` object last, so a segment whose
``.log`` object exists has all its objects. On the local filesystem every object is first written
to a temporary name beside it (``{key}.tmp-{hex}``) and renamed into place, so no reader ever sees
a partly written file; object stores (and ``memory://``) make a put visible only once complete.
If anything fails, whatever was written for the segment is deleted (best effort) and
``RemoteStorageException`` is raised. Temporary files left by a crashed process sit under the
segment's tiered-epoch prefix, so the bulk delete of that epoch removes them.

Every fsspec or OS failure is raised as ``RemoteStorageException``; a missing remote object as its
subclass ``RemoteResourceNotFoundException``. On an object store, each remote call (one object's
put, a read, a listing) is first retried while its error is transient (throttling, 5xx, a broken
connection) by the storage's one :class:`~tiered.retry.RetryPolicy`
(:mod:`tiered.rsm.settings`); the exception then names the object and the last error.

Bulk deletion (:class:`~tiered.api.RemoteStorageBulkDeleter`): the handles are the object keys
relative to the root, derived from segment metadata by the layout or listed under the partition's
``te=N/`` prefixes; the deleter is a
:class:`~tiered.rsm.s3_delete.S3ObjectDeleter` on S3 (DeleteObjects batches) and a
:class:`~tiered.rsm.fsspec_delete.FsspecObjectDeleter` (a thread pool of single deletes)
elsewhere, both on ``remote.storage.delete.threads`` threads.

S3 (``s3://BUCKET/PREFIX``) is configured by :mod:`tiered.rsm.s3`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import fsspec.core
from fsspec.implementations.local import LocalFileSystem

from tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
    RemoteSegmentObjects,
    RemoteStorageBulkDeleter,
    RemoteStorageException,
    RemoteStorageInspector,
    RemoteStorageManager,
    RemoteStorageScanner,
    RemoteStoredObject,
    TopicIdPartition,
)
from tiered.retry import RetryPolicy
from tiered.rsm import fsspec_scan, layout
from tiered.rsm.custom_metadata import SegmentLocation, encode_custom_metadata
from tiered.rsm.fsspec_delete import DEFAULT_DELETE_THREADS, FsspecObjectDeleter
from tiered.rsm.s3 import (
    S3Settings,
    describe_error,
    error_code,
    is_s3_url,
    is_transient,
    s3_settings_from_config,
)
from tiered.rsm.s3_delete import S3ObjectDeleter
from tiered.rsm.settings import (
    DEFAULT_RETRY_POLICY,
    DELETE_THREADS_CONFIG,
    ROOT_CONFIG,
    retry_policy_from_config,
)

__all__ = [
    "DELETE_THREADS_CONFIG",
    "LIST_BATCH_SIZE",
    "ROOT_CONFIG",
    "FsspecRemoteStorageManager",
    "create_from_config",
]

logger = logging.getLogger(__name__)

R = TypeVar("R")

LIST_BATCH_SIZE = 1000
"""The most handles in one batch of a bulk delete listing."""


class FsspecRemoteStorageManager(
    RemoteStorageManager, RemoteStorageBulkDeleter, RemoteStorageInspector, RemoteStorageScanner
):
    """Stores segments under ``root`` of an fsspec filesystem. Thread-safe."""

    def __init__(
        self,
        root: str,
        delete_threads: int = DEFAULT_DELETE_THREADS,
        *,
        s3: S3Settings | None = None,
        retry: RetryPolicy = DEFAULT_RETRY_POLICY,
    ) -> None:
        """``s3``: how to reach an ``s3://`` root (default: its bucket and prefix with
        botocore's endpoint, region and the environment's credentials). ``retry``: the policy
        of every remote call."""
        if not isinstance(root, str) or not root.strip():
            raise ValueError(f"{ROOT_CONFIG} must be a non-empty path or fsspec URL, got {root!r}")
        if isinstance(delete_threads, bool) or not isinstance(delete_threads, int):
            raise ValueError(f"{DELETE_THREADS_CONFIG} must be an integer, got {delete_threads!r}")
        if delete_threads < 1:
            raise ValueError(f"{DELETE_THREADS_CONFIG} must be >= 1, got {delete_threads}")
        root = root.strip()
        self._url = root
        self._retry = retry
        self._closed = False
        self._deleter: FsspecObjectDeleter | S3ObjectDeleter
        self._transient: Callable[[Exception], bool]
        self._describe: Callable[[BaseException], str]
        if is_s3_url(root):
            settings = s3 if s3 is not None else s3_settings_from_config(root, {})
            self._fs: Any = settings.filesystem()
            self._root = settings.root_path
            self._local = False
            self._deleter = S3ObjectDeleter(settings, delete_threads, retry)
            self._transient = is_transient
            self._describe = lambda error: settings.redact(describe_error(error))
            return
        try:
            fs, path = fsspec.core.url_to_fs(root)
        except (ImportError, ValueError) as e:
            # ValueError: unknown protocol; ImportError: known protocol, plugin not installed.
            raise ValueError(
                f"{ROOT_CONFIG}={root!r}: no fsspec filesystem for this URL is available ({e})"
            ) from e
        self._fs = fs
        self._root = str(path).rstrip("/")
        self._local = isinstance(fs, LocalFileSystem)
        self._deleter = FsspecObjectDeleter(root, delete_threads)
        # A local filesystem's errors (a full disk, a missing file) do not heal in seconds.
        self._transient = lambda error: False
        self._describe = lambda error: f"{type(error).__name__}: {error}"

    @property
    def root(self) -> str:
        """The configured root URL or path."""
        return self._url

    def __repr__(self) -> str:
        return f"FsspecRemoteStorageManager(root={self._url!r})"

    # -- paths --------------------------------------------------------------------------------

    def _path(self, key: str) -> str:
        return f"{self._root}/{key}"

    def _relative(self, path: str) -> str:
        path = str(path)
        prefix = self._root + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
        # memory:// with an empty root normalizes "/x" and "x" alike.
        return path.lstrip("/") if not self._root else path

    # -- RemoteStorageManager -----------------------------------------------------------------

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> CustomMetadata | None:
        """Uploads the indexes, the leader-epoch bytes and then the ``.log`` object. Returns the
        custom metadata of :mod:`tiered.rsm.custom_metadata` (where the objects are, their bytes)."""
        if not isinstance(metadata, RemoteLogSegmentMetadata):
            raise TypeError(f"metadata must be RemoteLogSegmentMetadata, got {metadata!r}")
        if not isinstance(segment_data, LogSegmentData):
            raise TypeError(f"segment_data must be LogSegmentData, got {segment_data!r}")
        prefix = layout.segment_prefix(metadata)
        segment = metadata.remote_log_segment_id
        sources: list[tuple[str, str | bytes]] = [
            (IndexType.OFFSET.value, segment_data.offset_index),
            (IndexType.TIMESTAMP.value, segment_data.time_index),
            (IndexType.LEADER_EPOCH.value, bytes(segment_data.leader_epoch_index)),
        ]
        if segment_data.producer_snapshot_index is not None:
            sources.append(
                (IndexType.PRODUCER_SNAPSHOT.value, segment_data.producer_snapshot_index)
            )
        if segment_data.transaction_index is not None:
            sources.append((IndexType.TRANSACTION.value, segment_data.transaction_index))
        sources.append((layout.LOG_SUFFIX, segment_data.log_segment))  # last: marks completion

        written: list[str] = []  # every remote path that may exist, temporary names included
        total = 0
        try:
            self._check_open()
            for suffix, source in sources:
                size = len(source) if isinstance(source, bytes) else Path(source).stat().st_size
                key = layout.object_key(prefix, suffix)
                self._call(
                    f"upload of segment {segment}",
                    self._path(key),
                    functools.partial(self._write_object, key, source, written),
                )
                total += size
        except BaseException as e:
            self._remove_quietly(written)
            if isinstance(e, Exception):
                # A RemoteStorageException already names the object and its last error.
                detail = str(e) if isinstance(e, RemoteStorageException) else self._describe(e)
                raise RemoteStorageException(
                    f"copy of segment {segment} to {self._path(prefix)}.* failed: {detail}"
                ) from e
            raise
        return encode_custom_metadata(
            SegmentLocation(
                topic_id_partition=metadata.topic_id_partition,
                tiered_epoch=metadata.tiered_epoch,
                start_offset=metadata.start_offset,
                segment_id=segment.id,
                total_bytes=total,
            )
        )

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        """Bytes ``[start_position, end_position]`` (inclusive) of the ``.log`` object; to its end
        when ``end_position`` is None. Positions past the end yield fewer (or no) bytes."""
        _check_position(start_position, "start_position")
        if end_position is not None:
            _check_position(end_position, "end_position")
            if end_position < start_position:
                raise ValueError(
                    f"end_position {end_position} is less than start_position {start_position}"
                )
        key = layout.object_key(layout.segment_prefix(metadata), layout.LOG_SUFFIX)
        end = None if end_position is None else end_position + 1
        path = self._path(key)

        def read() -> Any:
            try:
                return self._fs.cat_file(path, start=start_position, end=end)
            except OSError as e:
                if error_code(e) == "InvalidRange":  # S3's answer to a start past the end
                    return b""
                raise

        data = self._call(f"fetch of segment {metadata.remote_log_segment_id} data", path, read)
        return bytes(data)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        if not isinstance(index_type, IndexType):
            raise TypeError(f"index_type must be IndexType, got {index_type!r}")
        key = layout.object_key(layout.segment_prefix(metadata), index_type.value)
        what = f"fetch of the {index_type.name} index of segment {metadata.remote_log_segment_id}"
        path = self._path(key)
        return bytes(self._call(what, path, lambda: self._fs.cat_file(path)))

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Deletes the ``.log`` object first (so the segment stops looking complete), then every
        index, then anything else under the segment's prefix: the temporary object of an upload
        whose process died mid-write would otherwise outlive its metadata for ever. Missing
        objects are not an error."""
        prefix = layout.segment_prefix(metadata)
        for suffix in layout.ALL_SUFFIXES:
            self._delete_object(layout.object_key(prefix, suffix))
        pattern = self._path(prefix) + ".*"
        leftovers = self._call(f"listing of {prefix}", pattern, lambda: self._fs.glob(pattern))
        for path in leftovers:
            self._delete_object(self._relative(path))

    # -- bulk operations ----------------------------------------------------------------------

    def list_tiered_epochs(self, topic_id_partition: TopicIdPartition) -> list[int]:
        """The tiered epochs that have a ``te=`` prefix under the partition, ascending."""
        path = self._path(layout.partition_prefix(topic_id_partition))
        try:
            entries = self._call(
                f"listing of partition {topic_id_partition}",
                path,
                lambda: self._fs.ls(path, detail=False),
            )
        except RemoteResourceNotFoundException:
            return []
        epochs = {layout.parse_tiered_epoch_dir(str(entry)) for entry in entries}
        return sorted(e for e in epochs if e is not None)

    def object_keys(self, topic_id_partition: TopicIdPartition) -> list[str]:
        """Every object key (relative to the root) under the partition, sorted."""
        return self._find(layout.partition_prefix(topic_id_partition))

    def list_objects_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> Iterator[list[str]]:
        """The keys (relative to the root) under each ``te=N/`` prefix of the partition with
        ``N < tiered_epoch``, epoch by epoch, each epoch's sorted and in batches of at most
        :data:`LIST_BATCH_SIZE`. Directories not named ``te=N`` are ignored."""
        if not isinstance(topic_id_partition, TopicIdPartition):
            raise TypeError(f"expected a TopicIdPartition, got {topic_id_partition!r}")
        if isinstance(tiered_epoch, bool) or not isinstance(tiered_epoch, int) or tiered_epoch < 0:
            raise ValueError(f"tiered_epoch must be an int >= 0, got {tiered_epoch!r}")
        for epoch in self.list_tiered_epochs(topic_id_partition):
            if epoch >= tiered_epoch:
                break
            try:
                keys = self._find(layout.tiered_epoch_prefix(topic_id_partition, epoch))
            except RemoteResourceNotFoundException:
                continue  # removed since it was listed: nothing left to list
            for start in range(0, len(keys), LIST_BATCH_SIZE):
                yield keys[start : start + LIST_BATCH_SIZE]

    def object_handles_of(self, segments: Sequence[RemoteLogSegmentMetadata]) -> list[str]:
        """The keys (relative to the root) of the objects every copy writes: the ``.log`` object
        and the offset, time and leader-epoch indexes, under the segment's prefix
        (:mod:`tiered.rsm.layout`). The optional indexes and a local copy's temporary files are
        left to the listing."""
        keys: dict[str, None] = {}
        for metadata in segments:
            if not isinstance(metadata, RemoteLogSegmentMetadata):
                raise TypeError(f"expected RemoteLogSegmentMetadata, got {metadata!r}")
            prefix = layout.segment_prefix(metadata)
            keys.update((layout.object_key(prefix, s), None) for s in layout.WRITTEN_BY_EVERY_COPY)
        return list(keys)

    def objects_per_segment(self) -> int:
        """The objects :meth:`object_handles_of` names for each segment."""
        return len(layout.WRITTEN_BY_EVERY_COPY)

    def segment_objects(self, metadata: RemoteLogSegmentMetadata) -> RemoteSegmentObjects:
        """Each object of :data:`~tiered.rsm.layout.WRITTEN_BY_EVERY_COPY` asked for by itself
        (a stat; a HEAD on S3), so that a missing object is found whatever else the prefix
        holds."""
        if not isinstance(metadata, RemoteLogSegmentMetadata):
            raise TypeError(f"expected RemoteLogSegmentMetadata, got {metadata!r}")
        prefix = layout.segment_prefix(metadata)
        data_key = layout.object_key(prefix, layout.LOG_SUFFIX)
        missing: list[str] = []
        data_size: int | None = None
        for suffix in layout.WRITTEN_BY_EVERY_COPY:
            key = layout.object_key(prefix, suffix)
            size = self._size(key)
            if size is None:
                missing.append(key)
            elif key == data_key:
                data_size = size
        return RemoteSegmentObjects(tuple(missing), data_key, data_size)

    def _size(self, key: str) -> int | None:
        """The object's size in bytes, None when it does not exist."""
        path = self._path(key)
        try:
            info = self._call(f"stat of {key}", path, lambda: self._fs.info(path))
        except RemoteResourceNotFoundException:
            return None
        if info.get("type") == "directory":
            return None
        return int(info["size"])

    def scan_objects(self, parallelism: int) -> Iterator[list[RemoteStoredObject]]:
        """Every object under the root, listed as :mod:`tiered.rsm.fsspec_scan` says."""
        return fsspec_scan.scan_objects(self._fs, self._root, self._call, parallelism)

    def objects_still_stored(self, handles: Sequence[str], parallelism: int) -> set[str]:
        """A stat (a HEAD on S3) of each handle, on up to ``parallelism`` threads."""
        keys = list(handles)
        if not keys:
            return set()
        with ThreadPoolExecutor(
            max_workers=min(parallelism, len(keys)), thread_name_prefix="rsm-stat"
        ) as pool:
            sizes = list(pool.map(self._size, keys))
        return {key for key, size in zip(keys, sizes, strict=True) if size is not None}

    def object_deleter(self) -> FsspecObjectDeleter | S3ObjectDeleter:
        """Deletes keys under this root on ``remote.storage.delete.threads`` threads."""
        return self._deleter

    def close(self) -> None:
        """Refuses further copies and bulk deletes. Idempotent."""
        self._closed = True

    def __enter__(self) -> FsspecRemoteStorageManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RemoteStorageException(f"{self!r} is closed")

    def _call(self, what: str, path: str, operation: Callable[[], R]) -> R:
        """``operation()``, retried while its error is transient; its last error as
        ``RemoteStorageException`` (``RemoteResourceNotFoundException`` for a missing object)
        naming ``what``, ``path`` and the attempts made."""
        tries = 0

        def attempt() -> R:
            nonlocal tries
            tries += 1
            return operation()

        def on_retry(error: Exception, tries_so_far: int, delay_s: float) -> None:
            logger.debug(
                "%s at %s: attempt %d failed (%s), retrying in %.2f s",
                what,
                path,
                tries_so_far,
                self._describe(error),
                delay_s,
            )

        try:
            return self._retry(
                attempt, retry_on=Exception, retry_if=self._transient, on_retry=on_retry
            )
        except RemoteStorageException:
            raise
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundException(f"{what}: {path} does not exist") from e
        except Exception as e:
            attempts = f" after {tries} attempts" if tries > 1 else ""
            raise RemoteStorageException(
                f"{what} failed at {path}{attempts}: {self._describe(e)}"
            ) from e

    def _write_object(self, key: str, source: str | bytes, written: list[str]) -> None:
        """Writes one object. Appends every remote path it creates to ``written`` before
        creating it, so that a failure can remove it."""
        path = self._path(key)
        target = path
        if self._local:
            self._fs.makedirs(self._fs._parent(path), exist_ok=True)
            target = f"{path}.tmp-{uuid.uuid4().hex}"
        if target not in written:
            written.append(target)
        if isinstance(source, bytes):
            self._fs.pipe_file(target, source)
        else:
            self._fs.put_file(source, target)
        if target != path:
            written.append(path)
            self._fs.mv(target, path)

    def _remove_file(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(path)

    def _delete_object(self, key: str) -> None:
        path = self._path(key)
        self._call(f"delete of {key}", path, lambda: self._remove_file(path))

    def _remove_quietly(self, paths: list[str]) -> None:
        for path in reversed(paths):
            try:
                remove = functools.partial(self._remove_file, path)
                self._call("removal after a failed copy", path, remove)
            except RemoteStorageException as e:
                logger.warning("could not remove %s after a failed copy: %s", path, e)

    def _find(self, key: str) -> list[str]:
        path = self._path(key)
        paths = self._call(f"listing of {key}", path, lambda: self._fs.find(path))
        return sorted(self._relative(p) for p in paths)


def _check_position(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def create_from_config(config: Mapping[str, object]) -> FsspecRemoteStorageManager:
    """Builds the manager from ``remote.storage.root``, ``remote.storage.delete.threads``,
    the ``remote.storage.retry.*`` keys
    (:mod:`tiered.rsm.settings`) and, for an ``s3://`` root, the ``remote.storage.s3.*`` keys
    (:mod:`tiered.rsm.s3`). ``ValueError`` names the offending key."""
    raw_root = config.get(ROOT_CONFIG)
    if raw_root is None or not isinstance(raw_root, str) or not raw_root.strip():
        raise ValueError(
            f"{ROOT_CONFIG} is required: a local path or an fsspec URL, got {raw_root!r}"
        )
    raw_threads = config.get(DELETE_THREADS_CONFIG)
    threads = DEFAULT_DELETE_THREADS
    if raw_threads is not None:
        try:
            threads = int(str(raw_threads).strip())
        except ValueError:
            raise ValueError(
                f"{DELETE_THREADS_CONFIG} must be an integer, got {raw_threads!r}"
            ) from None
    s3 = s3_settings_from_config(raw_root, config) if is_s3_url(raw_root) else None
    return FsspecRemoteStorageManager(
        raw_root,
        delete_threads=threads,
        s3=s3,
        retry=retry_policy_from_config(config),
    )
