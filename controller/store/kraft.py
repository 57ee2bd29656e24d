"""KRaft-mode metadata store: the controller's state in an embedded, fsync'd record log
(``controller.store.kraft_log``) with snapshots, which brokers follow through FetchMetadata.

There is no consensus: the active controller is whoever holds the log directory's OS lock, held
from ``elect`` to ``resign`` or process death, and a standby on the same host (same directory)
takes over when the kernel drops the lock of a dead one. Every atomic change is one batch.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import sys
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from controller.store.base import (
    ControllerFencedError,
    MetadataLogSource,
    MetadataStore,
    MetadataStoreError,
    PartitionGrowth,
    StoredAcl,
    TopicChange,
    check_delete_job_of,
    check_partition_growth,
    check_scram_alteration,
)
from controller.store.kraft_log import (
    DEFAULT_SEGMENT_BYTES,
    MetadataLog,
    MetadataLogError,
    OffsetBelowLogStart,
)
from tiered.cluster import serde
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    MetadataImage,
    ScramCredentialKey,
    TopicMetadata,
)
from tiered.durable import atomic_write
from tiered.properties import int_property
from tiered.rpc.v1 import metadata_pb2
from tiered.security.acl_serde import acl_record, remove_acl_record
from tiered.security.scram import ScramCredential

logger = logging.getLogger(__name__)

__all__ = ["CONTROLLER_FILE", "KRaftMetadataStore"]

CONTROLLER_FILE = "controller.json"
DEFAULT_SNAPSHOT_INTERVAL_RECORDS = 20_000
DEFAULT_MAX_BATCHES_PER_READ = 1000
DEFAULT_MAX_BYTES_PER_READ = 1024 * 1024
SNAPSHOT_CACHE_S = 30.0  # how long the image built for far-behind followers is kept
_READ_ONLY_ATTEMPTS = 5


def _release_free_heap() -> None:
    """Hands freed heap pages back to the OS (glibc ``malloc_trim``). Parsing or building a
    snapshot of a large cluster takes a protobuf arena as large as the snapshot; it is freed at
    once but, interleaved with the image's objects, stays in the process's RSS unless trimmed.
    A no-op where there is no glibc."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)


def _replay(log: MetadataLog, *, read_only: bool) -> MetadataImage:
    """Opens ``log`` and replays it (snapshot, then the batches after it) into a new image."""
    holder = [MetadataImage()]

    def on_snapshot(batch: metadata_pb2.MetadataRecordBatch) -> None:
        holder[0] = serde.image_from_snapshot(batch)

    def on_batch(batch: metadata_pb2.MetadataRecordBatch) -> None:
        serde.apply_batch(holder[0], batch)

    log.open(on_snapshot=on_snapshot, on_batch=on_batch, read_only=read_only)
    holder[0].offset = log.end_offset - 1
    return holder[0]


class KRaftMetadataStore(MetadataStore, MetadataLogSource):
    """The ``MetadataStore`` contract over a ``MetadataLog`` in ``directory``, and a
    ``MetadataLogSource`` for the controller's FetchMetadata stream (``read_batches``; also
    ``end_offset``). Liveness of brokers comes from their heartbeats to the controller, not from
    here; ``leadership_lost`` is never set while this process holds the lock.
    """

    mode = "kraft"

    def __init__(
        self,
        directory: Path | str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        snapshot_interval_records: int = DEFAULT_SNAPSHOT_INTERVAL_RECORDS,
        lock_poll_s: float = 0.1,
    ) -> None:
        super().__init__()
        if snapshot_interval_records < 1:
            raise ValueError("snapshot_interval_records must be >= 1")
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.snapshot_interval_records = snapshot_interval_records
        self.lock_poll_s = lock_poll_s
        self._mu = threading.RLock()
        self._appended = threading.Condition(self._mu)
        self._log: MetadataLog | None = None  # open for writing while elected
        self._image = MetadataImage()
        self._records_since_snapshot = 0
        self._snapshotter: threading.Thread | None = None
        self._snapshot_cache: metadata_pb2.MetadataRecordBatch | None = None
        self._snapshot_cached_at = 0.0
        self._closed = False

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> KRaftMetadataStore:
        """``metadata.log.dir`` (required), ``metadata.log.segment.bytes`` (default 64 MiB),
        ``metadata.log.snapshot.interval.records`` (default 20000)."""
        directory = (config.get("metadata.log.dir") or "").strip()
        if not directory:
            raise ValueError("metadata.log.dir is required for metadata.store=kraft")
        return cls(
            directory,
            segment_bytes=int_property(
                config, "metadata.log.segment.bytes", DEFAULT_SEGMENT_BYTES, 1024
            ),
            snapshot_interval_records=int_property(
                config,
                "metadata.log.snapshot.interval.records",
                DEFAULT_SNAPSHOT_INTERVAL_RECORDS,
                1,
            ),
        )

    # ----------------------------------------------------------------------------- leadership

    @property
    def is_active(self) -> bool:
        log = self._log
        return log is not None and log.holds_lock

    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        with self._mu:
            if self._closed:
                raise MetadataStoreError("the metadata store is closed")
            log = self._log
        if log is None:
            log = MetadataLog(self.directory, segment_bytes=self.segment_bytes)
            try:
                if not log.acquire_lock(stop, self.lock_poll_s):
                    return None
            except OSError as exc:
                raise MetadataStoreError(f"cannot lock {log.lock_path}: {exc}") from exc
            try:
                image = self._recover(log)
            except BaseException:
                log.close()
                log.release_lock()
                raise
            with self._mu:
                self._log, self._image = log, image
                self._snapshot_cache = None
                self._records_since_snapshot = image.offset - log.snapshot_offset
        with self._mu:
            epoch = self._image.controller_epoch + 1
            try:
                self._commit([serde.controller_epoch_record(controller_id, epoch, endpoint)])
                self._write_controller_file(controller_id, endpoint, epoch)
            except BaseException:
                self._resign_locked()
                raise
            self.leadership_lost.clear()
            logger.info(
                "controller %d is active with controller epoch %d (metadata log %s, offset %d)",
                controller_id,
                epoch,
                self.directory,
                self._image.offset,
            )
            return epoch

    def _write_controller_file(self, controller_id: int, endpoint: str, epoch: int) -> None:
        """``controller.json``: how standbys and tools, which cannot hold the lock, name the
        active controller."""
        data = {"controller_id": controller_id, "endpoint": endpoint, "controller_epoch": epoch}
        try:
            atomic_write(self.directory / CONTROLLER_FILE, json.dumps(data).encode())
        except OSError as exc:
            raise MetadataStoreError(f"cannot write {CONTROLLER_FILE}: {exc}") from exc

    def _recover(self, log: MetadataLog) -> MetadataImage:
        started = time.monotonic()
        try:
            image = _replay(log, read_only=False)
        except (MetadataLogError, OSError, ValueError) as exc:
            raise MetadataStoreError(
                f"cannot recover the metadata log {self.directory}: {exc}"
            ) from exc
        _release_free_heap()  # the snapshot's parsed batch
        logger.info(
            "metadata log %s recovered in %.3fs: %d topics, %d brokers, %d delete jobs, "
            "%d SCRAM credentials, offsets [%d, %d), snapshot at %d",
            self.directory,
            time.monotonic() - started,
            len(image.topics),
            len(image.brokers),
            len(image.delete_jobs),
            len(image.scram_credentials),
            log.log_start_offset,
            log.end_offset,
            log.snapshot_offset,
        )
        return image

    def resign(self) -> None:
        with self._mu:
            self._resign_locked()

    def _resign_locked(self) -> None:
        log, self._log = self._log, None
        snapshotter, self._snapshotter = self._snapshotter, None
        self._snapshot_cache = None
        self._appended.notify_all()
        if log is None:
            return
        if snapshotter is not None:
            # It takes the log's own lock only; ours is an RLock we hold, which it never needs.
            snapshotter.join()
        log.close()
        log.release_lock()
        logger.info("resigned: released %s", log.lock_path)

    def active_controller(self) -> tuple[int, str] | None:
        """From ``controller.json``, written by each newly elected controller; None if nobody
        holds the lock (the last active controller died or resigned) or nobody was ever elected."""
        with self._mu:
            if self._log is None and not MetadataLog(self.directory).lock_is_held_elsewhere():
                return None
        try:
            data = json.loads((self.directory / CONTROLLER_FILE).read_text())
            return int(data["controller_id"]), str(data["endpoint"])
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MetadataStoreError(f"cannot read {CONTROLLER_FILE}: {exc}") from exc

    # ----------------------------------------------------------------------------- reads

    def load(self) -> MetadataImage:
        with self._mu:
            if self._log is not None:
                return self._image.copy()
        return self._read_only_replay()

    def _read_only_replay(self) -> MetadataImage:
        """A replay without the lock (a standby): the active controller may delete segments or
        be mid-append meanwhile, so a failed attempt is retried."""
        last: Exception | None = None
        for _ in range(_READ_ONLY_ATTEMPTS):
            log = MetadataLog(self.directory, segment_bytes=self.segment_bytes)
            try:
                return _replay(log, read_only=True)
            except (MetadataLogError, OSError, ValueError) as exc:
                last = exc
            finally:
                log.close()
        raise MetadataStoreError(f"cannot read the metadata log {self.directory}: {last}") from last

    @property
    def end_offset(self) -> int:
        """The offset the next record will get (0 before the first election of a fresh log)."""
        with self._mu:
            return self._image.offset + 1

    def read_batches(
        self,
        from_offset: int,
        max_wait_s: float,
        *,
        max_batches: int = DEFAULT_MAX_BATCHES_PER_READ,
        max_bytes: int = DEFAULT_MAX_BYTES_PER_READ,
    ) -> tuple[list[metadata_pb2.MetadataRecordBatch], bool]:
        """For FetchMetadata: committed batches from the one holding ``from_offset`` on, waiting
        up to ``max_wait_s`` for one if there is none yet (``([], False)`` then). If
        ``from_offset`` is 0 (a broker that starts), below the log start (deleted by snapshot
        retention), beyond the end (a follower of another log) or more than
        ``snapshot_interval_records`` records behind the end, ``([snapshot], True)``: the whole
        image as one batch whose ``base_offset`` is the image offset (apply it with
        ``serde.image_from_snapshot`` and continue from ``base_offset + 1``).
        ``ControllerFencedError`` if not active.

        A broker that starts gets the image, never the history: its disk already holds what
        later records made of its partitions, and replaying an earlier state would undo it (a
        topic deleted and created again under the same name: the old topic's record would
        replace the new topic's log with the old one's, whose removal comes later).

        Far behind, the image is cheaper than the history: one batch of the current state
        rather than a batch per past change, each decoded and applied on both sides. It is
        built outside the store's lock (writes go on meanwhile) and kept for followers that
        start together, for ``SNAPSHOT_CACHE_S`` at most (it holds the whole image, encoded)."""
        deadline = time.monotonic() + max_wait_s
        with self._mu:
            self._expire_snapshot_cache()
            while True:
                log = self._require_active()
                end = log.end_offset
                if (
                    from_offset == 0 < end
                    or from_offset > end
                    or end - from_offset > self.snapshot_interval_records
                ):
                    break
                if from_offset < end:
                    try:
                        return log.read(from_offset, max_batches, max_bytes), False
                    except OffsetBelowLogStart:
                        break
                    except (MetadataLogError, OSError) as exc:
                        raise MetadataStoreError(f"cannot read the metadata log: {exc}") from exc
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return [], False
                self._appended.wait(remaining)
            cached = self._snapshot_cache
            if cached is not None and cached.base_offset == self._image.offset:
                return [cached], True
            image = self._image.copy()
        batch = serde.image_to_batch(image, image.offset)
        with self._mu:
            cached = self._snapshot_cache
            if cached is None or cached.base_offset < batch.base_offset:
                self._snapshot_cache, self._snapshot_cached_at = batch, time.monotonic()
        return [batch], True

    def _expire_snapshot_cache(self) -> None:
        if (
            self._snapshot_cache is not None
            and time.monotonic() - self._snapshot_cached_at > SNAPSHOT_CACHE_S
        ):
            self._snapshot_cache = None
            _release_free_heap()

    # ----------------------------------------------------------------------------- fenced writes

    def create_topic(self, topic: TopicMetadata) -> None:
        with self._mu:
            self._require_active()
            if topic.name in self._image.topics:
                raise MetadataStoreError(f"topic {topic.name!r} exists already")
            if self._image.topic_by_id(topic.topic_id) is not None:
                raise MetadataStoreError(f"topic id {topic.topic_id} is in use")
            self._commit(serde.topic_to_records(topic))

    def update_topic(
        self, before: TopicMetadata, after: TopicMetadata, delete_job: DeleteJob | None = None
    ) -> None:
        """One batch: ConfigRecord, TieredStateRecord and, with ``delete_job``, its
        DeleteJobRecord."""
        self.update_topics([(before, after, delete_job)])

    def update_topics(self, changes: Sequence[TopicChange]) -> None:
        """One batch for all of them (one fsync), as ``update_topic`` writes each."""
        records: list[metadata_pb2.MetadataRecord] = []
        for _, after, delete_job in changes:
            records += serde.topic_update_records(after)
            if delete_job is not None:
                check_delete_job_of(after, delete_job)
                records.append(serde.delete_job_to_record(delete_job))
        if not records:
            return
        with self._mu:
            self._require_active()
            for _, after, _ in changes:
                if self._image.topic_by_id(after.topic_id) is None:
                    raise MetadataStoreError(f"unknown topic {after.name!r} ({after.topic_id})")
            self._commit(records)

    def add_partitions(self, growths: Sequence[PartitionGrowth]) -> None:
        """One batch of PartitionRecords for all of them."""
        records: list[metadata_pb2.MetadataRecord] = []
        for before, after in growths:
            check_partition_growth(before, after)
            records += serde.partition_records(before, after)
        if not records:
            return
        with self._mu:
            self._require_active()
            for before, _ in growths:
                if self._image.topic_by_id(before.topic_id) != before:
                    raise MetadataStoreError(
                        f"topic {before.name!r} ({before.topic_id}) is not as the caller saw it"
                    )
            self._commit(records)

    def put_delete_job(self, job: DeleteJob) -> None:
        """One DeleteJobRecord (whether or not the topic still exists)."""
        record = serde.delete_job_to_record(job)
        with self._mu:
            self._require_active()
            self._commit([record])

    def delete_topic(self, topic: TopicMetadata, delete_job: DeleteJob | None = None) -> None:
        """One batch: RemoveTopicRecord and, with ``delete_job``, its DeleteJobRecord."""
        records = [serde.remove_topic_record(topic.topic_id)]
        if delete_job is not None:
            check_delete_job_of(topic, delete_job)
            records.append(serde.delete_job_to_record(delete_job))
        with self._mu:
            self._require_active()
            if self._image.topic_by_id(topic.topic_id) is None:
                raise MetadataStoreError(f"unknown topic {topic.name!r} ({topic.topic_id})")
            self._commit(records)

    def alter_scram_credentials(
        self,
        upsertions: Mapping[ScramCredentialKey, ScramCredential],
        deletions: Collection[ScramCredentialKey],
    ) -> None:
        """One batch: a RemoveUserScramCredentialRecord per deletion of a credential that is
        there, a UserScramCredentialRecord per upsertion."""
        check_scram_alteration(upsertions, deletions)
        with self._mu:
            self._require_active()
            records = [
                serde.remove_scram_credential_record(user, mechanism)
                for user, mechanism in deletions
                if (user, mechanism) in self._image.scram_credentials
            ]
            records += [
                serde.scram_credential_record(user, mechanism, credential)
                for (user, mechanism), credential in upsertions.items()
            ]
            if records:
                self._commit(records)

    def create_acls(self, acls: Sequence[StoredAcl]) -> None:
        """One batch of AccessControlEntryRecords."""
        records = [acl_record(acl_id, binding) for acl_id, binding in acls]
        if records:
            with self._mu:
                self._require_active()
                self._commit(records)

    def delete_acls(self, acls: Sequence[StoredAcl]) -> None:
        """One batch of RemoveAccessControlEntryRecords."""
        records = [remove_acl_record(acl_id) for acl_id, _ in acls]
        if records:
            with self._mu:
                self._require_active()
                self._commit(records)

    def register_broker(self, registration: BrokerRegistration) -> None:
        with self._mu:
            self._require_active()
            self._commit([serde.registration_to_record(registration)])

    def _require_active(self) -> MetadataLog:
        log = self._log
        if log is None or not log.holds_lock:
            raise ControllerFencedError(
                f"not the active controller of {self.directory} (its lock is not held here)"
            )
        return log

    def _commit(self, records: Sequence[metadata_pb2.MetadataRecord]) -> None:
        """Appends one batch (durable on return), applies it to the image, wakes readers and
        starts a snapshot when one is due. Caller holds ``_mu``."""
        log = self._require_active()
        try:
            base = log.append(records)
        except (OSError, MetadataLogError) as exc:
            raise MetadataStoreError(f"metadata log append failed: {exc}") from exc
        serde.apply_batch(
            self._image, metadata_pb2.MetadataRecordBatch(base_offset=base, records=records)
        )
        self._records_since_snapshot += len(records)
        self._appended.notify_all()
        if self._records_since_snapshot >= self.snapshot_interval_records:
            self._start_snapshot(log)

    # ----------------------------------------------------------------------------- snapshots

    def _start_snapshot(self, log: MetadataLog) -> None:
        """Snapshots a copy of the image on a thread, so that writes are not held up by encoding
        100k topics. One at a time; a due snapshot waits for the next write if one is running."""
        if self._snapshotter is not None and self._snapshotter.is_alive():
            return
        image = self._image.copy()
        self._records_since_snapshot = 0
        self._snapshotter = threading.Thread(
            target=self._write_snapshot, args=(log, image), name="metadata-snapshot", daemon=True
        )
        self._snapshotter.start()

    def _write_snapshot(self, log: MetadataLog, image: MetadataImage) -> None:
        started = time.monotonic()
        try:
            log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
        except Exception:
            logger.exception("metadata snapshot at offset %d failed", image.offset)
            return
        _release_free_heap()  # the snapshot's batch
        logger.info(
            "metadata snapshot at offset %d (%d topics) written in %.3fs",
            image.offset,
            len(image.topics),
            time.monotonic() - started,
        )

    def snapshot_now(self) -> int:
        """Writes a snapshot of the current image synchronously; returns its offset. For tests
        and operators; the store snapshots on its own every ``snapshot_interval_records``."""
        with self._mu:
            log = self._require_active()
            self._wait_for_snapshotter()
            image = self._image.copy()
            self._records_since_snapshot = 0
        self._write_snapshot_or_raise(log, image)
        return image.offset

    def wait_for_snapshot(self) -> None:
        """Waits for a snapshot in progress to finish (tests)."""
        with self._mu:
            self._wait_for_snapshotter()

    def _wait_for_snapshotter(self) -> None:
        if self._snapshotter is not None:
            self._snapshotter.join()
            self._snapshotter = None

    @staticmethod
    def _write_snapshot_or_raise(log: MetadataLog, image: MetadataImage) -> None:
        try:
            log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
        except (OSError, MetadataLogError) as exc:
            raise MetadataStoreError(f"metadata snapshot failed: {exc}") from exc

    # ----------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        with self._mu:
            self._resign_locked()
            self._closed = True
