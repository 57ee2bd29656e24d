"""``DIR/cluster.json``: the processes of a local cluster and their ports, chosen on the first
``up`` and kept (a later ``up`` restarts a killed process on the same ports). Its keys are a
contract (docs/kafka-compatibility.md, docs/operations/security.md,
docs/operations/distributed-profile.md): ``kafka_bootstrap_servers``, ``zookeeper``,
``s3_endpoint``, ``spark_master`` and ``spark_master_web``; the metrics ports are
``controller_metrics_ports`` and ``broker_metrics_ports`` (in the order of ``controllers`` and
``brokers``); with ``--loopback-hosts``, ``loopback_hosts`` is true and ``hosts`` maps each
process's name to its own loopback address (127.0.0.11, 127.0.0.12, ... in the order ``status``
lists the processes), which every address above then names."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.cluster.spec import (
    S3,
    SPARK_MASTER,
    ZOOKEEPER,
    broker_name,
    controller_name,
    spark_worker_name,
    zookeeper_member_name,
)
from cli.launch.ports import LOOPBACK, free_port
from tiered.errors import ErrorCode, TieredError

Layout = dict[str, Any]

FILE_NAME = "cluster.json"

LOCAL, DISTRIBUTED = "local", "distributed"
PROFILES = (LOCAL, DISTRIBUTED)
DISTRIBUTED_SPARK_WORKERS = 2
ENSEMBLE_SIZE = 3
CONTROLLERS = 2
FIRST_LOOPBACK_HOST, LAST_LOOPBACK_HOST = 11, 254
"""The last octets of the addresses ``--loopback-hosts`` gives: 127.0.0.11 to 127.0.0.254."""
STORE_CHROOT = "/tiered"
"""The distributed profile's controller store and RLMM each have their own chroot."""
RLMM_CHROOT = "/tiered-rlmm"
S3_BUCKET = "tiered"
S3_PREFIX = "cluster"


@dataclass(frozen=True)
class ClusterRequest:
    """What ``up`` was asked for. ``None``: as the cluster in the directory has it (or the
    default, for a new one)."""

    brokers: int = 3
    profile: str | None = None
    metadata: str | None = None
    zookeeper: str | None = None
    spark_workers: int | None = None
    controller_config: Mapping[str, str] | None = None
    broker_config: Mapping[str, str] | None = None
    secure: bool | None = None
    loopback_hosts: bool | None = None

    @property
    def chosen_profile(self) -> str:
        return self.profile or LOCAL

    @property
    def chosen_metadata(self) -> str:
        if self.metadata is not None:
            return self.metadata
        return "zookeeper" if self.chosen_profile == DISTRIBUTED else "kraft"

    @property
    def chosen_spark_workers(self) -> int:
        if self.spark_workers is None and self.chosen_profile == DISTRIBUTED:
            return DISTRIBUTED_SPARK_WORKERS
        return self.spark_workers or 0

    def process_names(self) -> list[str]:
        """The processes of a new cluster of this request, in the order ``status`` lists them
        (``profile.cluster_profile``'s): ZooKeeper, S3, Spark, controllers, brokers."""
        names = []
        if self.chosen_profile == DISTRIBUTED:
            names += [zookeeper_member_name(i) for i in range(1, ENSEMBLE_SIZE + 1)]
            names.append(S3)
        elif managed_zookeeper(self):
            names.append(ZOOKEEPER)
        if self.chosen_spark_workers:
            names.append(SPARK_MASTER)
            names += [spark_worker_name(i) for i in range(1, self.chosen_spark_workers + 1)]
        names += [controller_name(i) for i in range(CONTROLLERS)]
        names += [broker_name(i) for i in range(1, self.brokers + 1)]
        return names

    def check(self) -> None:
        """INVALID_REQUEST, naming the flags and the valid values, for a request no cluster
        can meet."""
        if self.brokers < 1:
            raise TieredError(ErrorCode.INVALID_REQUEST, "--brokers must be at least 1")
        if self.spark_workers is not None and self.spark_workers < 0:
            raise TieredError(
                ErrorCode.INVALID_REQUEST, "--spark-workers must be 0 or more (0: no Spark cluster)"
            )
        if self.loopback_hosts:
            self._check_loopback_hosts()
        if self.chosen_profile != DISTRIBUTED:
            return
        if self.chosen_metadata != "zookeeper":
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"--metadata {self.chosen_metadata} cannot be used with --profile distributed, "
                "whose controllers keep their metadata in its ZooKeeper ensemble; valid values: "
                "zookeeper (or leave --metadata out)",
            )
        if self.zookeeper is not None:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                "--zookeeper cannot be used with --profile distributed, which runs its own "
                "three-server ZooKeeper ensemble; for an external ZooKeeper use --profile local "
                "--metadata zookeeper --zookeeper HOST:PORT[/chroot]",
            )
        if self.spark_workers == 0:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                "--spark-workers 0 cannot be used with --profile distributed, whose bulk delete "
                f"runs on its Spark cluster; valid values: 1 or more (default "
                f"{DISTRIBUTED_SPARK_WORKERS})",
            )

    def _check_loopback_hosts(self) -> None:
        if self.zookeeper is not None:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                "--loopback-hosts cannot be used with --zookeeper: an external ZooKeeper is not a "
                "process of the cluster and has no loopback address of its own; leave "
                "--zookeeper out (--metadata zookeeper then starts the cluster's own ZooKeeper) "
                "or leave --loopback-hosts out",
            )
        available = LAST_LOOPBACK_HOST - FIRST_LOOPBACK_HOST + 1
        processes = len(self.process_names())
        if processes > available:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"--loopback-hosts gives each process one address of {loopback_host(0)}.."
                f"{loopback_host(available - 1)}: at most {available} processes, and this "
                f"cluster has {processes} (--brokers {self.brokers}, --spark-workers "
                f"{self.chosen_spark_workers})",
            )


def loopback_host(position: int) -> str:
    """The address ``--loopback-hosts`` gives the process at ``position`` (from 0) in the order
    of ``status``."""
    return f"127.0.0.{FIRST_LOOPBACK_HOST + position}"


def host_of(layout: Layout, name: str) -> str:
    """The address process ``name`` binds and is reached at: its own with ``--loopback-hosts``,
    else 127.0.0.1."""
    return own_host(layout, name) or LOOPBACK


def own_host(layout: Layout, name: str) -> str | None:
    """Process ``name``'s own loopback address, None in a cluster without ``--loopback-hosts``
    (its processes share 127.0.0.1)."""
    host = layout.get("hosts", {}).get(name)
    return None if host is None else str(host)


def address(host: str, port: int) -> str:
    return f"{host}:{port}"


def free_address(layout: Layout, name: str) -> str:
    """``HOST:PORT``: a free port on process ``name``'s address."""
    host = host_of(layout, name)
    return address(host, free_port(host))


def managed_zookeeper(request: ClusterRequest) -> bool:
    """Whether ``up`` starts the cluster's ZooKeeper (a server or the ensemble)."""
    return request.chosen_metadata == "zookeeper" and not request.zookeeper


def create(request: ClusterRequest) -> Layout:
    """A new cluster's layout, every port a free one on its process's address."""
    layout: Layout = {
        "profile": request.chosen_profile,
        "metadata": request.chosen_metadata,
        "zookeeper_managed": managed_zookeeper(request),
    }
    if request.loopback_hosts:
        layout["loopback_hosts"] = True
        layout["hosts"] = {
            name: loopback_host(position) for position, name in enumerate(request.process_names())
        }

    def port(name: str) -> int:
        return free_port(host_of(layout, name))

    if request.chosen_profile == DISTRIBUTED:
        layout["zookeeper_ensemble"] = [
            {"client": port(member), "quorum": port(member), "election": port(member)}
            for member in map(zookeeper_member_name, range(1, ENSEMBLE_SIZE + 1))
        ]
        layout["zookeeper"] = zookeeper_hosts(layout) + STORE_CHROOT
        layout["s3_endpoint"] = f"http://{free_address(layout, S3)}"
    else:
        layout["zookeeper"] = (
            free_address(layout, ZOOKEEPER) if layout["zookeeper_managed"] else request.zookeeper
        )
    layout["controllers"] = [port(controller_name(i)) for i in range(CONTROLLERS)]
    layout["brokers"] = [port(broker_name(i)) for i in range(1, request.brokers + 1)]
    add_kafka_listeners(layout)
    add_metrics(layout)
    if request.chosen_spark_workers:
        add_spark(layout, request.chosen_spark_workers)
    for key in ("controller_config", "broker_config"):
        given = getattr(request, key)
        if given:
            layout[key] = dict(given)
    return layout


def load(path: Path) -> Layout | None:
    """The layout at ``path`` (brought up to date: written before brokers had a Kafka listener,
    it gains them), or None if there is none."""
    if not path.exists():
        return None
    layout: Layout = json.loads(path.read_text())
    upgraded = False
    if "kafka_brokers" not in layout:
        add_kafka_listeners(layout)
        upgraded = True
    if "controller_metrics_ports" not in layout:
        add_metrics(layout)
        upgraded = True
    if upgraded:
        save(path, layout)
    return layout


def save(path: Path, layout: Layout) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(layout, indent=1))


def add_kafka_listeners(layout: Layout) -> None:
    """A Kafka listener port per broker, and ``kafka_bootstrap_servers``
    (docs/kafka-compatibility.md: ``HOST:PORT,...`` in broker-id order)."""
    brokers = [broker_name(i) for i in range(1, len(layout["brokers"]) + 1)]
    layout["kafka_brokers"] = [free_port(host_of(layout, name)) for name in brokers]
    layout["kafka_bootstrap_servers"] = addresses(layout, brokers, layout["kafka_brokers"])


def addresses(layout: Layout, names: list[str], ports: list[int]) -> str:
    """``HOST:PORT,...``: each named process's address with its port."""
    return ",".join(
        address(host_of(layout, name), port) for name, port in zip(names, ports, strict=True)
    )


def add_metrics(layout: Layout) -> None:
    """A Prometheus port (``metrics.port``) per controller and per broker."""
    layout["controller_metrics_ports"] = [
        free_port(host_of(layout, controller_name(i))) for i in range(len(layout["controllers"]))
    ]
    layout["broker_metrics_ports"] = [
        free_port(host_of(layout, broker_name(i))) for i in range(1, len(layout["brokers"]) + 1)
    ]


def zookeeper_hosts(layout: Layout) -> str:
    """The ensemble's members as ``H:P,H:P,H:P`` (client ports), without a chroot."""
    members = layout["zookeeper_ensemble"]
    names = [zookeeper_member_name(i) for i in range(1, len(members) + 1)]
    return addresses(layout, names, [member["client"] for member in members])


def remote_storage_root() -> str:
    """The distributed profile's ``remote.storage.root``: a bucket of its S3 endpoint."""
    return f"s3://{S3_BUCKET}/{S3_PREFIX}"


def profile_of(layout: Layout) -> str:
    return str(layout.get("profile", LOCAL))


def add_spark(layout: Layout, workers: int) -> None:
    """A Spark master (``spark_master``, ``spark_master_web``:
    docs/operations/distributed-profile.md) and
    ``workers`` workers, each with its own port and web UI port."""
    layout["spark_master"] = f"spark://{free_address(layout, SPARK_MASTER)}"
    layout["spark_master_web"] = f"http://{free_address(layout, SPARK_MASTER)}"
    hosts = [host_of(layout, spark_worker_name(i)) for i in range(1, workers + 1)]
    layout["spark_workers"] = [
        {"port": free_port(host), "web_port": free_port(host)} for host in hosts
    ]


def spark_workers(layout: Layout) -> int:
    return len(layout.get("spark_workers", []))


def check_request(layout: Layout, request: ClusterRequest) -> None:
    """A cluster's profile, Spark workers, config overrides, security and addresses are chosen on
    its first ``up``: asking for others later is an error (its processes were configured for
    them)."""
    recorded = {
        "--profile": profile_of(layout),
        "--spark-workers": spark_workers(layout),
        "--controller-config": layout.get("controller_config", {}),
        "--broker-config": layout.get("broker_config", {}),
        "--secure": bool(layout.get("secure", False)),
        "--loopback-hosts": bool(layout.get("loopback_hosts", False)),
    }
    requested = {
        "--profile": request.profile,
        "--spark-workers": request.spark_workers,
        "--controller-config": request.controller_config,
        "--broker-config": request.broker_config,
        "--secure": request.secure,
        "--loopback-hosts": request.loopback_hosts,
    }
    for flag, asked in requested.items():
        if asked is not None and asked != recorded[flag]:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"{flag} {_shown(asked)} does not match the cluster in this directory, which "
                f"has {_shown(recorded[flag])}; valid values: {_shown(recorded[flag])} (or leave "
                "the flag out), or run down and remove the directory to lay it out anew",
            )


def _shown(value: object) -> str:
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "none"
    return str(value)


def port_of(url: str) -> int:
    """The port of ``spark://H:P``, ``http://H:P`` or ``H:P[/chroot]``."""
    _, _, rest = url.rpartition("//")
    return int(rest.split("/", 1)[0].rpartition(":")[2])
