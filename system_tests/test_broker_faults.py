"""Brokers killed -9 or paused (SIGSTOP) during DISABLING, in both metadata modes: the topic stays
DISABLING (truthfully) until the broker is back, then the controller's retries finish it."""

from __future__ import annotations

import pytest

from system_tests.conftest import MODES, ClusterFactory
from system_tests.harness import SystemCluster
from tiered.cluster.model import TieredState


def _disable(cluster: SystemCluster, topic: str, policy: str) -> None:
    result = cluster.admin.incremental_alter_configs(
        topic, {"remote.storage.enable": "false", "remote.log.disable.policy": policy}
    )
    assert result.tiered_state is TieredState.DISABLING and result.tiered_epoch == 1


def _owed(cluster: SystemCluster, topic: str) -> int:
    return cluster.admin.describe_topic(topic, include_partition_state=False).disable_acks_owed


@pytest.mark.parametrize("mode", MODES)
def test_broker_killed_after_it_stopped_tiering_but_before_its_ack(
    system_cluster: ClusterFactory, mode: str
) -> None:
    cluster = system_cluster(mode, broker_failpoints={1: {"broker.disable.stopped": "pause"}})
    cluster.tiered_topics(["orders"])
    _disable(cluster, "orders", "retain")
    victim = cluster.brokers[1]
    victim.wait_stopped_at("broker.disable.stopped")
    victim.kill()
    assert cluster.admin.describe_topic("orders").tiered_state is TieredState.DISABLING
    assert _owed(cluster, "orders") >= 1
    victim.start()  # it replays its stopped state and acks the controller's next attempt
    cluster.check_invariants()
    after = cluster.admin.describe_topic("orders")
    assert after.tiered_state is TieredState.DISABLED and after.tiered_epoch == 1
    assert after.partitions[0].log_start_offset == 0  # retain: everything still reads


@pytest.mark.parametrize("fault", ["kill", "pause"])
@pytest.mark.parametrize("mode", MODES)
def test_broker_down_during_disabling_comes_back_after_the_controller_gave_up_a_round(
    system_cluster: ClusterFactory, mode: str, fault: str
) -> None:
    cluster = system_cluster(mode, **{"controller.request.timeout.ms": "2000"})
    topics = cluster.tiered_topics(["clicks", "views"])
    victim_id = topics[0].partitions[0].leader
    victim = cluster.brokers[victim_id]
    victim.kill() if fault == "kill" else victim.pause()
    try:
        _disable(cluster, "clicks", "delete")
        _disable(cluster, "views", "retain")
        cluster.active_controller().wait_for_line(f"Broker {victim_id}: request failed", 60)
        # The controller tells the truth: still DISABLING, the victim's partitions still owed.
        for name in ("clicks", "views"):
            assert cluster.admin.describe_topic(name).tiered_state is TieredState.DISABLING
            assert _owed(cluster, name) >= 1
        # The other broker's partitions keep taking records meanwhile.
        other = topics[0].partitions[1]
        assert other.leader != victim_id
        assert cluster.produce_acked(topics[0], 1, 20)
    finally:
        victim.start() if fault == "kill" else victim.resume()
    cluster.check_invariants()
    clicks = cluster.admin.describe_topic("clicks")
    assert clicks.tiered_state is TieredState.DISABLED and clicks.delete_job is not None
    assert all(p.remote_segment_count == 0 for p in clicks.partitions)
    views = cluster.admin.describe_topic("views")
    assert views.tiered_state is TieredState.DISABLED
    assert all(p.remote_segment_count > 0 for p in views.partitions)
