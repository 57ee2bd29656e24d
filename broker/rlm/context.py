"""What the RemoteLogManager's tasks share, built once by the manager and handed to each task: the
RLMM and the RSM, the counters, the clock and the broker's identity, with the two remote-segment
operations both the copy and the expiration tasks perform through them (listing a partition's
remote segments, deleting one). Tasks reach the broker's remote storage through this object only,
never through the manager that schedules them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.rlm.model import RemoteLogMetrics
from tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
    TopicIdPartition,
)


@dataclass(frozen=True)
class RemoteLogContext:
    """The resources of one RemoteLogManager, as its tasks see them."""

    rlmm: RemoteLogMetadataManager
    rsm: RemoteStorageManager
    metrics: RemoteLogMetrics
    clock: Callable[[], float]  # seconds since the epoch
    broker_id: int
    custom_metadata_max_bytes: int  # remote.log.metadata.custom.metadata.max.bytes (KIP-917)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def remote_segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """The partition's remote segments in every state, oldest first; none when the RLMM has
        no metadata for it."""
        try:
            return list(self.rlmm.list_remote_log_segments(tp))
        except RemoteResourceNotFoundException:
            return []

    def delete_remote_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
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
                        segment_id, self.now_ms(), None, state, self.broker_id
                    )
                )
        except RemoteResourceNotFoundException:
            return  # finished by someone else
        self.metrics.delete_requests[metadata.topic_id_partition.topic] += 1
