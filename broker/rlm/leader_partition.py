"""The RemoteLogManager's registry entry for a partition it leads: the partition, its copy and
expiration tasks, the gate of its remote fetches, and which delete-policy stop it carried out."""

from __future__ import annotations

from broker.rlm.copy_task import RLMCopyTask
from broker.rlm.expiration_task import LocalRetentionTask, RLMExpirationTask
from broker.rlm.model import TieredPartition
from broker.rlm.partition_tiering import PartitionTiering
from broker.rlm.remote_read import FetchGate


class LeaderPartition:
    """What the RemoteLogManager keeps for a partition it leads. The tiering itself (epoch,
    state) is the partition's :class:`PartitionTiering`, read, never copied."""

    def __init__(self, partition: TieredPartition) -> None:
        self.partition = partition
        self.copy_task: RLMCopyTask | None = None
        self.expiration_task: RLMExpirationTask | LocalRetentionTask | None = None
        # The tiered epoch of the delete-policy stop whose work (fetches drained, log start
        # raised, DELETE_PARTITION_MARKED) was done for this leadership; None since copying last
        # (re)started.
        self.deletion_marked_epoch: int | None = None
        self.fetch_gate = FetchGate()

    @property
    def tiering(self) -> PartitionTiering:
        return self.partition.tiering

    def active_copy_task(self) -> RLMCopyTask | None:
        """Its copy task, unless it has none or the task was cancelled."""
        task = self.copy_task
        return None if task is None or task.cancelled else task

    def is_copying(self) -> bool:
        """Whether its copy task runs. This, not the tiering's state, says whether local segments
        are being copied: between a stop's event and its cancel, a run may still copy."""
        return self.active_copy_task() is not None

    def cancel_tasks(self, wait_s: float) -> None:
        """Cancels its tasks, waiting up to ``wait_s`` for each one's run in flight."""
        for task in (self.copy_task, self.expiration_task):
            if task is not None:
                task.cancel(wait_s)
