"""The controller daemon with real broker processes, in both metadata modes (KRaft log and a real
ZooKeeper): disable with retain and with delete, re-enable, rejected requests, a failed group
write, the CLI, deleted topics. Failover at each step of a disable, brokers killed or paused
during it and zombie controllers are in ``system_tests/``."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support.batches import offsets
from tests.support.cluster import Cluster, grpc_address, running_cluster
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import AdminClient, TopicDescription
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError
from tiered.retry import RetryPolicy

pytestmark = pytest.mark.processes

TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000"}


@pytest.fixture(params=["kraft", "zookeeper"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Scenarios that matter in both metadata modes."""
    yield from running_cluster(request, tmp_path, request.param)


@pytest.fixture
def kraft_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    yield from running_cluster(request, tmp_path, "kraft")


@pytest.fixture(params=["kraft", "zookeeper"])
def failing_write_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    """Its active controller's first group-commit write of topic changes fails."""
    yield from running_cluster(
        request,
        tmp_path,
        request.param,
        controller_failpoints={"controller.topic_writes.flush": "fail"},
    )


def tiered_topic(cluster: Cluster, name: str, partitions: int = 2) -> TopicDescription:
    topic = cluster.tiered_topic(name, partitions, TIERED)
    assert topic.tiered_state is TieredState.ENABLED and topic.tiered_epoch == 0
    return topic


def test_disable_with_retain_then_reenable(cluster: Cluster) -> None:
    topic = tiered_topic(cluster, "orders")
    result = cluster.admin.incremental_alter_configs("orders", {"remote.storage.enable": "false"})
    assert result.tiered_state in (TieredState.DISABLING, TieredState.DISABLED)
    assert result.tiered_epoch == 1
    disabled = cluster.wait_for_state("orders", TieredState.DISABLED)
    assert disabled.tiered_epoch == 1 and disabled.disable_policy == "retain"
    for p, partition in enumerate(topic.partitions):
        d = cluster.log_dirs(partition.leader)[(topic.topic_id, p)]
        assert not d.copying and d.tiered_epoch == 1 and d.remote_fetch_enabled
        fetched = cluster.fetch(topic, p, 0)  # retain: offset 0 still reads
        assert fetched.error.code == 0 and offsets(fetched.records)[0] == 0
    # Nothing new is tiered while disabled.
    before = {p: len(cluster.remote_segments(topic, p)) for p in range(2)}
    for p in range(2):
        cluster.produce(topic, p, 100)
    enabled = cluster.admin.incremental_alter_configs("orders", {"remote.storage.enable": "true"})
    assert enabled.tiered_state is TieredState.ENABLED and enabled.tiered_epoch == 1
    for p in range(2):
        poll_until(
            lambda p=p: any(m.tiered_epoch == 1 for m in cluster.remote_segments(topic, p)),
            timeout=30,
            what="segments stamped with the new epoch",
        )
        segments = sorted(
            cluster.remote_segments(topic, p),
            key=lambda m: m.start_offset,
        )
        assert len(segments) > before[p]
        for a, b in itertools.pairwise(segments):
            assert b.start_offset == a.end_offset + 1


def test_disable_with_delete_raises_log_start(cluster: Cluster) -> None:
    topic = tiered_topic(cluster, "payments")
    cluster.admin.incremental_alter_configs(
        "payments", {"remote.log.disable.policy": "delete", "remote.storage.enable": "false"}
    )
    disabled = cluster.wait_for_state("payments", TieredState.DISABLED)
    assert disabled.tiered_epoch == 1 and disabled.disable_policy == "delete"
    for p, partition in enumerate(topic.partitions):
        d = cluster.log_dirs(partition.leader)[(topic.topic_id, p)]
        assert not d.copying and not d.remote_fetch_enabled
        assert d.offsets.log_start_offset == d.offsets.local_log_start_offset
    # The broker marked each partition; the bulk delete takes it on
    # (tests/controller/jobs/test_delete_policy.py).
    for partition in cluster.admin.describe_topic("payments").partitions:
        assert partition.remote_delete_state.startswith("DELETE_PARTITION_")


def test_rejected_requests_change_nothing(cluster: Cluster) -> None:
    admin = cluster.admin
    with pytest.raises(TieredError) as bad_policy:
        admin.create_topic("t1", 1, {**TIERED, "remote.log.disable.policy": "purge"})
    assert bad_policy.value.code is ErrorCode.INVALID_REQUEST
    assert "retain, delete" in str(bad_policy.value)
    with pytest.raises(TieredError) as compacted:
        admin.create_topic("t2", 1, {**TIERED, "cleanup.policy": "compact"})
    assert compacted.value.code is ErrorCode.INVALID_CONFIG
    with pytest.raises(TieredError) as unknown:
        admin.incremental_alter_configs("nope", {"remote.storage.enable": "false"})
    assert unknown.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert [t.name for t in admin.describe_topics()] == []

    admin.create_topic("events", 2, TIERED)
    before = admin.describe_topic("events", include_partition_state=False)
    with pytest.raises(TieredError) as not_boolean:
        admin.incremental_alter_configs("events", {"remote.storage.enable": "maybe"})
    assert not_boolean.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(TieredError):
        admin.incremental_alter_configs("events", {"cleanup.policy": "compact"})
    assert admin.describe_topic("events", include_partition_state=False) == before

    # Hold DISABLING: one broker is paused, so its ack cannot arrive.
    paused = cluster.brokers[before.partitions[0].leader]
    paused.pause()
    try:
        admin.incremental_alter_configs("events", {"remote.storage.enable": "false"})
        disabling = admin.describe_topic("events", include_partition_state=False)
        assert disabling.tiered_state is TieredState.DISABLING and disabling.tiered_epoch == 1
        for change in ({"remote.storage.enable": "false"}, {"remote.storage.enable": "true"}):
            with pytest.raises(TieredError) as in_progress:
                admin.incremental_alter_configs("events", change)
            assert in_progress.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
        after = admin.describe_topic("events", include_partition_state=False)
        # Nothing changed (acks of the broker that is not paused may still come in meanwhile).
        assert (after.tiered_state, after.tiered_epoch, after.configs) == (
            disabling.tiered_state,
            disabling.tiered_epoch,
            disabling.configs,
        )
    finally:
        paused.resume()
    assert cluster.wait_for_state("events", TieredState.DISABLED).tiered_epoch == 1


def test_cli_alter_with_wait_reports_progress(cluster: Cluster) -> None:
    """Two topics in one alter; --wait follows both through the controller's watch."""
    tiered_topic(cluster, "audit", partitions=1)
    tiered_topic(cluster, "billing", partitions=2)
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
            "audit",
            "--entity-name",
            "billing",
            "--add-config",
            "remote.log.disable.policy=delete, remote.storage.enable=false",
            "--wait",
            "--timeout",
            "60",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        f"Topic {name}: tiered_state=DISABLED tiered_epoch=1 policy=delete"
        for name in ("audit", "billing")
    ]


def test_a_paused_broker_is_fenced_and_comes_back(kraft_cluster: Cluster) -> None:
    cluster = kraft_cluster
    broker = cluster.brokers[2]
    broker.pause()
    try:

        def fenced() -> bool:
            return any(
                b.fenced for b in cluster.admin.describe_cluster().brokers if b.broker_id == 2
            )

        poll_until(fenced, timeout=15, what="broker 2 to be fenced")
    finally:
        broker.resume()
    cluster.wait_for_live_brokers({1, 2})


def test_kafka_39_copy_disable_pauses_copying_without_a_disablement(kraft_cluster: Cluster) -> None:
    cluster = kraft_cluster
    topic = tiered_topic(cluster, "metrics", partitions=1)
    leader = topic.partitions[0].leader
    paused = cluster.admin.incremental_alter_configs("metrics", {"remote.log.copy.disable": "true"})
    assert paused.tiered_state is TieredState.ENABLED and paused.tiered_epoch == 0
    poll_until(
        lambda: not cluster.log_dirs(leader)[(topic.topic_id, 0)].copying,
        timeout=30,
        what="copying to pause",
    )
    d = cluster.log_dirs(leader)[(topic.topic_id, 0)]
    assert d.remote_fetch_enabled and cluster.fetch(topic, 0, 0).error.code == 0
    cluster.admin.incremental_alter_configs("metrics", {"remote.log.copy.disable": "false"})
    poll_until(
        lambda: cluster.log_dirs(leader)[(topic.topic_id, 0)].copying,
        timeout=30,
        what="copying to resume",
    )


def run_cli(cluster: Cluster, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, "--bootstrap-server", cluster.bootstrap, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_cli_create_describe_and_errors_against_the_cluster(kraft_cluster: Cluster) -> None:
    cluster = kraft_cluster
    created = run_cli(
        cluster,
        "cli.topics",
        "--create",
        "--topic",
        "cli",
        "--partitions",
        "2",
        "--config",
        "remote.storage.enable=true",
    )
    assert created.returncode == 0, created.stderr
    described = run_cli(cluster, "cli.topics", "--describe", "--format", "json")
    assert described.returncode == 0, described.stderr
    [topic] = json.loads(described.stdout)
    assert topic["topic"] == "cli" and topic["tiered_state"] == "ENABLED"
    assert topic["tiered_epoch"] == 0 and topic["configs"]["remote.storage.enable"] == "true"
    assert {p["partition"] for p in topic["partitions"]} == {0, 1}
    assert set(topic["partitions"][0]) >= {
        "partition",
        "leader",
        "log_start_offset",
        "local_log_start_offset",
        "log_end_offset",
        "remote_log_start_offset",
        "remote_log_size_bytes",
        "remote_segment_count",
        "remote_delete_state",
    }
    bad = run_cli(
        cluster,
        "cli.configs",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cli",
        "--add-config",
        "remote.log.disable.policy=purge",
    )
    assert bad.returncode == 1
    assert bad.stderr.startswith("INVALID_REQUEST: ") and "retain, delete" in bad.stderr
    unknown = run_cli(cluster, "cli.topics", "--describe", "--topic", "nope", "--format", "json")
    assert unknown.returncode == 1 and unknown.stderr.startswith("UNKNOWN_TOPIC_OR_PARTITION")


def test_brokers_forward_admin_calls_to_the_active_controller(cluster: Cluster) -> None:
    broker_address = grpc_address(cluster.brokers[1].properties)

    def forwarded() -> bool:
        try:
            with AdminClient(broker_address, timeout_s=10) as via_broker:
                via_broker.create_topic("forwarded", 1, {})
                return True
        except TieredError:
            return False  # the broker has not learned where the controller is yet

    poll_until(forwarded, timeout=30, what="a create through a broker")
    topic = cluster.admin.describe_topic("forwarded", include_partition_state=False)
    assert topic.tiered_state is TieredState.DISABLED and topic.tiered_epoch == 0


def test_deleted_topic_is_removed_from_brokers_and_can_be_created_again(cluster: Cluster) -> None:
    topic = tiered_topic(cluster, "churn", partitions=2)
    directories = [
        Path(cluster.brokers[p.leader].properties["log.dirs"]) / f"churn-{i}"
        for i, p in enumerate(topic.partitions)
    ]
    assert all(d.is_dir() for d in directories)
    cluster.admin.delete_topic("churn")
    with pytest.raises(TieredError) as gone:
        cluster.admin.describe_topic("churn")
    assert gone.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for i, p in enumerate(topic.partitions):
        poll_until(
            lambda i=i, p=p: (topic.topic_id, i) not in cluster.log_dirs(p.leader),
            timeout=30,
            what="the partition to be removed",
        )
    assert not any(d.exists() for d in directories)
    cluster.admin.create_topic("churn", 2, {})
    again = cluster.admin.describe_topic("churn")
    assert again.topic_id != topic.topic_id
    poll_until(
        lambda: all(p.leader_available for p in cluster.admin.describe_topic("churn").partitions),
        timeout=30,
        what="the new topic to be hosted",
    )
    assert all(p.log_end_offset == 0 for p in cluster.admin.describe_topic("churn").partitions)


def test_a_failed_group_write_fails_every_alter_and_applies_none(
    failing_write_cluster: Cluster,
) -> None:
    cluster = failing_write_cluster
    names = [f"group-{i}" for i in range(20)]
    for name in names:
        cluster.admin.create_topic(name, 1, TIERED, wait_hosted=True)
    epoch = cluster.admin.describe_cluster().controller_epoch
    at_once = threading.Barrier(len(names))

    def disable(name: str) -> ErrorCode | None:
        # No retry: the answer of the controller whose write failed, as it gave it.
        with AdminClient(cluster.bootstrap, retry=RetryPolicy(max_tries=1)) as admin:
            at_once.wait()
            try:
                admin.incremental_alter_configs(name, {"remote.storage.enable": "false"})
            except TieredError as e:
                return e.code
            return None

    with ThreadPoolExecutor(len(names)) as pool:
        codes = dict(zip(names, pool.map(disable, names), strict=True))
    # Those in the failed write, queued behind it or sent before the next term began: refused.
    # Those that reached the next term (a KRaft one can begin within milliseconds): applied.
    refused = [name for name, code in codes.items() if code is not None]
    assert refused and {codes[name] for name in refused} == {ErrorCode.NOT_CONTROLLER}
    poll_until(
        lambda: cluster.admin.describe_cluster().controller_epoch > epoch,
        timeout=60,
        what="a new controller term",
    )
    # Nothing of a refused alter was applied: not in the store the new term loaded, not at any
    # broker.
    for topic in cluster.admin.describe_topics(refused, include_partition_state=False):
        assert (topic.tiered_state, topic.tiered_epoch) == (TieredState.ENABLED, 0)
        log_dir = cluster.log_dirs(topic.partitions[0].leader)[(topic.topic_id, 0)]
        assert log_dir.copying and log_dir.tiered_epoch == 0
    # The clients' retry, at the new term: one request, every refused topic applied once.
    results = cluster.admin.incremental_alter_topics(refused, {"remote.storage.enable": "false"})
    assert all(not isinstance(r, TieredError) and r.tiered_epoch == 1 for r in results), results
    for name in names:
        assert cluster.wait_for_state(name, TieredState.DISABLED).tiered_epoch == 1
