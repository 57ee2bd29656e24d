"""Network partitions between the distributed profile's processes and remote storage (its S3
endpoint) or Spark, cut with nftables in the test's own network namespace
(``tests.support.network``), on one ``tiered-cluster up --profile distributed --loopback-hosts``
cluster: a ``netns`` test runs alone in a child pytest, so the scenarios are steps of one test,
each on its own topic.

Broker <-> S3, mid-tiering: the leader of a tiered topic is cut from the endpoint, both ways,
while closed segments wait for its copier. Every segment the RLMM holds as COPY_SEGMENT_FINISHED
has its objects in the bucket, during the cut and after; a fetch below the local log start (the
records are in remote storage only) answers KAFKA_STORAGE_ERROR within the S3 timeouts while the
broker goes on serving; after the heal the copies resume until no closed segment waits, and the
same fetch returns the records.

Controller <-> S3, controller <-> Spark master and a Spark worker <-> S3 (its executors run in
its cgroup), mid-bulk-delete: a delete-policy disable whose job runs on Spark, and one whose job
runs in the controller, each stopped by a fail point once it has named its first partition's
objects and deleted none; the links are cut there. The job fails while cut and finishes (DONE)
after the heal; objects at or above the delete epoch keep their keys and ETags; no object below it
is left, orphans the metadata never named included."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka import Producer
from kio.schema.errors import ErrorCode

from system_tests.partitions import client_address, cluster_status, partitioned_cluster
from tests.support.kafka_requests import by_partition, fetch
from tests.support.kafka_wire import WireClient
from tests.support.network import Network
from tests.support.polling import poll_until
from tests.support.processes import process_state
from tiered import failpoints
from tiered import rlmm as rlmm_factory
from tiered import rsm as rsm_factory
from tiered.admin import AdminClient
from tiered.api import RemoteLogSegmentState, RemoteStorageManager, TopicIdPartition
from tiered.cluster.model import TieredState
from tiered.rlmm.manager import StoreRemoteLogMetadataManager
from tiered.rsm import layout

pytestmark = [pytest.mark.netns, pytest.mark.timeout(600)]

# Each S3 call of a cut process gives up within a few seconds (attempts x timeouts + backoff).
S3_TIMEOUTS = (
    "remote.storage.s3.connect.timeout.ms=1000",
    "remote.storage.s3.request.timeout.ms=2000",
    "remote.storage.retry.max.attempts=3",
    "remote.storage.retry.backoff.max.ms=500",
)
FAST_PATH_MAX_OBJECTS = 40
LISTED = "controller.delete_job.listed"
SEGMENTED = {"remote.storage.enable": "true", "segment.bytes": "2000"}
TIERING = {**SEGMENTED, "local.retention.bytes": "4000"}
VALUE = b"v" * 100  # one record per batch: a segment closes every dozen records


def _up_args() -> list[str]:
    args = ["--profile", "distributed", "--brokers", "2"]
    for setting in S3_TIMEOUTS:
        args += ["--controller-config", setting, "--broker-config", setting]
    return [
        *args,
        "--controller-config",
        f"bulk.delete.fast.path.max.objects={FAST_PATH_MAX_OBJECTS}",
    ]


class Remote:
    """The cluster's remote storage as the brokers see it (RSM and RLMM), and its bucket as
    listed straight from the endpoint."""

    def __init__(self, data: Path, layout_: dict[str, Any]) -> None:
        text = (data / "config" / "broker-1.properties").read_text()
        properties = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        self.rsm: RemoteStorageManager = rsm_factory.create(
            {k: v for k, v in properties.items() if k.startswith("remote.storage.")}
        )
        self.rlmm: StoreRemoteLogMetadataManager = rlmm_factory.create(
            {
                "rlmm.backend": "zookeeper",
                "rlmm.zookeeper.connect": properties["rlmm.zookeeper.connect"],
                "broker.id": "-7",
            }
        )
        self.bucket, _, self.prefix = (
            properties["remote.storage.root"].removeprefix("s3://").partition("/")
        )
        self.s3 = boto3.client(
            "s3",
            endpoint_url=layout_["s3_endpoint"],
            region_name="us-east-1",
            aws_access_key_id="tests",
            aws_secret_access_key="tests",
        )

    def objects(self, topic: str, topic_id: uuid.UUID) -> dict[str, str]:
        """Every object of the topic: key (relative to the root) -> ETag."""
        start = f"{self.prefix}/{topic}-{topic_id}/"
        found: dict[str, str] = {}
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start)
        for page in pages:
            for item in page.get("Contents", []):
                found[item["Key"][len(self.prefix) + 1 :]] = item["ETag"]
        return found

    def put(self, key: str, data: bytes) -> None:
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}", Body=data)

    def finished_without_objects(self, tp: TopicIdPartition) -> list[str]:
        """Segments the RLMM holds as COPY_SEGMENT_FINISHED whose objects are not all in the
        bucket (listed after the metadata was read: a finished copy's objects exist before
        its metadata says so)."""
        finished = [
            m
            for m in self.rlmm.list_remote_log_segments(tp)
            if m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        ]
        present = set(self.objects(tp.topic, tp.topic_id))
        return [
            f"{m.remote_log_segment_id.id}: {sorted(set(keys) - present)}"
            for m in finished
            if not set(keys := self.rsm.object_handles_of([m])) <= present
        ]

    def close(self) -> None:
        self.rlmm.close()
        self.rsm.close()


def _produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    errors: list[Any] = []
    for _ in range(count):
        producer.produce(topic, VALUE, partition=partition,
                         on_delivery=lambda e, _m: errors.append(e) if e else None)  # fmt: skip
    assert producer.flush(60) == 0 and not errors, errors


def _metric(address: str, name: str, topic: str) -> float:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(rf'^{name}\{{topic="{re.escape(topic)}"\}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def _fetch(address: str, topic: str, offset: int) -> tuple[Any, float]:
    """A Fetch of partition 0 at ``offset``: its partition answer and how long it took."""
    host, _, port = address.rpartition(":")
    started = time.monotonic()
    with WireClient((host, int(port)), timeout=60) as wire:
        answer = by_partition(wire.call(fetch({(topic, 0): offset})))[(topic, 0)]
    return answer, time.monotonic() - started


def _endpoint(status: dict[str, Any], name: str, port: str) -> str:
    entry = next(p for p in status["processes"] if p["name"] == name)
    return f"{entry['host']}:{entry['ports'][port]}"


def broker_cut_from_s3_mid_tiering(
    data: Path, network: Network, layout_: dict[str, Any], remote: Remote
) -> None:
    topic = "tiering"
    _, status = cluster_status(data)
    admin = AdminClient(client_address(status, status["active_controller"]))
    admin.create_topic(topic, 1, TIERING)
    described = admin.describe_topic(topic)
    victim = f"broker-{described.partitions[0].leader}"
    tp = TopicIdPartition(described.topic_id, topic, 0)
    kafka, metrics = _endpoint(status, victim, "kafka"), _endpoint(status, victim, "metrics")
    _produce(kafka, topic, 0, 60)

    def partition() -> Any:
        return admin.describe_topic(topic).partitions[0]

    poll_until(
        lambda: partition().local_log_start_offset > 0 and partition().remote_segment_count >= 2,
        timeout=90,
        what="records in remote storage only",
    )
    errors_before = _metric(metrics, "kafka_server_brokertopicmetrics_remotecopyerrorspersec_total",
                            topic)  # fmt: skip

    network.cut(victim, "s3", both_ways=True)
    _produce(kafka, topic, 0, 60)  # closes segments its copier has to upload during the cut

    def copies_failed() -> bool:
        assert remote.finished_without_objects(tp) == []
        copy_errors = "kafka_server_brokertopicmetrics_remotecopyerrorspersec_total"
        lag = "kafka_server_brokertopicmetrics_remotecopylagsegments"
        return (
            _metric(metrics, copy_errors, topic) > errors_before
            and _metric(metrics, lag, topic) > 0
        )

    poll_until(copies_failed, timeout=90, what=f"{victim}'s copies to fail during the cut")
    answer, took = _fetch(kafka, topic, 0)
    assert answer.error_code is ErrorCode.kafka_storage_error, answer
    assert took < 30, f"a remote read during the cut took {took:.1f} s"
    # The broker goes on serving what it holds locally.
    local = partition().local_log_start_offset
    answer, _ = _fetch(kafka, topic, local)
    assert answer.error_code is ErrorCode.none and answer.records, answer
    assert remote.finished_without_objects(tp) == []

    network.heal()
    lag = "kafka_server_brokertopicmetrics_remotecopylagsegments"
    poll_until(lambda: _metric(metrics, lag, topic) == 0, timeout=120,
               what="the copies to catch up after the heal")  # fmt: skip
    answer, _ = _fetch(kafka, topic, 0)
    assert answer.error_code is ErrorCode.none and answer.records, answer
    assert remote.finished_without_objects(tp) == []
    _, status = cluster_status(data)
    assert all(p["alive"] for p in status["processes"]), status


@contextmanager
def _resumed_at_every_stop(pid: int) -> Iterator[None]:
    """Resumes the process ``pid`` whenever it stops (a later attempt of a job at the fail
    point), from a thread of its own: the test's calls to a stopped controller would wait."""
    done = threading.Event()

    def resume() -> None:
        while not done.wait(0.1):
            if process_state(pid) == "T":
                os.kill(pid, signal.SIGCONT)

    thread = threading.Thread(target=resume, name=f"resume-{pid}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def bulk_delete_cut_mid_job(
    data: Path,
    network: Network,
    remote: Remote,
    topic: str,
    partitions: int,
    records: int,
    cuts: Callable[[str], list[tuple[str, str]]],
    engine: str,
) -> None:
    """A delete-policy disable of ``topic`` whose job is stopped at its first listing, where
    ``cuts(active controller)`` are cut both ways; healed once an attempt failed."""
    _, status = cluster_status(data)
    active = status["active_controller"]
    pid = next(p["pid"] for p in status["processes"] if p["name"] == active)
    admin = AdminClient(client_address(status, active))
    admin.create_topic(topic, partitions, SEGMENTED)
    described = admin.describe_topic(topic)
    for p in described.partitions:
        _produce(_endpoint(status, f"broker-{p.leader}", "kafka"), topic, p.partition, records)
    # Every closed segment copied (a dozen records close one), so that the job's engine,
    # chosen by its count of objects, is the one this step is about.
    segments = records // 12
    poll_until(
        lambda: all(
            p.remote_segment_count >= segments for p in admin.describe_topic(topic).partitions
        ),
        timeout=120,
        what=f"{topic} to tier {segments} segments in each partition",
    )
    topic_id = described.topic_id
    # Beside the copies: objects the metadata never named, below the delete epoch (orphans
    # the sweep must find) and at or above it (which nothing may touch).
    for p in range(partitions):
        tp = TopicIdPartition(topic_id, topic, p)
        for epoch in (0, 1, 2):
            prefix = layout.tiered_epoch_prefix(tp, epoch)
            remote.put(f"{prefix}/00000000000000000000-{uuid.uuid4()}.log", b"planted")
    kept = {k: etag for k, etag in remote.objects(topic, topic_id).items() if "/te=0/" not in k}
    assert len(kept) == 2 * partitions

    admin.alter_configs(topic, {"remote.storage.enable": "false",
                                "remote.log.disable.policy": "delete"})  # fmt: skip
    poll_until(lambda: process_state(pid) == "T", timeout=120,
               what=f"{active} to stop at {LISTED}")  # fmt: skip
    for a, b in cuts(active):
        network.cut(a, b, both_ways=True)

    def job() -> Any:
        return admin.describe_topic(topic, include_partition_state=False).delete_job

    def failed_while_cut() -> bool:
        seen = job()
        assert seen is not None and seen.state != "DONE", seen
        return bool(seen.last_error)

    def done() -> bool:
        seen = job()
        return seen is not None and seen.state == "DONE"

    with _resumed_at_every_stop(pid):
        poll_until(failed_while_cut, timeout=180, what=f"the job of {topic} to fail while cut")
        network.heal()
        poll_until(done, timeout=180, what=f"the job of {topic} to finish after the heal")
    finished = admin.describe_topic(topic, include_partition_state=False)
    assert finished.tiered_state is TieredState.DISABLED and finished.tiered_epoch == 1
    assert finished.delete_job is not None
    assert finished.delete_job.objects_deleted == finished.delete_job.objects_total
    left = remote.objects(topic, topic_id)
    assert {k: e for k, e in left.items() if "/te=0/" not in k} == kept  # untouched
    assert [k for k in left if "/te=0/" in k] == []  # nothing orphaned below the epoch
    logs = (data / "logs" / f"{active}.log").read_text(errors="replace")
    assert re.search(rf"Bulk delete of topic {topic} below tiered epoch 1: \d+ objects, {engine}",
                     logs), logs[-3000:]  # fmt: skip


def test_remote_storage_and_spark_cut_mid_tiering_and_mid_bulk_delete(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    # Every attempt of every job stops at its first listing: the test cuts at the first of
    # each job and resumes the others.
    environment = {failpoints.ENVIRONMENT_VARIABLE: f"{LISTED}=pause*50"}
    with partitioned_cluster(data, *_up_args(), environment=environment) as (network, layout_):
        remote = Remote(data, layout_)
        try:
            broker_cut_from_s3_mid_tiering(data, network, layout_, remote)
            # On Spark: the driver cut from the master and from S3 (its sweep lists), one
            # worker's executors from S3.
            bulk_delete_cut_mid_job(
                data, network, remote, "on-spark", 2, 80,
                lambda active: [(active, "s3"), (active, "spark-master"),
                                ("spark-worker-1", "s3")],
                "engine Spark",
            )  # fmt: skip
            # In the controller: it deletes and lists.
            bulk_delete_cut_mid_job(
                data, network, remote, "in-process", 1, 45,
                lambda active: [(active, "s3")], "engine in process",
            )  # fmt: skip
        finally:
            remote.close()
