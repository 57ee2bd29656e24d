"""ZooKeeper mode only: the ZooKeeper server restarted or killed during DISABLING, and the active
controller's session expiring while it is paused, leaving a zombie that must write nothing once
it runs again."""

from __future__ import annotations

import grpc
import pytest
from kazoo.client import KazooClient

from system_tests.conftest import ClusterFactory
from system_tests.harness import SystemCluster
from tests.support.zookeeper import start_kazoo_client
from tiered.admin import AdminClient
from tiered.cluster.model import TieredState
from tiered.rpc.v1 import controller_pb2, controller_pb2_grpc


def _stuck_in_disabling(cluster: SystemCluster, name: str, policy: str) -> int:
    """Disables ``name`` with one of its brokers paused, so it stays DISABLING; returns that
    broker's id (the caller resumes it)."""
    topic = cluster.admin.describe_topic(name, include_partition_state=False)
    broker_id = topic.partitions[0].leader
    cluster.brokers[broker_id].pause()
    cluster.admin.incremental_alter_configs(
        name, {"remote.storage.enable": "false", "remote.log.disable.policy": policy}
    )
    assert cluster.admin.describe_topic(name).tiered_state is TieredState.DISABLING
    return broker_id


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_zookeeper_restarted_during_disabling(system_cluster: ClusterFactory, how: str) -> None:
    cluster = system_cluster("zookeeper")
    assert cluster.zookeeper is not None
    cluster.tiered_topics(["trades", "quotes"])
    paused = _stuck_in_disabling(cluster, "trades", "delete")
    try:
        if how == "kill -9":
            cluster.zookeeper.kill()
            cluster.zookeeper.start()
        else:
            cluster.zookeeper.restart()
    finally:
        cluster.brokers[paused].resume()
    # Sessions outlive a short outage: no failover was needed, but one would be fine too.
    cluster.check_invariants()
    trades = cluster.admin.describe_topic("trades")
    assert trades.tiered_state is TieredState.DISABLED and trades.tiered_epoch == 1
    assert trades.delete_job is not None and trades.delete_job.state == "DONE"
    # The cluster takes new work after the outage.
    cluster.admin.incremental_alter_configs("quotes", {"remote.storage.enable": "false"})
    assert cluster.wait_for_state("quotes", TieredState.DISABLED).tiered_epoch == 1
    cluster.check_invariants()


def _znode_versions(client: KazooClient) -> dict[str, int]:
    """Every znode's last-modified zxid (ZooKeeper's own bookkeeping excluded)."""
    versions: dict[str, int] = {}
    pending = ["/"]
    while pending:
        path = pending.pop()
        children = client.get_children(path)
        for child in children:
            child_path = f"{path.rstrip('/')}/{child}"
            if child_path == "/zookeeper":
                continue
            _, stat = client.get(child_path)
            versions[child_path] = stat.mzxid
            pending.append(child_path)
    return versions


def test_a_paused_controller_whose_session_expired_writes_nothing_when_it_resumes(
    system_cluster: ClusterFactory,
) -> None:
    cluster = system_cluster("zookeeper")
    assert cluster.zookeeper is not None
    cluster.tiered_topics(["ledger"])
    paused_broker = _stuck_in_disabling(cluster, "ledger", "retain")
    zombie, standby = cluster.controllers
    assert cluster.active_controller() is zombie
    client = start_kazoo_client(cluster.zookeeper.connect_string)
    zombie.pause()
    try:
        # The zombie's session expires; the standby is elected and re-queues the disable.
        standby.wait_for_line("Active as controller", timeout_s=60)
        cluster.brokers[paused_broker].resume()
        cluster.wait_for_state("ledger", TieredState.DISABLED)
        with AdminClient(cluster.bootstrap, timeout_s=30) as fresh:
            fresh.incremental_alter_configs("ledger", {"retention.ms": "3600000"})
        cluster.check_invariants()
        before = _znode_versions(client)
    finally:
        cluster.brokers[paused_broker].resume()
        zombie.resume()
    try:
        # Straight to the zombie, raw (an AdminClient would follow it to the active one), with a
        # change its stale view accepts: it refuses, whether it already knows it was deposed or
        # learns it when its write is fenced.
        with grpc.insecure_channel(zombie.properties["listeners"]) as channel:
            response = controller_pb2_grpc.AdminServiceStub(channel).IncrementalAlterConfigs(
                controller_pb2.IncrementalAlterConfigsRequest(
                    topic="ledger", set={"retention.ms": "1234"}
                ),
                timeout=30,
            )
        assert response.error.name == "NOT_CONTROLLER", response
        zombie.wait_for_line("stepping down", timeout_s=30)
        # Nothing the zombie held in memory (its queue, its old epoch) reached ZooKeeper.
        after = _znode_versions(client)
        changed = {p for p in before.keys() & after.keys() if before[p] != after[p]}
        assert not changed, f"znodes written after the zombie resumed: {sorted(changed)}"
        assert set(after) - set(before) == set(), sorted(set(after) - set(before))
    finally:
        client.stop()
        client.close()
    ledger = cluster.admin.describe_topic("ledger")
    assert ledger.tiered_state is TieredState.DISABLED and ledger.tiered_epoch == 1
    assert ledger.configs["retention.ms"] == "3600000"
    assert cluster.active_controller() is standby
    assert zombie.alive  # a standby now
    cluster.check_invariants()
