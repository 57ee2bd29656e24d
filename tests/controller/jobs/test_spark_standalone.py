"""The bulk delete on a real Spark standalone cluster: a master and two workers started from
pyspark's ``spark-class`` (cli.launch.spark_standalone), the controller's SparkSession on
``spark://``, the delete-job runner with a real RLMM and the fsspec storage plugin on a local
root (the workers share the host, so they reach the files).

The module shares one cluster and one session (they take about 20 s to start). The deleter's
Spark tasks wait at a gate (tests.support.gated_deleter) so that a test acts while the job runs:
no timing decides where a worker dies."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

from cli.launch.spark_standalone import SparkStandaloneCluster, master_state
from controller.jobs.runner import DeleteJobRunner
from controller.jobs.spark_delete import BulkObjectDeleter, SparkSessionProvider
from tests.controller.jobs.test_delete_job_runner import Persisted, Remote
from tests.support import gated_deleter
from tests.support.gated_deleter import GatedStorage, started
from tests.support.polling import poll_until
from tests.support.remote_tree import build_tree, remaining
from tiered.cluster.model import DeleteJob, DeleteJobState

pytestmark = pytest.mark.processes

MAX_SLICE_OBJECTS = 8  # 6 segments x 4 objects x 2 partitions at most, in 6 slices


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    cluster = SparkStandaloneCluster(tmp_path_factory.mktemp("spark"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def provider(standalone: SparkStandaloneCluster) -> Iterator[SparkSessionProvider]:
    cloudpickle.register_pickle_by_value(gated_deleter)  # executors cannot import the tests
    p = SparkSessionProvider(
        standalone.master.url,
        {
            "spark.cores.max": "2",
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
            "spark.driver.host": "127.0.0.1",
        },
    )
    try:
        yield p
    finally:
        p.stop()


def executors(provider: SparkSessionProvider) -> int:
    status: Any = provider.get().sparkContext._jsc.sc().getExecutorMemoryStatus()
    return int(status.size()) - 1  # the driver is listed too


def objects_deleted(job: DeleteJob) -> int:
    return sum(p.objects_deleted for p in job.progress)


class RunningJob:
    """``runner.run_job`` on a thread, as the controller's job thread runs it."""

    def __init__(self, runner: DeleteJobRunner, job: DeleteJob) -> None:
        self.result: DeleteJob | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(runner, job), daemon=True)
        self._thread.start()

    def _run(self, runner: DeleteJobRunner, job: DeleteJob) -> None:
        try:
            self.result = runner.run_job(job)
        except BaseException as e:
            self.error = e

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self) -> DeleteJob:
        poll_until(lambda: not self.running, timeout=180, what="the delete job to end")
        assert self.error is None, self.error
        assert self.result is not None
        return self.result


def job_on_spark(
    tmp_path: Path, provider: SparkSessionProvider
) -> tuple[Remote, Path, DeleteJobRunner, DeleteJob]:
    """A topic whose epoch 0 holds 48 objects in two partitions and epoch 1 8 more, its delete
    job below epoch 1, and a runner whose Spark tasks wait at the returned gate."""
    remote = Remote(tmp_path)
    for partition in (0, 1):
        remote.copy(partition, 6, tiered_epoch=0)
        remote.copy(partition, 1, tiered_epoch=1)
    gate = tmp_path / "gate"
    gate.mkdir()
    engine = BulkObjectDeleter(provider, fast_path_max_objects=10, slices=6)
    runner = DeleteJobRunner(
        remote.controller, GatedStorage(remote.root, gate), engine, Persisted()
    )
    return remote, gate, runner, remote.job(tiered_epoch=1)


def test_progress_shows_each_finished_slice_while_the_spark_job_runs(
    tmp_path: Path, provider: SparkSessionProvider
) -> None:
    remote, gate, runner, job = job_on_spark(tmp_path, provider)
    try:
        kept = remote.objects(1)
        running = RunningJob(runner, job)
        poll_until(lambda: len(started(gate)) >= 1, timeout=120, what="a Spark task at the gate")
        assert objects_deleted(runner.progress(job)) == 0

        (gate / "pass-1").touch()  # one slice, and only it, goes through
        poll_until(
            lambda: objects_deleted(runner.progress(job)) > 0,
            timeout=60,
            what="the first slice's objects in the job's progress",
        )
        assert running.running  # the Spark job is still on: the others wait at the gate
        # One slice of the first Spark job (partition 0's objects, or both partitions' if the
        # second was marked before the job began), and the progress counts just those.
        deleted = objects_deleted(runner.progress(job))
        assert deleted <= MAX_SLICE_OBJECTS
        assert len(remote.objects(0)) == 48 - deleted

        (gate / "open").touch()
        done = running.join()
        assert done.state is DeleteJobState.DONE
        assert objects_deleted(done) == 48
        assert remote.objects(0) == [] and sorted(remote.objects(1)) == sorted(kept)
        assert {m["python"] for m in started(gate)} == {sys.executable}  # the venv's python
    finally:
        remote.close()


def test_a_worker_killed_mid_job_has_its_tasks_rerun_and_nothing_else_touched(
    tmp_path: Path, provider: SparkSessionProvider, standalone: SparkStandaloneCluster
) -> None:
    remote, gate, runner, job = job_on_spark(tmp_path, provider)
    try:
        other = build_tree(Path(remote.root), uuid.uuid4(), topic="other")
        kept = set(remote.objects(1)) | {k for keys in other.values() for k in keys}
        poll_until(lambda: executors(provider) == 2, timeout=120, what="an executor per worker")
        running = RunningJob(runner, job)

        def one_task_per_worker() -> bool:
            dirs = {m["cwd"] for m in started(gate)}
            return len({standalone.worker_running(d).port for d in dirs}) == 2

        poll_until(one_task_per_worker, timeout=120, what="a Spark task on each worker")
        [victim_task, *_] = started(gate)
        victim = standalone.worker_running(victim_task["cwd"])
        victim.kill()  # SIGKILL: the worker, its executor and the executor's Python workers
        (gate / "open").touch()

        done = running.join()
        assert done.state is DeleteJobState.DONE and done.attempts == 1  # Spark recovered
        assert remote.objects(0) == []  # nothing left below the epoch
        assert kept <= remaining(Path(remote.root))  # epoch 1 and the other topic untouched
        # The killed task's slice was run again, on the surviving worker (markers are unordered).
        reruns = [m for m in started(gate) if m["first"] == victim_task["first"]]
        assert len(reruns) == 2, reruns
        ran_on = [standalone.worker_running(m["cwd"]) for m in reruns]
        assert victim in ran_on and any(w is not victim for w in ran_on), reruns

        provider.stop()  # the application ends: the master lists it as completed
        state = master_state(standalone.master.web_url)
        assert state is not None
        assert [(a["name"], a["state"]) for a in state["completedapps"]] == [
            ("tiered-bulk-delete", "FINISHED")
        ]
        assert state["activeapps"] == []
    finally:
        remote.close()
