"""The delete policy end to end with real processes: disable with delete, the bulk-delete job
(in-process fast path and real Spark), re-enable, and a controller killed mid-job."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.batches import offsets
from tests.support.cluster import Cluster, running_cluster
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import DeleteJobDescription, TopicDescription
from tiered.cluster.model import TieredState

pytestmark = pytest.mark.processes

# Local retention keeps ~2 segments, so most of the log is in remote storage only.
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000", "local.retention.bytes": "4000"}
DELETE = {"remote.log.disable.policy": "delete", "remote.storage.enable": "false"}


@pytest.fixture(params=["kraft", "zookeeper"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from running_cluster(request, tmp_path, request.param)


def tiered_topic(
    cluster: Cluster, name: str, partitions: int = 2, records: int = 200
) -> TopicDescription:
    return cluster.tiered_topic(name, partitions, TIERED, records, expire_locally=True)


def epoch_dirs(cluster: Cluster, topic: TopicDescription) -> set[str]:
    """The te=... directories left in the remote tree of the topic."""
    base = cluster.root / "remote" / f"{topic.name}-{topic.topic_id}"
    return {f"{p.parent.name}/{p.name}" for p in base.glob("*/te=*") if any(p.iterdir())}


def wait_for_job(cluster: Cluster, name: str, timeout_s: float = 90) -> TopicDescription:
    def done() -> bool:
        job = cluster.admin.describe_topic(name, include_partition_state=False).delete_job
        return job is not None and job.state == "DONE"

    poll_until(done, timeout=timeout_s, what=f"the delete job of {name}")
    return cluster.admin.describe_topic(name)


def test_disable_with_delete_empties_older_epochs_then_reenable(cluster: Cluster) -> None:
    topic = tiered_topic(cluster, "payments")
    assert epoch_dirs(cluster, topic) == {"0/te=0", "1/te=0"}
    cluster.admin.incremental_alter_configs("payments", DELETE)
    cluster.wait_for_state("payments", TieredState.DISABLED)
    done = wait_for_job(cluster, "payments")
    job = done.delete_job
    assert job is not None and job.tiered_epoch == 1 and job.partitions_done == 2
    assert job.objects_deleted == job.objects_total > 0
    assert epoch_dirs(cluster, topic) == set()  # no object of a deleted epoch remains
    text = topics_describe(cluster, "payments")
    assert f"RemoteDelete: DONE below epoch 1, {job.objects_total}/{job.objects_total}" in text
    assert text.count("RemoteDeleteState: DELETE_PARTITION_FINISHED") == 2
    for p, partition in enumerate(done.partitions):
        assert partition.remote_log_size_bytes == 0 and partition.remote_segment_count == 0
        assert partition.remote_delete_state == "DELETE_PARTITION_FINISHED"
        assert partition.delete_objects_deleted == partition.delete_objects_total > 0
        assert cluster.remote_segments(topic, p) == []
        below = cluster.fetch(topic, p, 0)  # below the new log start: gone
        assert below.error.name == "OFFSET_OUT_OF_RANGE"
        assert partition.log_start_offset == partition.local_log_start_offset

    # Re-enable: tiering resumes, stamped with the current epoch, offsets contiguous.
    before = {p.partition: p.log_end_offset for p in done.partitions}
    cluster.admin.incremental_alter_configs("payments", {"remote.storage.enable": "true"})
    for p in range(2):
        cluster.produce(topic, p, 150)
        poll_until(
            lambda p=p: len(cluster.remote_segments(topic, p)) > 2,
            timeout=30,
            what="tiering to resume",
        )
        segments = sorted(cluster.remote_segments(topic, p), key=lambda m: m.start_offset)
        assert {m.tiered_epoch for m in segments} == {1}
        for a, b in itertools.pairwise(segments):
            assert b.start_offset == a.end_offset + 1
        assert before[p] is not None
    assert epoch_dirs(cluster, topic) <= {"0/te=1", "1/te=1"}


@pytest.fixture
def spark_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from running_cluster(
        request, tmp_path, "kraft", **{"bulk.delete.fast.path.max.objects": "0"}
    )


def test_the_job_runs_on_spark_and_wait_shows_its_progress(spark_cluster: Cluster) -> None:
    cluster = spark_cluster
    topic = tiered_topic(cluster, "clicks", partitions=2)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.configs",
            "--bootstrap-server",
            cluster.bootstrap,
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "clicks",
            "--add-config",
            "remote.log.disable.policy=delete, remote.storage.enable=false",
            "--wait",
            "--timeout",
            "120",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "deleting remote data below epoch 1" in done.stderr
    assert "DISABLED" in done.stdout
    job = cluster.admin.describe_topic("clicks").delete_job
    assert job is not None and job.state == "DONE"
    assert epoch_dirs(cluster, topic) == set()
    log = "".join(cluster.active_controller().output)
    assert "SparkSession tiered-bulk-delete started" in log
    assert " via Spark (attempt 1)" in log


@pytest.fixture
def kraft_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from running_cluster(request, tmp_path, "kraft")


def test_retain_keeps_reads_and_expires_remote_before_local(kraft_cluster: Cluster) -> None:
    cluster = kraft_cluster
    topic = tiered_topic(cluster, "orders", partitions=1)
    leader = topic.partitions[0].leader
    cluster.admin.incremental_alter_configs("orders", {"remote.storage.enable": "false"})
    cluster.wait_for_state("orders", TieredState.DISABLED)
    d = cluster.log_dirs(leader)[(topic.topic_id, 0)]
    assert not d.copying and d.remote_fetch_enabled
    assert offsets(cluster.fetch(topic, 0, 0).records)[0] == 0  # still readable from offset 0
    local_start = d.offsets.local_log_start_offset
    remote_before = d.remote_segment_count
    assert local_start > 0 and remote_before > 3

    # Total retention small enough that everything old must go: remote first, oldest first.
    cluster.admin.incremental_alter_configs("orders", {"retention.bytes": "100"})
    seen_remote_starts: list[int] = []

    def remote_emptied() -> bool:
        now = cluster.log_dirs(leader)[(topic.topic_id, 0)]
        if now.remote_segment_count:
            seen_remote_starts.append(now.remote_log_start_offset)
            # Local segments are kept while anything remote is left, but for those wholly below
            # the log start (their records are gone): offsets stay contiguous.
            local_now = now.offsets.local_log_start_offset
            assert local_now == local_start or local_now <= now.offsets.log_start_offset
        return now.remote_segment_count == 0

    poll_until(remote_emptied, timeout=60, what="remote segments to expire")
    assert seen_remote_starts == sorted(seen_remote_starts)  # oldest first
    after = cluster.log_dirs(leader)[(topic.topic_id, 0)]
    assert after.offsets.log_start_offset >= local_start  # offsets stay contiguous
    below = cluster.fetch(topic, 0, 0)
    assert below.error.name == "OFFSET_OUT_OF_RANGE"


# ----------------------------------------------------------------------------- the delete delay


def delayed_delete(delay_ms: int) -> dict[str, str]:
    return {**DELETE, "remote.log.delete.delay.ms": str(delay_ms)}


def read_all(cluster: Cluster, topic: TopicDescription, partition: int, end: int) -> list[int]:
    """Every offset read from 0 up to ``end``, fetch after fetch (remote tier first)."""
    read: list[int] = []
    while not read or read[-1] < end - 1:
        response = cluster.fetch(topic, partition, read[-1] + 1 if read else 0)
        assert response.error.name == "NONE", response.error
        batch = offsets(response.records)
        assert batch, f"partition {partition}: nothing read at {read[-1] + 1 if read else 0}"
        read.extend(o for o in batch if not read or o > read[-1])
    return read


def scheduled_job(cluster: Cluster, name: str) -> DeleteJobDescription:
    job = cluster.admin.describe_topic(name, include_partition_state=False).delete_job
    assert job is not None and job.state == "SCHEDULED", job
    assert job.tiered_epoch == 1 and job.starts_at_ms is not None
    return job


def test_a_reenable_inside_the_delay_cancels_the_delete_and_keeps_every_record(
    cluster: Cluster,
) -> None:
    topic = tiered_topic(cluster, "ledger")
    ends = {p.partition: p.log_end_offset for p in topic.partitions}
    before_ms = int(time.time() * 1000)
    # --wait returns at DISABLED (the job is only scheduled) and says when it starts.
    waited = run_cli(
        cluster,
        "cli.configs",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "ledger",
        "--add-config",
        ",".join(f"{k}={v}" for k, v in delayed_delete(600_000).items()),
        "--wait",
        "--timeout",
        "60",
    )
    assert cluster.admin.describe_topic("ledger").tiered_state is TieredState.DISABLED
    job = scheduled_job(cluster, "ledger")
    assert (
        "Topic ledger: tiered_state=DISABLED tiered_epoch=1 policy=delete; remote delete below "
        "epoch 1 SCHEDULED, starts 20"
    ) in waited
    assert before_ms + 600_000 <= job.starts_at_ms <= int(time.time() * 1000) + 600_000
    text = topics_describe(cluster, "ledger")
    assert "RemoteDelete: SCHEDULED below epoch 1, starts 20" in text
    # Stopped as under retain: remote data readable, the log start where it was.
    described = cluster.admin.describe_topic("ledger")
    for p in described.partitions:
        assert p.log_start_offset == 0 and p.remote_delete_state in ("", None)
    assert epoch_dirs(cluster, topic) == {"0/te=0", "1/te=0"}

    cluster.admin.incremental_alter_configs("ledger", {"remote.storage.enable": "true"})
    cancelled = cluster.admin.describe_topic("ledger", include_partition_state=False)
    assert cancelled.delete_job is not None and cancelled.delete_job.state == "CANCELLED"
    assert cancelled.delete_job.starts_at_ms is None
    for p, end in ends.items():
        assert end is not None
        assert read_all(cluster, topic, p, end) == list(range(end))
    assert epoch_dirs(cluster, topic) >= {"0/te=0", "1/te=0"}  # nothing deleted
    # Copying resumes, stamped with the epoch the disable set.
    cluster.produce(topic, 0, 150)
    poll_until(
        lambda: any(m.tiered_epoch == 1 for m in cluster.remote_segments(topic, 0)),
        timeout=30,
        what="copying to resume at tiered epoch 1",
    )


def test_after_the_delay_the_log_start_rises_and_the_data_goes(cluster: Cluster) -> None:
    topic = tiered_topic(cluster, "audit")
    cluster.admin.incremental_alter_configs("audit", delayed_delete(4_000))
    cluster.wait_for_state("audit", TieredState.DISABLED)
    job = scheduled_job(cluster, "audit")
    assert offsets(cluster.fetch(topic, 0, 0).records)[0] == 0  # readable while it waits
    done = wait_for_job(cluster, "audit")
    assert int(time.time() * 1000) >= job.starts_at_ms
    assert epoch_dirs(cluster, topic) == set()
    for p, partition in enumerate(done.partitions):
        assert partition.log_start_offset == partition.local_log_start_offset
        assert cluster.fetch(topic, p, 0).error.name == "OFFSET_OUT_OF_RANGE"
        assert partition.remote_delete_state == "DELETE_PARTITION_FINISHED"


def test_a_controller_killed_during_the_delay_keeps_the_schedule_and_its_clock(
    cluster: Cluster,
) -> None:
    topic = tiered_topic(cluster, "escrow", partitions=1)
    cluster.admin.incremental_alter_configs("escrow", delayed_delete(20_000))
    cluster.wait_for_state("escrow", TieredState.DISABLED)
    job = scheduled_job(cluster, "escrow")
    active = cluster.active_controller()
    [standby] = [c for c in cluster.controllers if c is not active]
    active.kill()  # SIGKILL
    standby.wait_for_line("Active as controller", timeout_s=60)
    assert scheduled_job(cluster, "escrow").starts_at_ms == job.starts_at_ms  # not restarted
    assert epoch_dirs(cluster, topic) == {"0/te=0"}
    wait_for_job(cluster, "escrow", timeout_s=120)
    assert int(time.time() * 1000) >= job.starts_at_ms
    assert epoch_dirs(cluster, topic) == set()
    active.start()  # back, as a standby


def run_cli(cluster: Cluster, module: str, *args: str) -> str:
    """A tool's standard output, run against the cluster; it must exit 0."""
    return subprocess.run(
        [sys.executable, "-m", module, "--bootstrap-server", cluster.bootstrap, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    ).stdout


def topics_describe(cluster: Cluster, name: str) -> str:
    return run_cli(cluster, "cli.topics", "--describe", "--topic", name)
