"""ZooKeeper mode on a three-server ensemble that holds both the controller store and the RLMM
(``rlmm.backend=zookeeper``): the ZooKeeper leader killed with SIGKILL mid-DISABLING and
mid-tiering. Every disable completes, no acknowledged record or finished segment is lost, no
controller without leadership writes (ZooKeeper's own transaction log shows who wrote what), and
the killed server, restarted, rejoins with everything it missed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient

from cli.launch.zookeeper import FOLLOWER, QuorumPeer
from system_tests.conftest import ClusterFactory
from system_tests.harness import RLMM_CHROOT, TIERED, SystemCluster
from tests.support.polling import poll_until
from tests.support.zookeeper import start_kazoo_client
from tiered.admin import TopicDescription
from tiered.api import RemoteLogSegmentId, RemoteLogSegmentState
from tiered.cluster import zk_paths
from tiered.cluster.model import TieredState
from tiered.rlmm import keys
from tiered.rlmm.manager import RemoteLogMetadataConflictException

ELECTION_TIMEOUT_S = 30


def _ensemble_cluster(system_cluster: ClusterFactory, **options: object) -> SystemCluster:
    cluster = system_cluster("zookeeper", ensemble=True, **options)
    assert cluster.ensemble is not None and cluster.zookeeper is None
    return cluster


def _kill_the_leader(cluster: SystemCluster) -> QuorumPeer:
    assert cluster.ensemble is not None
    leader = cluster.ensemble.wait_until_formed()
    leader.kill()
    return leader


def _rejoin(cluster: SystemCluster, member: QuorumPeer) -> None:
    """Starts the killed member again: it follows the survivors' leader and serves what was
    written while it was down (the controller epoch, topics and delete jobs, the RLMM's
    partitions)."""
    assert cluster.ensemble is not None
    member.start()
    assert member.mode() == FOLLOWER
    cluster.ensemble.wait_until_formed()
    everyone = start_kazoo_client(cluster.ensemble.connect_string)
    direct = start_kazoo_client(member.connect_string)

    def view(client: KazooClient) -> tuple[object, ...]:
        client.sync("/")
        return (
            client.get(zk_paths.CONTROLLER_EPOCH)[0],
            sorted(client.get_children(zk_paths.BROKER_TOPICS)),
            sorted(client.get_children(zk_paths.DELETE_JOBS)),
            sorted(client.get_children(f"{RLMM_CHROOT}/{keys.ROOT}")),
        )

    try:
        # Polled: the cluster may write between the two reads.
        poll_until(lambda: view(direct) == view(everyone), timeout=30, what=f"{member} to catch up")
    finally:
        for client in (everyone, direct):
            client.stop()
            client.close()


def _finished_segments(
    cluster: SystemCluster, topics: list[TopicDescription]
) -> set[RemoteLogSegmentId]:
    """The ids of every segment the RLMM lists as COPY_SEGMENT_FINISHED. Brokers go on tiering
    while it reads, and a read that keeps finding its partition written to gives up: read again
    then."""
    found: set[RemoteLogSegmentId] = set()

    def read() -> bool:
        try:
            found.update(
                segment.remote_log_segment_id
                for topic in topics
                for partition in range(len(topic.partitions))
                for segment in cluster.remote_segments(topic, partition)
                if segment.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
            )
        except RemoteLogMetadataConflictException:
            found.clear()
            return False
        return True

    poll_until(read, timeout=60, what="a read of the RLMM between two copies")
    return found


def test_zookeeper_leader_killed_mid_disabling(system_cluster: ClusterFactory) -> None:
    cluster = _ensemble_cluster(
        system_cluster, broker_failpoints={1: {"broker.disable.stopped": "pause"}}
    )
    assert cluster.ensemble is not None
    cluster.tiered_topics(["trades", "quotes"])
    cluster.admin.incremental_alter_configs(
        "trades", {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}
    )
    # Broker 1 stopped tiering trades and holds its ack: the topic is DISABLING.
    cluster.brokers[1].wait_stopped_at("broker.disable.stopped")
    assert cluster.admin.describe_topic("trades").tiered_state is TieredState.DISABLING

    killed = _kill_the_leader(cluster)
    # The ack and a second disable reach the controller while ZooKeeper elects a new leader.
    cluster.brokers[1].resume()
    cluster.admin.incremental_alter_configs("quotes", {"remote.storage.enable": "false"})

    cluster.ensemble.wait_until_formed(timeout=ELECTION_TIMEOUT_S)
    trades = cluster.wait_for_state("trades", TieredState.DISABLED)
    quotes = cluster.wait_for_state("quotes", TieredState.DISABLED)
    assert (trades.tiered_epoch, quotes.tiered_epoch) == (1, 1)
    _rejoin(cluster, killed)
    cluster.check_invariants()
    trades = cluster.admin.describe_topic("trades")
    assert trades.delete_job is not None and trades.delete_job.state == "DONE"
    cluster.check_no_zombie_writes()


@contextmanager
def _produce_load(cluster: SystemCluster, topics: list[TopicDescription]) -> Iterator[None]:
    """Acknowledged records to every partition of ``topics``, round after round, until the block
    ends; refusals (a leader busy during the outage) are simply not in the ledger."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def produce() -> None:
        try:
            while not stop.is_set():
                for topic in topics:
                    for partition in range(len(topic.partitions)):
                        cluster.produce_acked(topic, partition, 10, timeout_s=10)
        except BaseException as e:  # reported by the test, not lost in a thread
            failures.append(e)

    thread = threading.Thread(target=produce, name="produce-load", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive() and not failures, failures


def _remote_segments(cluster: SystemCluster, names: list[str]) -> dict[tuple[str, int], int]:
    return {
        (t.name, p.partition): p.remote_segment_count
        for t in cluster.admin.describe_topics(names)
        for p in t.partitions
    }


def test_zookeeper_leader_killed_mid_tiering(system_cluster: ClusterFactory) -> None:
    cluster = _ensemble_cluster(system_cluster)
    assert cluster.ensemble is not None
    names = ["orders", "payments"]
    for name in names:
        cluster.admin.create_topic(name, 2, dict(TIERED))
    topics = cluster.admin.describe_topics(names, include_partition_state=False)
    with _produce_load(cluster, topics):
        poll_until(
            lambda: min(_remote_segments(cluster, names).values()) >= 2,
            timeout=60,
            what="every partition to be tiering",
        )
        finished_before = _finished_segments(cluster, topics)
        # Copies and their RLMM writes are in flight on every broker at the kill.
        killed = _kill_the_leader(cluster)
        cluster.ensemble.wait_until_formed(timeout=ELECTION_TIMEOUT_S)
        after_election = _remote_segments(cluster, names)
        poll_until(
            lambda: all(
                count >= after_election[key] + 2
                for key, count in _remote_segments(cluster, names).items()
            ),
            timeout=60,
            what="every partition to tier two more segments after the election",
        )
    assert cluster.ledger.count() > 0
    # Nothing expires here (no retention set): every segment finished before the kill stays.
    assert finished_before <= _finished_segments(cluster, topics)
    _rejoin(cluster, killed)
    cluster.check_invariants()
    cluster.check_no_zombie_writes()
