"""``tiered-remote-storage verify`` against a real cluster on local disk, in both metadata
modes: a healthy topic exits 0; an object removed by hand from a finished segment is reported
with the segment's fields and exit status 1, by the command and by the active controller's
periodic verify (its gauge); an unknown topic is an error naming it. On the S3 endpoint (KRaft):
a removed object is reported, asked through a broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from tests.cli.test_configs_dry_run import PARTITIONS, tiered_and_settled
from tests.support.cluster import Cluster, grpc_address
from tests.support.kafka_cluster import MODES, shared_cluster
from tests.support.metrics import figure, metrics_url, scrape
from tests.support.polling import poll_until
from tests.support.s3 import S3Store, new_store
from tiered.admin import TopicDescription
from tiered.api import RemoteLogSegmentState
from tiered.rsm import layout

pytestmark = pytest.mark.processes

SEGMENTS_MISSING = "kafka_controller_remotestorageverify_segmentsmissing"
SEGMENTS_CHECKED = "kafka_controller_remotestorageverify_segmentschecked"


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with shared_cluster(
        request,
        tmp_path_factory.mktemp(f"verify-{request.param}"),
        controller_overrides={"metrics.port": "0", "remote.storage.verify.interval.ms": "200"},
    ) as c:
        yield c


def remote_storage_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``tiered-remote-storage SUBCOMMAND --bootstrap-server bootstrap ...``, run to its end."""
    subcommand, *rest = args
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.remote_storage",
            subcommand,
            "--bootstrap-server",
            bootstrap,
            *rest,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def verify_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return remote_storage_cli(cluster.bootstrap, "verify", *args)


def finished_count(cluster: Cluster, topic: TopicDescription) -> int:
    return sum(
        1
        for p in range(PARTITIONS)
        for s in cluster.remote_segments(topic, p)
        if s.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    )


def test_a_healthy_topic_exits_0(cluster: Cluster) -> None:
    topic = tiered_and_settled(cluster, f"healthy-{uuid.uuid4().hex[:8]}")
    done = verify_cli(cluster, "--topic", topic.name, "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "segments_checked": finished_count(cluster, topic),
        "missing": [],
    }
    text = verify_cli(cluster, "--topic", topic.name)
    assert text.returncode == 0, text.stderr
    assert "none is missing anything" in text.stdout


def test_an_object_removed_by_hand_is_reported_with_exit_status_1(cluster: Cluster) -> None:
    topic = tiered_and_settled(cluster, f"broken-{uuid.uuid4().hex[:8]}")
    segment = cluster.remote_segments(topic, 1)[1]
    assert segment.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    key = layout.object_key(layout.segment_prefix(segment), "index")
    (cluster.root / "remote" / key).unlink()

    done = verify_cli(cluster, "--topic", topic.name, "--format", "json")
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout) == {
        "segments_checked": finished_count(cluster, topic),
        "missing": [
            {
                "topic": topic.name,
                "partition": 1,
                "segment_id": str(segment.remote_log_segment_id.id),
                "tiered_epoch": segment.tiered_epoch,
                "start_offset": segment.start_offset,
                "end_offset": segment.end_offset,
                "objects": [key],
            }
        ],
    }
    text = verify_cli(cluster)  # every topic
    assert text.returncode == 1, text.stderr
    assert f"{topic.name}-1 segment {segment.remote_log_segment_id.id}" in text.stdout
    assert key in text.stdout

    # The active controller's own verify finds it too, and logs it once.
    url = metrics_url(cluster.controllers[0])
    poll_until(
        lambda: (figure(scrape(url), SEGMENTS_MISSING) or 0) >= 1,
        timeout=60,
        what="the periodic verify's gauge to show the missing segment",
    )
    assert (figure(scrape(url), SEGMENTS_CHECKED) or 0) >= finished_count(cluster, topic)
    standby = scrape(metrics_url(cluster.controllers[1]))  # only the active controller verifies
    assert figure(standby, SEGMENTS_MISSING) == 0
    assert figure(standby, SEGMENTS_CHECKED) == 0
    segment_id = str(segment.remote_log_segment_id.id)
    poll_until(
        lambda: any(segment_id in line for line in cluster.controllers[0].output),
        timeout=30,
        what="the missing segment logged",
    )
    logged = [line for line in cluster.controllers[0].output if segment_id in line]
    assert len(logged) == 1, logged


def test_an_unknown_topic_is_an_error_naming_it(cluster: Cluster) -> None:
    done = verify_cli(cluster, "--topic", "no-such-topic", "--format", "json")
    assert done.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in done.stderr
    assert "'no-such-topic'" in done.stderr
    assert done.stdout == ""


@pytest.fixture(scope="module", params=["kraft"])
def s3_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, S3Store]]:
    root = tmp_path_factory.mktemp("verify-s3")
    store = new_store(request.getfixturevalue("s3_endpoint"), root)
    with shared_cluster(
        request,
        root,
        broker_overrides={1: store.config(), 2: store.config()},
        controller_overrides=store.config(),
    ) as c:
        yield c, store


@pytest.mark.s3
def test_on_s3_a_removed_object_is_reported_through_a_broker(
    s3_cluster: tuple[Cluster, S3Store],
) -> None:
    cluster, store = s3_cluster
    topic = tiered_and_settled(cluster, f"s3-{uuid.uuid4().hex[:8]}")
    segment = cluster.remote_segments(topic, 0)[0]
    assert segment.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
    key = layout.object_key(layout.segment_prefix(segment), "log")
    path = f"{store.bucket}/{store.prefix}/{key}"
    assert store.fs.exists(path)  # the cluster tiers to the bucket, not to a local directory
    store.fs.rm(path)

    broker = grpc_address(cluster.brokers[1].properties)  # the broker forwards the call
    done = remote_storage_cli(broker, "verify", "--topic", topic.name, "--format", "json")
    assert done.returncode == 1, done.stderr
    answer = json.loads(done.stdout)
    assert answer["segments_checked"] == finished_count(cluster, topic)
    assert [(m["partition"], m["segment_id"], m["objects"]) for m in answer["missing"]] == [
        (0, str(segment.remote_log_segment_id.id), [key])
    ]
