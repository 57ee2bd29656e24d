"""S3 under faults: a fault-injecting proxy in front of a real moto server, and the product's own
paths through it: the broker's RemoteLogManager copying and reading segments (a real sqlite
RLMM, real local logs) and the controller's bulk delete job, on its fast path and on Spark (local
mode) as the controller's config and wiring build it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.launch.s3_endpoint import write_credentials_file
from controller.config import ControllerConfig
from controller.jobs import wiring
from tests.broker.rlm.test_rlm import Broker
from tests.controller.jobs.test_delete_job_runner import GatedDeleter, Persisted, Remote, runner_for
from tests.support.batches import decode
from tests.support.polling import poll_until
from tests.support.s3 import TEST_CREDENTIALS, S3Store
from tests.support.s3_fault_proxy import FaultPlan, S3FaultProxy
from tiered import rsm
from tiered.api import RemoteLogSegmentState, RemoteStorageException
from tiered.cluster.model import DeleteJob, DeleteJobState
from tiered.rsm import FsspecRemoteStorageManager, S3Credentials, S3ObjectDeleter, layout

pytestmark = pytest.mark.s3

EXECUTOR_CREDENTIALS = S3Credentials("AKIAEXECUTORS", "executors/secret", source="tests")
EVERY_FAULT = {"slow_down_rate": 0.15, "internal_error_rate": 0.05, "reset_rate": 0.1}


def test_copies_under_faults_leave_no_finished_segment_without_objects_nor_orphans(
    tmp_path: Path, s3_store: S3Store, s3_proxy: S3FaultProxy
) -> None:
    config = s3_store.config(s3_proxy.url, **{"remote.storage.retry.max.attempts": "3"})
    broker = Broker(tmp_path, config)
    try:
        tp = broker.partition("faulty", 300)
        log = broker.logs[tp]
        last = [s for s in log.closed_segments() if not s.is_empty][-1].next_offset - 1
        s3_proxy.set_plan(FaultPlan(**EVERY_FAULT, operations=frozenset({"PutObject"})))
        s3_proxy.inject_next("SlowDown", "SlowDown", "SlowDown")  # the first copy gives up
        broker.lead(tp)
        task = broker.rlm.copy_task(tp)
        assert task is not None
        for _ in range(100):  # a run that fails stops at its segment; the next one resumes
            if task.copied_offset is not None and task.copied_offset >= last:
                break
            runs = task.runs
            broker.rlm.trigger_copy(tp)
            poll_until(lambda runs=runs: task.runs > runs, timeout=60, what="a copy run")
        assert task.copied_offset is not None and task.copied_offset >= last
        assert task.failures >= 1 and broker.rlm.metrics.copy_errors["faulty"] >= 1
        assert s3_proxy.injected["reset"] > 0  # uploads stored but never confirmed, too

        listed = list(broker.rlmm.list_remote_log_segments(tp))
        assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in listed)
        stored = s3_store.keys()
        by_segment: dict[str, set[str]] = {}
        for key in stored:
            prefix, _, suffix = key.rpartition(".")
            by_segment.setdefault(prefix, set()).add(suffix)
        # Every object belongs to a finished segment (no orphan of a failed or retried upload),
        # and every finished segment has all its objects.
        assert set(by_segment) == {layout.segment_prefix(m) for m in listed}
        [suffixes] = {frozenset(s) for s in by_segment.values()}
        assert {"log", "index", "timeindex", "epochs"} <= suffixes

        # Remote fetches under faults: the right records or a clean error.
        log.delete_local_segments_up_to(listed[-1].end_offset + 1)
        s3_proxy.set_plan(FaultPlan(**EVERY_FAULT, operations=frozenset({"GetObject"})))
        answered = 0
        for offset in range(0, log.local_log_start_offset, 7):
            try:
                records = decode(broker.rlm.read(tp, offset, 300).records)
            except RemoteStorageException as e:
                assert "attempts" in str(e)
                continue
            first = next(r for r in records if r.offset == offset)
            assert first.value == f"value-{offset}".encode() * 3
            answered += 1
        assert answered > 0 and s3_proxy.injected["SlowDown"] > 0
    finally:
        broker.close()


def test_a_bulk_delete_under_slowdowns_leaves_nothing_below_the_epoch(
    tmp_path: Path, s3_store: S3Store, s3_proxy: S3FaultProxy
) -> None:
    storage = rsm.create(s3_store.config(s3_proxy.url))
    assert isinstance(storage, FsspecRemoteStorageManager)
    remote = Remote(tmp_path, partitions=2, store=s3_store, storage=storage)
    try:
        for p in range(2):
            remote.copy(p, 6, tiered_epoch=0)
        orphan = f"{layout.tiered_epoch_prefix(remote.tps()[0], 0)}/{0:020d}-orphan.log"
        s3_store.write(orphan, b"left by a copy that died before its metadata")
        kept_before = s3_store.keys()
        kept = [remote.copy(p, 2, tiered_epoch=1) for p in range(2)]
        kept_keys = s3_store.keys() - kept_before
        s3_proxy.set_plan(FaultPlan(slow_down_rate=0.2))  # listings and deletes alike

        job = runner_for(remote, GatedDeleter(), Persisted()).run_job(remote.job())

        assert job.state is DeleteJobState.DONE and job.last_error == ""
        assert [p.objects_deleted for p in job.progress] == [6 * 4 + 1, 6 * 4]
        assert s3_store.keys() == kept_keys  # nothing below the epoch, all of the new one
        for p in range(2):
            assert [m.remote_log_segment_id for m in remote.listed(p)] == [
                m.remote_log_segment_id for m in kept[p]
            ]
        assert s3_proxy.injected["SlowDown"] > 0
        assert all(len(r.keys) <= 1000 for r in s3_proxy.delete_requests)
    finally:
        remote.close()


def test_the_controllers_spark_job_reaches_s3_with_the_executors_own_credentials_file(
    tmp_path: Path, s3_store: S3Store, s3_proxy: S3FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing on this machine but the file the job names gives the executors credentials.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    executors_file = write_credentials_file(tmp_path / "executors", EXECUTOR_CREDENTIALS)
    properties = {
        "node.id": "100",
        "metadata.log.dir": str(tmp_path / "metadata"),
        "rlmm.sqlite.path": str(tmp_path / "rlmm.db"),
        "bulk.delete.fast.path.max.objects": "0",  # every delete on Spark
        "spark.master": "local[2]",
        **s3_store.config(s3_proxy.url),
        "remote.storage.s3.executor.credentials.file": str(executors_file),
    }
    config = ControllerConfig.from_properties(properties)
    bulk = wiring.create(config.node_id, config.remote, config.spark)
    assert bulk is not None
    remote: Remote | None = None
    try:
        assert isinstance(bulk.storage, FsspecRemoteStorageManager)
        deleter = bulk.storage.object_deleter()
        assert isinstance(deleter, S3ObjectDeleter)
        assert deleter.settings.endpoint_url == s3_proxy.url
        assert deleter.settings.credentials == TEST_CREDENTIALS
        assert deleter.settings.credentials_file == str(executors_file)
        remote = Remote(tmp_path, partitions=2, store=s3_store, storage=bulk.storage)
        kept_keys = remote.two_epochs(segments=5, kept_segments=2)
        s3_store.credentials_file.unlink()  # the executors read theirs, not the controller's
        s3_proxy.reset_counts()
        s3_proxy.set_plan(FaultPlan(slow_down_rate=0.2))

        job = bulk.runner(Persisted()).run_job(DeleteJob(remote.topic, remote.topic_id, 1, 2))

        assert job.state is DeleteJobState.DONE and job.last_error == ""
        assert bulk.spark.started
        assert s3_store.keys() == kept_keys
        assert s3_proxy.requests["DeleteObjects"] >= 1 and s3_proxy.injected["SlowDown"] > 0
        # The listings are the controller's, the deletes the executors'.
        assert set(s3_proxy.access_key_ids) == {
            TEST_CREDENTIALS.access_key_id,
            EXECUTOR_CREDENTIALS.access_key_id,
        }
    finally:
        if remote is not None:
            remote.close()
        bulk.close()
