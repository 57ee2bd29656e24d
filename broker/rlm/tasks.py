"""The RemoteLogManager's per-partition work: ``LeaderPartition`` (the state it keeps for a
partition it leads) and the periodic tasks run on its pools, small template ``execute()``s that
call back into the manager: RLMCopyTask (copier pool), RLMExpirationTask and, after a
delete-policy stop, LocalRetentionTask (expiration pool)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.rlm.model import TieredPartition
from broker.rlm.remote_read import FetchGate
from broker.rlm.scheduler import PeriodicTask
from tiered.config import RemoteLogDisablePolicy

if TYPE_CHECKING:
    from broker.rlm.manager import RemoteLogManager


class LeaderPartition:
    """What the RemoteLogManager keeps for a partition it leads: its copy and expiration tasks,
    the tiered-epoch fence, the KIP-950 stop, and the gate of its remote fetches."""

    def __init__(self, partition: TieredPartition) -> None:
        self.partition = partition
        self.copy_task: RLMCopyTask | None = None
        self.expiration_task: PeriodicTask | None = None
        self.fence_epoch = partition.tiered_epoch  # copies stamped below this are discarded
        self.stopped: tuple[int, RemoteLogDisablePolicy] | None = None
        self.delete_marked = False
        self.fetch_gate = FetchGate()


class RLMCopyTask(PeriodicTask):
    """Copies a leader partition's closed segments above its highest copied offset, oldest first,
    each through COPY_SEGMENT_STARTED, upload, COPY_SEGMENT_FINISHED."""

    def __init__(self, rlm: RemoteLogManager, state: LeaderPartition) -> None:
        super().__init__(f"RLMCopyTask[{state.partition.topic_id_partition}]")
        self._rlm = rlm
        self._state = state
        self.copied_offset: int | None = None  # highest offset known to be in remote storage

    def execute(self) -> None:
        partition = self._state.partition
        if self.copied_offset is None:
            # First run as leader: no copy of ours is in flight, so a COPY_SEGMENT_STARTED segment
            # is a copy that died with its broker (or with an earlier leader): remove it.
            self._rlm.abandon_unfinished_copies(self._state)
            self.copied_offset = self._rlm.highest_copied_offset(self._state)
        partition.log.roll_if_due()  # an idle partition's segment still closes on segment.ms
        for segment in partition.log.closed_segments():
            if self.cancelled:
                return
            if segment.next_offset - 1 <= self.copied_offset or segment.is_empty:
                continue
            self._rlm.copy_segment(self._state, segment, self)
            self.copied_offset = segment.next_offset - 1


class RLMExpirationTask(PeriodicTask):
    """Applies retention to a leader partition: remote segments by ``retention.*`` (and below the
    log start offset), local segments by ``local.retention.*`` once they are in remote storage;
    when copying is off (KIP-950 retain), local segments expire only once remote storage is empty,
    so that offsets stay contiguous if tiering comes back. Also finishes deletions that failed."""

    def __init__(self, rlm: RemoteLogManager, state: LeaderPartition) -> None:
        super().__init__(f"RLMExpirationTask[{state.partition.topic_id_partition}]")
        self._rlm = rlm
        self._state = state

    def execute(self) -> None:
        self._rlm.expire(self._state)


class LocalRetentionTask(PeriodicTask):
    """After a delete-policy stop: the remote data is the bulk-delete job's, so only the local
    log's own retention (``retention.*``) runs, until tiering is enabled again."""

    def __init__(self, rlm: RemoteLogManager, state: LeaderPartition) -> None:
        super().__init__(f"LocalRetentionTask[{state.partition.topic_id_partition}]")
        self._rlm = rlm
        self._state = state

    def execute(self) -> None:
        partition = self._state.partition
        retention = partition.retention
        self._rlm.expire_local_only(
            partition.log, retention.retention_ms, retention.retention_bytes
        )
