"""The broker's RemoteLogManager: keeps the registry of the partitions this broker leads and the
pools their work runs on, follows leadership changes, stops a topic's tiering per KIP-950
(``stop_partitions``) and turns it on again, and serves reads below the local log start from
remote storage. The work itself is the tasks': each led partition has a copy task on the copier
pool while it copies (``broker.rlm.copy_task``) and an expiration task on the expiration pool
(``broker.rlm.expiration_task``); both reach the RLMM and the RSM through one
``RemoteLogContext`` (``broker.rlm.context``) that this manager builds.

A led partition's tiering (its epoch and state) is its ``PartitionTiering``
(``broker.rlm.partition_tiering``), which this manager reads and never keeps a copy of: the
caller fires the event on it, then has the manager carry it out (``apply_stop``,
``resume_copying``); ``stop_partitions`` and ``enable_partitions`` do both.

A stop at tiered epoch E raises the epoch, then cancels the copy task and waits for its run in
flight, whose copy the task discards once fenced by the raised epoch: once the stop returns, no
segment stamped below E is ever uploaded or finished. A retain stop keeps the expiration task; a
delete stop replaces it with the local log's own retention (``LocalRetentionTask``), the remote
data being the bulk-delete job's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from broker.log import BatchRead, Log, LogSegment, OffsetOutOfRangeError, TimestampOffset
from broker.rlm.context import RemoteLogContext
from broker.rlm.copy_task import RLMCopyTask
from broker.rlm.expiration_task import LocalRetentionTask, RLMExpirationTask
from broker.rlm.leader_partition import LeaderPartition
from broker.rlm.model import (
    CustomMetadataSizeLimitExceededException,
    RemoteLogManagerConfig,
    RemoteLogMetrics,
    RetentionConfig,
    TieredPartition,
)
from broker.rlm.remote_read import find_remote_timestamp, read_remote
from broker.rlm.scheduler import PeriodicTask, ScheduledPool
from tiered.api import (
    RemoteLogMetadataManager,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageManager,
    TopicIdPartition,
)
from tiered.config import RemoteLogDisablePolicy

log = logging.getLogger(__name__)

__all__ = [
    "CustomMetadataSizeLimitExceededException",
    "RLMCopyTask",
    "RLMExpirationTask",
    "RemoteLogManager",
    "RemoteLogManagerConfig",
    "RetentionConfig",
    "TieredPartition",
]


class RemoteLogManager:
    """One per broker (see the module docstring); :meth:`close` cancels every task and shuts its
    pools down."""

    def __init__(
        self,
        config: RemoteLogManagerConfig,
        rlmm: RemoteLogMetadataManager,
        rsm: RemoteStorageManager,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.rlmm = rlmm
        self.rsm = rsm
        self.metrics = RemoteLogMetrics()
        self._context = RemoteLogContext(
            rlmm=rlmm,
            rsm=rsm,
            metrics=self.metrics,
            clock=clock,
            broker_id=config.broker_id,
            custom_metadata_max_bytes=config.custom_metadata_max_bytes,
        )
        self._partitions: dict[TopicIdPartition, LeaderPartition] = {}
        self._lock = threading.Lock()
        self._copier = ScheduledPool("rlm-copier", config.copier_threads, config.task_interval_s)
        self._expiration = ScheduledPool(
            "rlm-expiration", config.expiration_threads, config.task_interval_s
        )
        self._readers = ThreadPoolExecutor(config.reader_threads, thread_name_prefix="rlm-reader")

    # ----------------------------------------------------------------------------- leadership

    def on_leadership_change(
        self, leaders: Iterable[TieredPartition], followers: Iterable[TopicIdPartition] = ()
    ) -> None:
        """Starts tiering the ``leaders``; stops everything for the ``followers``."""
        leaders = list(leaders)
        followers = set(followers)
        self.rlmm.on_partition_leadership_changes(
            {p.topic_id_partition for p in leaders}, followers
        )
        for tp in followers:
            self._drop(tp)
        for partition in leaders:
            state = LeaderPartition(partition)
            with self._lock:
                previous = self._partitions.get(partition.topic_id_partition)
                self._partitions[partition.topic_id_partition] = state
            if previous is not None:
                previous.cancel_tasks(self.config.stop_wait_s)
            if partition.tiering.copying:
                self._start_copying(state)
            else:  # led for expiry and remote reads; the caller applies the stop
                self._start_expiration(state)

    def is_leading(self, tp: TopicIdPartition) -> bool:
        return tp in self._partitions

    def update_retention(self, tp: TopicIdPartition, retention: RetentionConfig) -> None:
        """New retention configs apply from the expiration task's next run."""
        state = self._partitions.get(tp)
        if state is not None:
            state.partition.retention = retention

    def _start_copying(self, state: LeaderPartition) -> None:
        state.copy_task = RLMCopyTask(self._context, state.partition)
        self._copier.schedule(state.copy_task)
        self._start_expiration(state)

    def _start_expiration(self, state: LeaderPartition) -> None:
        if isinstance(state.expiration_task, LocalRetentionTask):
            state.expiration_task.cancel(self.config.stop_wait_s)
        if state.expiration_task is None or state.expiration_task.cancelled:
            state.expiration_task = RLMExpirationTask(
                self._context, state.partition, state.is_copying
            )
            self._expiration.schedule(state.expiration_task)

    def _drop(self, tp: TopicIdPartition) -> None:
        with self._lock:
            state = self._partitions.pop(tp, None)
        if state is not None:
            state.cancel_tasks(self.config.stop_wait_s)

    def trigger_copy(self, tp: TopicIdPartition) -> None:
        """Runs the partition's copy task now (tests, and after a segment roll)."""
        state = self._partitions.get(tp)
        task = None if state is None else state.active_copy_task()
        if task is not None:
            self._copier.trigger(task)

    def trigger_expiration(self, tp: TopicIdPartition) -> None:
        """Runs the partition's expiration task (or its local retention) now."""
        state = self._partitions.get(tp)
        task = None if state is None else state.expiration_task
        if task is not None and not task.cancelled:
            self._expiration.trigger(task)

    def expiration_task(self, tp: TopicIdPartition) -> PeriodicTask | None:
        state = self._partitions.get(tp)
        return None if state is None else state.expiration_task

    def accepts_remote_fetches(self, tp: TopicIdPartition) -> bool:
        state = self._partitions.get(tp)
        return state is not None and state.fetch_gate.is_open

    def copy_task(self, tp: TopicIdPartition) -> RLMCopyTask | None:
        state = self._partitions.get(tp)
        return None if state is None else state.copy_task

    def copy_lag(self, tp: TopicIdPartition) -> list[LogSegment] | None:
        """The partition's copy task's lag (:meth:`RLMCopyTask.lag`); None when the partition is
        not being copied."""
        state = self._partitions.get(tp)
        task = None if state is None else state.active_copy_task()
        return None if task is None else task.lag()

    # ----------------------------------------------------------------------------- stopping

    def stop_partitions(
        self,
        partitions: Iterable[TopicIdPartition],
        tiered_epoch: int,
        policy: RemoteLogDisablePolicy,
    ) -> dict[TopicIdPartition, Exception | None]:
        """KIP-950's ``stopPartitions`` for tiered epoch ``tiered_epoch``: DisableRemoteTopic on
        each led partition's tiering, then :meth:`apply_stop`. Idempotent per (partition,
        epoch), and a no-op for an epoch older than one already applied; a partition not led
        here has nothing to stop."""
        partitions = list(partitions)
        for tp in partitions:
            state = self._partitions.get(tp)
            if state is not None:
                state.tiering.handle_disable_remote_topic(tiered_epoch, policy)
        return self.apply_stop(partitions)

    def apply_stop(
        self, partitions: Iterable[TopicIdPartition]
    ) -> dict[TopicIdPartition, Exception | None]:
        """Carries out the stop each led partition's tiering records (nothing while it copies):
        the copy task is cancelled and a copy in flight waited for; under the delete policy,
        expiration is replaced by local retention, remote fetches are drained and refused, the
        log start offset rises to the local log start and the partition is marked
        DELETE_PARTITION_MARKED. Idempotent. Returns each partition's outcome (None: stopped);
        one partition's failure does not stop the rest."""
        outcomes: dict[TopicIdPartition, Exception | None] = {}
        to_mark: list[LeaderPartition] = []
        for tp in partitions:
            state = self._partitions.get(tp)
            try:
                if state is not None and self._stop_partition(tp, state):
                    to_mark.append(state)
                outcomes[tp] = None
            except Exception as e:
                epoch = None if state is None else state.tiering.tiered_epoch
                log.exception("Partition %s: stop for tiered epoch %s failed", tp, epoch)
                outcomes[tp] = e
        if to_mark:
            outcomes.update(self._mark_for_deletion(to_mark))
        return outcomes

    def _stop_partition(self, tp: TopicIdPartition, state: LeaderPartition) -> bool:
        """Stops the partition's tasks for its tiering's stop; True when the delete policy's
        mark (DELETE_PARTITION_MARKED) is still to be written."""
        tiering = state.tiering
        policy = tiering.state.stop_policy
        if policy is None:
            return False  # copying
        copy_task = state.copy_task
        stopped_now = state.is_copying()
        if copy_task is not None and not copy_task.cancel(self.config.stop_wait_s):
            raise RemoteStorageException(
                f"partition {tp}: a copy still runs after {self.config.stop_wait_s}s"
            )
        if (
            policy is RemoteLogDisablePolicy.DELETE
            and state.deletion_marked_epoch != tiering.tiered_epoch
        ):
            expiration = state.expiration_task
            if expiration is not None and not expiration.cancel(self.config.stop_wait_s):
                raise RemoteStorageException(f"partition {tp}: expiration still runs")
            if not state.fetch_gate.close_and_drain(self.config.stop_wait_s):
                raise RemoteStorageException(f"partition {tp}: remote fetches did not drain")
            log_ = state.partition.log
            log_.set_log_start_offset(log_.local_log_start_offset)
            local_retention = LocalRetentionTask(self._context, state.partition)
            state.expiration_task = local_retention
            # At its first period, not now: a DisableRemoteTopic stops thousands at once.
            self._expiration.schedule(local_retention, self._expiration.interval_s)
            return True
        if stopped_now:  # ``Hosting`` logs a DisableRemoteTopic's partitions in one line
            log.debug(
                "Partition %s: tiering stopped for tiered epoch %d with policy %s",
                tp,
                tiering.tiered_epoch,
                policy.value,
            )
        return False

    def _mark_for_deletion(
        self, states: list[LeaderPartition]
    ) -> dict[TopicIdPartition, Exception | None]:
        """DELETE_PARTITION_MARKED for each partition stopped under the delete policy, in one
        RLMM call (one durable write where its store allows: a DisableRemoteTopic stops
        thousands). A partition that never tiered has nothing to mark. One that fails is
        stopped again, mark included, by the next stop or assignment."""
        now = self._context.now_ms()
        marks = [
            RemotePartitionDeleteMetadata(
                state.partition.topic_id_partition,
                RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                now,
                self.config.broker_id,
            )
            for state in states
        ]
        outcomes: dict[TopicIdPartition, Exception | None] = {}
        errors = self.rlmm.put_remote_partition_delete_metadata_all(marks)
        for state, error in zip(states, errors, strict=True):
            tp = state.partition.topic_id_partition
            if error is None or isinstance(error, RemoteResourceNotFoundException):
                state.deletion_marked_epoch = state.tiering.tiered_epoch
                outcomes[tp] = None
                log.debug(
                    "Partition %s: tiering stopped for tiered epoch %d with policy delete",
                    tp,
                    state.tiering.tiered_epoch,
                )
            else:
                log.error(
                    "Partition %s: marking its remote data for deletion at tiered epoch %d "
                    "failed: %s",
                    tp,
                    state.tiering.tiered_epoch,
                    error,
                )
                outcomes[tp] = error
        return outcomes

    def enable_partitions(self, partitions: Iterable[TopicIdPartition], tiered_epoch: int) -> None:
        """Tiering is on again: a re-enable on each led partition's tiering, then
        :meth:`resume_copying`; copies are stamped ``tiered_epoch`` (or the partition's own epoch
        if later)."""
        led = [tp for tp in partitions if tp in self._partitions]
        for tp in led:
            self._partitions[tp].tiering.handle_reenable(tiered_epoch)
        self.resume_copying(led)

    def resume_copying(self, partitions: Iterable[TopicIdPartition]) -> None:
        """Copying of led partitions whose tiering copies again resumes, at the first offset not
        in remote storage; remote fetches are served again and expiration is the full one."""
        partitions = [
            tp
            for tp in partitions
            if (state := self._partitions.get(tp)) is not None
            and state.tiering.copying
            and not state.is_copying()
        ]
        if partitions:
            # Claim the partitions again: a finished bulk delete may have removed their remote
            # metadata (claim included) while tiering was off.
            self.rlmm.on_partition_leadership_changes(set(partitions), set())
        for tp in partitions:
            state = self._partitions[tp]
            state.deletion_marked_epoch = None
            state.fetch_gate.reopen()
            self._start_copying(state)

    # ----------------------------------------------------------------------------- reading

    def read(self, tp: TopicIdPartition, offset: int, max_bytes: int) -> BatchRead:
        """Whole batches from ``offset``: from the local log at or above its local start offset,
        from remote storage (on the reader pool) between the log start and the local log start.
        Below the log start offset: OFFSET_OUT_OF_RANGE, also when the log start passed
        ``offset`` during a remote read that then failed (its segment was expired meanwhile)."""
        state = self._partitions.get(tp)
        if state is None:
            raise RemoteResourceNotFoundException(f"partition {tp} is not led by this broker")
        log_ = state.partition.log
        self._check_not_below_log_start(tp, log_, offset)
        if offset >= log_.local_log_start_offset:
            return log_.read(offset, max_bytes)
        if not state.fetch_gate.enter():
            raise OffsetOutOfRangeError(f"remote data of {tp} is being deleted")
        try:
            return self._readers.submit(self._read_remote, state, offset, max_bytes).result()
        except RemoteStorageException:
            self._check_not_below_log_start(tp, log_, offset)
            raise
        finally:
            state.fetch_gate.leave()

    @staticmethod
    def _check_not_below_log_start(tp: TopicIdPartition, log_: Log, offset: int) -> None:
        start = log_.log_start_offset
        if offset < start:
            raise OffsetOutOfRangeError(
                f"offset {offset} of {tp} is below the log start offset {start}"
            )

    def _read_remote(self, state: LeaderPartition, offset: int, max_bytes: int) -> BatchRead:
        tp = state.partition.topic_id_partition
        read = read_remote(self.rlmm, self.rsm, tp, state.partition.log, offset, max_bytes)
        self.metrics.fetch_requests[tp.topic] += 1
        self.metrics.fetch_bytes[tp.topic] += len(read.records)
        return read

    def find_offset_by_timestamp(
        self, tp: TopicIdPartition, timestamp_ms: int
    ) -> TimestampOffset | None:
        """ListOffsets by timestamp over the remote segments below the local log start (from
        the log start offset on), on the reader pool; None if none holds such a record, if the
        partition is not tiered here, or while its remote data is being deleted."""
        state = self._partitions.get(tp)
        if state is None or not state.fetch_gate.enter():
            return None
        try:
            log_ = state.partition.log
            return self._readers.submit(
                find_remote_timestamp, self.rlmm, self.rsm, tp, log_, timestamp_ms
            ).result()
        finally:
            state.fetch_gate.leave()

    def close(self) -> None:
        for tp in list(self._partitions):
            self._drop(tp)
        self._copier.close()
        self._expiration.close()
        self._readers.shutdown(wait=True, cancel_futures=True)
