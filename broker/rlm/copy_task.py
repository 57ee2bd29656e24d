"""The copy task (Kafka's ``RLMCopyTask``), run on the RemoteLogManager's copier pool for each
partition it leads while that partition copies: tiers the partition's closed segments above its
highest copied offset, oldest first, each through COPY_SEGMENT_STARTED, upload and
COPY_SEGMENT_FINISHED, and removes copies left unfinished when it starts.

Tiered epoch fencing: a copy is stamped with the partition's tiered epoch when it begins, and is
finished only if the partition still copies at that epoch; otherwise (a stop came while it was in
flight) its data is deleted instead. So once a stop has raised the epoch and waited for this
task's run, no segment stamped below that epoch is ever finished."""

from __future__ import annotations

import logging

from broker.log import LogSegment
from broker.rlm.context import RemoteLogContext
from broker.rlm.model import CustomMetadataSizeLimitExceededException, TieredPartition
from broker.rlm.scheduler import PeriodicTask
from tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteStorageException,
)

log = logging.getLogger(__name__)


class RLMCopyTask(PeriodicTask):
    """Copies a leader partition's closed segments above its highest copied offset, oldest first.
    A failed upload is counted (``copy_errors``), its data deleted, and the run fails: the next
    period retries from the same segment. Custom metadata above the broker's limit stops the task
    for good (KIP-917)."""

    def __init__(self, context: RemoteLogContext, partition: TieredPartition) -> None:
        super().__init__(f"RLMCopyTask[{partition.topic_id_partition}]")
        self._context = context
        self._partition = partition
        self.copied_offset: int | None = None  # highest offset known to be in remote storage

    def execute(self) -> None:
        log_ = self._partition.log
        if self.copied_offset is None:
            # First run as leader: no copy of ours is in flight, so a COPY_SEGMENT_STARTED segment
            # is a copy that died with its broker (or with an earlier leader): remove it.
            self._abandon_unfinished_copies()
            self.copied_offset = self.highest_copied_offset()
        log_.roll_if_due()  # an idle partition's segment still closes on segment.ms
        for segment in log_.closed_segments():
            if self.cancelled:
                return
            if segment.next_offset - 1 <= self.copied_offset or segment.is_empty:
                continue
            if segment.next_offset <= log_.log_start_offset:
                continue  # deleted records (DeleteRecords): the log deletes the segment too
            if not self._copy_segment(segment):
                return  # copying stopped under this run: the stop cancels the task
            self.copied_offset = segment.next_offset - 1

    def highest_copied_offset(self) -> int:
        """Where copying resumes: after the highest finished remote offset that still counts
        (remote data stamped below the epoch of a delete-policy stop is being deleted and does
        not), and never below the log start offset."""
        partition = self._partition
        delete_below_epoch = partition.tiering.delete_below_epoch
        highest = partition.log.log_start_offset - 1
        for m in self._context.remote_segments(partition.topic_id_partition):
            if (
                m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
                and m.tiered_epoch >= delete_below_epoch
            ):
                highest = max(highest, m.end_offset)
        return highest

    def lag(self) -> list[LogSegment]:
        """The closed, non-empty local segments not yet in remote storage, oldest first. Before
        the first run the resume point comes from the RLMM, so the lag is right from the moment
        the partition is led."""
        copied = self.copied_offset
        if copied is None:
            copied = self.highest_copied_offset()
        return [
            s
            for s in self._partition.log.closed_segments()
            if not s.is_empty and s.next_offset - 1 > copied
        ]

    def _copy_segment(self, segment: LogSegment) -> bool:
        """Copies one closed segment; False when copying stopped before it could start or
        finish (a finished copy must carry an epoch at which the partition was copying), or when
        the segment was deleted (its records were) before its copy could finish."""
        context, partition = self._context, self._partition
        tp, log_ = partition.topic_id_partition, partition.log
        start, end = segment.base_offset, segment.next_offset - 1
        stamp = partition.tiering.copy_epoch()
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
            broker_id=context.broker_id,
            event_timestamp_ms=context.now_ms(),
            segment_size_in_bytes=segment.size_bytes,
            segment_leader_epochs=log_.leader_epoch_cache.epochs_in_range(start, end),
            tiered_epoch=stamp,
        )
        context.rlmm.add_remote_log_segment_metadata(metadata)
        context.metrics.copy_requests[tp.topic] += 1
        try:
            custom = context.rsm.copy_log_segment_data(metadata, segment_data)
        except Exception as e:
            if segment not in log_.closed_segments():
                # Its records were deleted under the copy (DeleteRecords): nothing to retry.
                self._abandon_copy(metadata, "its local segment was deleted during the copy")
                return False
            context.metrics.copy_errors[tp.topic] += 1
            self._abandon_copy(metadata, f"copy failed: {e}")
            raise
        limit = context.custom_metadata_max_bytes
        if custom is not None and len(custom) > limit:
            context.metrics.copy_errors[tp.topic] += 1
            log.error(
                "Partition %s: custom metadata of segment %s is %d bytes, more than "
                "remote.log.metadata.custom.metadata.max.bytes=%d; deleting the copied data and "
                "stopping this partition's copy task",
                tp,
                metadata.remote_log_segment_id.id,
                len(custom),
                limit,
            )
            self.cancel()
            self._abandon_copy(metadata, "custom metadata too large")
            raise CustomMetadataSizeLimitExceededException(
                f"custom metadata of {len(custom)} bytes exceeds the limit of {limit} bytes"
            )
        if partition.tiering.copy_epoch() != stamp:
            # A stop (or a new epoch) came while this copy was in flight: discard it.
            self._abandon_copy(metadata, f"fenced by {partition.tiering}")
            return False
        context.rlmm.update_remote_log_segment_metadata(
            RemoteLogSegmentMetadataUpdate(
                metadata.remote_log_segment_id,
                context.now_ms(),
                custom,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                context.broker_id,
            )
        )
        context.metrics.copy_bytes[tp.topic] += segment.size_bytes
        log.info(
            "Partition %s: copied segment [%d, %d] (tiered epoch %d)",
            tp,
            start,
            end,
            metadata.tiered_epoch,
        )
        return True

    def _abandon_unfinished_copies(self) -> None:
        for m in self._context.remote_segments(self._partition.topic_id_partition):
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
                self._abandon_copy(m, "left unfinished by an earlier copy")

    def _abandon_copy(self, metadata: RemoteLogSegmentMetadata, why: str) -> None:
        """Deletes a copy that will never finish. If the delete fails the segment stays
        DELETE_SEGMENT_STARTED (listed), for expiration to retry."""
        try:
            self._context.delete_remote_segment(metadata)
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
