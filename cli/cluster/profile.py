"""A cluster's processes as data: one :class:`~cli.cluster.spec.ProcessSpec` per
process, built from the cluster's layout. ``up`` starts the specs stage by stage (each stage
waited for before the next), ``down`` stops them in :data:`~cli.cluster.spec.STOP_ORDER`,
and ``status`` reports them; a new role is a new spec, not a new code path.

Both profiles run two controllers and the brokers, each with a Prometheus endpoint
(``metrics.port``). The local one shares the host's shortcuts between them: a remote storage
directory, a sqlite RLMM and an embedded KRaft log (or one ZooKeeper server). The distributed one
shares no file: a ZooKeeper ensemble holds the controller store and the RLMM (each under its own
chroot), an S3 endpoint the remote data, and a Spark standalone cluster runs the bulk delete."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import grpc

from cli.cluster import layout as layouts
from cli.cluster import secure, secure_services, services
from cli.cluster.daemons import ClusterFiles
from cli.cluster.layout import Layout
from cli.cluster.spec import BROKER, CONTROLLER, ProcessSpec, broker_name, controller_name
from tiered import source_address
from tiered.admin import AdminClient
from tiered.errors import ErrorCode, TieredError
from tiered.metrics_endpoint import HOST_KEY as METRICS_HOST_KEY

CONTROLLER_NODE_ID_BASE = 1000
DAEMON_STAGE = 3
OVERRIDE_FLAGS = {CONTROLLER: "--controller-config", BROKER: "--broker-config"}


class ControllerProbe:
    """What the controllers say about the cluster, asked at most every ``interval_s`` (several
    specs' ``serving`` share one answer). ``close()`` when done."""

    def __init__(
        self,
        bootstrap: str,
        timeout_s: float = 5.0,
        interval_s: float = 0.2,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._credentials = credentials
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
                self._admin = AdminClient(
                    self._bootstrap, timeout_s=self._timeout_s, credentials=self._credentials
                )
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
    names = [controller_name(i) for i in range(len(layout["controllers"]))]
    return layouts.addresses(layout, names, layout["controllers"])


def cluster_profile(
    files: ClusterFiles, layout: Layout, probe: ControllerProbe
) -> list[ProcessSpec]:
    """Every process of the cluster laid out in ``layout``, in start order."""
    return [
        *services.zookeeper_specs(files, layout),
        *services.s3_specs(files, layout),
        *services.spark_specs(files, layout),
        *_controllers(files, layout, probe),
        *_brokers(files, layout, probe),
    ]


def check_overrides(files: ClusterFiles, layout: Layout) -> None:
    """INVALID_REQUEST if ``--controller-config`` or ``--broker-config`` names a key the
    cluster sets itself (its addresses, ids, paths and links): overrides add settings, they do
    not move a process."""
    own_keys = {
        CONTROLLER: controller_properties(files, layout, 0).keys(),
        BROKER: broker_properties(files, layout, 1).keys(),
    }
    for role, flag in OVERRIDE_FLAGS.items():
        given = layout.get(f"{role}_config", {})
        own = own_keys[role]
        taken = sorted(set(given) & set(own))
        if taken:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"{flag} {taken[0]}: the cluster sets this key itself; valid keys: any but "
                f"{', '.join(sorted(own))}",
            )


def _own_address(layout: Layout, name: str) -> dict[str, str]:
    """With ``--loopback-hosts``, a controller's or broker's metrics endpoint and outgoing
    connections on its own address (its listeners name it too)."""
    host = layouts.own_host(layout, name)
    if host is None:
        return {}
    return {METRICS_HOST_KEY: host, source_address.KEY: host}


# --------------------------------------------------------------------------------- controllers


def _metadata(files: ClusterFiles, layout: Layout) -> dict[str, str]:
    if layout["metadata"] == "kraft":
        return {"metadata.store": "kraft", "metadata.log.dir": str(files.dir / "metadata")}
    return {"metadata.store": "zookeeper", "zookeeper.connect": layout["zookeeper"]}


def controller_properties(files: ClusterFiles, layout: Layout, index: int) -> dict[str, str]:
    """Controller ``index``'s properties, without the operator's overrides."""
    name = controller_name(index)
    remote = services.remote_storage(files, layout, name)
    return {
        "node.id": str(CONTROLLER_NODE_ID_BASE + index),
        "listeners": layouts.address(layouts.host_of(layout, name), layout["controllers"][index]),
        "metrics.port": str(layout["controller_metrics_ports"][index]),
        **_own_address(layout, name),
        **_metadata(files, layout),
        **remote,
        **services.rlmm_properties(files, layout),
        **services.spark_properties(layout, name),
        **secure.process_properties(files, layout, name),
        **secure_services.controller_properties(files, layout),
    }


def _controllers(files: ClusterFiles, layout: Layout, probe: ControllerProbe) -> list[ProcessSpec]:
    specs = []
    for i, port in enumerate(layout["controllers"]):
        name = controller_name(i)
        properties = {
            **controller_properties(files, layout, i),
            **layout.get("controller_config", {}),
        }
        ports = {"client": port, "metrics": layout["controller_metrics_ports"][i]}
        specs.append(_python_daemon(files, layout, name, CONTROLLER, "controller.main",
                                    properties, ports, lambda: probe.live_brokers() is not None))  # fmt: skip
    return specs


# --------------------------------------------------------------------------------- brokers


def broker_properties(files: ClusterFiles, layout: Layout, broker_id: int) -> dict[str, str]:
    """Broker ``broker_id``'s properties (ids from 1), without the operator's overrides."""
    name = broker_name(broker_id)
    port = layout["brokers"][broker_id - 1]
    grpc_address = layouts.address(layouts.host_of(layout, name), port)
    link = (
        {"controller.quorum.bootstrap.servers": bootstrap(layout)}
        if layout["metadata"] == "kraft"
        else {"zookeeper.connect": layout["zookeeper"]}
    )
    remote = services.remote_storage(files, layout, name)
    return {
        "node.id": str(broker_id),
        "listeners": f"GRPC://{grpc_address},{secure.kafka_listeners(layout, broker_id)}",
        "metrics.port": str(layout["broker_metrics_ports"][broker_id - 1]),
        **_own_address(layout, name),
        "log.dirs": str(files.dir / name),
        "remote.log.manager.task.interval.ms": "1000",  # retention within a second
        **remote,
        **services.rlmm_properties(files, layout),
        **link,
        **secure.process_properties(files, layout, name),
        **secure.broker_listener_properties(layout),
    }


def _brokers(files: ClusterFiles, layout: Layout, probe: ControllerProbe) -> list[ProcessSpec]:
    specs = []
    ports = zip(layout["brokers"], layout["kafka_brokers"], layout["broker_metrics_ports"],
                strict=True)  # fmt: skip
    for broker_id, (port, kafka_port, metrics_port) in enumerate(ports, start=1):
        name = broker_name(broker_id)
        properties = {
            **broker_properties(files, layout, broker_id),
            **layout.get("broker_config", {}),
        }

        def live(broker_id: int = broker_id) -> bool:
            return broker_id in (probe.live_brokers() or set())

        specs.append(_python_daemon(files, layout, name, BROKER, "broker.main", properties,
                                    {"client": port, "kafka": kafka_port,
                                     **secure.broker_ports(layout, broker_id),
                                     "metrics": metrics_port}, live))  # fmt: skip
    return specs


def _python_daemon(
    files: ClusterFiles,
    layout: Layout,
    name: str,
    role: str,
    module: str,
    properties: Mapping[str, str],
    ports: dict[str, int],
    serving: Callable[[], bool],
) -> ProcessSpec:
    def launch() -> None:
        services.write_credentials(files, layout, name)
        files.start_python_daemon(name, module, properties)

    return ProcessSpec(
        name,
        role,
        stage=DAEMON_STAGE,
        ports=ports,
        # The config's path names this cluster's directory: a pid reused by a daemon of another
        # cluster (or of this one's previous run) is not taken for this one.
        marker=str(files.config_file(name)),
        launch=launch,
        serving=serving,
        properties=properties,
        host=layouts.own_host(layout, name),
    )
