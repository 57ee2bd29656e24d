"""``tiered-configs --alter --dry-run`` and Kafka clients' ``validate_only`` against a real
cluster, in both metadata modes: the dry run of a delete-policy disable says exactly what the
real disable then deletes (the remote directory's listing before and after, the bulk delete
job's counts), and no dry run changes anything (state, epoch, configs, RLMM, remote objects),
whichever client sends it; an invalid change exits 1 with the real alter's error."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from kafka.admin import ConfigResource as PythonConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from tests.support.cluster import Cluster
from tests.support.kafka_cluster import (
    MODES,
    confluent_admin,
    kafka_bootstrap,
    result_error,
    shared_cluster,
)
from tests.support.polling import poll_until
from tiered.admin import TopicDescription
from tiered.api import RemoteLogSegmentState, TopicIdPartition
from tiered.cluster.model import TieredState
from tiered.rsm import layout

pytestmark = pytest.mark.processes

TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000", "local.retention.bytes": "4000"}
DISABLE_DELETING = "remote.log.disable.policy=delete,remote.storage.enable=false"
PARTITIONS = 2
QUIET_S = 3.0  # no copy for this long once produced: the copier is done with closed segments


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with shared_cluster(request, tmp_path_factory.mktemp(f"dry-run-{request.param}")) as c:
        yield c


def configs_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.configs", "--bootstrap-server", cluster.bootstrap, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def alter(
    cluster: Cluster, topic: str, add_config: str, *more: str
) -> subprocess.CompletedProcess[str]:
    return configs_cli(
        cluster,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        add_config,
        *more,
    )


def remote_objects(cluster: Cluster, topic: TopicDescription, partition: int) -> set[str]:
    """The partition's objects in the remote directory (temporary files of a copy aside)."""
    tp = TopicIdPartition(topic.topic_id, topic.name, partition)
    base = cluster.root / "remote" / layout.partition_prefix(tp)
    return {
        str(p.relative_to(base)) for p in base.rglob("*") if p.is_file() and ".tmp-" not in p.name
    }


def tiered_and_settled(cluster: Cluster, name: str) -> TopicDescription:
    """A topic with tiered segments in every partition, once its copies are over: every
    segment COPY_SEGMENT_FINISHED and each listing the same twice in a row (nothing is produced
    after the records, so the copier stops once the closed segments are copied)."""
    topic = cluster.tiered_topic(name, PARTITIONS, TIERED)
    since: list[tuple[float, Any]] = []  # (when first seen, snapshot)

    def settled() -> bool:
        now = snapshot(cluster, topic)
        states = {s.state for p in range(PARTITIONS) for s in cluster.remote_segments(topic, p)}
        if not since or since[0][1] != now:
            since[:] = [(time.monotonic(), now)]
        quiet = time.monotonic() - since[0][0] >= QUIET_S
        return quiet and states == {RemoteLogSegmentState.COPY_SEGMENT_FINISHED}

    poll_until(settled, timeout=60, what=f"the copies of {name} to settle")
    return topic


def snapshot(cluster: Cluster, topic: TopicDescription) -> tuple[Any, ...]:
    """What a dry run must not change: state, epoch, configs, RLMM listing, remote objects."""
    described = cluster.admin.describe_topic(topic.name, include_partition_state=False)
    return (
        described.tiered_state,
        described.tiered_epoch,
        dict(described.configs),
        described.delete_job,
        [cluster.remote_segments(topic, p) for p in range(PARTITIONS)],
        [remote_objects(cluster, topic, p) for p in range(PARTITIONS)],
    )


@pytest.fixture
def topic(cluster: Cluster) -> TopicDescription:
    return tiered_and_settled(cluster, f"t-{uuid.uuid4().hex[:8]}")


def dry_run_json(cluster: Cluster, name: str, add_config: str) -> dict[str, Any]:
    done = alter(cluster, name, add_config, "--dry-run", "--format", "json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_dry_run_of_a_delete_policy_disable_counts_what_the_disable_deletes(
    cluster: Cluster, topic: TopicDescription
) -> None:
    before = snapshot(cluster, topic)
    answer = dry_run_json(cluster, topic.name, DISABLE_DELETING)
    assert snapshot(cluster, topic) == before  # nothing changed
    segments = [cluster.remote_segments(topic, p) for p in range(PARTITIONS)]
    objects = [remote_objects(cluster, topic, p) for p in range(PARTITIONS)]
    expected = [
        {
            "partition": p,
            "objects": len(objects[p]),
            "bytes": sum(s.segment_size_in_bytes for s in segments[p]),
            "segments": len(segments[p]),
        }
        for p in range(PARTITIONS)
    ]
    assert all(e["segments"] > 3 for e in expected)
    assert answer == {
        "topic": topic.name,
        "valid": True,
        "tiered_epoch_after": topic.tiered_epoch + 1,
        "would_delete": {
            "objects": sum(e["objects"] for e in expected),
            "bytes": sum(e["bytes"] for e in expected),
            "segments": sum(e["segments"] for e in expected),
            "partitions": expected,
        },
    }
    text = alter(cluster, topic.name, DISABLE_DELETING, "--dry-run")
    assert text.returncode == 0, text.stderr
    total = answer["would_delete"]
    assert (
        f"would delete below tiered epoch {topic.tiered_epoch + 1}: {total['objects']} objects, "
        f"{total['bytes']} bytes, {total['segments']} segments"
    ) in text.stdout
    assert "partition 1: " in text.stdout
    assert snapshot(cluster, topic) == before

    # The real disable deletes exactly that: the listing empties and the job counts as much.
    done = alter(cluster, topic.name, DISABLE_DELETING, "--wait")
    assert done.returncode == 0, done.stderr
    after = cluster.admin.describe_topic(topic.name)
    assert (after.tiered_state, after.tiered_epoch) == (
        TieredState.DISABLED,
        answer["tiered_epoch_after"],
    )
    assert after.delete_job is not None and after.delete_job.state == "DONE"
    assert after.delete_job.objects_deleted == total["objects"]
    assert [p.delete_objects_deleted for p in after.partitions] == [e["objects"] for e in expected]
    assert [remote_objects(cluster, topic, p) for p in range(PARTITIONS)] == [set(), set()]


def test_a_dry_run_of_another_change_is_valid_and_deletes_nothing(
    cluster: Cluster, topic: TopicDescription
) -> None:
    before = snapshot(cluster, topic)
    retain = dry_run_json(cluster, topic.name, "remote.storage.enable=false")
    assert retain == {
        "topic": topic.name,
        "valid": True,
        "tiered_epoch_after": topic.tiered_epoch + 1,
        "would_delete": None,
    }
    assert dry_run_json(cluster, topic.name, "retention.ms=60000")["would_delete"] is None
    assert snapshot(cluster, topic) == before


@pytest.mark.parametrize(
    ("add_config", "key"),
    [
        (
            "remote.log.disable.policy=bogus,remote.storage.enable=false",
            "remote.log.disable.policy",
        ),
        ("remote.storage.enable=maybe", "remote.storage.enable"),
        ("retention.ms=-7", "retention.ms"),
    ],
)
def test_an_invalid_dry_run_exits_1_with_the_real_alters_error(
    cluster: Cluster, topic: TopicDescription, add_config: str, key: str
) -> None:
    before = snapshot(cluster, topic)
    dry = alter(cluster, topic.name, add_config, "--dry-run", "--format", "json")
    real = alter(cluster, topic.name, add_config)
    assert (dry.returncode, real.returncode) == (1, 1)
    assert dry.stdout == ""
    assert dry.stderr == real.stderr and key in dry.stderr, dry.stderr
    assert snapshot(cluster, topic) == before


def test_an_unknown_topics_dry_run_exits_1_as_its_alter(cluster: Cluster) -> None:
    name = f"missing-{uuid.uuid4().hex[:8]}"
    dry = alter(cluster, name, DISABLE_DELETING, "--dry-run")
    real = alter(cluster, name, DISABLE_DELETING)
    assert (dry.returncode, real.returncode) == (1, 1)
    assert dry.stderr == real.stderr and "UNKNOWN_TOPIC_OR_PARTITION" in dry.stderr
    assert name not in {t.name for t in cluster.admin.describe_topics()}


def _incremental_resource(name: str, configs: Sequence[tuple[str, str]]) -> ConfigResource:
    return ConfigResource(
        "topic",
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            for key, value in configs
        ],
    )


DELETING_CONFIGS = (("remote.log.disable.policy", "delete"), ("remote.storage.enable", "false"))


def test_kafka_clients_validate_only_changes_nothing(
    cluster: Cluster, topic: TopicDescription
) -> None:
    before = snapshot(cluster, topic)
    admin = confluent_admin(cluster)
    [future] = admin.incremental_alter_configs(
        [_incremental_resource(topic.name, DELETING_CONFIGS)], validate_only=True
    ).values()
    assert result_error(future) is None
    whole_set = {**TIERED, **dict(DELETING_CONFIGS)}  # legacy AlterConfigs: the whole set
    legacy = ConfigResource("topic", topic.name, set_config=whole_set)
    [future] = admin.alter_configs([legacy], validate_only=True).values()
    assert result_error(future) is None
    python_admin = KafkaAdminClient(
        bootstrap_servers=kafka_bootstrap(cluster), request_timeout_ms=30000
    )
    try:
        resource = PythonConfigResource(
            ConfigResourceType.TOPIC, topic.name, dict(DELETING_CONFIGS)
        )
        python_admin.alter_configs([resource], validate_only=True, incremental=True)
        python_admin.alter_configs(
            [PythonConfigResource(ConfigResourceType.TOPIC, topic.name, whole_set)],
            validate_only=True,
        )
    finally:
        python_admin.close()
    assert snapshot(cluster, topic) == before


def test_kafka_clients_validate_only_refuses_what_the_alter_refuses(
    cluster: Cluster, topic: TopicDescription
) -> None:
    before = snapshot(cluster, topic)
    bad = (("remote.log.disable.policy", "bogus"), ("remote.storage.enable", "false"))
    admin = confluent_admin(cluster)
    [dry] = admin.incremental_alter_configs(
        [_incremental_resource(topic.name, bad)], validate_only=True
    ).values()
    [real] = admin.incremental_alter_configs([_incremental_resource(topic.name, bad)]).values()
    dry_error, real_error = result_error(dry), result_error(real)
    assert dry_error is not None and real_error is not None
    assert (dry_error.code(), dry_error.str()) == (real_error.code(), real_error.str())
    assert snapshot(cluster, topic) == before
