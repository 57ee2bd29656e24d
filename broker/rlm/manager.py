"""The broker's RemoteLogManager: tiers closed segments of leader partitions to remote storage on a
copier pool, applies retention on an expiration pool, serves reads below the local log start
from remote storage on a reader pool, and stops a topic's tiering per KIP-950
(``stop_partitions``).

A led partition's tiering (its epoch and state) is its ``PartitionTiering``
(``broker.rlm.partition_tiering``), which this manager reads and never keeps a copy of: the
caller fires the event on it, then has the manager carry it out (``apply_stop``,
``resume_copying``); ``stop_partitions`` and ``enable_partitions`` do both.

Tiered epoch fencing: every remote segment is stamped with the partition's tiered epoch when its
copy begins. A stop at epoch E raises the epoch, then cancels the copy task and waits for a run in
flight; a copy stamped below the partition's epoch is discarded instead of being marked
COPY_SEGMENT_FINISHED. So once the stop returns, no segment stamped below E is ever uploaded or
finished.

Retention (RLMExpirationTask): remote segments by ``retention.*``, oldest first, and those wholly
below the log start offset (which DeleteRecords raises: Kafka's
``isSegmentBreachByLogStartOffset``), and local segments by ``local.retention.*`` once they are in
remote storage. The log start offset is the log's (``Log.log_start_offset``), read at each run;
the remote log start is the first segment the RLMM still lists. A retain stop keeps the
expiration task (local segments then expire only once remote storage is empty); a delete stop
replaces it with the local log's own retention (LocalRetentionTask), the remote data being the
bulk-delete job's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from broker.log import BatchRead, Log, LogSegment, OffsetOutOfRangeError, TimestampOffset
from broker.rlm.model import (
    CustomMetadataSizeLimitExceededException,
    RemoteLogManagerConfig,
    RemoteLogMetrics,
    RetentionConfig,
    TieredPartition,
)
from broker.rlm.remote_read import find_remote_timestamp, read_remote
from broker.rlm.scheduler import PeriodicTask, ScheduledPool
from broker.rlm.tasks import LeaderPartition, LocalRetentionTask, RLMCopyTask, RLMExpirationTask
from tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
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
        self._clock = clock
        self._partitions: dict[TopicIdPartition, LeaderPartition] = {}
        self._lock = threading.Lock()
        self._copier = ScheduledPool("rlm-copier", config.copier_threads, config.task_interval_s)
        self._expiration = ScheduledPool(
            "rlm-expiration", config.expiration_threads, config.task_interval_s
        )
        self._readers = ThreadPoolExecutor(config.reader_threads, thread_name_prefix="rlm-reader")

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

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
                self._cancel_tasks(previous)
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
        state.copy_task = RLMCopyTask(self, state)
        self._copier.schedule(state.copy_task)
        self._start_expiration(state)

    def _start_expiration(self, state: LeaderPartition) -> None:
        if isinstance(state.expiration_task, LocalRetentionTask):
            state.expiration_task.cancel(self.config.stop_wait_s)
        if state.expiration_task is None or state.expiration_task.cancelled:
            state.expiration_task = RLMExpirationTask(self, state)
            self._expiration.schedule(state.expiration_task)

    def expire_local_only(self, log_: Log, retention_ms: int, retention_bytes: int) -> None:
        self._expire_local(log_, None, retention_ms, retention_bytes, self._now_ms())

    def _drop(self, tp: TopicIdPartition) -> None:
        with self._lock:
            state = self._partitions.pop(tp, None)
        if state is not None:
            self._cancel_tasks(state)

    def _cancel_tasks(self, state: LeaderPartition) -> None:
        for task in (state.copy_task, state.expiration_task):
            if task is not None:
                task.cancel(self.config.stop_wait_s)

    def trigger_copy(self, tp: TopicIdPartition) -> None:
        """Runs the partition's copy task now (tests, and after a segment roll)."""
        state = self._partitions.get(tp)
        if state is not None and state.copy_task is not None and not state.copy_task.cancelled:
            self._copier.trigger(state.copy_task)

    def trigger_expiration(self, tp: TopicIdPartition) -> None:
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
        """The closed, non-empty local segments not yet in remote storage, oldest first; None when
        the partition is not being copied. Before the copy task's first run the resume point comes
        from the RLMM, so the lag is right from the moment the partition is led."""
        state = self._partitions.get(tp)
        task = None if state is None else state.copy_task
        if state is None or task is None or task.cancelled:
            return None
        copied = task.copied_offset
        if copied is None:
            copied = self.highest_copied_offset(state)
        return [
            s
            for s in state.partition.log.closed_segments()
            if not s.is_empty and s.next_offset - 1 > copied
        ]

    # ----------------------------------------------------------------------------- copying

    def highest_copied_offset(self, state: LeaderPartition) -> int:
        """Where copying resumes: after the highest finished remote offset that still counts
        (remote data stamped below the epoch of a delete-policy stop is being deleted and does
        not), and never below the log start offset."""
        partition = state.partition
        highest = partition.log.log_start_offset - 1
        try:
            segments = self.rlmm.list_remote_log_segments(partition.topic_id_partition)
            for m in segments:
                if (
                    m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                    and m.tiered_epoch >= state.tiering.delete_below_epoch
                ):
                    highest = max(highest, m.end_offset)
        except RemoteResourceNotFoundException:
            pass
        return highest

    def copy_segment(self, state: LeaderPartition, segment: LogSegment, task: RLMCopyTask) -> bool:
        """Copies one closed segment; False when copying stopped before it could start or
        finish (a finished copy must carry an epoch at which the partition was copying), or when
        the segment was deleted (its records were) before its copy could finish."""
        partition = state.partition
        tp = partition.topic_id_partition
        log_ = partition.log
        start, end = segment.base_offset, segment.next_offset - 1
        stamp = state.tiering.copy_epoch()
        if stamp is None:
            return False
        try:
            segment_data = log_.segment_data(segment)
        except ValueError:
            return False  # deleted meanwhile (its records were): the next run goes on without it
        metadata = RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId.generate_new(tp),
            start_offset=start,
            end_offset=end,
            max_timestamp_ms=segment.max_timestamp_ms,
            broker_id=self.config.broker_id,
            event_timestamp_ms=self._now_ms(),
            segment_size_in_bytes=segment.size_bytes,
            segment_leader_epochs=log_.leader_epoch_cache.epochs_in_range(start, end),
            tiered_epoch=stamp,
        )
        self.rlmm.add_remote_log_segment_metadata(metadata)
        self.metrics.copy_requests[tp.topic] += 1
        try:
            custom = self.rsm.copy_log_segment_data(metadata, segment_data)
        except Exception as e:
            if segment not in log_.closed_segments():
                # Its records were deleted under the copy (DeleteRecords): nothing to retry.
                self._abandon_copy(metadata, "its local segment was deleted during the copy")
                return False
            self.metrics.copy_errors[tp.topic] += 1
            self._abandon_copy(metadata, f"copy failed: {e}")
            raise
        if custom is not None and len(custom) > self.config.custom_metadata_max_bytes:
            self.metrics.copy_errors[tp.topic] += 1
            log.error(
                "Partition %s: custom metadata of segment %s is %d bytes, more than "
                "remote.log.metadata.custom.metadata.max.bytes=%d; deleting the copied data and "
                "stopping this partition's copy task",
                tp,
                metadata.remote_log_segment_id.id,
                len(custom),
                self.config.custom_metadata_max_bytes,
            )
            task.cancel()
            self._abandon_copy(metadata, "custom metadata too large")
            raise CustomMetadataSizeLimitExceededException(
                f"custom metadata of {len(custom)} bytes exceeds the limit of "
                f"{self.config.custom_metadata_max_bytes} bytes"
            )
        if state.tiering.copy_epoch() != stamp:
            # A stop (or a new epoch) came while this copy was in flight: discard it.
            self._abandon_copy(metadata, f"fenced by {state.tiering}")
            return False
        self.rlmm.update_remote_log_segment_metadata(
            RemoteLogSegmentMetadataUpdate(
                metadata.remote_log_segment_id,
                self._now_ms(),
                custom,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                self.config.broker_id,
            )
        )
        self.metrics.copy_bytes[tp.topic] += segment.size_bytes
        log.info(
            "Partition %s: copied segment [%d, %d] (tiered epoch %d)",
            tp,
            start,
            end,
            metadata.tiered_epoch,
        )
        return True

    def _abandon_copy(self, metadata: RemoteLogSegmentMetadata, why: str) -> None:
        """Deletes a copy that will never finish. If the delete fails the segment stays
        DELETE_SEGMENT_STARTED (listed), for expiration to retry."""
        try:
            self._delete_remote_segment(metadata)
        except RemoteStorageException as e:
            log.error(
                "Segment %s (%s): deleting its data failed, retried later: %s",
                metadata.remote_log_segment_id,
                why,
                e,
            )
            return
        log.warning(
            "Segment %s abandoned (%s); its data was deleted", metadata.remote_log_segment_id, why
        )

    def abandon_unfinished_copies(self, state: LeaderPartition) -> None:
        tp = state.partition.topic_id_partition
        try:
            segments = list(self.rlmm.list_remote_log_segments(tp))
        except RemoteResourceNotFoundException:
            return
        for m in segments:
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
                self._abandon_copy(m, "left unfinished by an earlier copy")

    # ----------------------------------------------------------------------------- expiration

    def expire(self, state: LeaderPartition) -> None:
        partition = state.partition
        tp, log_, retention = partition.topic_id_partition, partition.log, partition.retention
        try:
            segments = list(self.rlmm.list_remote_log_segments(tp))
        except RemoteResourceNotFoundException:
            segments = []
        for m in segments:  # deletions that failed before: finish them
            if m.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
                self._delete_remote_segment(m)
        finished = [m for m in segments if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
        remote_end = max((m.end_offset for m in finished), default=log_.log_start_offset - 1)
        local_only = sum(s.size_bytes for s in log_.segments() if s.base_offset > remote_end)
        total = (
            self.rlmm.remote_log_totals(tp).copy_finished_size_bytes if finished else 0
        ) + local_only
        now_ms = self._now_ms()
        for m in finished:  # oldest first
            breach_bytes = retention.retention_bytes >= 0 and total > retention.retention_bytes
            breach_ms = (
                retention.retention_ms >= 0 and m.max_timestamp_ms < now_ms - retention.retention_ms
            )
            below_start = m.end_offset < log_.log_start_offset
            if not (below_start or breach_ms or breach_bytes):
                break
            if (
                breach_bytes
                and not (below_start or breach_ms)
                and total - m.segment_size_in_bytes < retention.retention_bytes
            ):
                break  # deleting it would go below the limit: Kafka keeps it
            self._delete_remote_segment(m)
            total -= m.segment_size_in_bytes
            log_.set_log_start_offset(m.end_offset + 1)
            finished = finished[1:]
        copying = state.copy_task is not None and not state.copy_task.cancelled
        if copying:
            self._expire_local(
                log_,
                remote_end,
                retention.effective_local_ms,
                retention.effective_local_bytes,
                now_ms,
            )
        elif not finished:
            # Tiering is off and remote storage is empty: plain retention on the local log.
            self._expire_local(
                log_, None, retention.retention_ms, retention.retention_bytes, now_ms
            )

    def _expire_local(
        self, log_: Log, copied_up_to: int | None, limit_ms: int, limit_bytes: int, now_ms: int
    ) -> None:
        """Deletes the oldest closed local segments that breach the limits; with
        ``copied_up_to``, only segments entirely in remote storage."""
        local_bytes = sum(s.size_bytes for s in log_.segments())
        for segment in log_.closed_segments():
            if copied_up_to is not None and segment.next_offset - 1 > copied_up_to:
                break  # not in remote storage yet: never deleted locally
            breach_ms = limit_ms >= 0 and segment.max_timestamp_ms < now_ms - limit_ms
            breach_bytes = limit_bytes >= 0 and local_bytes - segment.size_bytes >= limit_bytes
            if not (breach_ms or breach_bytes):
                break
            local_bytes -= segment.size_bytes
            log_.delete_local_segments_up_to(segment.next_offset)
            if copied_up_to is None:
                log_.set_log_start_offset(segment.next_offset)

    def _delete_remote_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED, delete the objects, DELETE_SEGMENT_FINISHED. Every step is
        idempotent, and a segment another task already finished counts as deleted: the copy task
        (abandoning a copy) and the expiration task (retrying deletions) may meet on one."""
        segment_id = metadata.remote_log_segment_id
        try:
            for state in (
                RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                RemoteLogSegmentState.DELETE_SEGMENT_FINISHED,
            ):
                if state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
                    self.rsm.delete_log_segment_data(metadata)
                self.rlmm.update_remote_log_segment_metadata(
                    RemoteLogSegmentMetadataUpdate(
                        segment_id, self._now_ms(), None, state, self.config.broker_id
                    )
                )
        except RemoteResourceNotFoundException:
            return  # finished by someone else
        self.metrics.delete_requests[metadata.topic_id_partition.topic] += 1

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
        stopped_now = copy_task is not None and not copy_task.cancelled
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
            local_retention = LocalRetentionTask(self, state)
            state.expiration_task = local_retention
            # At its first period, not now: a DisableRemoteTopic stops thousands at once.
            self._expiration.schedule(local_retention, self._expiration.interval_s)
            return True
        if stopped_now:  # the agent logs a DisableRemoteTopic's partitions in one line
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
        now = self._now_ms()
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
            and (state.copy_task is None or state.copy_task.cancelled)
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
