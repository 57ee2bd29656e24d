"""Records in and out of the partitions a broker hosts, across both tiers: appends (Produce),
reads from the local log or, below its start, from remote storage through the RemoteLogManager
(Fetch), offsets and the offset of a timestamp (ListOffsets), DeleteRecords, and what each
partition holds in each tier (DescribeLogDirs, the metrics). Plain Python: the gRPC servicer and
the Kafka APIs convert at their edges and call these methods.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.hosted import HostedPartition
from broker.hosted_partitions import HostedPartitions
from broker.log import AppendInfo, BatchRead, TimestampOffset
from broker.rlm.manager import RemoteLogManager
from tiered.api import (
    BulkDeleteRemoteLogMetadataManager,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.config import CLEANUP_POLICY, CLEANUP_POLICY_DELETE
from tiered.errors import ErrorCode, TieredError

__all__ = ["DataPlane", "PartitionLogDir", "PartitionOffsets"]


@dataclass(frozen=True)
class PartitionOffsets:
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class PartitionLogDir:
    topic_id_partition: TopicIdPartition
    offsets: PartitionOffsets
    local_size_bytes: int
    remote_size_bytes: int
    remote_segment_count: int
    remote_copy_finished_bytes: int
    tiered_epoch: int
    copying: bool
    copy_lag_bytes: int = 0
    copy_lag_segments: int = 0
    remote_fetch_enabled: bool = False
    remote_log_start_offset: int = -1
    remote_delete_state: str = ""


def _local_size_bytes(hosted: HostedPartition) -> int:
    return sum(s.size_bytes for s in hosted.log.segments())


class DataPlane:
    """Thread-safe. ``rlm`` is None when remote storage is off: everything is local then."""

    def __init__(self, partitions: HostedPartitions, rlm: RemoteLogManager | None) -> None:
        self._partitions = partitions
        self._rlm = rlm
        self._append_listeners: list[Callable[[TopicIdPartition, int], None]] = []

    def on_append(self, listener: Callable[[TopicIdPartition, int], None]) -> None:
        """Calls ``listener(partition, bytes appended)`` after every append that wrote records,
        on the appending thread (a Kafka Fetch waiting for data wakes up); it must not block."""
        self._append_listeners.append(listener)

    def produce(
        self,
        topic_id: uuid.UUID,
        partition: int,
        records: bytes | bytearray | memoryview,
        leader_epoch: int = 0,
    ) -> AppendInfo:
        """Appends a produce payload (one or more Kafka record batches v2) with
        ``Log.append_batches`` (its errors); durable before this returns. A segment it closed
        is copied to remote storage right away."""
        hosted = self._partitions.hosted(topic_id, partition)
        if not records:
            raise TieredError(ErrorCode.INVALID_REQUEST, "a produce request needs records")
        with hosted.lock:
            info = hosted.log.append_batches(records, leader_epoch)
        if info.rolled and self._rlm is not None:
            self._rlm.trigger_copy(hosted.topic_id_partition)
        if not info.duplicate:
            for listener in self._append_listeners:
                listener(hosted.topic_id_partition, len(records))
        return info

    def fetch(
        self, topic_id: uuid.UUID, partition: int, offset: int, max_bytes: int
    ) -> tuple[BatchRead, bool]:
        """Whole batches from the one holding ``offset`` (at least one, else up to
        ``max_bytes``) and whether they came from remote storage. OFFSET_OUT_OF_RANGE outside
        [log start, log end]; KAFKA_STORAGE_ERROR if remote storage fails."""
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        hosted = self._partitions.hosted(topic_id, partition)
        log_ = hosted.log
        if offset < log_.log_start_offset or offset > log_.log_end_offset:
            raise TieredError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{log_.log_start_offset}, {log_.log_end_offset}] "
                f"of {hosted.topic_id_partition}",
            )
        if offset >= log_.local_log_start_offset or self._rlm is None:
            return log_.read(offset, max_bytes), False
        try:
            return self._rlm.read(hosted.topic_id_partition, offset, max_bytes), True
        except RemoteStorageException as e:
            raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e

    def delete_records(self, topic_id: uuid.UUID, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords (``Log.delete_records``: -1 is the high watermark; its
        OFFSET_OUT_OF_RANGE): the log start offset rises to ``offset``, durably, before this
        returns the new low watermark; local segments wholly below it are deleted. Remote
        segments wholly below it are the expiration task's, run now, under every tiering state
        that keeps one (a delete-policy stop leaves them to the bulk delete). A topic whose
        ``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION, as in Kafka."""
        hosted = self._partitions.hosted(topic_id, partition)
        if CLEANUP_POLICY_DELETE not in hosted.config.cleanup_policy:
            raise TieredError(
                ErrorCode.POLICY_VIOLATION,
                f"records of {hosted.topic_id_partition} cannot be deleted: its "
                f"{CLEANUP_POLICY}={','.join(hosted.config.cleanup_policy)} lacks "
                f"{CLEANUP_POLICY_DELETE}",
            )
        low_watermark = hosted.log.delete_records(offset)
        if self._rlm is not None:
            self._rlm.trigger_expiration(hosted.topic_id_partition)
        return low_watermark

    def offset_for_timestamp(
        self, topic_id: uuid.UUID, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        """ListOffsets by timestamp across both tiers: the first record from the log start
        offset on whose timestamp is at least ``timestamp_ms`` (remote segments first, then the
        local log); None if there is none."""
        hosted = self._partitions.hosted(topic_id, partition)
        found = None
        rlm = self._rlm
        if rlm is not None and hosted.log.log_start_offset < hosted.log.local_log_start_offset:
            try:
                found = rlm.find_offset_by_timestamp(hosted.topic_id_partition, timestamp_ms)
            except RemoteStorageException as e:
                raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e
        return found if found is not None else hosted.log.offset_for_timestamp(timestamp_ms)

    def offsets(self, topic_id: uuid.UUID, partition: int) -> PartitionOffsets:
        log_ = self._partitions.hosted(topic_id, partition).log
        return PartitionOffsets(
            log_.log_start_offset, log_.local_log_start_offset, log_.log_end_offset
        )

    def local_partitions(self) -> list[tuple[str, int, int]]:
        """(topic, partition, local size in bytes) of every hosted partition: what Kafka's
        DescribeLogDirs reports (the log on this broker's disk, remote segments not counted)."""
        return [
            (h.topic_id_partition.topic, h.topic_id_partition.partition, _local_size_bytes(h))
            for h in self._partitions.all()
        ]

    def describe_log_dirs(self) -> list[PartitionLogDir]:
        """What every hosted partition holds in each tier, and how its tiering stands."""
        return [self._log_dir(hosted) for hosted in self._partitions.all()]

    def _log_dir(self, hosted: HostedPartition) -> PartitionLogDir:
        tp = hosted.topic_id_partition
        rlm = self._rlm
        remote = (0, 0, 0)
        remote_start, delete_state = -1, ""
        if rlm is not None:
            try:
                totals = rlm.rlmm.remote_log_totals(tp)
                remote = (totals.size_bytes, totals.segment_count, totals.copy_finished_size_bytes)
                if totals.segment_count:
                    start = rlm.rlmm.remote_log_start_offset(tp)
                    remote_start = -1 if start is None else start
                deleting = (
                    rlm.rlmm.remote_partition_delete_state(tp)
                    if isinstance(rlm.rlmm, BulkDeleteRemoteLogMetadataManager)
                    else None  # a plugin without the capability: no delete state to show
                )
                delete_state = "" if deleting is None else deleting.name
            except RemoteResourceNotFoundException:
                pass
        lag = rlm.copy_lag(tp) if rlm is not None else None
        return PartitionLogDir(
            tp,
            self.offsets(tp.topic_id, tp.partition),
            _local_size_bytes(hosted),
            *remote,
            tiered_epoch=hosted.tiered_epoch,
            copying=lag is not None,
            copy_lag_bytes=sum(s.size_bytes for s in lag or ()),
            copy_lag_segments=len(lag or ()),
            remote_fetch_enabled=rlm is not None and rlm.accepts_remote_fetches(tp),
            remote_log_start_offset=remote_start,
            remote_delete_state=delete_state,
        )
