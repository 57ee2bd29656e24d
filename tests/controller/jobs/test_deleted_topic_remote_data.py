"""Deleting a tiered topic deletes its remote data, every epoch of it, through the durable bulk
delete, in both metadata modes with real processes: through confluent-kafka's DeleteTopics and
``tiered-topics --delete``, shown by ``tiered-topics --describe`` while it runs, without touching
a topic re-created under the same name, and finished by the standby when the active controller
dies mid-job."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.batches import offsets
from tests.support.cluster import Cluster
from tests.support.kafka_cluster import MODES, confluent_admin, shared_cluster
from tests.support.polling import poll_until
from tests.support.processes import REPO, DaemonProcess
from tiered import rlmm
from tiered.admin import TopicDescription
from tiered.api import RemoteResourceNotFoundException, TopicIdPartition
from tiered.cluster.model import TieredState

pytestmark = pytest.mark.processes

# Local retention keeps ~2 segments, so most of the log is in remote storage only.
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000", "local.retention.bytes": "4000"}
# A broker paused by a test stays live (unfenced) this long: the job waits for it meanwhile.
SESSION_TIMEOUT_MS = "30000"


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"deleted-topics-{request.param}")
    with shared_cluster(
        request, root, controller_overrides={"broker.session.timeout.ms": SESSION_TIMEOUT_MS}
    ) as c:
        yield c


def remote_objects(cluster: Cluster, name: str, topic_id: uuid.UUID) -> list[Path]:
    base = cluster.root / "remote" / f"{name}-{topic_id}"
    return [p for p in base.rglob("*") if p.is_file()]


def epochs_stored(cluster: Cluster, topic: TopicDescription) -> set[str]:
    """``partition/te=N`` of every object of the topic in remote storage."""
    return {
        f"{p.parent.parent.name}/{p.parent.name}"
        for p in remote_objects(cluster, topic.name, topic.topic_id)
    }


def metadata_removed(cluster: Cluster, topic: TopicDescription) -> bool:
    """Whether the RLMM holds nothing of any partition of the topic (DELETE_PARTITION_FINISHED
    removed it, or it never had any)."""
    manager = rlmm.create({"rlmm.sqlite.path": str(cluster.root / "rlmm.db")})
    try:
        for p in range(len(topic.partitions)):
            try:
                manager.remote_partition_delete_state(
                    TopicIdPartition(topic.topic_id, topic.name, p)
                )
            except RemoteResourceNotFoundException:
                continue
            return False
        return True
    finally:
        manager.close()


def wait_until_remote_data_gone(cluster: Cluster, topic: TopicDescription) -> None:
    def gone() -> bool:
        listing = cluster.admin.describe_topic_listing(include_partition_state=False)
        return (
            not remote_objects(cluster, topic.name, topic.topic_id)
            and metadata_removed(cluster, topic)
            and all(d.topic_id != topic.topic_id for d in listing.deleted_topics)
        )

    poll_until(gone, timeout=90, what=f"the remote data of deleted {topic.name} to be deleted")


def two_epochs_topic(cluster: Cluster, name: str) -> TopicDescription:
    """A tiered topic disabled with retain and enabled again: objects at te=0 and te=1."""
    topic = cluster.tiered_topic(name, 2, TIERED, expire_locally=True)
    cluster.admin.incremental_alter_configs(name, {"remote.storage.enable": "false"})
    cluster.wait_for_state(name, TieredState.DISABLED)
    cluster.admin.incremental_alter_configs(name, {"remote.storage.enable": "true"})
    topic = cluster.wait_for_state(name, TieredState.ENABLED)
    assert topic.tiered_epoch == 1
    for p in range(2):
        cluster.produce(topic, p, 60)
    poll_until(
        lambda: epochs_stored(cluster, topic) == {f"{p}/te={e}" for p in (0, 1) for e in (0, 1)},
        timeout=30,
        what="copies of both epochs",
    )
    return topic


def topics_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.topics", "--bootstrap-server", cluster.bootstrap, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_delete_topics_through_kafka_removes_every_epoch(cluster: Cluster) -> None:
    topic = two_epochs_topic(cluster, "orders")
    admin = confluent_admin(cluster)
    [future] = admin.delete_topics(["orders"], operation_timeout=30).values()
    assert future.result(30) is None
    wait_until_remote_data_gone(cluster, topic)
    assert "orders" not in {t.name for t in cluster.admin.describe_topics()}
    cluster.active_controller().wait_for_line("Delete job of orders below tiered epoch 2 done")


def test_cli_delete_shows_the_job_and_spares_a_topic_recreated_under_the_name(
    cluster: Cluster,
) -> None:
    old = cluster.tiered_topic("refunds", 2, TIERED, expire_locally=True)
    cluster.admin.incremental_alter_configs("refunds", {"remote.storage.enable": "false"})
    cluster.wait_for_state("refunds", TieredState.DISABLED)  # retain: its data stays readable
    assert epochs_stored(cluster, old) == {"0/te=0", "1/te=0"}
    stalled = old.partitions[0].leader
    cluster.brokers[stalled].pause()  # slow to drop the partitions: the job waits for it
    try:
        deleted = topics_cli(cluster, "--delete", "--topic", "refunds")
        assert deleted.returncode == 0, deleted.stderr
        assert "Deleted topic refunds." in deleted.stdout

        # While it waits, a describe shows the deleted topic and its job; the JSON list of
        # topics (docs/design.md §6) holds live topics only.
        shown: list[str] = []

        def described() -> bool:
            text = topics_cli(cluster, "--describe", "--topic", "refunds")
            shown[:] = [text.stdout + text.stderr]
            return f"waiting for brokers [{stalled}]" in text.stdout

        poll_until(described, timeout=30, what="the held job in the describe")
        assert (
            f"Topic: refunds\tTopicId: {old.topic_id}\tMarkedForDeletion: true\t"
            "RemoteDelete: PENDING below epoch 2, 0/0 objects, 0/2 partitions"
        ) in shown[0]
        every = topics_cli(cluster, "--describe", "--format", "json")
        assert every.returncode == 0, every.stderr
        assert all(t["topic"] != "refunds" for t in json.loads(every.stdout))
        named = topics_cli(cluster, "--describe", "--topic", "refunds", "--format", "json")
        assert named.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in named.stderr

        # A topic re-created under the name is a new topic id; it tiers on the broker that
        # is not stalled before the old job may run.
        cluster.admin.create_topic("refunds", 2, TIERED)
        new = cluster.admin.describe_topic("refunds", include_partition_state=False)
        assert new.topic_id != old.topic_id
        p = next(p.partition for p in new.partitions if p.leader != stalled)
        leader = new.partitions[p].leader
        poll_until(
            lambda: (new.topic_id, p) in cluster.log_dirs(leader),
            timeout=30,
            what="the new partition to be hosted",
        )
        cluster.produce(new, p, 200)
        poll_until(
            lambda: cluster.log_dirs(leader)[(new.topic_id, p)].remote_segment_count > 3,
            timeout=30,
            what="the new topic to tier",
        )
        # Copied objects, not the temporary files of copies still running.
        kept = {o.name for o in remote_objects(cluster, "refunds", new.topic_id)}
        kept = {name for name in kept if ".tmp-" not in name}
        assert remote_objects(cluster, "refunds", old.topic_id)  # the old job has not run
    finally:
        cluster.brokers[stalled].resume()

    wait_until_remote_data_gone(cluster, old)
    assert kept <= {o.name for o in remote_objects(cluster, "refunds", new.topic_id)}
    assert cluster.remote_segments(new, p)
    assert offsets(cluster.fetch(new, p, 0).records)[0] == 0  # read back from remote storage
    text = topics_cli(cluster, "--describe")
    assert text.returncode == 0 and "MarkedForDeletion" not in text.stdout


# The active controller freezes here: objects listed (KRaft) or deleted (ZooKeeper).
FAIL_POINT = {
    "kraft": "controller.delete_job.listed",
    "zookeeper": "controller.delete_job.objects_deleted",
}


def _fail_over(dead: DaemonProcess, successor: DaemonProcess) -> None:
    dead.kill()
    successor.wait_for_line("Active as controller", timeout_s=60)


def test_a_controller_killed_mid_job_leaves_it_to_the_standby(cluster: Cluster) -> None:
    point = FAIL_POINT[cluster.mode]
    standby = cluster.active_controller()
    [armed] = [c for c in cluster.controllers if c is not standby]
    # A fail point is armed at a start: the standby restarts armed, then takes over.
    armed.kill()
    armed.failpoints = {point: "pause"}
    armed.start()
    _fail_over(standby, armed)
    standby.start()
    cluster.wait_for_live_brokers(set(cluster.brokers))

    topic = cluster.tiered_topic("trades", 2, TIERED)
    cluster.admin.delete_topic("trades")
    armed.wait_stopped_at(point)
    _fail_over(armed, standby)
    wait_until_remote_data_gone(cluster, topic)
    # The job was resumed (the dead controller's attempt was the first), not started over.
    standby.wait_for_line("Delete job of trades below tiered epoch 1: attempt 2")
    armed.start()  # back, as a standby
