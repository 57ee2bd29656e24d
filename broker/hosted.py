"""What a broker knows of each partition it hosts, and of each stop it acked before hosting one,
as kept in memory and in the assignment journal (``broker.assignment_journal``)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.log import Log
from broker.rlm.model import RetentionConfig
from broker.rlm.partition_tiering import PartitionTiering, TieringConfigs
from tiered.api import TopicIdPartition
from tiered.config import RemoteLogDisablePolicy, TopicConfig

PartitionKey = tuple[uuid.UUID, int]  # (topic id, partition)


def check_partition(topic_id: uuid.UUID, partition: int) -> None:
    """``ValueError`` for a negative partition: a request carrying one is malformed (refused
    whole, before anything is applied), not a partition that is merely not hosted."""
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition} (topic id {topic_id})")


@dataclass(frozen=True)
class PartitionStop:
    """One DisableRemoteTopic entry: stop tiering this partition at this tiered epoch (KIP-950).
    ``ValueError`` for a negative partition (:func:`check_partition`)."""

    topic_id: uuid.UUID
    partition: int
    tiered_epoch: int
    policy: RemoteLogDisablePolicy

    def __post_init__(self) -> None:
        check_partition(self.topic_id, self.partition)

    @property
    def key(self) -> PartitionKey:
        return self.topic_id, self.partition

    def journal_json(self) -> str:
        """The journal entry of a stop acked for a partition not hosted (yet)."""
        entry = {
            "topic_id": str(self.topic_id),
            "partition": self.partition,
            "stop_before_hosting": {"tiered_epoch": self.tiered_epoch, "policy": self.policy.value},
        }
        return json.dumps(entry, separators=(",", ":"))


@dataclass
class HostedPartition:
    """A partition this broker hosts and leads. Its tiering (epoch and state: never tiered,
    copying, copy paused, stopped with a policy) is ``tiering``, the one record of it, which the
    RemoteLogManager reads too."""

    topic_id_partition: TopicIdPartition
    log: Log
    config: TopicConfig
    raw_configs: dict[str, str]
    tiering: PartitionTiering
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> PartitionKey:
        return self.topic_id_partition.topic_id, self.topic_id_partition.partition

    @property
    def tiered_epoch(self) -> int:
        return self.tiering.tiered_epoch

    @property
    def retention(self) -> RetentionConfig:
        return RetentionConfig.of(self.config)

    def tiering_configs(self) -> TieringConfigs:
        return TieringConfigs(
            remote_storage_enable=self.config.remote_storage_enable,
            copy_disable=self.config.remote_log_copy_disable,
            disable_policy=self.config.disable_policy,
        )

    def assignment_json(self) -> str:
        """This partition's assignment journal entry (the journal skips it if unchanged). The
        tiering is written as earlier versions read it (``tiered``, and ``stopped_policy``, which
        a copy pause shares with a retain stop), plus ``delete_below_epoch``."""
        tp = self.topic_id_partition
        tiering = self.tiering
        policy = tiering.state.stop_policy
        entry = {
            "topic_id": str(tp.topic_id),
            "topic": tp.topic,
            "partition": tp.partition,
            "configs": self.raw_configs,
            "tiered_epoch": tiering.tiered_epoch,
            "tiered": tiering.tiered,
            "stopped_policy": None if policy is None else policy.value,
            "delete_below_epoch": tiering.delete_below_epoch,
        }
        # Compact: one line of the journal.
        return json.dumps(entry, separators=(",", ":"))


@dataclass(frozen=True)
class RestoredPartition:
    """A hosted partition as the journal holds it. ``tiered`` is None in entries written before
    it was recorded: the partition's tiering then follows its configs, as for a new one;
    ``delete_below_epoch`` is None in entries written before it was."""

    topic_id_partition: TopicIdPartition
    configs: dict[str, str]
    tiered_epoch: int
    tiered: bool | None
    stopped_policy: RemoteLogDisablePolicy | None
    delete_below_epoch: int | None = None

    def restore(self, hosted: HostedPartition) -> None:
        """Gives ``hosted``, just hosted from this entry, the tiering recorded in it."""
        hosted.tiering.handle_restore(
            tiered=self.tiered,
            stopped_policy=self.stopped_policy,
            delete_below_epoch=self.delete_below_epoch,
            configs=hosted.tiering_configs(),
        )


def entry_from_journal(entry: Mapping[str, Any]) -> RestoredPartition | PartitionStop:
    """A journal entry as written by :meth:`HostedPartition.assignment_json` or
    :meth:`PartitionStop.journal_json`; ``KeyError``/``ValueError`` if it is neither."""
    topic_id, partition = uuid.UUID(str(entry["topic_id"])), int(entry["partition"])
    stop = entry.get("stop_before_hosting")
    if stop is not None:
        return PartitionStop(
            topic_id,
            partition,
            int(stop["tiered_epoch"]),
            RemoteLogDisablePolicy.parse(str(stop["policy"])),
        )
    policy = entry.get("stopped_policy")
    tiered = entry.get("tiered")
    delete_below = entry.get("delete_below_epoch")
    return RestoredPartition(
        TopicIdPartition(topic_id, str(entry["topic"]), partition),
        {str(k): str(v) for k, v in dict(entry["configs"]).items()},
        int(entry["tiered_epoch"]),
        None if tiered is None else bool(tiered),
        None if policy is None else RemoteLogDisablePolicy.parse(str(policy)),
        None if delete_below is None else int(delete_below),
    )
