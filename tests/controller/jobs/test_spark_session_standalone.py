"""The controller's SparkSession on a real Spark standalone master (issue 29: Spark off the
critical path): a master and one worker from pyspark's ``spark-class``, an active controller in
this process (a KRaft store) whose bulk delete is wired from its properties as
``tiered-controller`` wires it, with the delete-job runner on a real sqlite RLMM and the fsspec
storage plugin on a local root.

One test walks the story in order, sharing its one cluster and its sessions (each Spark start
takes seconds): the application is on the master's ``/json/`` soon after the controller becomes
active, before any job; its idle executor is given back to the worker after the idle timeout;
the master is killed and started again on the same port, and the application is started again;
a delete job then runs on Spark without waiting for a session; the application ends when the
controller stands down. What it measured is printed (``pytest -s``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.launch.spark_standalone import SparkMaster, SparkStandaloneCluster, master_state
from controller.config import ControllerConfig
from controller.controller import Controller
from controller.jobs import wiring
from controller.metrics import ControllerMetrics
from controller.store.kraft import KRaftMetadataStore
from tests.controller.jobs.test_delete_job_runner import Persisted, Remote
from tests.support.polling import poll_until
from tiered.cluster.model import DeleteJobState

pytestmark = pytest.mark.processes

APP = "tiered-bulk-delete"
IDLE_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    cluster = SparkStandaloneCluster(tmp_path_factory.mktemp("spark"), workers=1)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class Master:
    """The master's ``/json/`` page, read at most every 0.2 s."""

    def __init__(self, cluster: SparkStandaloneCluster) -> None:
        self.cluster = cluster

    def state(self) -> dict[str, Any]:
        time.sleep(0.2)
        return master_state(self.cluster.master.web_url) or {}

    def active_apps(self) -> list[dict[str, Any]]:
        return [a for a in self.state().get("activeapps", []) if a["name"] == APP]

    def cores_used(self) -> int:
        return sum(int(w.get("coresused", 0)) for w in self.state().get("workers", []))

    def restart(self) -> float:
        """SIGKILL, then a new master on the same ports; the seconds the new one took."""
        old = self.cluster.master
        old.kill()
        new = SparkMaster(
            log_path=old.log_path.with_name("master-restarted.log"),
            port=old.port,
            web_port=old.web_port,
        )
        self.cluster.master = new
        began = time.monotonic()
        new.start()
        return time.monotonic() - began


def metric(metrics: ControllerMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(f"kafka_controller_bulkdelete_{name}")


def test_the_application_is_up_before_any_job_and_comes_back_after_a_master_restart(
    tmp_path: Path, standalone: SparkStandaloneCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "controller.jobs")
    master = Master(standalone)
    remote = Remote(tmp_path)
    for partition in (0, 1):
        remote.copy(partition, 6, tiered_epoch=0)
        remote.copy(partition, 1, tiered_epoch=1)
    properties = {
        "node.id": "100",
        "metadata.log.dir": str(tmp_path / "meta"),
        "remote.storage.root": remote.root,
        "rlmm.sqlite.path": str(tmp_path / "rlmm.db"),
        "bulk.delete.fast.path.max.objects": "0",  # every job on Spark
        "bulk.delete.spark.idle.timeout.ms": str(IDLE_TIMEOUT_MS),
        "spark.master": standalone.master.url,
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.driver.host": "127.0.0.1",
    }
    config = ControllerConfig.from_properties(properties)
    metrics = ControllerMetrics("kraft")
    bulk = wiring.create(
        config.node_id, config.remote, config.spark, metrics.objects_deleted, metrics
    )
    assert bulk is not None
    store = KRaftMetadataStore.from_config(config.store)
    controller = Controller(config, store, bulk.runner, metrics, bulk.spark)
    stop = threading.Event()
    leadership = threading.Thread(target=controller.run, args=(stop,), name="controller-main")
    measured: dict[str, float] = {}
    try:
        leadership.start()
        assert controller.wait_active(30)
        active_at = time.monotonic()

        # 1. The application registers in the background, before any job.
        poll_until(master.active_apps, timeout=120, what="the application on the master")
        measured["app on the master after activation (s)"] = time.monotonic() - active_at
        [app] = master.active_apps()
        poll_until(lambda: bulk.spark.started, timeout=60, what="the session's start to end")
        assert bulk.spark.start_seconds is not None
        measured["session start (s)"] = bulk.spark.start_seconds
        assert "Delete job" not in caplog.text  # no job ran
        poll_until(lambda: metric(metrics, "sparksessionup") == 1, timeout=10, what="up 1")

        # 2. Its executor (asked for at the start) goes back to the worker once idle.
        poll_until(lambda: master.cores_used() == 1, timeout=120, what="the idle executor")
        granted_at = time.monotonic()
        poll_until(lambda: master.cores_used() == 0, timeout=60, what="the executor released")
        measured["idle executor released after (s)"] = time.monotonic() - granted_at
        assert [a["id"] for a in master.active_apps()] == [app["id"]]  # the app stays

        # 3. The master restarts (without recovery it forgets the application): a new one.
        killed_at = time.monotonic()
        measured["master restart (s)"] = master.restart()
        poll_until(
            lambda: [a["id"] for a in master.active_apps()] not in ([], [app["id"]]),
            timeout=180,
            what="the application started again on the restarted master",
        )
        measured["application back after the kill (s)"] = time.monotonic() - killed_at
        poll_until(lambda: bulk.spark.started, timeout=60, what="the provider's new session")
        measured["restarted session start (s)"] = bulk.spark.start_seconds or 0.0
        assert metric(metrics, "sparksessionlostpersec_total") == 1
        assert metric(metrics, "sparksessionstartspersec_total") == 2
        assert metric(metrics, "sparksessionup") == 1

        # 4. A delete job runs on Spark and waits for no session.
        poll_until(lambda: master.state().get("aliveworkers") == 1, timeout=120, what="worker")
        caplog.clear()
        began = time.monotonic()
        done = bulk.runner(Persisted()).run_job(remote.job(tiered_epoch=1))
        measured["delete job (s)"] = time.monotonic() - began
        assert done.state is DeleteJobState.DONE
        assert remote.objects(0) == [] and len(remote.objects(1)) == 8
        assert " via Spark (attempt 1)" in caplog.text
        assert "Waited" not in caplog.text  # the session was up
    finally:
        stop.set()
        leadership.join(30)
        controller.close()  # stands down: the session stops

    try:
        poll_until(lambda: not master.active_apps(), timeout=60, what="the application to end")
        poll_until(lambda: metric(metrics, "sparksessionup") == 0, timeout=10, what="up 0")
        print("\nmeasured:", {k: round(v, 1) for k, v in measured.items()})
    finally:
        bulk.close()
        store.close()
        remote.close()
