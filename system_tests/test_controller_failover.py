"""The active controller killed -9 at each step of a disable, in both metadata modes: the standby
takes over and finishes the disable (and the bulk delete) from what was persisted."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from system_tests.conftest import MODES, ClusterFactory
from system_tests.harness import SystemCluster
from tiered.admin import AdminClient, TopicDescription
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import records_pb2

DISABLE_STEPS = [
    "controller.disable.persisted",  # DISABLING persisted, no RPC sent
    "controller.disable.some_acked",  # one broker acked, the other still owes
    "controller.disable.all_acked",  # every ack in, DISABLED not persisted
]
DELETE_JOB_STEPS = [
    "controller.delete_job.listed",  # first partition named, nothing deleted
    "controller.delete_job.objects_deleted",  # objects gone, partitions not finished
]


def _disable_in_background(cluster: SystemCluster, topic: str) -> Future[object]:
    """A client of its own, as a CLI run would be. The alter may hang on the frozen controller;
    once that one dies the client retries against the new one."""

    def alter() -> object:
        with AdminClient(cluster.bootstrap, timeout_s=60) as admin:
            try:
                return admin.incremental_alter_configs(
                    topic, {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}
                )
            except TieredError as e:
                # The retry reached the new controller after the first attempt was persisted:
                # it finds that very disablement in progress (docs/design.md §2 rejects a repeat).
                if e.code is not ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS:
                    raise
                return e

    return ThreadPoolExecutor(1).submit(alter)


def _kill_the_frozen_controller_and_fail_over(cluster: SystemCluster, point: str) -> None:
    frozen, standby = cluster.controllers
    frozen.wait_stopped_at(point)
    frozen.kill()
    standby.wait_for_line("Active as controller", timeout_s=60)
    # An operator brings the dead one back: it must come back as a standby.
    frozen.start()


def _disable_from_epoch(cluster: SystemCluster, topic: TopicDescription, epoch: int) -> str:
    """A DisableRemoteTopic as the controller of ``epoch`` would send it; the error name."""
    response = cluster.broker_stub(topic.partitions[0].leader).DisableRemoteTopic(
        pb.DisableRemoteTopicRequest(
            controller_epoch=epoch,
            entries=[
                pb.DisableRemoteTopicEntry(
                    partition=records_pb2.TopicIdPartition(
                        topic_id=topic.topic_id.bytes, topic=topic.name, partition=0
                    ),
                    tiered_epoch=topic.tiered_epoch,
                    policy="delete",
                )
            ],
        ),
        timeout=10,
    )
    return str(response.error.name)


@pytest.mark.parametrize("point", DISABLE_STEPS + DELETE_JOB_STEPS)
@pytest.mark.parametrize("mode", MODES)
def test_controller_killed_at_each_step_of_a_disable(
    system_cluster: ClusterFactory, mode: str, point: str
) -> None:
    cluster = system_cluster(mode, failpoints={point: "pause"})
    (topic, other) = cluster.tiered_topics(["payments", "refunds"])
    epoch_before = cluster.admin.describe_cluster().controller_epoch

    alter = _disable_in_background(cluster, topic.name)
    _kill_the_frozen_controller_and_fail_over(cluster, point)
    alter.result(timeout=90)

    # The other topic, untouched by the failover, still takes records and tiers.
    assert cluster.produce_acked(other, 0, 50)
    cluster.check_invariants()

    after = cluster.admin.describe_topic(topic.name)
    assert after.tiered_state is TieredState.DISABLED and after.tiered_epoch == 1
    assert after.delete_job is not None and after.delete_job.state == "DONE"
    assert cluster.admin.describe_cluster().controller_epoch > epoch_before
    assert cluster.active_controller() is cluster.controllers[1]
    assert all(p.remote_segment_count == 0 for p in after.partitions)
    if point in DELETE_JOB_STEPS:
        assert after.delete_job.attempts >= 2  # the dead controller's attempt, then the new one
    # The dead controller's epoch is stale at every broker that heard from the new one.
    assert _disable_from_epoch(cluster, after, epoch_before) == "STALE_CONTROLLER_EPOCH"

    # Re-enabled afterwards, the topic tiers again under the same epoch, and nothing the delete
    # job removed comes back.
    cluster.admin.incremental_alter_configs(topic.name, {"remote.storage.enable": "true"})
    for p in range(len(topic.partitions)):
        assert cluster.produce_acked(topic, p, 100)
    cluster.check_invariants()
    enabled = cluster.admin.describe_topic(topic.name)
    assert enabled.tiered_state is TieredState.ENABLED and enabled.tiered_epoch == 1
