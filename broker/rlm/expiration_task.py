"""Retention of a led partition, run on the RemoteLogManager's expiration pool: the expiration task
(Kafka's ``RLMExpirationTask``) for a partition that copies or keeps its remote data, and the
local log's own retention (``LocalRetentionTask``) after a delete-policy stop, when the remote
data is the bulk delete's.

The expiration task deletes remote segments oldest first by ``retention.*``, and those wholly
below the log start offset (which DeleteRecords raises: Kafka's
``isSegmentBreachByLogStartOffset``), raising the log start past each; the remote log start is the
first segment the RLMM still lists. Local segments expire by ``local.retention.*``, and only once
they are in remote storage. While copying is off (KIP-950 retain, or a copy pause), local segments
expire only once remote storage is empty, by ``retention.*``, so that offsets stay contiguous if
tiering comes back. Each run also finishes remote deletions that failed before."""

from __future__ import annotations

from collections.abc import Callable

from broker.log import Log
from broker.rlm.context import RemoteLogContext
from broker.rlm.model import RetentionConfig, TieredPartition
from broker.rlm.scheduler import PeriodicTask
from tiered.api import RemoteLogSegmentMetadata, RemoteLogSegmentState


class RLMExpirationTask(PeriodicTask):
    """Applies remote and local retention to a leader partition (see the module docstring).
    ``is_copying`` tells whether the partition's copy task runs: local segments then expire by
    ``local.retention.*`` up to the highest copied offset."""

    def __init__(
        self, context: RemoteLogContext, partition: TieredPartition, is_copying: Callable[[], bool]
    ) -> None:
        super().__init__(f"RLMExpirationTask[{partition.topic_id_partition}]")
        self._context = context
        self._partition = partition
        self._is_copying = is_copying

    def execute(self) -> None:
        context, partition = self._context, self._partition
        log_, retention = partition.log, partition.retention
        segments = context.remote_segments(partition.topic_id_partition)
        for m in segments:  # deletions that failed before: finish them
            if m.state is RemoteLogSegmentState.DELETE_SEGMENT_STARTED:
                context.delete_remote_segment(m)
        finished = [m for m in segments if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
        remote_end = max((m.end_offset for m in finished), default=log_.log_start_offset - 1)
        now_ms = context.now_ms()
        remaining = self._expire_remote(finished, remote_end, retention, now_ms)
        if self._is_copying():
            _expire_local_segments(
                log_,
                remote_end,
                retention.effective_local_ms,
                retention.effective_local_bytes,
                now_ms,
            )
        elif not remaining:
            # Tiering is off and remote storage is empty: plain retention on the local log.
            _expire_local_segments(
                log_, None, retention.retention_ms, retention.retention_bytes, now_ms
            )

    def _expire_remote(
        self,
        finished: list[RemoteLogSegmentMetadata],
        remote_end: int,
        retention: RetentionConfig,
        now_ms: int,
    ) -> list[RemoteLogSegmentMetadata]:
        """Deletes the oldest finished remote segments that breach retention or lie below the log
        start offset, raising the log start past each; returns those kept. The size counted is
        the remote log's plus the local segments above ``remote_end``, as Kafka counts it."""
        context, partition = self._context, self._partition
        tp, log_ = partition.topic_id_partition, partition.log
        local_only = sum(s.size_bytes for s in log_.segments() if s.base_offset > remote_end)
        total = (
            context.rlmm.remote_log_totals(tp).copy_finished_size_bytes if finished else 0
        ) + local_only
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
            context.delete_remote_segment(m)
            total -= m.segment_size_in_bytes
            log_.set_log_start_offset(m.end_offset + 1)
            finished = finished[1:]
        return finished


class LocalRetentionTask(PeriodicTask):
    """After a delete-policy stop: the remote data is the bulk-delete job's, so only the local
    log's own retention (``retention.*``) runs, until tiering is enabled again."""

    def __init__(self, context: RemoteLogContext, partition: TieredPartition) -> None:
        super().__init__(f"LocalRetentionTask[{partition.topic_id_partition}]")
        self._context = context
        self._partition = partition

    def execute(self) -> None:
        retention = self._partition.retention
        _expire_local_segments(
            self._partition.log,
            None,
            retention.retention_ms,
            retention.retention_bytes,
            self._context.now_ms(),
        )


def _expire_local_segments(
    log_: Log, copied_up_to: int | None, limit_ms: int, limit_bytes: int, now_ms: int
) -> None:
    """Deletes the oldest closed local segments that breach the limits; with ``copied_up_to``,
    only segments entirely in remote storage (the log start stays: their records are still
    remote), without it the log start rises past each (their records are gone)."""
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
