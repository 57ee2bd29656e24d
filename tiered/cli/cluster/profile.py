"""A local cluster's processes as data: one :class:`ProcessSpec` per process, built from the
cluster's layout. ``up`` starts the specs stage by stage (each stage waited for before the next),
``down`` stops them in :data:`STOP_ORDER`, and ``status`` reports them; a new role is a new spec,
not a new code path."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tiered import zookeeper
from tiered.admin import AdminClient
from tiered.cli.cluster import layout as layouts
from tiered.cli.cluster.daemons import ClusterFiles
from tiered.cli.cluster.layout import Layout
from tiered.errors import ErrorCode, TieredError
from tiered.ports import LOOPBACK
from tiered.spark_standalone import (
    MASTER_CLASS,
    WORKER_CLASS,
    SparkError,
    SparkMaster,
    SparkWorker,
)
from tiered.zookeeper import ZooKeeperError, ZooKeeperServer

CONTROLLER, BROKER, ZOOKEEPER, S3, SPARK_MASTER, SPARK_WORKER = (
    "controller", "broker", "zookeeper", "s3", "spark-master", "spark-worker",
)  # fmt: skip
ROLES = (CONTROLLER, BROKER, ZOOKEEPER, S3, SPARK_MASTER, SPARK_WORKER)
STOP_ORDER = (BROKER, CONTROLLER, SPARK_WORKER, SPARK_MASTER, S3, ZOOKEEPER)
"""Brokers leave while the controllers answer, controllers while Spark runs their jobs' last
tasks and ZooKeeper holds their state."""

ZOOKEEPER_START_TIMEOUT_S = 30.0
ZOOKEEPER_TICK_MS = 500
ZOOKEEPER_MAX_SESSION_TIMEOUT_MS = 60_000
SPARK_START_TIMEOUT_S = 60.0
SPARK_WORKER_CORES = 1
SPARK_WORKER_MEMORY = "1g"
SPARK_EXECUTOR_MEMORY = "512m"
CONTROLLER_NODE_ID_BASE = 1000


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a cluster. ``launch`` starts it as a daemon (pid file, log) and returns at
    once or once it serves; ``serving`` says whether it serves now; ``marker`` is a piece of its
    command line (a stale pid reused by another program is not taken for it)."""

    name: str
    role: str
    stage: int
    ports: Mapping[str, int]
    marker: str
    launch: Callable[[], None]
    serving: Callable[[], bool]
    properties: Mapping[str, str] = field(default_factory=dict)


class ControllerProbe:
    """What the controllers say about the cluster, asked at most every ``interval_s`` (several
    specs' ``serving`` share one answer). ``close()`` when done."""

    def __init__(self, bootstrap: str, timeout_s: float = 5.0, interval_s: float = 0.2) -> None:
        self._bootstrap = bootstrap
        self._timeout_s = timeout_s
        self._interval_s = interval_s
        self._admin: AdminClient | None = None
        self._asked = float("-inf")
        self._live: set[int] | None = None
        self.last_error: TieredError | None = None

    def live_brokers(self) -> set[int] | None:
        """Ids of the unfenced brokers, None while no controller answers."""
        if time.monotonic() - self._asked >= self._interval_s:
            self._asked = time.monotonic()
            if self._admin is None:
                self._admin = AdminClient(self._bootstrap, timeout_s=self._timeout_s)
            try:
                brokers = self._admin.describe_cluster().brokers
                self._live = {b.broker_id for b in brokers if not b.fenced}
            except TieredError as e:
                self._live, self.last_error = None, e
        return self._live

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def bootstrap(layout: Layout) -> str:
    return ",".join(layouts.address(p) for p in layout["controllers"])


def local_profile(files: ClusterFiles, layout: Layout, probe: ControllerProbe) -> list[ProcessSpec]:
    """Every process of the cluster laid out in ``layout``, in start order."""
    return [
        *_zookeeper(files, layout),
        *_spark(files, layout),
        *_controllers(files, layout, probe),
        *_brokers(files, layout, probe),
    ]


# --------------------------------------------------------------------------------- ZooKeeper


def check_zookeeper_requirements() -> None:
    """Fail, naming what is missing, if this machine cannot run the local ZooKeeper."""
    try:
        zookeeper.check_requirements()
    except ZooKeeperError as e:
        raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e


def managed_zookeeper(files: ClusterFiles, layout: Layout) -> ZooKeeperServer:
    """The managed ZooKeeper as configured in ``layout`` (a daemon: it outlives ``up``)."""
    return ZooKeeperServer(
        files.dir / ZOOKEEPER,
        port=layouts.port_of(layout["zookeeper"]),
        start_timeout=ZOOKEEPER_START_TIMEOUT_S,
        tick_time_ms=ZOOKEEPER_TICK_MS,
        min_session_timeout_ms=2 * ZOOKEEPER_TICK_MS,
        max_session_timeout_ms=ZOOKEEPER_MAX_SESSION_TIMEOUT_MS,
        die_with_parent=False,
        force_sync=True,
        config_path=files.config_file(ZOOKEEPER, "cfg"),
        log_path=files.log_file(ZOOKEEPER),
        pid_file=files.pid_file(ZOOKEEPER),
    )


def _zookeeper(files: ClusterFiles, layout: Layout) -> list[ProcessSpec]:
    if not layout.get("zookeeper_managed"):
        return []
    server = managed_zookeeper(files, layout)

    def launch() -> None:
        check_zookeeper_requirements()
        try:
            server.start()
        except ZooKeeperError as e:
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
        server.detach()

    return [
        ProcessSpec(
            ZOOKEEPER,
            ZOOKEEPER,
            stage=0,
            ports={"client": server.port},
            marker=zookeeper.MAIN_CLASS,
            launch=launch,
            serving=lambda: server.is_serving(timeout=0.5),
        )
    ]


# --------------------------------------------------------------------------------- Spark


def _spark(files: ClusterFiles, layout: Layout) -> list[ProcessSpec]:
    if "spark_master" not in layout:
        return []
    master = SparkMaster(
        port=layouts.port_of(layout["spark_master"]),
        web_port=layouts.port_of(layout["spark_master_web"]),
        log_path=files.log_file(SPARK_MASTER),
        pid_file=files.pid_file(SPARK_MASTER),
        start_timeout=SPARK_START_TIMEOUT_S,
        die_with_parent=False,
    )
    specs = [
        ProcessSpec(
            SPARK_MASTER,
            SPARK_MASTER,
            stage=1,
            ports={"client": master.port, "web": master.web_port},
            marker=MASTER_CLASS,
            launch=lambda: _launch_spark(master),
            serving=master.is_serving,
        )
    ]
    for i, ports in enumerate(layout["spark_workers"], start=1):
        name = f"{SPARK_WORKER}-{i}"
        worker = SparkWorker(
            master_url=master.url,
            master_web_url=master.web_url,
            work_dir=files.dir / name,
            port=ports["port"],
            web_port=ports["web_port"],
            cores=SPARK_WORKER_CORES,
            memory=SPARK_WORKER_MEMORY,
            log_path=files.log_file(name),
            pid_file=files.pid_file(name),
            start_timeout=SPARK_START_TIMEOUT_S,
            die_with_parent=False,
        )
        specs.append(
            ProcessSpec(
                name,
                SPARK_WORKER,
                stage=2,
                ports={"client": worker.port, "web": worker.web_port},
                marker=WORKER_CLASS,
                launch=lambda daemon=worker: _launch_spark(daemon),  # type: ignore[misc]
                serving=worker.is_serving,
            )
        )
    return specs


def _launch_spark(daemon: SparkMaster | SparkWorker) -> None:
    try:
        daemon.launch()
    except SparkError as e:
        raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
    daemon.detach()


def spark_properties(layout: Layout) -> dict[str, str]:
    """The controllers' settings for the bulk delete on the cluster's Spark master: an executor
    of one core per worker, small, and the driver reachable on loopback."""
    if "spark_master" not in layout:
        return {}
    return {
        "spark.master": layout["spark_master"],
        "spark.cores.max": str(SPARK_WORKER_CORES * layouts.spark_workers(layout)),
        "spark.executor.cores": str(SPARK_WORKER_CORES),
        "spark.executor.memory": SPARK_EXECUTOR_MEMORY,
        "spark.driver.host": LOOPBACK,
    }


# --------------------------------------------------------------------------------- controllers


def _common_remote(files: ClusterFiles) -> dict[str, str]:
    return {
        "remote.storage.root": str(files.dir / "remote"),
        "rlmm.sqlite.path": str(files.dir / "rlmm.db"),
    }


def _controllers(files: ClusterFiles, layout: Layout, probe: ControllerProbe) -> list[ProcessSpec]:
    metadata = (
        {"metadata.store": "kraft", "metadata.log.dir": str(files.dir / "metadata")}
        if layout["metadata"] == "kraft"
        else {"metadata.store": "zookeeper", "zookeeper.connect": layout["zookeeper"]}
    )
    specs = []
    for i, port in enumerate(layout["controllers"]):
        name = f"{CONTROLLER}-{i}"
        properties = {
            "node.id": str(CONTROLLER_NODE_ID_BASE + i),
            "listeners": layouts.address(port),
            **metadata,
            **_common_remote(files),
            **spark_properties(layout),
        }
        specs.append(_python_daemon(files, name, CONTROLLER, "controller.main", properties,
                                    {"client": port}, lambda: probe.live_brokers() is not None))  # fmt: skip
    return specs


def _brokers(files: ClusterFiles, layout: Layout, probe: ControllerProbe) -> list[ProcessSpec]:
    link = (
        {"controller.quorum.bootstrap.servers": bootstrap(layout)}
        if layout["metadata"] == "kraft"
        else {"zookeeper.connect": layout["zookeeper"]}
    )
    specs = []
    ports = zip(layout["brokers"], layout["kafka_brokers"], strict=True)
    for broker_id, (port, kafka_port) in enumerate(ports, start=1):
        name = f"{BROKER}-{broker_id}"
        properties = {
            "node.id": str(broker_id),
            "listeners": f"GRPC://{layouts.address(port)},PLAINTEXT://{layouts.address(kafka_port)}",
            "log.dirs": str(files.dir / name),
            "remote.log.manager.task.interval.ms": "1000",  # retention within a second
            **_common_remote(files),
            **link,
        }

        def live(broker_id: int = broker_id) -> bool:
            return broker_id in (probe.live_brokers() or set())

        specs.append(_python_daemon(files, name, BROKER, "broker.main", properties,
                                    {"client": port, "kafka": kafka_port}, live))  # fmt: skip
    return specs


def _python_daemon(
    files: ClusterFiles,
    name: str,
    role: str,
    module: str,
    properties: dict[str, str],
    ports: dict[str, int],
    serving: Callable[[], bool],
) -> ProcessSpec:
    return ProcessSpec(
        name,
        role,
        stage=3,
        ports=ports,
        marker=module,
        launch=lambda: files.start_python_daemon(name, module, properties),
        serving=serving,
        properties=properties,
    )
