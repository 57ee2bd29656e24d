"""The final state of a randomized run, read from a ``SystemCluster`` after the last heal, for
``system_tests.history_checker``: every topic's state, records (read across both tiers from its
leaders), remote objects and finished segments; the group's committed offsets; and every
controller's activations, from the line each logs when it becomes active (``Active as controller
ID with controller epoch N``), and, in ZooKeeper mode, the controller-store writes ZooKeeper's
transaction log shows from a session without the leadership."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Iterable
from pathlib import Path

import grpc
from confluent_kafka import Consumer, KafkaException, TopicPartition

from system_tests.harness import CONTROLLER_WRITES, STORE_PARENTS, SystemCluster
from system_tests.history_checker import (
    Activation,
    DeleteJob,
    FinalState,
    FinishedSegment,
    PartitionState,
    TopicState,
)
from tests.support.kafka_cluster import QUIET
from tests.support.polling import poll_until
from tests.support.zookeeper_txn_log import read_txn_log, writes_outside_leadership
from tiered.admin import TopicDescription
from tiered.api import RemoteLogSegmentState
from tiered.cluster import zk_paths
from tiered.cluster.model import TieredState
from tiered.errors import TieredError
from tiered.rsm import layout

__all__ = ["final_state_json", "read_final_state", "settle"]

ACTIVATION = re.compile(r"Active as controller (\d+) with controller epoch (\d+)")


def settle(cluster: SystemCluster, timeout_s: float) -> None:
    """Waits, up to ``timeout_s``, until no topic is DISABLING and every delete job is DONE;
    returns either way: what did not settle is the checker's to name."""

    def settled() -> bool:
        try:
            topics = cluster.admin.describe_topics()
        except (TieredError, grpc.RpcError):
            return False
        return all(
            t.tiered_state is not TieredState.DISABLING
            and (t.delete_job is None or t.delete_job.state == "DONE")
            for t in topics
        )

    with contextlib.suppress(AssertionError):
        poll_until(settled, timeout=timeout_s, what="every topic to settle")


def read_final_state(
    cluster: SystemCluster, taken_at: float, group: str, names: Iterable[str]
) -> FinalState:
    """The state of the topics called ``names`` (those the run's clients use) and of ``group``."""
    topics: dict[str, TopicState] = {}
    unreadable: list[str] = []
    wanted = set(names)
    for topic in cluster.admin.describe_topics():
        if topic.name in wanted:
            topics[str(topic.topic_id)] = _topic_state(cluster, topic, unreadable)
    return FinalState(
        taken_at=taken_at,
        topics=topics,
        committed={group: _committed(cluster, group, topics.values())},
        activations=tuple(_activations(cluster)),
        writes_outside_leadership=tuple(_writes_outside_leadership(cluster)),
        unreadable=tuple(unreadable),
    )


def _topic_state(
    cluster: SystemCluster, topic: TopicDescription, unreadable: list[str]
) -> TopicState:
    partitions: dict[int, PartitionState] = {}
    finished: list[FinishedSegment] = []
    for p, partition in enumerate(topic.partitions):
        try:
            offsets = cluster.log_dirs(partition.leader)[(topic.topic_id, p)].offsets
            read = cluster.read_all(topic, p, offsets.log_start_offset, offsets.log_end_offset)
        except (KeyError, AssertionError, grpc.RpcError) as e:
            unreadable.append(f"{topic.name}-{p} on broker {partition.leader}: {e!r}"[:500])
            continue
        partitions[p] = PartitionState(
            log_start=offsets.log_start_offset,
            local_log_start=offsets.local_log_start_offset,
            log_end=offsets.log_end_offset,
            records={o: v.decode(errors="replace") for o, v in read.items()},
        )
        finished += [
            FinishedSegment(layout.segment_prefix(s), s.tiered_epoch)
            for s in cluster.remote_segments(topic, p)
            if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]
    job = topic.delete_job
    return TopicState(
        name=topic.name,
        topic_id=str(topic.topic_id),
        tiered_state=topic.tiered_state.value,
        delete_job=None if job is None else DeleteJob(job.tiered_epoch, job.state),
        partitions=partitions,
        objects=frozenset(_objects(cluster.root / "remote", topic)),
        finished_segments=tuple(finished),
    )


def _objects(remote: Path, topic: TopicDescription) -> list[str]:
    directory = remote / f"{topic.name}-{topic.topic_id}"
    if not directory.is_dir():
        return []
    return [str(f.relative_to(remote)) for f in directory.rglob("*") if f.is_file()]


def _committed(
    cluster: SystemCluster, group: str, topics: Iterable[TopicState]
) -> dict[tuple[str, int], int]:
    wanted = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
    if not wanted:
        return {}
    consumer = Consumer({"bootstrap.servers": cluster.kafka_bootstrap, "group.id": group, **QUIET})
    try:
        found = consumer.committed(wanted, timeout=30)
    except KafkaException:
        return {}
    finally:
        consumer.close()
    return {(p.topic, p.partition): p.offset for p in found if p.offset >= 0}


def _activations(cluster: SystemCluster) -> list[Activation]:
    found = []
    for controller in cluster.controllers:
        for line in list(controller.output):
            match = ACTIVATION.search(line)
            if match:
                found.append(Activation(int(match.group(1)), int(match.group(2))))
    return found


def _writes_outside_leadership(cluster: SystemCluster) -> list[str]:
    """ZooKeeper mode: what ZooKeeper's own transaction log shows written to the controller
    store by a session that did not hold ``/controller`` then."""
    if cluster.zookeeper is None:
        return []
    txns = read_txn_log(cluster.zookeeper.data_dir)
    return writes_outside_leadership(txns, zk_paths.CONTROLLER, CONTROLLER_WRITES, STORE_PARENTS)


def final_state_json(final: FinalState) -> str:
    """The final state as JSON, kept beside the history for a failed run's post-mortem."""
    data = dataclasses.asdict(final)
    data["committed"] = {
        group: {f"{topic}-{partition}": offset for (topic, partition), offset in found.items()}
        for group, found in final.committed.items()
    }
    return json.dumps(data, default=sorted, indent=1, sort_keys=True)
