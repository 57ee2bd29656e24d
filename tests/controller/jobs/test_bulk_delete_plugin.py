"""The bulk delete job goes through the configured storage plugin: a RemoteStorageManager named by
``remote.log.storage.manager.class.name`` that keeps objects its own way
(tests/support/flat_rsm.py), the controller's config and job wiring as tiered-controller builds
them, a real sqlite RLMM, and the real job on its fast path and on Spark (local mode, one
session for the module)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.config import ControllerConfig
from controller.jobs import wiring
from tests.rlmm_support import COPY_SEGMENT_FINISHED, segment, update_of
from tests.support import flat_rsm
from tests.support.polling import poll_until
from tiered import rlmm
from tiered.api import LogSegmentData, RemoteLogSegmentMetadata, TopicIdPartition
from tiered.cluster.model import DeleteJob, DeleteJobState
from tiered.rlmm.manager import StoreRemoteLogMetadataManager

pytestmark = pytest.mark.processes

FAST_PATH_MAX = 40
OBJECTS_PER_SEGMENT = 4  # log, offset index, time index, leader epochs


def controller_properties(workdir: Path, plugin: str) -> dict[str, str]:
    """A controller's .properties with the brokers' remote storage and RLMM settings."""
    return {
        "node.id": "100",
        "metadata.log.dir": str(workdir / "metadata"),
        "rlmm.sqlite.path": str(workdir / "rlmm.db"),
        "remote.log.storage.manager.class.name": f"tests.support.flat_rsm.{plugin}",
        f"rsm.config.{flat_rsm.DIR_CONFIG}": str(workdir / "flat"),
        "bulk.delete.fast.path.max.objects": str(FAST_PATH_MAX),
        "spark.master": "local[2]",
    }


def bulk_delete_of(properties: dict[str, str]) -> wiring.BulkDelete:
    config = ControllerConfig.from_properties(properties)
    bulk = wiring.create(config.node_id, config.remote, config.spark)
    assert bulk is not None
    return bulk


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugin")


@pytest.fixture(scope="module")
def bulk(workdir: Path) -> Iterator[wiring.BulkDelete]:
    """One controller's bulk delete machinery (and so one Spark session) for the module."""
    b = bulk_delete_of(controller_properties(workdir, "FlatRsm"))
    try:
        yield b
    finally:
        b.close()


class Topic:
    """A topic whose segments a broker copied through the plugin and recorded in the RLMM."""

    def __init__(self, workdir: Path, storage: flat_rsm.CopyOnlyRsm, partitions: int) -> None:
        self.workdir, self.storage = workdir, storage
        self.name, self.topic_id = f"t{uuid.uuid4().hex[:8]}", uuid.uuid4()
        self.tps = [TopicIdPartition(self.topic_id, self.name, p) for p in range(partitions)]
        self.broker = rlmm.create({"rlmm.sqlite.path": str(workdir / "rlmm.db"), "broker.id": "0"})
        self.broker.on_partition_leadership_changes(set(self.tps), set())
        self.segments: dict[int, list[RemoteLogSegmentMetadata]] = {0: [], 1: []}
        data = workdir / "segment-data"
        data.mkdir(exist_ok=True)
        for name in ("log", "index", "timeindex"):
            (data / name).write_bytes(name.encode() * 10)
        self.data = LogSegmentData(
            str(data / "log"), str(data / "index"), str(data / "timeindex"), b"0 0\n"
        )

    def copy(self, segments_per_partition: int, tiered_epoch: int) -> None:
        for tp in self.tps:
            for n in range(segments_per_partition):
                start = 1000 * tiered_epoch + 10 * n
                m = segment(tp, {0: start}, start, start + 9, tiered_epoch=tiered_epoch)
                self.broker.add_remote_log_segment_metadata(m)
                self.storage.copy_log_segment_data(m, self.data)
                self.broker.update_remote_log_segment_metadata(update_of(m, COPY_SEGMENT_FINISHED))
                self.segments[tiered_epoch].append(m)

    def objects(self, tiered_epoch: int) -> set[str]:
        """The plugin's files of this topic's segments of ``tiered_epoch``."""
        return {
            name
            for name in (p.name for p in self.storage.objects.iterdir())
            if name.startswith(f"{self.topic_id}.") and f".e{tiered_epoch}." in name
        }

    def expected_objects(self, tiered_epoch: int) -> set[str]:
        return {
            self.storage.name_of(m, suffix)
            for m in self.segments[tiered_epoch]
            for suffix in ("log", "index", "timeindex", "epochs")
        }

    def listed_segments(self, tp: TopicIdPartition) -> set[uuid.UUID]:
        return {m.remote_log_segment_id.id for m in self.broker.list_remote_log_segments(tp)}

    def job(self) -> DeleteJob:
        return DeleteJob(self.name, self.topic_id, 1, len(self.tps))

    def close(self) -> None:
        self.broker.close()


def calls_since(workdir: Path, before: int) -> list[list[str]]:
    return flat_rsm.recorded_calls(workdir / "flat")[before:]


def run_and_check(bulk: wiring.BulkDelete, workdir: Path, segments: int) -> list[list[str]]:
    """Runs a job below tiered epoch 1 on a 2-partition topic with ``segments`` segments of
    epoch 0 and 2 of epoch 1 per partition; checks what only the plugin could have done and
    returns the delete calls the plugin recorded."""
    assert isinstance(bulk.storage, flat_rsm.FlatRsm)
    topic = Topic(workdir, bulk.storage, partitions=2)
    try:
        topic.copy(segments, tiered_epoch=0)
        topic.copy(2, tiered_epoch=1)
        doomed, kept = topic.expected_objects(0), topic.expected_objects(1)
        assert topic.objects(0) == doomed and topic.objects(1) == kept
        before = len(flat_rsm.recorded_calls(workdir / "flat"))
        persisted: list[DeleteJob] = []

        job = bulk.runner(persisted.append).run_job(topic.job())

        assert job.state is DeleteJobState.DONE and job.last_error == ""
        assert [p.objects_deleted for p in job.progress] == [len(doomed) // 2] * 2
        assert [p.segments_deleted for p in job.progress] == [segments] * 2
        assert topic.objects(0) == set()  # below the epoch: gone from the plugin's store
        assert topic.objects(1) == kept  # at the epoch: untouched
        for tp in topic.tps:
            assert topic.listed_segments(tp) == {
                m.remote_log_segment_id.id for m in topic.segments[1] if m.topic_id_partition == tp
            }
        calls = calls_since(workdir, before)
        lists = sorted(c[:3] for c in calls if c[0] == "list")
        assert lists == [["list", f"{tp.topic_id}-{tp.partition}", "1"] for tp in topic.tps]
        deletes = [c for c in calls if c[0] == "delete"]
        assert sum(int(c[1]) for c in deletes) == len(doomed)
        return deletes
    finally:
        topic.close()


def test_the_fast_path_deletes_through_the_plugin_in_the_controller(
    bulk: wiring.BulkDelete, workdir: Path
) -> None:
    segments = 3
    assert 2 * segments * OBJECTS_PER_SEGMENT <= FAST_PATH_MAX
    deletes = run_and_check(bulk, workdir, segments)
    assert deletes and {c[2] for c in deletes} == {str(os.getpid())}  # in this process


def test_the_spark_path_deletes_through_the_plugin_on_executors(
    bulk: wiring.BulkDelete, workdir: Path
) -> None:
    """The job, not a partition, is larger than the fast path: the engine is the job's."""
    segments = 6
    assert segments * OBJECTS_PER_SEGMENT <= FAST_PATH_MAX < 2 * segments * OBJECTS_PER_SEGMENT
    deletes = run_and_check(bulk, workdir, segments)
    assert bulk.spark.started
    assert deletes and all(c[2] != str(os.getpid()) for c in deletes)  # on Spark's workers


def test_a_plugin_without_the_capability_fails_the_job_and_says_why(tmp_path: Path) -> None:
    bulk = bulk_delete_of(controller_properties(tmp_path, "CopyOnlyRsm"))
    assert type(bulk.storage) is flat_rsm.CopyOnlyRsm
    topic = Topic(tmp_path, bulk.storage, partitions=1)
    persisted: list[DeleteJob] = []
    runner = bulk.runner(persisted.append)
    try:
        topic.copy(2, tiered_epoch=0)
        runner.start([topic.job()])
        poll_until(
            lambda: any(j.last_error for j in persisted),
            timeout=30,
            what="the failure of the delete job to be persisted",
        )
        runner.stop()
        assert {j.last_error for j in persisted if j.last_error} == {
            "BulkDeleteUnsupportedError: the RemoteStorageManager "
            "tests.support.flat_rsm.CopyOnlyRsm does not implement "
            "tiered.api.RemoteStorageBulkDeleter (list_objects_below_epoch, object_deleter): "
            "the delete policy can not delete its remote data"
        }
        assert persisted[-1].state is DeleteJobState.RUNNING  # to be retried, never DONE
        assert all(j.state is not DeleteJobState.DONE for j in persisted)
        assert topic.objects(0) == topic.expected_objects(0)  # nothing deleted
        tp = topic.tps[0]
        assert isinstance(topic.broker, StoreRemoteLogMetadataManager)
        assert topic.broker.remote_partition_delete_state(tp) is None  # never marked
        assert topic.listed_segments(tp) == {m.remote_log_segment_id.id for m in topic.segments[0]}
    finally:
        runner.stop()
        topic.close()
        bulk.close()
