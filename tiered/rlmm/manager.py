"""The RemoteLogMetadataManager over a MetadataStorageBackend.

A partition this process leads (``on_partition_leadership_changes``) is taken over with a new
*claim* written to the partition's claim record and served from a fully loaded in-memory
:class:`PartitionMetadataState`. The cache stays consistent with the backend: every write is a multi
conditioned on the partition record's version, and a watch on that record marks the cache stale when
anyone else (the controller's delete job, a new leader) writes, so the next call reloads it. A write
that finds the partition claimed by someone else is fenced.

Every other partition is read straight from the backend through a lazily loading view, so that a
follower, a leader warming up and the delete job get the same answers as the leader. Writes through
that path retry on conflicts (re-reading each time) under an injected RetryPolicy
(:data:`~tiered.retry_policies.RLMM_CONFLICT_RETRY`); its reads confirm afterwards that no write
overlapped them.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from typing import TypeVar

from tiered import api
from tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.retry import RetryPolicy
from tiered.retry_policies import RLMM_CONFLICT_RETRY
from tiered.rlmm import keys, serde
from tiered.rlmm.backend import (
    ANY_VERSION,
    Check,
    Create,
    MetadataStorageBackend,
    Op,
    StorageBackendError,
    Update,
    VersionConflictError,
)
from tiered.rlmm.bulk_delete_writer import BulkDeleteWriter
from tiered.rlmm.partition_state import PartitionMetadataState
from tiered.rpc.v1 import rlmm_store_pb2 as store_pb

log = logging.getLogger(__name__)

T = TypeVar("T")


class RemoteLogMetadataConflictException(RemoteStorageException):
    """Another writer changed the partition first, and retrying did not get past it."""


class RemoteLogMetadataFencedException(RemoteLogMetadataConflictException):
    """This manager's leadership claim on the partition was superseded by another process."""


class _LedPartition:
    def __init__(self, claim: int, claim_version: int, state: PartitionMetadataState) -> None:
        self.claim = claim
        self.claim_version = claim_version  # every write checks the claim record is still here
        self.state: PartitionMetadataState | None = state
        self.lock = threading.RLock()
        self.claim_verified = True
        # Latest version of the partition record known to exist (None once deleted).
        self.notified_version: int | None = state.version

    def note_version(self, version: int | None) -> None:
        """Versions only grow, and notifications may arrive late: never step back. Once the
        record is gone (None) only a reload, which resets this, brings it back."""
        if version is None:
            self.notified_version = None
        elif self.notified_version is not None:
            self.notified_version = max(self.notified_version, version)


class StoreRemoteLogMetadataManager(api.BulkDeleteRemoteLogMetadataManager):
    """The RemoteLogMetadataManager of :func:`tiered.rlmm.create`, with the bulk delete job's
    capability (:class:`~tiered.api.BulkDeleteRemoteLogMetadataManager`), whose events its
    :class:`~tiered.rlmm.bulk_delete_writer.BulkDeleteWriter` writes through :meth:`_write_many`."""

    def __init__(
        self,
        backend: MetadataStorageBackend,
        broker_id: int = -1,
        conflict_retry: RetryPolicy = RLMM_CONFLICT_RETRY,
    ) -> None:
        self._backend = backend
        self._broker_id = broker_id
        self._retry = conflict_retry
        self._led: dict[TopicIdPartition, _LedPartition] = {}
        self._led_keys: dict[str, TopicIdPartition] = {}  # partition record key -> partition
        self._led_lock = threading.Lock()
        self._bulk_delete = BulkDeleteWriter(backend, broker_id, self._write_many)
        self._closed = False

    def __repr__(self) -> str:
        return f"StoreRemoteLogMetadataManager(broker_id={self._broker_id}, {self._backend!r})"

    @property
    def backend(self) -> MetadataStorageBackend:
        return self._backend

    # ----------------------------------------------------------------------------- writes

    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        if metadata is None:
            raise TypeError("remote log segment metadata can not be None")
        if not isinstance(metadata, RemoteLogSegmentMetadata):
            raise TypeError(f"expected RemoteLogSegmentMetadata, got {type(metadata).__name__}")
        if metadata.state is not api.RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(
                f"segment {metadata.remote_log_segment_id} must be added in state "
                f"COPY_SEGMENT_STARTED, not {metadata.state.name}"
            )
        if min(metadata.segment_leader_epochs) < 0:
            raise ValueError(f"leader epochs can not be negative: {metadata.segment_leader_epochs}")
        self._write(
            metadata.topic_id_partition,
            lambda s: s.handle_remote_log_segment_metadata(metadata),
            create_if_absent=True,
        )

    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        if update is None:
            raise TypeError("remote log segment metadata update can not be None")
        if not isinstance(update, RemoteLogSegmentMetadataUpdate):
            raise TypeError(f"expected RemoteLogSegmentMetadataUpdate, got {type(update).__name__}")
        self._write(
            update.topic_id_partition,
            lambda s: s.handle_remote_log_segment_metadata_update(update),
        )

    def _write_many(
        self,
        tp: TopicIdPartition,
        applies: Iterable[Callable[[PartitionMetadataState], bool]],
        opened: PartitionMetadataState | None = None,
    ) -> PartitionMetadataState | None:
        """Each of ``applies`` in turn, each committed as one write when it applies anything.
        Outside a leader's cache: starting from ``opened`` if given (a view at the stored
        version), and returning the view as the last write left it."""
        led = self._led.get(tp)
        if led is None:
            return self._write_many_from_store(tp, applies, opened)
        for apply in applies:
            self._write_as_leader(tp, led, apply)
        return None

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        if metadata is None:
            raise TypeError("remote partition delete metadata can not be None")
        if not isinstance(metadata, RemotePartitionDeleteMetadata):
            raise TypeError(
                f"expected RemotePartitionDeleteMetadata, got {type(metadata).__name__}"
            )
        tp = metadata.topic_id_partition
        applied = self._write(tp, lambda s: s.handle_remote_partition_delete_metadata(metadata))
        if applied and metadata.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            try:
                kept = self.remote_partition_delete_state(tp) is None  # newer segments remain
            except api.RemoteResourceNotFoundException:
                kept = False
            if not kept:
                self._remove_partition(tp)

    def put_remote_partition_delete_metadata_all(
        self, metadatas: Sequence[RemotePartitionDeleteMetadata]
    ) -> list[Exception | None]:
        """One durable write for all, where the backend groups writes (sqlite); each partition
        is still written, checked and fenced as it is alone. The partitions led here are locked
        first, in one order, and the backend after them, as every other writer does. If the
        group's commit fails, every partition fails and the cached views that hold its writes
        are dropped (reloaded at the next use)."""
        metadatas = list(metadatas)
        tps = sorted({m.topic_id_partition for m in metadatas}, key=str)
        with contextlib.ExitStack() as locked:
            led = [entry for tp in tps if (entry := self._led.get(tp)) is not None]
            for entry in led:
                locked.enter_context(entry.lock)
            try:
                with self._backend.grouped():
                    return super().put_remote_partition_delete_metadata_all(metadatas)
            except StorageBackendError as e:
                for entry in led:
                    entry.state = None
                failed = RemoteStorageException(f"remote metadata write failed, not applied: {e}")
                return [failed for _ in metadatas]

    def _remove_partition(self, tp: TopicIdPartition) -> None:
        """After DELETE_PARTITION_FINISHED is durable, removes the partition's records. A crash
        part-way leaves a FINISHED partition record, which reads treat as absent and the next
        leadership claim purges."""
        self._forget(tp)
        try:
            self._backend.remove_by_prefix(keys.partition_key(tp))
        except StorageBackendError as e:
            log.warning(
                "Partition %s: removing deleted remote metadata failed (%s); the "
                "next claim of the partition finishes it",
                tp,
                e,
            )

    def _write(
        self,
        tp: TopicIdPartition,
        apply: Callable[[PartitionMetadataState], bool],
        create_if_absent: bool = False,
    ) -> bool:
        """Applies an event and commits it; False if the event was dropped as invalid."""
        led = self._led.get(tp)
        if led is not None:
            return self._write_as_leader(tp, led, apply)
        return self._write_from_store(tp, apply, create_if_absent)

    def _write_as_leader(
        self,
        tp: TopicIdPartition,
        led: _LedPartition,
        apply: Callable[[PartitionMetadataState], bool],
    ) -> bool:
        with led.lock:
            for _attempt in self._retry.attempts():
                state = self._leader_state(tp, led, for_write=True)
                try:
                    applied = apply(state)
                    if applied:
                        self._commit(state, led.claim_version)
                        led.note_version(state.version)  # our own write is not news
                    return applied
                except VersionConflictError as e:
                    led.state = None  # another writer got in: reload and re-check the claim
                    log.info("Partition %s: write lost a race (%s); reloading", tp, e)
                except (RemoteResourceNotFoundException, ValueError, TypeError):
                    raise  # rejected while validating, before anything was applied
                except BaseException:
                    led.state = None  # the in-memory state may be half-applied
                    raise
        raise RemoteLogMetadataConflictException(
            f"partition {tp}: gave up after {self._retry.max_tries} conflicting writes"
        )

    def _write_from_store(
        self,
        tp: TopicIdPartition,
        apply: Callable[[PartitionMetadataState], bool],
        create_if_absent: bool,
    ) -> bool:
        last: VersionConflictError | None = None
        for _attempt in self._retry.attempts():
            state = self._open(tp)
            if state is None:
                if not create_if_absent:
                    raise RemoteResourceNotFoundException(
                        f"no remote log metadata for partition {tp}"
                    )
                state = PartitionMetadataState.create(self._backend, tp)
            try:
                applied = apply(state)
                if applied:
                    self._commit(state)
                return applied
            except VersionConflictError as e:
                last = e
                log.info("Partition %s: write lost a race (%s); retrying", tp, e)
        raise RemoteLogMetadataConflictException(
            f"partition {tp}: another writer changed it on each of "
            f"{self._retry.max_tries} attempts (last conflict at {last.key if last else '?'})"
        )

    def _write_many_from_store(
        self,
        tp: TopicIdPartition,
        applies: Iterable[Callable[[PartitionMetadataState], bool]],
        state: PartitionMetadataState | None = None,
    ) -> PartitionMetadataState | None:
        """Like :meth:`_write_from_store` for each of ``applies`` in turn, keeping the partition
        open between them: a committed state is the stored one, so only a lost race reloads it
        (reopening for each write would re-read what the previous writes touched)."""
        for apply in applies:
            last: VersionConflictError | None = None
            for _attempt in self._retry.attempts():
                if state is None:
                    state = self._open(tp)
                    if state is None:
                        raise RemoteResourceNotFoundException(
                            f"no remote log metadata for partition {tp}"
                        )
                try:
                    if apply(state):
                        self._commit(state)
                    break
                except VersionConflictError as e:
                    last, state = e, None
                    log.info("Partition %s: write lost a race (%s); retrying", tp, e)
                except BaseException:
                    state = None  # possibly half-applied
                    raise
            else:
                raise RemoteLogMetadataConflictException(
                    f"partition {tp}: another writer changed it on each of "
                    f"{self._retry.max_tries} attempts (last conflict at "
                    f"{last.key if last else '?'})"
                )
        return state

    def _commit(self, state: PartitionMetadataState, claim_version: int | None = None) -> None:
        ops = state.pending_ops()
        if not ops:
            return
        if claim_version is not None:  # right after the partition record: the leader fence
            ops.insert(1, Check(keys.claim_key(state.topic_id_partition), claim_version))
        try:
            self._backend.multi(ops)
        except VersionConflictError:
            raise
        except StorageBackendError as e:
            raise RemoteStorageException(
                f"partition {state.topic_id_partition}: metadata write failed, outcome unknown: {e}"
            ) from e
        state.mark_committed()

    # ----------------------------------------------------------------------------- bulk delete

    def update_remote_log_segment_metadata_batch(
        self, updates: Sequence[RemoteLogSegmentMetadataUpdate], batch_size: int = 256
    ) -> None:
        """:meth:`BulkDeleteWriter.update_remote_log_segment_metadata_batch`."""
        self._bulk_delete.update_remote_log_segment_metadata_batch(updates, batch_size)

    def handle_partition_segments_delete_started_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> list[RemoteLogSegmentMetadata]:
        """:meth:`BulkDeleteWriter.handle_partition_segments_delete_started_below_epoch`."""
        return self._bulk_delete.handle_partition_segments_delete_started_below_epoch(
            topic_id_partition, tiered_epoch
        )

    def handle_partition_segments_deleted_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int, batch_size: int = 1024
    ) -> None:
        """:meth:`BulkDeleteWriter.handle_partition_segments_deleted_below_epoch`."""
        self._bulk_delete.handle_partition_segments_deleted_below_epoch(
            topic_id_partition, tiered_epoch, batch_size
        )

    # ----------------------------------------------------------------------------- leadership

    def on_partition_leadership_changes(
        self, leaders: Set[TopicIdPartition], followers: Set[TopicIdPartition]
    ) -> None:
        if leaders is None or followers is None:
            raise TypeError("leaders and followers can not be None")
        for tp in followers:
            self._forget(tp)
        for tp in leaders:
            claim, claim_version = self._claim(tp)
            led = _LedPartition(claim, claim_version, self._load(tp))
            with self._led_lock:
                previous = self._led.get(tp)
                self._led[tp] = led
                self._led_keys[keys.partition_key(tp)] = tp
            if previous is None:
                self._backend.watch(keys.partition_key(tp), self._on_partition_record_change)
            log.info("Partition %s: leading with claim %d (broker %d)", tp, claim, self._broker_id)

    def _claim(self, tp: TopicIdPartition) -> tuple[int, int]:
        """Writes a new claim on the partition (creating the partition if needed); returns the
        claim number and the version of the claim record. Only claimers write that record, so a
        takeover does not have to win a race against the deposed leader's writes."""
        for _attempt in self._retry.attempts():
            try:
                partition = PartitionMetadataState.read_record(self._backend, tp)
                if (
                    partition is not None
                    and partition[0].HasField("delete_state")
                    and (
                        serde.delete_state_from_proto(partition[0].delete_state)
                        is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
                    )
                ):
                    # A removal that crashed after DELETE_PARTITION_FINISHED: finish it.
                    self._backend.remove_by_prefix(keys.partition_key(tp))
                    partition = None
                stored = self._backend.get(keys.claim_key(tp))
                previous = (
                    store_pb.LeaderClaimRecord.FromString(stored.value)
                    if stored is not None
                    else store_pb.LeaderClaimRecord()
                )
                claim = store_pb.LeaderClaimRecord(
                    claim=previous.claim + 1, broker_id=self._broker_id
                )
                ops: list[Op] = (
                    PartitionMetadataState.create(self._backend, tp).pending_ops()
                    if partition is None
                    else [Check(keys.partition_key(tp), ANY_VERSION)]
                )
                encoded = claim.SerializeToString()
                if stored is None:
                    ops.append(Create(keys.claim_key(tp), encoded))
                else:
                    ops.append(Update(keys.claim_key(tp), encoded, stored.version))
                self._backend.multi(ops)
            except VersionConflictError as e:
                log.info("Partition %s: claim lost a race (%s); retrying", tp, e)
                continue
            except StorageBackendError as e:
                raise RemoteStorageException(f"partition {tp}: claiming failed: {e}") from e
            return claim.claim, 0 if stored is None else stored.version + 1
        raise RemoteLogMetadataConflictException(f"partition {tp}: could not claim leadership")

    def _load(self, tp: TopicIdPartition) -> PartitionMetadataState:
        """Loads the whole partition for the leader's cache, re-loading until no write overlapped
        the load (the partition record's version is the same before and after)."""
        for _attempt in self._retry.attempts():
            try:
                state = PartitionMetadataState.load(self._backend, tp)
                if state is None or state.is_deleted:
                    raise RemoteResourceNotFoundException(
                        f"no remote log metadata for partition {tp}"
                    )
                current = self._backend.get(keys.partition_key(tp))
            except StorageBackendError as e:
                raise RemoteStorageException(f"partition {tp}: loading metadata failed: {e}") from e
            if current is not None and current.version == state.version:
                return state
            log.info("Partition %s: written to while loading; loading again", tp)
        raise RemoteLogMetadataConflictException(
            f"partition {tp}: written to during each of {self._retry.max_tries} loads"
        )

    def _on_partition_record_change(self, key: str, version: int | None) -> None:
        tp = self._led_keys.get(key)
        led = self._led.get(tp) if tp is not None else None
        if led is not None:
            led.note_version(version)

    def _leader_state(
        self, tp: TopicIdPartition, led: _LedPartition, for_write: bool
    ) -> PartitionMetadataState:
        try:
            self._backend.deliver_watches(keys.partition_key(tp))
        except StorageBackendError as e:
            raise RemoteStorageException(f"partition {tp}: {e}") from e
        if led.state is None or led.notified_version != led.state.version:
            led.state = None
            if for_write:
                self._raise_if_claimed_by_another(tp, led)
            try:
                led.state = self._load(tp)
            except RemoteResourceNotFoundException:
                if not for_write or self._backend.get(keys.claim_key(tp)) is not None:
                    raise
                return self._reclaim(tp, led)
            led.notified_version = led.state.version
            led.claim_verified = False
        if for_write and not led.claim_verified:
            self._verify_claim(tp, led)
            led.claim_verified = True
        return led.state

    def _reclaim(self, tp: TopicIdPartition, led: _LedPartition) -> PartitionMetadataState:
        """A finished deletion removed the partition's metadata, claim included, and nobody has
        claimed it since: its leader leads it afresh (KIP-950: re-enable after a delete)."""
        led.claim, led.claim_version = self._claim(tp)
        state = led.state = self._load(tp)
        led.notified_version = state.version
        led.claim_verified = True
        log.info("Partition %s: remote metadata was deleted; claimed again", tp)
        return state

    def _raise_if_claimed_by_another(self, tp: TopicIdPartition, led: _LedPartition) -> None:
        """Fenced before a reload, not after it: a deposed leader would otherwise load a whole
        partition its successor keeps writing to, and lose that race again and again."""
        stored = self._backend.get(keys.claim_key(tp))
        if stored is not None and stored.version != led.claim_version:
            self._verify_claim(tp, led)

    def _verify_claim(self, tp: TopicIdPartition, led: _LedPartition) -> None:
        """After a reload (which follows any lost race), whether this manager still leads."""
        stored = self._backend.get(keys.claim_key(tp))
        if stored is not None and stored.version == led.claim_version:
            return
        if stored is None:
            self._reclaim(tp, led)
            return
        current = (
            store_pb.LeaderClaimRecord.FromString(stored.value)
            if stored is not None
            else store_pb.LeaderClaimRecord()
        )
        raise RemoteLogMetadataFencedException(
            f"partition {tp} was taken over by broker {current.broker_id} (claim {current.claim}); "
            f"this manager's claim {led.claim} is stale, so it may no longer write"
        )

    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        if partitions is None:
            raise TypeError("partitions can not be None")
        for tp in partitions:
            self._forget(tp)

    def _forget(self, tp: TopicIdPartition) -> None:
        with self._led_lock:
            led = self._led.pop(tp, None)
            self._led_keys.pop(keys.partition_key(tp), None)
        if led is not None:
            self._backend.unwatch(keys.partition_key(tp))

    def is_leader_cache(self, tp: TopicIdPartition) -> bool:
        """Whether reads of ``tp`` are served from this manager's memory."""
        return tp in self._led

    # ----------------------------------------------------------------------------- reads

    def _open(
        self, tp: TopicIdPartition, include_deleted: bool = False
    ) -> PartitionMetadataState | None:
        try:
            state = PartitionMetadataState.open(self._backend, tp)
        except StorageBackendError as e:
            raise RemoteStorageException(f"partition {tp}: {e}") from e
        if state is not None and state.is_deleted and not include_deleted:
            return None
        return state

    def _read(self, tp: TopicIdPartition, read: Callable[[PartitionMetadataState], T]) -> T:
        if tp is None:
            raise TypeError("topic_id_partition can not be None")
        led = self._led.get(tp)
        try:
            if led is not None:
                with led.lock:
                    return read(self._leader_state(tp, led, for_write=False))
            return self._read_from_store(tp, read)
        except StorageBackendError as e:
            raise RemoteStorageException(f"partition {tp}: metadata read failed: {e}") from e

    def _read_from_store(
        self, tp: TopicIdPartition, read: Callable[[PartitionMetadataState], T]
    ) -> T:
        """Reads through a lazily loading view, then confirms that the partition record is still
        at the version the view started from: every write moves it, so the answer is one that
        held at a single point in time. Otherwise, and if a record vanished mid-read, re-reads."""
        for _attempt in self._retry.attempts():
            state = self._open(tp)
            if state is None:
                raise RemoteResourceNotFoundException(f"no remote log metadata for partition {tp}")
            try:
                result = read(state)
            except VersionConflictError as e:
                log.debug("Partition %s: read overlapped a write (%s); re-reading", tp, e)
                continue
            current = self._backend.get(keys.partition_key(tp))
            if current is not None and current.version == state.version:
                return result
        raise RemoteLogMetadataConflictException(
            f"partition {tp}: written to during each of {self._retry.max_tries} read attempts"
        )

    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        return self._read(
            topic_id_partition, lambda s: s.remote_log_segment_metadata(leader_epoch, offset)
        )

    def highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int | None:
        return self._read(topic_id_partition, lambda s: s.highest_offset_for_epoch(leader_epoch))

    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        return iter(
            self._read(topic_id_partition, lambda s: s.list_remote_log_segments(leader_epoch))
        )

    def remote_log_segment_ids(self, topic_id_partition: TopicIdPartition) -> set[uuid.UUID]:
        return self._read(topic_id_partition, lambda s: set(s.listed_segment_ids()))

    def remote_log_start_offset(self, topic_id_partition: TopicIdPartition) -> int | None:
        return self._read(topic_id_partition, lambda s: s.remote_log_start_offset())

    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        return self._read(topic_id_partition, lambda s: s.remote_log_size(leader_epoch))

    def remote_log_totals(self, topic_id_partition: TopicIdPartition) -> api.RemoteLogTotals:
        return self._read(topic_id_partition, lambda s: s.remote_log_totals())

    def remote_log_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> api.RemoteLogBelowEpoch:
        return self._read(topic_id_partition, lambda s: s.remote_log_below_epoch(tiered_epoch))

    def remote_partition_delete_state(
        self, topic_id_partition: TopicIdPartition
    ) -> RemotePartitionDeleteState | None:
        """Where the partition's remote deletion stands (None: not being deleted)."""
        return self._read(topic_id_partition, lambda s: s.delete_state)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for tp in list(self._led):
            self._forget(tp)
        self._backend.close()
