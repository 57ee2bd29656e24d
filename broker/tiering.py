"""How a hosted partition's tiering follows the controller, one route per fact (docs/design.md §2,
KIP-950). The rules (which event moves which state) are the partition's ``PartitionTiering`` table
(``broker.rlm.partition_tiering``); here each event is fired on it and its outcome carried out by
the RemoteLogManager:

- DisableRemoteTopic(E) is the one route that stops tiering at tiered epoch E and raises the
  partition's epoch to E (:meth:`TieringDriver.stop`); the controller re-sends it until acked.
- AssignPartitions and the KRaft metadata log carry configs. For a hosted partition
  (:meth:`TieringDriver.reconfigure`) that is retention, Kafka 3.9's copy pause
  (``remote.log.copy.disable``) and a re-enable, which resumes copying at the epoch the
  partition was stopped at; they never stop tiering for a disablement nor raise the epoch. A
  broker that learns ``remote.storage.enable=false`` and epoch E there before its
  DisableRemoteTopic(E) keeps copying at its own epoch: copies stamped E would survive the
  deletion for E, while copies stamped below it are stopped or deleted once the stop arrives.
- A partition hosted for the first time takes the topic's state (:meth:`TieringDriver.start`):
  copying at the topic's epoch or, disabled at epoch E > 0, stopped at E, so that its earlier
  remote data is expired and served (retain) or left to the delete job (delete). A stop acked
  before the partition was hosted wins over configs older than it (the metadata log, replayed
  from the start by a restarted broker, shows a topic's old states on the way).
- A restarted broker restores what it persisted (:meth:`TieringDriver.restore`, once the
  journal's record is back in the partition's tiering).
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.hosted import HostedPartition, PartitionStop
from broker.rlm.manager import RemoteLogManager, TieredPartition
from broker.rlm.partition_tiering import TieringState
from tiered.api import TopicIdPartition
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import ErrorCode, TieredError


class TieringDriver:
    """Not thread-safe: ``Hosting`` calls it under the state change lock. Methods that apply a
    stop raise ``TieredError`` (KAFKA_STORAGE_ERROR) if the RemoteLogManager could not stop;
    the stop stays recorded, and the next assignment or a repeated DisableRemoteTopic carries
    it out again."""

    def __init__(self, rlm: RemoteLogManager) -> None:
        self.rlm = rlm

    def start(self, hosted: HostedPartition, stop_before: PartitionStop | None) -> None:
        """A partition hosted for the first time, at the topic's tiered epoch."""
        stop = None if stop_before is None else (stop_before.tiered_epoch, stop_before.policy)
        hosted.tiering.handle_hosting(hosted.tiering_configs(), stop)
        self._apply(hosted)

    def reconfigure(self, hosted: HostedPartition, tiered_epoch: int) -> None:
        """New configs for a hosted partition, sent with the topic's ``tiered_epoch``."""
        tiering = hosted.tiering
        before = tiering.state
        tiering.handle_assignment(hosted.tiering_configs(), tiered_epoch)
        resumed = before not in (TieringState.NOT_TIERED, TieringState.COPYING) and tiering.copying
        if resumed:
            self.rlm.resume_copying([hosted.topic_id_partition])
        self._apply(hosted)

    def restore(self, hosted: HostedPartition) -> None:
        """A partition restored from the journal, its tiering as recorded."""
        self._apply(hosted)

    def stop(
        self, stops: Sequence[tuple[HostedPartition, int, RemoteLogDisablePolicy]]
    ) -> list[TieredError | None]:
        """DisableRemoteTopic: KIP-950's stopPartitions, each partition at its tiered epoch and
        policy, carried out together (one RLMM write for the delete policy's marks); each
        partition's outcome, in order. A partition never tiered is led for expiry and reads."""
        for hosted, tiered_epoch, policy in stops:
            hosted.tiering.handle_disable_remote_topic(tiered_epoch, policy)
        return self._apply_all([hosted for hosted, _, _ in stops])

    def drop(self, hosted: HostedPartition) -> None:
        """A partition no longer hosted: its tasks end, and the RLMM forgets it."""
        tp = hosted.topic_id_partition
        if self.rlm.is_leading(tp):
            self.rlm.on_leadership_change([], {tp})
            self.rlm.rlmm.on_stop_partitions({tp})

    def _apply(self, hosted: HostedPartition) -> None:
        (error,) = self._apply_all([hosted])
        if error is not None:
            raise error

    def _apply_all(self, partitions: Sequence[HostedPartition]) -> list[TieredError | None]:
        """Brings the RemoteLogManager to each partition's tiering; idempotent, so a stop that
        failed is carried out by the next assignment."""
        stopping: list[TopicIdPartition] = []
        for hosted in partitions:
            tiering = hosted.tiering
            if not tiering.tiered:
                continue
            tp = hosted.topic_id_partition
            if not self.rlm.is_leading(tp):
                partition = TieredPartition(
                    tp, hosted.log, retention=hosted.retention, tiering=tiering
                )
                self.rlm.on_leadership_change([partition])
            else:
                self.rlm.update_retention(tp, hosted.retention)
            if tiering.state.stop_policy is not None:
                stopping.append(tp)
        errors = self.rlm.apply_stop(stopping) if stopping else {}
        return [
            None
            if (error := errors.get(hosted.topic_id_partition)) is None
            else TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(error))
            for hosted in partitions
        ]
