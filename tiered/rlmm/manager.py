"""The RemoteLogMetadataManager over a MetadataStorageBackend.

A partition this process leads (``on_partition_leadership_changes``) is taken over with a new
*claim* written to its partition record and served from a fully loaded in-memory
:class:`PartitionMetadataState`. The cache stays consistent with the backend: every write is a multi
conditioned on the partition record's version, and a watch on that record marks the cache stale when
anyone else (the controller's delete job, a new leader) writes, so the next call reloads it. A write
that finds the partition claimed by someone else is fenced.

Every other partition is read straight from the backend through a lazily loading view, so that a
follower, a leader warming up and the delete job get the same answers as the leader. Writes through
that path retry on conflicts (re-reading each time) under an injected :class:`ConflictRetry`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass
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
from tiered.rlmm import keys
from tiered.rlmm.backend import MetadataStorageBackend, MetadataStoreError, VersionConflictError
from tiered.rlmm.partition_state import PartitionMetadataState

log = logging.getLogger(__name__)

T = TypeVar("T")


class RemoteLogMetadataConflictException(RemoteStorageException):
    """Another writer changed the partition first, and retrying did not get past it."""


class RemoteLogMetadataFencedException(RemoteLogMetadataConflictException):
    """This manager's leadership claim on the partition was superseded by another process."""


@dataclass(frozen=True)
class ConflictRetry:
    """How often and how patiently to re-read and re-apply after losing a race (kazoo's KazooRetry
    in miniature: bounded attempts, capped exponential backoff with jitter, and a deadline)."""

    max_attempts: int = 8
    base_delay_s: float = 0.005
    max_delay_s: float = 0.25
    deadline_s: float = 10.0

    def delays(self) -> Iterator[float]:
        """Yields before each attempt the delay to wait first (0 for the first attempt)."""
        start = time.monotonic()
        delay = self.base_delay_s
        for attempt in range(self.max_attempts):
            if attempt == 0:
                yield 0.0
                continue
            if time.monotonic() - start > self.deadline_s:
                return
            yield random.uniform(0, delay)
            delay = min(delay * 2, self.max_delay_s)


class _LedPartition:
    def __init__(self, claim: int, state: PartitionMetadataState) -> None:
        self.claim = claim
        self.state: PartitionMetadataState | None = state
        self.lock = threading.RLock()
        # Latest version of the partition record that a watch reported.
        self.notified_version: int | None = state.version


class StoreRemoteLogMetadataManager(api.RemoteLogMetadataManager):
    def __init__(
        self,
        backend: MetadataStorageBackend,
        broker_id: int = -1,
        conflict_retry: ConflictRetry | None = None,
    ) -> None:
        self._backend = backend
        self._broker_id = broker_id
        self._retry = conflict_retry or ConflictRetry()
        self._led: dict[TopicIdPartition, _LedPartition] = {}
        self._led_lock = threading.Lock()
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

    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        if metadata is None:
            raise TypeError("remote partition delete metadata can not be None")
        if not isinstance(metadata, RemotePartitionDeleteMetadata):
            raise TypeError(
                f"expected RemotePartitionDeleteMetadata, got {type(metadata).__name__}"
            )
        tp = metadata.topic_id_partition
        self._write(tp, lambda s: s.handle_remote_partition_delete_metadata(metadata))
        if metadata.state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED:
            self._remove_partition(tp)

    def _remove_partition(self, tp: TopicIdPartition) -> None:
        """After DELETE_PARTITION_FINISHED is durable, removes the partition's records. A crash
        part-way leaves a FINISHED partition record, which reads treat as absent and the next
        leadership claim purges."""
        self._forget(tp)
        try:
            self._backend.remove_by_prefix(keys.partition_key(tp))
        except MetadataStoreError as e:
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
    ) -> None:
        led = self._led.get(tp)
        if led is not None:
            self._write_as_leader(tp, led, apply)
        else:
            self._write_from_store(tp, apply, create_if_absent)

    def _write_as_leader(
        self,
        tp: TopicIdPartition,
        led: _LedPartition,
        apply: Callable[[PartitionMetadataState], bool],
    ) -> None:
        with led.lock:
            for delay in self._retry.delays():
                time.sleep(delay)
                state = self._leader_state(tp, led, for_write=True)
                try:
                    if apply(state):
                        self._commit(state)
                    return
                except VersionConflictError as e:
                    led.state = None  # another writer got in: reload and re-check the claim
                    log.info("Partition %s: write lost a race (%s); reloading", tp, e)
                except (RemoteResourceNotFoundException, ValueError, TypeError):
                    raise  # rejected while validating, before anything was applied
                except BaseException:
                    led.state = None  # the in-memory state may be half-applied
                    raise
        raise RemoteLogMetadataConflictException(
            f"partition {tp}: gave up after {self._retry.max_attempts} conflicting writes"
        )

    def _write_from_store(
        self,
        tp: TopicIdPartition,
        apply: Callable[[PartitionMetadataState], bool],
        create_if_absent: bool,
    ) -> None:
        last: VersionConflictError | None = None
        for delay in self._retry.delays():
            time.sleep(delay)
            state = self._open(tp)
            if state is None:
                if not create_if_absent:
                    raise RemoteResourceNotFoundException(
                        f"no remote log metadata for partition {tp}"
                    )
                state = PartitionMetadataState.create(self._backend, tp)
            try:
                if apply(state):
                    self._commit(state)
                return
            except VersionConflictError as e:
                last = e
                log.info("Partition %s: write lost a race (%s); retrying", tp, e)
        raise RemoteLogMetadataConflictException(
            f"partition {tp}: another writer changed it on each of "
            f"{self._retry.max_attempts} attempts (last conflict at {last.key if last else '?'})"
        )

    def _commit(self, state: PartitionMetadataState) -> None:
        ops = state.pending_ops()
        if not ops:
            return
        try:
            self._backend.multi(ops)
        except VersionConflictError:
            raise
        except MetadataStoreError as e:
            raise RemoteStorageException(
                f"partition {state.topic_id_partition}: metadata write failed, outcome unknown: {e}"
            ) from e
        state.mark_committed()

    # ----------------------------------------------------------------------------- leadership

    def on_partition_leadership_changes(
        self, leaders: Set[TopicIdPartition], followers: Set[TopicIdPartition]
    ) -> None:
        if leaders is None or followers is None:
            raise TypeError("leaders and followers can not be None")
        for tp in followers:
            self._forget(tp)
        for tp in leaders:
            claim = self._claim(tp)
            led = _LedPartition(claim, self._load(tp))
            with self._led_lock:
                previous = self._led.get(tp)
                self._led[tp] = led
            if previous is None:
                self._backend.watch(keys.partition_key(tp), self._on_partition_record_change)
            log.info("Partition %s: leading with claim %d (broker %d)", tp, claim, self._broker_id)

    def _claim(self, tp: TopicIdPartition) -> int:
        for delay in self._retry.delays():
            time.sleep(delay)
            state = self._open(tp, include_deleted=True)
            if state is not None and state.is_deleted:
                self._backend.remove_by_prefix(keys.partition_key(tp))  # purge a crashed removal
                state = None
            if state is None:
                state = PartitionMetadataState.create(self._backend, tp)
            claim = state.claim_leadership(self._broker_id)
            try:
                self._commit(state)
                return claim
            except VersionConflictError as e:
                log.info("Partition %s: claim lost a race (%s); retrying", tp, e)
        raise RemoteLogMetadataConflictException(f"partition {tp}: could not claim leadership")

    def _load(self, tp: TopicIdPartition) -> PartitionMetadataState:
        try:
            state = PartitionMetadataState.load(self._backend, tp)
        except MetadataStoreError as e:
            raise RemoteStorageException(f"partition {tp}: loading metadata failed: {e}") from e
        if state is None or state.is_deleted:
            raise RemoteResourceNotFoundException(f"no remote log metadata for partition {tp}")
        return state

    def _on_partition_record_change(self, key: str, version: int | None) -> None:
        for tp, led in list(self._led.items()):
            if keys.partition_key(tp) == key:
                led.notified_version = version

    def _leader_state(
        self, tp: TopicIdPartition, led: _LedPartition, for_write: bool
    ) -> PartitionMetadataState:
        try:
            self._backend.deliver_watches(keys.partition_key(tp))
        except MetadataStoreError as e:
            raise RemoteStorageException(f"partition {tp}: {e}") from e
        if led.state is None or led.notified_version != led.state.version:
            led.state = None
            led.state = self._load(tp)
            led.notified_version = led.state.version
        if for_write and led.state.record.leader_claim != led.claim:
            claim, broker = led.state.record.leader_claim, led.state.record.leader_broker_id
            raise RemoteLogMetadataFencedException(
                f"partition {tp} was taken over by broker {broker} (claim {claim}); this "
                f"manager's claim {led.claim} is stale, so it may no longer write"
            )
        return led.state

    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        if partitions is None:
            raise TypeError("partitions can not be None")
        for tp in partitions:
            self._forget(tp)

    def _forget(self, tp: TopicIdPartition) -> None:
        with self._led_lock:
            led = self._led.pop(tp, None)
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
        except MetadataStoreError as e:
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
            state = self._open(tp)
            if state is None:
                raise RemoteResourceNotFoundException(f"no remote log metadata for partition {tp}")
            return read(state)
        except MetadataStoreError as e:
            raise RemoteStorageException(f"partition {tp}: metadata read failed: {e}") from e

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

    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        return self._read(topic_id_partition, lambda s: s.remote_log_size(leader_epoch))

    def remote_log_totals(self, topic_id_partition: TopicIdPartition) -> api.RemoteLogTotals:
        return self._read(topic_id_partition, lambda s: s.remote_log_totals())

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
