"""The system-test harness: a real cluster (controller, standby, brokers and, in ZooKeeper mode,
its own ZooKeeper server, or a three-server ensemble that also holds the RLMM) in a temp dir, a
ledger of every acknowledged record, and the invariants every scenario ends with.

Processes are killed (-9), paused (SIGSTOP), resumed and restarted through their
``DaemonProcess`` (``cluster.controllers``, ``cluster.brokers``), ``cluster.zookeeper`` or the
members of ``cluster.ensemble``; fail points (``tiered.failpoints``) stop them at a named line.
On failure the fixture prints every process's output and the ZooKeeper logs.

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

import itertools
import threading
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from system_tests.history_checker import REQUIRED_SUFFIXES
from tests.support.batches import decode, one_batch_each
from tests.support.cluster import Cluster, loopback_hosts
from tests.support.polling import poll_until
from tests.support.zookeeper import HOST, ZooKeeperEnsemble, ZooKeeperServer
from tests.support.zookeeper_txn_log import read_txn_log, writes_outside_leadership
from tiered.admin import AdminClient, TopicDescription
from tiered.api import RemoteLogSegmentState, TopicIdPartition
from tiered.cluster import zk_paths
from tiered.cluster.model import TieredState
from tiered.config import RETENTION_BYTES, RETENTION_MS
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import records_pb2
from tiered.rsm import FsspecRemoteStorageManager, layout

TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000"}
RECORD_BYTES = 100
ADMIN_TIMEOUT_S = 8.0
# Parallel producers when filling topics: a produce waits on the broker, not on this process.
PRODUCERS = 8
# The ZooKeeper server's name (its cgroup is its log's: zookeeper.log) and its own address.
ZOOKEEPER = "zookeeper"
ZOOKEEPER_HOST = "127.0.0.10"
# On an ensemble, the brokers' and the controllers' RLMM lives under this chroot.
RLMM_CHROOT = "/rlmm"
# The controller store's znodes that only the active controller writes, and the parents of them
# that every process creates where missing.
CONTROLLER_WRITES = (zk_paths.BROKER_TOPICS, zk_paths.CONFIG_TOPICS, "/tiered")
STORE_PARENTS = (
    "/brokers",
    zk_paths.BROKER_TOPICS,
    "/config",
    zk_paths.CONFIG_TOPICS,
    "/tiered",
    zk_paths.DELETE_JOBS,
)

# broker id -> (topic id, partition) -> what DescribeLogDirs said
LogDirSnapshot = dict[int, dict[tuple[uuid.UUID, int], pb.PartitionLogDir]]


@dataclass
class RecordLedger:
    """What the cluster acknowledged: (topic id, partition) -> offset -> value."""

    acked: dict[tuple[uuid.UUID, int], dict[int, bytes]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(
        self, topic_id: uuid.UUID, partition: int, last_offset: int, values: list[bytes]
    ) -> None:
        first = last_offset - len(values) + 1
        with self._lock:
            acked = self.acked[(topic_id, partition)]
            for i, value in enumerate(values):
                acked[first + i] = value

    def count(self) -> int:
        return sum(len(offsets) for offsets in self.acked.values())


class SystemCluster(Cluster):
    def __init__(
        self,
        root: Path,
        mode: str,
        brokers: int = 2,
        controller_extra: dict[str, str] | None = None,
        broker_extra: dict[str, str] | None = None,
        ensemble: bool = False,
        own_hosts: bool = False,
    ) -> None:
        """``ensemble`` (ZooKeeper mode): three ZooKeeper servers instead of one, holding the
        controller store and the RLMM (``rlmm.backend=zookeeper``) of every process.
        ``own_hosts`` (in a partition test's network namespace): every process, the ZooKeeper
        server included, on its own loopback address (``hosts``), so that links can be cut."""
        if ensemble and mode != "zookeeper":
            raise ValueError(f"ensemble=True needs mode 'zookeeper', not {mode!r}")
        if ensemble and own_hosts:
            raise ValueError("own_hosts=True is for a single ZooKeeper server, not an ensemble")
        hosts = loopback_hosts(2, brokers) if own_hosts else {}
        if own_hosts and mode == "zookeeper":
            hosts[ZOOKEEPER] = ZOOKEEPER_HOST
        self.zookeeper: ZooKeeperServer | None = None
        self.ensemble: ZooKeeperEnsemble | None = None
        self._rlmm_properties: dict[str, str] | None = None
        zk_connect = None
        if ensemble:
            self.ensemble = ZooKeeperEnsemble(root / "zookeeper-ensemble")
            zk_connect = self.ensemble.connect_string
            self._rlmm_properties = {
                "rlmm.backend": "zookeeper",
                "rlmm.zookeeper.connect": zk_connect + RLMM_CHROOT,
            }
            controller_extra = {**self._rlmm_properties, **(controller_extra or {})}
            broker_extra = {**self._rlmm_properties, **(broker_extra or {})}
        elif mode == "zookeeper":
            self.zookeeper = ZooKeeperServer(root / ZOOKEEPER, host=hosts.get(ZOOKEEPER, HOST))
            zk_connect = self.zookeeper.connect_string
        super().__init__(
            root, mode, zk_connect, brokers, controller_extra, broker_extra, hosts=hosts
        )
        # A call to a paused controller costs this much before the client looks elsewhere.
        self.admin.close()
        self.admin = AdminClient(self.bootstrap, timeout_s=ADMIN_TIMEOUT_S)
        self.ledger = RecordLedger()
        self._sequence = itertools.count(1)  # thread-safe: producers run in parallel

    def start(self) -> None:
        if self.zookeeper is not None:
            self.zookeeper.start()
        if self.ensemble is not None:
            self.ensemble.start()
            self.ensemble.wait_until_formed()
        super().start()

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.zookeeper is not None:
                self.zookeeper.stop()
            if self.ensemble is not None:
                self.ensemble.stop()

    def dump_logs(self) -> str:
        text = super().dump_logs()
        if self.zookeeper is not None:
            text += f"\n===== zookeeper\n{self.zookeeper.log_tail()}"
        for member in self.ensemble.members if self.ensemble is not None else []:
            text += f"\n===== zookeeper server {member.server_id}\n{member.log_tail(30)}"
        return text

    def rlmm_properties(self) -> dict[str, str]:
        return self._rlmm_properties or super().rlmm_properties()

    # ----------------------------------------------------------------------------- records

    def produce_acked(
        self, topic: TopicDescription, partition: int, count: int, timeout_s: float = 30.0
    ) -> bool:
        """Produces ``count`` unique records to the partition's leader; the ledger keeps them if
        (and only if) the broker acknowledged them. Returns whether it did."""
        values = [
            f"{topic.name}/{partition}/{next(self._sequence):010d}/".encode().ljust(RECORD_BYTES)
            for _ in range(count)
        ]
        leader = topic.partitions[partition].leader
        try:
            response = self.broker_stub(leader).Produce(
                pb.ProduceRequest(
                    partition=records_pb2.TopicIdPartition(
                        topic_id=topic.topic_id.bytes, topic=topic.name, partition=partition
                    ),
                    records=one_batch_each(values),
                ),
                timeout=timeout_s,
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

        def fill(topic: TopicDescription, partition: int) -> None:
            # Refused until the leader hosts the partition (the assignment is asynchronous).
            poll_until(
                lambda: self.produce_acked(topic, partition, records),
                timeout=30,
                what=f"{topic.name}-{partition} to take records",
            )

        with ThreadPoolExecutor(PRODUCERS) as pool:
            for done in [pool.submit(fill, t, p) for t in topics for p in range(partitions)]:
                done.result()

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
        topics = self.settle(timeout_s)
        for topic in topics:
            self._check_legal_state(topic)
        log_dirs = self._wait_for_brokers_to_agree(topics)
        for topic in topics:
            self._check_acked_records_readable(topic, log_dirs)
            self._check_no_object_below_a_deleted_epoch(topic)
            self._check_finished_segments_have_objects(topic)

    def check_no_zombie_writes(self) -> None:
        """Ensemble only: ZooKeeper's own transaction log (the leader's, which has every commit)
        shows no controller-store write from a session that did not hold ``/controller`` then: a
        controller that lost its leadership wrote nothing."""
        assert self.ensemble is not None, "check_no_zombie_writes needs an ensemble"
        leader = self.ensemble.wait_until_formed()
        txns = read_txn_log(leader.data_dir)
        assert any(path == zk_paths.CONTROLLER for t in txns for _, path in t.writes), (
            f"no election in the transaction log of {leader}: is it the store's?"
        )
        zombie = writes_outside_leadership(
            txns, zk_paths.CONTROLLER, CONTROLLER_WRITES, STORE_PARENTS
        )
        assert not zombie, (
            f"{len(zombie)} writes from a controller without leadership: {zombie[:5]}"
        )

    def _check_legal_state(self, topic: TopicDescription) -> None:
        expected = TieredState.ENABLED if _enabled(topic) else TieredState.DISABLED
        assert topic.tiered_state is expected, (topic.name, topic.tiered_state, topic.configs)

    def _wait_for_brokers_to_agree(self, topics: list[TopicDescription]) -> LogDirSnapshot:
        """Waits until every partition's leader hosts it at the topic's tiered epoch and copies
        exactly when the topic says so; returns the log dirs that showed it. One DescribeLogDirs
        per broker per attempt, not one per partition: this runs over hundreds of topics."""
        snapshot: LogDirSnapshot = {}
        disagreeing: list[str] = []

        def agree() -> bool:
            leaders = {p.leader for t in topics for p in t.partitions}
            try:
                snapshot.update({b: self.log_dirs(b) for b in leaders})
            except grpc.RpcError:
                return False  # a restarted broker may not serve yet
            disagreeing[:] = [t.name for t in topics if not _leaders_agree(t, snapshot)]
            return not disagreeing

        poll_until(agree, timeout=30, what=f"brokers to agree on the state of {disagreeing[:5]}")
        return snapshot

    def _may_lose_old_records(self, topic: TopicDescription) -> bool:
        # A delete job means a disablement under ``delete`` ran at some point, even if the
        # topic was re-enabled and its policy set back to retain since.
        return (
            topic.disable_policy == "delete"
            or topic.delete_job is not None
            or RETENTION_MS in topic.configs
            or RETENTION_BYTES in topic.configs
        )

    def _check_acked_records_readable(
        self, topic: TopicDescription, log_dirs: LogDirSnapshot
    ) -> None:
        for p, partition in enumerate(topic.partitions):
            acked = self.ledger.acked.get((topic.topic_id, p), {})
            if not acked:
                continue
            # From the leader itself: a describe may lack a broker that just restarted.
            offsets = log_dirs[partition.leader][(topic.topic_id, p)].offsets
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

    def read_all(
        self, topic: TopicDescription, partition: int, start: int, end: int
    ) -> dict[int, bytes]:
        read: dict[int, bytes] = {}
        offset = start
        while offset < end:
            response = self.fetch(topic, partition, offset)
            assert response.error.code == 0, (topic.name, partition, offset, response.error)
            records = decode(response.records)
            assert records, f"{topic.name}-{partition}: empty fetch at {offset} < {end}"
            for record in records:
                read[record.offset] = record.value or b""
            offset = records[-1].offset + 1
        return read

    def _check_no_object_below_a_deleted_epoch(self, topic: TopicDescription) -> None:
        job = topic.delete_job
        if job is None or job.state != "DONE":
            return
        storage = FsspecRemoteStorageManager(str(self.root / "remote"))
        for p in range(len(topic.partitions)):
            tp = TopicIdPartition(topic.topic_id, topic.name, p)
            left = [k for b in storage.list_objects_below_epoch(tp, job.tiered_epoch) for k in b]
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


def _enabled(topic: TopicDescription) -> bool:
    return topic.configs.get("remote.storage.enable", "false").lower() == "true"


def _leaders_agree(topic: TopicDescription, log_dirs: LogDirSnapshot) -> bool:
    copy_disabled = topic.configs.get("remote.log.copy.disable", "false").lower() == "true"
    copying = _enabled(topic) and not copy_disabled
    for p, partition in enumerate(topic.partitions):
        d = log_dirs.get(partition.leader, {}).get((topic.topic_id, p))
        if d is None or d.tiered_epoch != topic.tiered_epoch or d.copying != copying:
            return False
    return True
