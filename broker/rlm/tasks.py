"""The RemoteLogManager's per-partition work: ``LeaderPartition`` (what it keeps for a partition it
leads) and the periodic tasks run on its pools, small template ``execute()``s that call back
into the work they are given: RLMCopyTask (copier pool), RLMExpirationTask and, after a
delete-policy stop, LocalRetentionTask (expiration pool).

The tasks know that work only as the narrow protocols below (the RemoteLogManager is one), so
this module does not depend on the manager that schedules them."""

from __future__ import annotations

from typing import Protocol

from broker.log import Log, LogSegment
from broker.rlm.model import TieredPartition
from broker.rlm.partition_tiering import PartitionTiering
from broker.rlm.remote_read import FetchGate
from broker.rlm.scheduler import PeriodicTask


class LeaderPartition:
    """What the RemoteLogManager keeps for a partition it leads: its copy and expiration tasks,
    the gate of its remote fetches, and which delete-policy stop it carried out. The tiering
    itself (epoch, state) is the partition's :class:`PartitionTiering`, read, never copied."""

    def __init__(self, partition: TieredPartition) -> None:
        self.partition = partition
        self.copy_task: RLMCopyTask | None = None
        self.expiration_task: PeriodicTask | None = None
        # The tiered epoch of the delete-policy stop whose work (fetches drained, log start
        # raised, DELETE_PARTITION_MARKED) was done for this leadership; None since copying last
        # (re)started.
        self.deletion_marked_epoch: int | None = None
        self.fetch_gate = FetchGate()

    @property
    def tiering(self) -> PartitionTiering:
        return self.partition.tiering


class CopyWork(Protocol):
    """What a copy task asks of the RemoteLogManager."""

    def abandon_unfinished_copies(self, state: LeaderPartition) -> None: ...

    def highest_copied_offset(self, state: LeaderPartition) -> int: ...

    def copy_segment(
        self, state: LeaderPartition, segment: LogSegment, task: RLMCopyTask
    ) -> bool: ...


class ExpirationWork(Protocol):
    """What the expiration tasks ask of the RemoteLogManager."""

    def expire(self, state: LeaderPartition) -> None: ...

    def expire_local_only(self, log_: Log, retention_ms: int, retention_bytes: int) -> None: ...


class RLMCopyTask(PeriodicTask):
    """Copies a leader partition's closed segments above its highest copied offset, oldest first,
    each through COPY_SEGMENT_STARTED, upload, COPY_SEGMENT_FINISHED."""

    def __init__(self, work: CopyWork, state: LeaderPartition) -> None:
        super().__init__(f"RLMCopyTask[{state.partition.topic_id_partition}]")
        self._work = work
        self._state = state
        self.copied_offset: int | None = None  # highest offset known to be in remote storage

    def execute(self) -> None:
        partition = self._state.partition
        if self.copied_offset is None:
            # First run as leader: no copy of ours is in flight, so a COPY_SEGMENT_STARTED segment
            # is a copy that died with its broker (or with an earlier leader): remove it.
            self._work.abandon_unfinished_copies(self._state)
            self.copied_offset = self._work.highest_copied_offset(self._state)
        partition.log.roll_if_due()  # an idle partition's segment still closes on segment.ms
        for segment in partition.log.closed_segments():
            if self.cancelled:
                return
            if segment.next_offset - 1 <= self.copied_offset or segment.is_empty:
                continue
            if segment.next_offset <= partition.log.log_start_offset:
                continue  # deleted records (DeleteRecords): the log deletes the segment too
            if not self._work.copy_segment(self._state, segment, self):
                return  # copying stopped under this run: the stop cancels the task
            self.copied_offset = segment.next_offset - 1


class RLMExpirationTask(PeriodicTask):
    """Applies retention to a leader partition: remote segments by ``retention.*`` (and below the
    log start offset), local segments by ``local.retention.*`` once they are in remote storage;
    when copying is off (KIP-950 retain), local segments expire only once remote storage is empty,
    so that offsets stay contiguous if tiering comes back. Also finishes deletions that failed."""

    def __init__(self, work: ExpirationWork, state: LeaderPartition) -> None:
        super().__init__(f"RLMExpirationTask[{state.partition.topic_id_partition}]")
        self._work = work
        self._state = state

    def execute(self) -> None:
        self._work.expire(self._state)


class LocalRetentionTask(PeriodicTask):
    """After a delete-policy stop: the remote data is the bulk-delete job's, so only the local
    log's own retention (``retention.*``) runs, until tiering is enabled again."""

    def __init__(self, work: ExpirationWork, state: LeaderPartition) -> None:
        super().__init__(f"LocalRetentionTask[{state.partition.topic_id_partition}]")
        self._work = work
        self._state = state

    def execute(self) -> None:
        partition = self._state.partition
        retention = partition.retention
        self._work.expire_local_only(
            partition.log, retention.retention_ms, retention.retention_bytes
        )
