"""The services a cluster's controllers and brokers stand on, as process specs: ZooKeeper (one
server, or a three-server ensemble), the S3 endpoint and a Spark standalone master with its
workers; and the properties that point controllers and brokers at them (remote storage, RLMM,
Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from cli.cluster import layout as layouts
from cli.cluster import secure, secure_services
from cli.cluster.daemons import ClusterFiles
from cli.cluster.layout import Layout
from cli.cluster.spec import (
    S3,
    SPARK_MASTER,
    SPARK_WORKER,
    ZOOKEEPER,
    ProcessSpec,
    spark_worker_name,
    zookeeper_member_name,
)
from cli.launch import zookeeper
from cli.launch.s3_endpoint import (
    ENDPOINT_CREDENTIALS,
    S3Endpoint,
    S3EndpointError,
    write_credentials_file,
)
from cli.launch.s3_endpoint import is_serving as s3_is_serving
from cli.launch.spark_standalone import (
    MASTER_CLASS,
    WORKER_CLASS,
    SparkError,
    SparkMaster,
    SparkWorker,
)
from cli.launch.zookeeper import (
    PeerPorts,
    ServerTls,
    ZooKeeperEnsemble,
    ZooKeeperError,
    ZooKeeperServer,
)
from tiered.errors import ErrorCode, TieredError
from tiered.rsm import ROOT_CONFIG
from tiered.rsm.s3 import CREDENTIALS_FILE_CONFIG, ENDPOINT_URL_CONFIG, REGION_CONFIG

ZOOKEEPER_START_TIMEOUT_S = 30.0
ZOOKEEPER_TICK_MS = 500
ZOOKEEPER_MAX_SESSION_TIMEOUT_MS = 60_000
S3_START_TIMEOUT_S = 60.0
S3_REGION = "us-east-1"
S3_MODULE = "moto.server"
"""The S3 endpoint's command-line marker: ``python -m moto.server``."""
SPARK_START_TIMEOUT_S = 60.0
SPARK_WORKER_CORES = 1
SPARK_WORKER_MEMORY = "1g"
SPARK_EXECUTOR_MEMORY = "512m"
RLMM_BACKEND_CONFIG = "rlmm.backend"
RLMM_ZOOKEEPER_CONFIG = "rlmm.zookeeper.connect"

# --------------------------------------------------------------------------------- ZooKeeper


def check_zookeeper_requirements() -> None:
    """Fail, naming what is missing, if this machine cannot run the local ZooKeeper."""
    try:
        zookeeper.check_requirements()
    except ZooKeeperError as e:
        raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e


class _ManagedOptions(TypedDict):
    start_timeout: float
    tick_time_ms: int
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    die_with_parent: bool
    force_sync: bool


ZOOKEEPER_OPTIONS = _ManagedOptions(
    start_timeout=ZOOKEEPER_START_TIMEOUT_S,
    tick_time_ms=ZOOKEEPER_TICK_MS,
    min_session_timeout_ms=2 * ZOOKEEPER_TICK_MS,
    max_session_timeout_ms=ZOOKEEPER_MAX_SESSION_TIMEOUT_MS,
    die_with_parent=False,  # a daemon: it outlives ``up``
    force_sync=True,
)
"""What the managed ZooKeeper servers share: durable writes and sessions up to a minute."""


def managed_zookeeper(files: ClusterFiles, layout: Layout) -> ZooKeeperServer:
    """The local profile's managed ZooKeeper as configured in ``layout``."""
    return ZooKeeperServer(
        files.dir / ZOOKEEPER,
        port=layouts.port_of(layout["zookeeper"]),
        config_path=files.config_file(ZOOKEEPER, "cfg"),
        log_path=files.log_file(ZOOKEEPER),
        pid_file=files.pid_file(ZOOKEEPER),
        host=layouts.host_of(layout, ZOOKEEPER),
        tls=secure.zookeeper_server_tls(files, layout, ZOOKEEPER),
        **ZOOKEEPER_OPTIONS,
    )


def zookeeper_specs(files: ClusterFiles, layout: Layout) -> list[ProcessSpec]:
    """The managed ZooKeeper: the ensemble's members, a single server, or none (external)."""
    if "zookeeper_ensemble" in layout:
        return _ensemble_specs(files, layout)
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
            marker=_zoo_cfg(files, ZOOKEEPER),
            launch=launch,
            serving=lambda: server.is_serving(timeout=0.5),
            host=layouts.own_host(layout, ZOOKEEPER),
        )
    ]


def ensemble(files: ClusterFiles, layout: Layout) -> ZooKeeperEnsemble:
    """The distributed profile's ensemble as configured in ``layout``: member N has its data in
    ``DIR/zookeeper/server-N``, config ``DIR/config/zookeeper-N.cfg``, output
    ``DIR/logs/zookeeper-N.log`` and pid ``DIR/pids/zookeeper-N.pid``; in a secure cluster,
    TLS only, each member with its own certificate."""
    ports = [PeerPorts(**member) for member in layout["zookeeper_ensemble"]]
    names = [zookeeper_member_name(server_id) for server_id in range(1, len(ports) + 1)]
    return ZooKeeperEnsemble(
        files.dir / ZOOKEEPER,
        size=len(ports),
        ports=ports,
        config_paths=[files.config_file(name, "cfg") for name in names],
        log_paths=[files.log_file(name) for name in names],
        pid_files=[files.pid_file(name) for name in names],
        hosts=[layouts.host_of(layout, name) for name in names],
        tls=_members_tls(files, layout, names),
        **ZOOKEEPER_OPTIONS,
    )


def _members_tls(files: ClusterFiles, layout: Layout, names: list[str]) -> list[ServerTls] | None:
    tls = [secure.zookeeper_server_tls(files, layout, name) for name in names]
    return None if None in tls else [member for member in tls if member is not None]


class _EnsembleLauncher:
    """Starts the ensemble's missing members together on the first member's launch (a member
    alone has no quorum, so it would never serve), and nothing on the others'."""

    def __init__(self, files: ClusterFiles, servers: ZooKeeperEnsemble) -> None:
        self._files = files
        self._ensemble = servers
        self._launched: set[int] = set()

    def launch(self, server_id: int) -> None:
        if server_id in self._launched:
            return
        missing = [
            member.server_id
            for member in self._ensemble.members
            if self._files.running(*_member_files(self._files, member.server_id)) is None
        ]
        check_zookeeper_requirements()
        try:
            self._ensemble.start(missing)
        except ZooKeeperError as e:
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
        finally:
            self._launched.update(missing)
        self._ensemble.detach()


def _zoo_cfg(files: ClusterFiles, name: str) -> str:
    """A ZooKeeper member's config path: its command line's marker, unique to this cluster."""
    return str(files.config_file(name, "cfg"))


def _member_files(files: ClusterFiles, server_id: int) -> tuple[str, str]:
    """An ensemble member's name and marker."""
    name = zookeeper_member_name(server_id)
    return name, _zoo_cfg(files, name)


def _ensemble_specs(files: ClusterFiles, layout: Layout) -> list[ProcessSpec]:
    servers = ensemble(files, layout)
    launcher = _EnsembleLauncher(files, servers)
    return [
        ProcessSpec(
            zookeeper_member_name(member.server_id),
            ZOOKEEPER,
            stage=0,
            ports={
                "client": member.ports.client,
                "quorum": member.ports.quorum,
                "election": member.ports.election,
            },
            marker=_zoo_cfg(files, zookeeper_member_name(member.server_id)),
            launch=lambda server_id=member.server_id: launcher.launch(server_id),  # type: ignore[misc]
            serving=lambda member=member: member.is_serving(timeout=0.5),  # type: ignore[misc]
            host=layouts.own_host(layout, zookeeper_member_name(member.server_id)),
        )
        for member in servers.members
    ]


def rlmm_properties(files: ClusterFiles, layout: Layout) -> dict[str, str]:
    """Where controllers and brokers keep remote segment metadata: ZooKeeper under its own
    chroot in the distributed profile, else the sqlite file the processes of the host share."""
    if "zookeeper_ensemble" in layout:
        return {
            RLMM_BACKEND_CONFIG: "zookeeper",
            RLMM_ZOOKEEPER_CONFIG: layouts.zookeeper_hosts(layout) + layouts.RLMM_CHROOT,
        }
    return {"rlmm.sqlite.path": str(files.dir / "rlmm.db")}


# --------------------------------------------------------------------------------- S3


def s3_endpoint(files: ClusterFiles, layout: Layout) -> S3Endpoint:
    return S3Endpoint(
        files.dir / S3,
        port=layouts.port_of(layout["s3_endpoint"]),
        start_timeout_s=S3_START_TIMEOUT_S,
        die_with_parent=False,
        log_path=files.log_file(S3),
        pid_file=files.pid_file(S3),
        host=layouts.host_of(layout, S3),
        tls=secure_services.endpoint_tls(files, layout),
    )


def s3_specs(files: ClusterFiles, layout: Layout) -> list[ProcessSpec]:
    """The S3 endpoint, with the cluster's bucket created (again after a restart: the endpoint
    keeps its objects in memory)."""
    if "s3_endpoint" not in layout:
        return []
    endpoint = s3_endpoint(files, layout)
    bucket = layouts.S3_BUCKET

    def launch() -> None:
        try:
            endpoint.start()
        except S3EndpointError as e:
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
        try:
            endpoint.create_bucket(bucket)
        except Exception as e:
            endpoint.kill()
            raise TieredError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"cannot create bucket {bucket} on the S3 endpoint {endpoint.url}: {e}",
            ) from e
        endpoint.detach()

    return [
        ProcessSpec(
            S3,
            S3,
            stage=0,
            ports={"client": endpoint.port},
            marker=S3_MODULE,
            launch=launch,
            serving=lambda: s3_is_serving(endpoint.url, timeout_s=0.5, ca_file=endpoint.ca_file),
            host=layouts.own_host(layout, S3),
        )
    ]


def credentials_file(files: ClusterFiles, name: str) -> Path:
    """Process ``name``'s own S3 credentials file, beside its properties (none is shared)."""
    return files.config_file(name, "s3-credentials")


def remote_storage(files: ClusterFiles, layout: Layout, name: str) -> dict[str, str]:
    """Process ``name``'s remote storage settings: the cluster's bucket on the S3 endpoint in
    the distributed profile, else the directory ``DIR/remote``."""
    if "s3_endpoint" not in layout:
        return {ROOT_CONFIG: str(files.dir / "remote")}
    return {
        ROOT_CONFIG: layouts.remote_storage_root(),
        ENDPOINT_URL_CONFIG: layout["s3_endpoint"],
        REGION_CONFIG: S3_REGION,
        CREDENTIALS_FILE_CONFIG: str(credentials_file(files, name)),
        **secure_services.s3_properties(files, layout),
    }


def write_credentials(files: ClusterFiles, layout: Layout, name: str) -> None:
    """Process ``name``'s S3 credentials, before it starts (the endpoint accepts any
    well-formed pair); nothing without an S3 endpoint."""
    if "s3_endpoint" in layout:
        write_credentials_file(credentials_file(files, name), ENDPOINT_CREDENTIALS)


# --------------------------------------------------------------------------------- Spark


def spark_specs(files: ClusterFiles, layout: Layout) -> list[ProcessSpec]:
    if "spark_master" not in layout:
        return []
    conf_dir = secure_services.spark_conf_dir(files, layout)
    master = SparkMaster(
        conf_dir=conf_dir,
        port=layouts.port_of(layout["spark_master"]),
        web_port=layouts.port_of(layout["spark_master_web"]),
        log_path=files.log_file(SPARK_MASTER),
        pid_file=files.pid_file(SPARK_MASTER),
        start_timeout=SPARK_START_TIMEOUT_S,
        die_with_parent=False,
        host=layouts.host_of(layout, SPARK_MASTER),
    )
    specs = [_spark_spec(layout, SPARK_MASTER, SPARK_MASTER, 1, MASTER_CLASS, master)]
    for i, ports in enumerate(layout["spark_workers"], start=1):
        name = spark_worker_name(i)
        worker = SparkWorker(
            conf_dir=conf_dir,
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
            host=layouts.host_of(layout, name),
        )
        specs.append(_spark_spec(layout, name, SPARK_WORKER, 2, WORKER_CLASS, worker))
    return specs


def _spark_spec(
    layout: Layout,
    name: str,
    role: str,
    stage: int,
    marker: str,
    daemon: SparkMaster | SparkWorker,
) -> ProcessSpec:
    def launch() -> None:
        try:
            daemon.launch()
        except SparkError as e:
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
        daemon.detach()

    return ProcessSpec(
        name,
        role,
        stage=stage,
        ports={"client": daemon.port, "web": daemon.web_port},
        marker=marker,
        launch=launch,
        serving=daemon.is_serving,
        host=layouts.own_host(layout, name),
    )


def spark_properties(layout: Layout, name: str) -> dict[str, str]:
    """Controller ``name``'s settings for the bulk delete: on the cluster's Spark master, an
    executor of one core per worker, small, and the driver reachable on the controller's
    address; with ``--loopback-hosts``, its Spark driver on that address in the local profile's
    in-process Spark too."""
    driver = {"spark.driver.host": layouts.host_of(layout, name)}
    if "spark_master" not in layout:
        return driver if layouts.own_host(layout, name) is not None else {}
    return {
        "spark.master": layout["spark_master"],
        "spark.cores.max": str(SPARK_WORKER_CORES * layouts.spark_workers(layout)),
        "spark.executor.cores": str(SPARK_WORKER_CORES),
        "spark.executor.memory": SPARK_EXECUTOR_MEMORY,
        **driver,
    }
