"""``tiered-remote-storage scrub`` against a real cluster on local disk, in both metadata modes.

Orphans are made as they happen: an uploader SIGKILLed after its objects and before any metadata
(a segment the RLMM does not know, under a live topic), and an object dropped by hand under the
prefix of a topic deleted (and whose delete job finished). The scrub finds exactly those with
their reason, never while they are younger than ``--min-age-ms``, never a copy in flight while
the brokers tier; ``--execute`` removes exactly those and nothing else. Bad input is refused and
changes nothing. On the S3 endpoint, asked through a broker: orphans under a live and under a
deleted topic are found and deleted; and a topic deleted during an S3 outage (a fault proxy
holding the brokers' uploads past their timeout) leaves late uploads that the scrub finds as a
deleted topic's and deletes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_configs_dry_run import PARTITIONS, tiered_and_settled
from tests.cli.test_remote_storage_verify import (  # noqa: F401 - the fixture
    remote_storage_cli,
    s3_cluster,
)
from tests.support.cluster import Cluster, grpc_address
from tests.support.kafka_clients import SMALL_BATCHES, Message, confluent_produce
from tests.support.kafka_cluster import MODES, shared_cluster
from tests.support.polling import poll_until
from tests.support.s3 import S3Store, new_store
from tests.support.s3_fault_proxy import FaultPlan, S3FaultProxy
from tiered.admin import TopicDescription
from tiered.api import TopicIdPartition
from tiered.errors import ErrorCode, TieredError
from tiered.rsm import layout

pytestmark = pytest.mark.processes

# An uploader that copies one segment of a live partition with the storage plugin, as a broker's
# copier does, and is killed before it records anything in the RLMM.
KILLED_UPLOADER = """
import os, signal, sys, uuid
from tiered.api import LogSegmentData, RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from tiered.rsm.fsspec_rsm import FsspecRemoteStorageManager

root, topic, topic_id, workdir = sys.argv[1:5]
tp = TopicIdPartition(uuid.UUID(topic_id), topic, 0)
files = {}
for suffix in ("log", "index", "timeindex"):
    files[suffix] = os.path.join(workdir, f"00000000000000900000.{suffix}")
    with open(files[suffix], "wb") as f:
        f.write(b"x" * 64)
metadata = RemoteLogSegmentMetadata(
    remote_log_segment_id=RemoteLogSegmentId.generate_new(tp),
    start_offset=900_000, end_offset=900_099, max_timestamp_ms=1, broker_id=1,
    event_timestamp_ms=1, segment_size_in_bytes=64, segment_leader_epochs={0: 900_000},
    tiered_epoch=0,
)
data = LogSegmentData(files["log"], files["index"], files["timeindex"], b"\\x00" * 8, None, None)
FsspecRemoteStorageManager(root).copy_log_segment_data(metadata, data)
print(metadata.remote_log_segment_id.id, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with shared_cluster(request, tmp_path_factory.mktemp(f"scrub-{request.param}")) as c:
        yield c


def scrub_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return remote_storage_cli(cluster.bootstrap, "scrub", *args)


def scrub_json(cluster: Cluster, *args: str, bootstrap: str | None = None) -> dict[str, Any]:
    done = remote_storage_cli(bootstrap or cluster.bootstrap, "scrub", "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def remote_keys(cluster: Cluster) -> set[str]:
    root = cluster.root / "remote"
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def killed_upload(cluster: Cluster, topic: TopicDescription, workdir: Path) -> set[str]:
    """The keys an uploader SIGKILLed before its metadata left under ``topic``'s partition 0."""
    before = remote_keys(cluster)
    workdir.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            KILLED_UPLOADER,
            str(cluster.root / "remote"),
            topic.name,
            str(topic.topic_id),
            str(workdir),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    segment_id = done.stdout.strip()
    left = {k for k in remote_keys(cluster) - before if segment_id in k}
    assert left, "the uploader left no object"
    assert not [
        s
        for s in cluster.remote_segments(topic, 0)
        if str(s.remote_log_segment_id.id) == segment_id
    ]
    return left


def dropped_under_deleted_topic(cluster: Cluster, name: str) -> str:
    """A tiered topic deleted (its delete job done: its objects gone), then an object dropped by
    hand under its prefix; returns the object's key."""
    topic = cluster.tiered_topic(
        name, 1, {"remote.storage.enable": "true", "segment.bytes": "2000"}
    )
    prefix = f"{topic.name}-{topic.topic_id}/"
    assert any(k.startswith(prefix) for k in remote_keys(cluster))
    cluster.admin.delete_topic(topic.name)

    def job_done() -> bool:
        listing = cluster.admin.describe_topic_listing(include_partition_state=False)
        return not any(k.startswith(prefix) for k in remote_keys(cluster)) and all(
            d.topic_id != topic.topic_id for d in listing.deleted_topics
        )

    poll_until(job_done, timeout=60, what=f"the delete job of {topic.name} to finish")
    key = f"{prefix}0/te=0/copied-by-hand.log"
    path = cluster.root / "remote" / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"by hand")
    return key


def test_orphans_made_two_ways_are_found_with_their_reason_and_execute_removes_only_them(
    cluster: Cluster, tmp_path: Path
) -> None:
    live = tiered_and_settled(cluster, f"live-{uuid.uuid4().hex[:8]}")
    unknown = killed_upload(cluster, live, tmp_path / "upload")
    deleted = dropped_under_deleted_topic(cluster, f"gone-{uuid.uuid4().hex[:8]}")
    orphans = {*unknown, deleted}

    # Younger than the default hour: nothing is an orphan yet.
    young = scrub_json(cluster)
    assert young["orphans"]["objects"] == 0
    assert young["scanned_objects"] == len(remote_keys(cluster))

    found = scrub_json(cluster, "--min-age-ms", "0")
    assert found["orphans"]["by_reason"] == {
        "deleted_topic": 1,
        "unknown_segment": len(unknown),
        "deleted_segment": 0,
    }
    assert set(found["examples"]) == orphans
    assert found["orphans"]["bytes"] == sum(
        (cluster.root / "remote" / k).stat().st_size for k in orphans
    )
    assert found["deleted"] == 0
    assert orphans <= remote_keys(cluster)  # a report deletes nothing

    before = remote_keys(cluster)
    executed = scrub_json(cluster, "--min-age-ms", "0", "--execute")
    assert executed["deleted"] == len(orphans)
    assert remote_keys(cluster) == before - orphans
    assert scrub_json(cluster, "--min-age-ms", "0")["orphans"]["objects"] == 0
    # The live topic's data is whole: every finished segment's objects are there.
    verify = remote_storage_cli(cluster.bootstrap, "verify", "--topic", live.name)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_copies_in_flight_are_never_reported_while_the_brokers_tier(cluster: Cluster) -> None:
    """Scrubs with no minimum age while every partition copies and expires segments: an object
    of a copy in flight is claimed by its COPY_SEGMENT_STARTED record, one that retention removes
    is gone when the scrub confirms it."""
    name = f"busy-{uuid.uuid4().hex[:8]}"
    topic = cluster.tiered_topic(
        name,
        PARTITIONS,
        {"remote.storage.enable": "true", "segment.bytes": "2000", "retention.bytes": "20000"},
    )
    stop = threading.Event()

    def produce() -> None:
        from confluent_kafka import Producer

        from tests.support.kafka_cluster import kafka_bootstrap

        producer = Producer(
            {"bootstrap.servers": kafka_bootstrap(cluster), "linger.ms": 0, "batch.num.messages": 1}
        )
        while not stop.is_set():
            for p in range(PARTITIONS):
                producer.produce(topic.name, value=b"b" * 200, partition=p)
            producer.poll(0.01)
        producer.flush(30)

    baseline = scrub_json(cluster, "--min-age-ms", "0")["orphans"]["objects"]
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        copied = cluster.admin.describe_topic(name).partitions[0].remote_segment_count
        for _ in range(5):
            answer = scrub_json(cluster, "--min-age-ms", "0")
            busy = [k for k in answer["examples"] if k.startswith(f"{name}-")]
            assert busy == [], f"in-flight objects reported as orphans: {busy}"
            assert answer["orphans"]["objects"] == baseline
        poll_until(
            lambda: cluster.admin.describe_topic(name).partitions[0].remote_segment_count != copied,
            timeout=60,
            what=f"{name} to keep tiering during the scrubs",
        )
    finally:
        stop.set()
        producer.join(60)


def test_bad_input_is_refused_and_changes_nothing(cluster: Cluster) -> None:
    orphan = cluster.root / "remote" / f"never-{uuid.uuid4()}" / "0" / "by-hand.bin"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"an orphan a bad request must leave")
    for bad in ("-1", "soon"):
        done = scrub_cli(cluster, "--min-age-ms", bad, "--execute")
        assert done.returncode == 2
        assert "--min-age-ms must be" in done.stderr
    with pytest.raises(TieredError) as e:
        cluster.admin.scrub_remote_storage(min_age_ms=-5, execute=True)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert "--min-age-ms must be >= 0, got -5" in e.value.message
    assert orphan.exists()
    orphan.unlink()


@pytest.mark.s3
def test_on_s3_orphans_are_found_and_deleted_through_a_broker(
    s3_cluster: tuple[Cluster, S3Store],  # noqa: F811 - the imported fixture
) -> None:
    cluster, store = s3_cluster
    live = tiered_and_settled(cluster, f"s3-{uuid.uuid4().hex[:8]}")
    base = f"{store.bucket}/{store.prefix}"

    def keys() -> set[str]:
        return {p[len(base) + 1 :] for p in store.fs.find(base)}

    tp = TopicIdPartition(live.topic_id, live.name, 0)
    unknown = layout.object_key(layout.segment_prefix_of(tp, 0, 900_000, uuid.uuid4()), "log")
    deleted = f"gone-{uuid.uuid4()}/0/te=0/left-behind.log"
    for key in (unknown, deleted):
        store.fs.pipe(f"{base}/{key}", b"orphan")
    before = keys()
    broker = grpc_address(cluster.brokers[1].properties)  # the broker forwards the call

    found = scrub_json(cluster, "--min-age-ms", "0", bootstrap=broker)
    assert found["scanned_objects"] == len(before)
    assert found["orphans"]["by_reason"] == {
        "deleted_topic": 1,
        "unknown_segment": 1,
        "deleted_segment": 0,
    }
    assert sorted(found["examples"]) == sorted([unknown, deleted])
    assert scrub_json(cluster, "--min-age-ms", "0", "--execute", bootstrap=broker)["deleted"] == 2
    assert keys() == before - {unknown, deleted}


LATE_S = 12.0
"""How long the outage holds each upload before it lands: far past the brokers' request
timeout, so each copy fails, and past the deleted topic's delete job."""


@pytest.fixture(scope="module", params=["kraft"])
def outage_cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, S3Store, S3FaultProxy]]:
    """A cluster on the S3 endpoint whose brokers reach it through a fault proxy (the
    controllers, which run the delete jobs and the scrub, directly)."""
    root = tmp_path_factory.mktemp("scrub-outage")
    store = new_store(request.getfixturevalue("s3_endpoint"), root)
    with S3FaultProxy(store.endpoint_url) as proxy:
        brokers = store.config(proxy.url, **{"remote.storage.s3.request.timeout.ms": "1000"})
        with shared_cluster(
            request,
            root,
            broker_overrides={1: brokers, 2: brokers},
            controller_overrides=store.config(),
        ) as c:
            yield c, store, proxy


@pytest.mark.s3
def test_a_topic_deleted_during_an_s3_outage_leaves_late_uploads_that_the_scrub_finds(
    outage_cluster: tuple[Cluster, S3Store, S3FaultProxy],
) -> None:
    """S3 holds the brokers' uploads past their timeout and stores them later, as a store in
    trouble does; the topic is deleted meanwhile and its delete job finishes before they land."""
    cluster, store, proxy = outage_cluster
    topic = cluster.tiered_topic(
        f"outage-{uuid.uuid4().hex[:8]}",
        1,
        {"remote.storage.enable": "true", "segment.bytes": "2000"},
    )
    base = f"{store.bucket}/{store.prefix}"
    prefix = f"{base}/{topic.name}-{topic.topic_id}/"

    def under_topic() -> list[str]:
        return [p for p in store.fs.find(base) if p.startswith(prefix)]

    proxy.reset_counts()
    proxy.set_plan(FaultPlan(latency_s=LATE_S, operations=frozenset({"PutObject"})))
    producer = confluent_produce(
        cluster,
        topic.name,
        [Message(0, None, b"o" * 200, (), int(time.time() * 1000)) for _ in range(40)],
        **SMALL_BATCHES,
    )
    poll_until(lambda: proxy.requests["PutObject"] > 0, timeout=30, what="an upload held")
    cluster.admin.delete_topic(topic.name)

    def job_done() -> bool:
        listing = cluster.admin.describe_topic_listing(include_partition_state=False)
        return all(d.topic_id != topic.topic_id for d in listing.deleted_topics)

    poll_until(job_done, timeout=60, what=f"the delete job of {topic.name} to finish")
    held = proxy.requests["PutObject"]
    assert proxy.forwarded["PutObject"] < held, "every held upload landed before the job ended"
    proxy.set_plan(FaultPlan())
    poll_until(
        lambda: proxy.forwarded["PutObject"] >= held,
        timeout=LATE_S * 4,
        what="the held uploads to land",
    )
    producer.flush(10)
    late = under_topic()
    assert late, "no upload landed after the delete job"

    found = scrub_json(cluster, "--min-age-ms", "0")
    assert found["orphans"]["by_reason"] == {
        "deleted_topic": len(late),
        "unknown_segment": 0,
        "deleted_segment": 0,
    }
    assert all(f"{base}/{key}" in late for key in found["examples"])
    assert scrub_json(cluster, "--min-age-ms", "0", "--execute")["deleted"] == len(late)
    assert under_topic() == []
