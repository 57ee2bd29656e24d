"""What a broker knows of each partition it hosts, and of each stop it acked before hosting one,
as kept in memory and in the assignment journal (``broker.assignment_journal``)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.config import TopicConfig
from broker.log import Log
from tiered.api import TopicIdPartition
from tiered.config import RemoteLogDisablePolicy

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
    """A partition this broker hosts and leads. Its tiering is one of: off (``tiered`` false:
    never tiered here, nothing remote to copy, expire or serve), copying (stamped
    ``tiered_epoch``), or stopped at ``tiered_epoch`` with ``stopped_policy`` (by
    DisableRemoteTopic, or paused by Kafka 3.9's ``remote.log.copy.disable`` as retain)."""

    topic_id_partition: TopicIdPartition
    log: Log
    config: TopicConfig
    raw_configs: dict[str, str]
    tiered_epoch: int
    tiered: bool = False  # the RemoteLogManager leads it: copying, or stopped
    stopped_policy: RemoteLogDisablePolicy | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def key(self) -> PartitionKey:
        return self.topic_id_partition.topic_id, self.topic_id_partition.partition

    def assignment_json(self) -> str:
        """This partition's assignment journal entry (the journal skips it if unchanged)."""
        tp = self.topic_id_partition
        entry = {
            "topic_id": str(tp.topic_id),
            "topic": tp.topic,
            "partition": tp.partition,
            "configs": self.raw_configs,
            "tiered_epoch": self.tiered_epoch,
            "tiered": self.tiered,
            "stopped_policy": None if self.stopped_policy is None else self.stopped_policy.value,
        }
        # Compact: one line of the journal.
        return json.dumps(entry, separators=(",", ":"))


@dataclass(frozen=True)
class RestoredPartition:
    """A hosted partition as the journal holds it. ``tiered`` is None in entries written before
    it was recorded: the partition's tiering then follows its configs, as for a new one."""

    topic_id_partition: TopicIdPartition
    configs: dict[str, str]
    tiered_epoch: int
    tiered: bool | None
    stopped_policy: RemoteLogDisablePolicy | None


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
    return RestoredPartition(
        TopicIdPartition(topic_id, str(entry["topic"]), partition),
        {str(k): str(v) for k, v in dict(entry["configs"]).items()},
        int(entry["tiered_epoch"]),
        None if tiered is None else bool(tiered),
        None if policy is None else RemoteLogDisablePolicy.parse(str(policy)),
    )
