"""The system-test harness: a real cluster (controller, standby, brokers and, in ZooKeeper mode,
its own ZooKeeper server) in a temp dir, a ledger of every acknowledged record, and the
invariants every scenario ends with.

Processes are killed (-9), paused (SIGSTOP), resumed and restarted through their
``DaemonProcess`` (``cluster.controllers``, ``cluster.brokers``) or ``cluster.zookeeper``; fail
points (``tiered.failpoints``) stop them at a named line. On failure the fixture prints every
process's output and the ZooKeeper log.

Invariants (``check_invariants``), after waiting for the cluster to settle:

1. every topic is in a legal state: ENABLED exactly when ``remote.storage.enable=true``, never
   left DISABLING, and its partitions' leaders agree on the tiered epoch and on copying;
2. every acknowledged record is readable, unless it is below the log start offset of a topic
   whose data may go (a retention config or a ``delete`` disablement);
3. no object of a deleted epoch remains: once a delete job is DONE, nothing below its epoch;
4. no object of the current data is missing: every segment the RLMM lists as
   COPY_SEGMENT_FINISHED has its objects in remote storage.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from controller.jobs.spark_delete import list_objects_below_epoch
from tests.rlmm_support import poll_until
from tests.support.cluster import Cluster
from tests.support.zookeeper import ZooKeeperServer
from tiered.admin import AdminClient, TopicDescription
from tiered.api import RemoteLogSegmentState
from tiered.cluster.model import TieredState
from tiered.config import RETENTION_BYTES, RETENTION_MS
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import records_pb2
from tiered.rsm import layout

TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000"}
RECORD_BYTES = 100
ADMIN_TIMEOUT_S = 8.0
# Objects every finished segment has (DESIGN section 8); the data object is uploaded last.
REQUIRED_SUFFIXES = ("log", "index", "timeindex")


@dataclass
class RecordLedger:
    """What the cluster acknowledged: (topic id, partition) -> offset -> value."""

    acked: dict[tuple[uuid.UUID, int], dict[int, bytes]] = field(
        default_factory=lambda: defaultdict(dict)
    )

    def record(
        self, topic_id: uuid.UUID, partition: int, last_offset: int, values: list[bytes]
    ) -> None:
        first = last_offset - len(values) + 1
        for i, value in enumerate(values):
            self.acked[(topic_id, partition)][first + i] = value

    def count(self) -> int:
        return sum(len(offsets) for offsets in self.acked.values())


class SystemCluster(Cluster):
    def __init__(
        self,
        root: Path,
        mode: str,
        brokers: int = 2,
        controller_extra: dict[str, str] | None = None,
    ) -> None:
        self.zookeeper: ZooKeeperServer | None = None
        zk_connect = None
        if mode == "zookeeper":
            self.zookeeper = ZooKeeperServer(root / "zookeeper")
            zk_connect = self.zookeeper.connect_string
        super().__init__(root, mode, zk_connect, brokers, controller_extra)
        # A call to a paused controller costs this much before the client looks elsewhere.
        self.admin.close()
        self.admin = AdminClient(self.bootstrap, timeout_s=ADMIN_TIMEOUT_S)
        self.ledger = RecordLedger()
        self._sequence = 0

    def start(self) -> None:
        if self.zookeeper is not None:
            self.zookeeper.start()
        super().start()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.zookeeper is not None:
                self.zookeeper.stop()

    def dump_logs(self) -> str:
        text = super().dump_logs()
        if self.zookeeper is not None:
            text += f"\n===== zookeeper\n{self.zookeeper.log_tail()}"
        return text

    # ----------------------------------------------------------------------------- records

    def produce_acked(self, topic: TopicDescription, partition: int, count: int) -> bool:
        """Produces ``count`` unique records to the partition's leader; the ledger keeps them if
        (and only if) the broker acknowledged them. Returns whether it did."""
        values = []
        for _ in range(count):
            self._sequence += 1
            values.append(f"{topic.name}/{partition}/{self._sequence:010d}/".encode().ljust(100))
        leader = topic.partitions[partition].leader
        try:
            response = self.broker_stub(leader).Produce(
                pb.ProduceRequest(
                    partition=records_pb2.TopicIdPartition(
                        topic_id=topic.topic_id.bytes, topic=topic.name, partition=partition
                    ),
                    records=[pb.Record(value=v) for v in values],
                ),
                timeout=30,
            )
        except Exception:
            return False
        if response.error.code != 0:
            return False
        self.ledger.record(topic.topic_id, partition, response.last_offset, values)
        return True

    def tiered_topics(
        self, names: list[str], partitions: int = 2, records: int = 150, min_segments: int = 3
    ) -> list[TopicDescription]:
        """Creates tiered topics, produces ``records`` acked records to each partition and
        waits until every partition has tiered ``min_segments`` segments."""
        for name in names:
            self.admin.create_topic(name, partitions, dict(TIERED))
        topics = self.admin.describe_topics(names, include_partition_state=False)
        for topic in topics:
            for p in range(partitions):
                # Refused until the leader hosts the partition (the assignment is asynchronous).
                poll_until(
                    lambda t=topic, p=p: self.produce_acked(t, p, records),
                    timeout=30,
                    what=f"{topic.name}-{p} to take records",
                )

        def tiered() -> bool:
            return all(
                p.remote_segment_count >= min_segments
                for t in self.admin.describe_topics(names)
                for p in t.partitions
            )

        poll_until(tiered, timeout=120, what=f"{len(names)} topics to tier segments")
        return topics

    # ----------------------------------------------------------------------------- invariants

    def settle(self, timeout_s: float = 120.0) -> list[TopicDescription]:
        """Waits until no topic is DISABLING and every delete job is DONE; returns the topics."""
        found: list[TopicDescription] = []

        def settled() -> bool:
            try:
                topics = self.admin.describe_topics()
            except Exception:
                return False
            found[:] = topics
            return all(
                t.tiered_state is not TieredState.DISABLING
                and (t.delete_job is None or t.delete_job.state == "DONE")
                for t in topics
            )

        poll_until(settled, timeout=timeout_s, what="every topic to settle")
        return found

    def check_invariants(self, timeout_s: float = 120.0) -> None:
        for topic in self.settle(timeout_s):
            described = self.admin.describe_topic(topic.name)
            self._check_legal_state(described)
            self._check_acked_records_readable(described)
            self._check_no_object_below_a_deleted_epoch(described)
            self._check_finished_segments_have_objects(described)

    def _check_legal_state(self, topic: TopicDescription) -> None:
        enabled = topic.configs.get("remote.storage.enable", "false").lower() == "true"
        expected = TieredState.ENABLED if enabled else TieredState.DISABLED
        assert topic.tiered_state is expected, (topic.name, topic.tiered_state, topic.configs)
        copy_disabled = topic.configs.get("remote.log.copy.disable", "false").lower() == "true"

        def brokers_agree() -> bool:
            dirs = {b: self.log_dirs(b) for b in {p.leader for p in topic.partitions}}
            for p, partition in enumerate(topic.partitions):
                d = dirs[partition.leader].get((topic.topic_id, p))
                if d is None or d.tiered_epoch != topic.tiered_epoch:
                    return False
                if d.copying != (enabled and not copy_disabled):
                    return False
            return True

        poll_until(brokers_agree, timeout=30, what=f"{topic.name}'s brokers to agree on its state")

    def _may_lose_old_records(self, topic: TopicDescription) -> bool:
        return (
            topic.disable_policy == "delete"
            or RETENTION_MS in topic.configs
            or RETENTION_BYTES in topic.configs
        )

    def _check_acked_records_readable(self, topic: TopicDescription) -> None:
        for p in range(len(topic.partitions)):
            acked = self.ledger.acked.get((topic.topic_id, p), {})
            if not acked:
                continue
            # From the leader itself: a describe may lack a broker that just restarted.
            offsets = self._leader_offsets(topic, p)
            start, end = offsets.log_start_offset, offsets.log_end_offset
            if not self._may_lose_old_records(topic):
                assert start == 0, f"{topic.name}-{p} lost records: log start {start}"
            assert end > max(acked), f"{topic.name}-{p}: log end {end} <= acked {max(acked)}"
            read = self.read_all(topic, p, start, end)
            missing = [o for o, v in acked.items() if o >= start and read.get(o) != v]
            assert not missing, (
                f"{topic.name}-{p}: {len(missing)} acknowledged records unreadable or changed, "
                f"first offsets {sorted(missing)[:5]} (log start {start}, end {end})"
            )

    def _leader_offsets(self, topic: TopicDescription, partition: int) -> pb.PartitionOffsets:
        """From the leader itself: a describe may lack a broker that just restarted."""
        found: list[pb.PartitionOffsets] = []

        def hosted() -> bool:
            leader = topic.partitions[partition].leader
            d = self.log_dirs(leader).get((topic.topic_id, partition))
            found[:] = [] if d is None else [d.offsets]
            return bool(found)

        poll_until(hosted, timeout=30, what=f"{topic.name}-{partition} to be hosted by its leader")
        return found[0]

    def read_all(
        self, topic: TopicDescription, partition: int, start: int, end: int
    ) -> dict[int, bytes]:
        read: dict[int, bytes] = {}
        offset = start
        while offset < end:
            response = self.fetch(topic, partition, offset)
            assert response.error.code == 0, (topic.name, partition, offset, response.error)
            assert response.records, f"{topic.name}-{partition}: empty fetch at {offset} < {end}"
            for record in response.records:
                read[record.offset] = record.value
            offset = response.records[-1].offset + 1
        return read

    def _check_no_object_below_a_deleted_epoch(self, topic: TopicDescription) -> None:
        job = topic.delete_job
        if job is None or job.state != "DONE":
            return
        for p in range(len(topic.partitions)):
            left = list_objects_below_epoch(
                str(self.root / "remote"), topic.name, topic.topic_id, p, job.tiered_epoch
            )
            assert not left, f"{topic.name}-{p}: {len(left)} objects below epoch left: {left[:3]}"

    def _check_finished_segments_have_objects(self, topic: TopicDescription) -> None:
        root = self.root / "remote"
        for p in range(len(topic.partitions)):
            for segment in self.remote_segments(topic, p):
                if segment.state is not RemoteLogSegmentState.COPY_SEGMENT_FINISHED:
                    continue
                prefix = layout.segment_prefix(segment)
                absent = [
                    s
                    for s in REQUIRED_SUFFIXES
                    if not (root / layout.object_key(prefix, s)).is_file()
                ]
                assert not absent, f"{prefix}: FINISHED in the RLMM but {absent} missing"
