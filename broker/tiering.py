"""How a hosted partition's tiering follows the controller, one route per fact (DESIGN.md
section 4, KIP-950):

- DisableRemoteTopic(E) is the one route that stops tiering at tiered epoch E and raises the
  partition's epoch to E (:meth:`PartitionTiering.stop`); the controller re-sends it until acked.
- AssignPartitions and the KRaft metadata log carry configs. For a hosted partition
  (:meth:`PartitionTiering.reconfigure`) that is retention, Kafka 3.9's copy pause
  (``remote.log.copy.disable``) and a re-enable, which resumes copying at the epoch the
  partition was stopped at; they never stop tiering for a disablement nor raise the epoch. A
  broker that learns ``remote.storage.enable=false`` and epoch E there before its
  DisableRemoteTopic(E) keeps copying at its own epoch: copies stamped E would survive the
  deletion for E, while copies stamped below it are stopped or deleted once the stop arrives.
- A partition hosted for the first time takes the topic's state (:meth:`PartitionTiering.start`):
  copying at the topic's epoch or, disabled at epoch E > 0, stopped at E, so that its earlier
  remote data is expired and served (retain) or left to the delete job (delete). A stop acked
  before the partition was hosted wins over configs older than it (the metadata log, replayed
  from the start by a restarted broker, shows a topic's old states on the way).
- A restarted broker restores what it persisted (:meth:`PartitionTiering.restore`).
"""

from __future__ import annotations

import logging

from broker.hosted import HostedPartition, PartitionStop
from broker.rlm.manager import RemoteLogManager, TieredPartition
from tiered.config import RemoteLogDisablePolicy, disable_policy
from tiered.errors import ErrorCode, TieredError

log = logging.getLogger(__name__)

_PAUSED = RemoteLogDisablePolicy.RETAIN  # a copy pause keeps everything, as retain


class PartitionTiering:
    """Not thread-safe: the agent calls it under its state change lock. Methods that apply a
    stop raise ``TieredError`` (KAFKA_STORAGE_ERROR) if the RemoteLogManager could not stop."""

    def __init__(self, rlm: RemoteLogManager) -> None:
        self.rlm = rlm

    def start(self, hosted: HostedPartition, stop_before: PartitionStop | None) -> None:
        """A partition hosted for the first time, at the topic's tiered epoch."""
        config = hosted.config
        if stop_before is not None and stop_before.tiered_epoch > hosted.tiered_epoch:
            log.info(
                "%s: hosted stopped at tiered epoch %d, as DisableRemoteTopic asked before it "
                "was hosted (its configs are of epoch %d)",
                hosted.topic_id_partition,
                stop_before.tiered_epoch,
                hosted.tiered_epoch,
            )
            self._record_stop(hosted, stop_before.tiered_epoch, stop_before.policy)
        elif config.remote_storage_enable:
            self._record_start(hosted)
        elif hosted.tiered_epoch > 0:
            self._record_stop(hosted, hosted.tiered_epoch, disable_policy(hosted.raw_configs))
        self._apply(hosted)

    def reconfigure(self, hosted: HostedPartition, tiered_epoch: int) -> None:
        """New configs for a hosted partition, sent with the topic's ``tiered_epoch``."""
        config = hosted.config
        tp = hosted.topic_id_partition
        if not hosted.tiered:
            if config.remote_storage_enable:
                self._record_start(hosted)  # first tiered now
        elif hosted.stopped_policy is None:
            if config.remote_storage_enable and config.remote_log_copy_disable:
                hosted.stopped_policy = _PAUSED
            elif not config.remote_storage_enable and tiered_epoch > hosted.tiered_epoch:
                log.info(
                    "%s: remote.storage.enable=false at tiered epoch %d; copying goes on at "
                    "epoch %d until DisableRemoteTopic stops it",
                    tp,
                    tiered_epoch,
                    hosted.tiered_epoch,
                )
        elif (
            config.remote_storage_enable
            and not config.remote_log_copy_disable
            and tiered_epoch >= hosted.tiered_epoch  # older configs predate the stop
        ):
            log.info("Copying of %s resumes at tiered epoch %d", tp, hosted.tiered_epoch)
            hosted.stopped_policy = None
            if self.rlm.is_leading(tp):
                self.rlm.enable_partitions([tp], hosted.tiered_epoch)
        self._apply(hosted)

    def restore(self, hosted: HostedPartition, *, recorded: bool) -> None:
        """A partition restored from the journal with its tiering state; ``recorded`` False for
        entries written before ``tiered`` was: their tiering follows their configs, unless they
        were stopped."""
        if not recorded:
            if hosted.stopped_policy is None:
                self.start(hosted, None)
                return
            hosted.tiered = True
        self._apply(hosted)

    def stop(
        self, hosted: HostedPartition, tiered_epoch: int, policy: RemoteLogDisablePolicy
    ) -> None:
        """DisableRemoteTopic: KIP-950's stopPartitions for ``tiered_epoch``; recorded once the
        RemoteLogManager stopped. A partition never tiered is led for expiry and reads first."""
        tp = hosted.topic_id_partition
        if not self.rlm.is_leading(tp):
            self._lead(hosted, copying=False)
        self._stop_in_rlm(hosted, tiered_epoch, policy)
        if hosted.stopped_policy is None or tiered_epoch >= hosted.tiered_epoch:
            self._record_stop(hosted, max(hosted.tiered_epoch, tiered_epoch), policy)

    def drop(self, hosted: HostedPartition) -> None:
        """A partition no longer hosted: its tasks end, and the RLMM forgets it."""
        tp = hosted.topic_id_partition
        if self.rlm.is_leading(tp):
            self.rlm.on_leadership_change([], {tp})
            self.rlm.rlmm.on_stop_partitions({tp})

    # ----------------------------------------------------------------------------- internals

    @staticmethod
    def _record_start(hosted: HostedPartition) -> None:
        hosted.tiered = True
        hosted.stopped_policy = _PAUSED if hosted.config.remote_log_copy_disable else None

    @staticmethod
    def _record_stop(
        hosted: HostedPartition, tiered_epoch: int, policy: RemoteLogDisablePolicy
    ) -> None:
        hosted.tiered = True
        hosted.tiered_epoch = tiered_epoch
        hosted.stopped_policy = policy

    def _apply(self, hosted: HostedPartition) -> None:
        """Brings the RemoteLogManager to the partition's recorded tiering; idempotent, so a
        stop that failed is retried by the next assignment."""
        if not hosted.tiered:
            return
        tp = hosted.topic_id_partition
        if not self.rlm.is_leading(tp):
            self._lead(hosted, copying=hosted.stopped_policy is None)
        else:
            self.rlm.update_retention(tp, hosted.config.retention)
        if hosted.stopped_policy is not None:
            self._stop_in_rlm(hosted, hosted.tiered_epoch, hosted.stopped_policy)

    def _lead(self, hosted: HostedPartition, *, copying: bool) -> None:
        partition = TieredPartition(
            hosted.topic_id_partition,
            hosted.log,
            tiered_epoch=hosted.tiered_epoch,
            retention=hosted.config.retention,
            copy_enabled=copying,
        )
        self.rlm.on_leadership_change([partition])
        hosted.tiered = True

    def _stop_in_rlm(
        self, hosted: HostedPartition, tiered_epoch: int, policy: RemoteLogDisablePolicy
    ) -> None:
        tp = hosted.topic_id_partition
        error = self.rlm.stop_partitions([tp], tiered_epoch, policy)[tp]
        if error is not None:
            raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(error))
