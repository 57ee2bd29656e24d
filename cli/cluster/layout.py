"""``DIR/cluster.json``: the processes of a local cluster and their ports, chosen on the first
``up`` and kept (a later ``up`` restarts a killed process on the same ports). Its keys are a
contract (docs/kafka-compatibility.md, docs/operations/security.md,
docs/operations/distributed-profile.md): ``kafka_bootstrap_servers``, ``zookeeper``,
``s3_endpoint``, ``spark_master`` and ``spark_master_web``; the metrics ports are
``controller_metrics_ports`` and ``broker_metrics_ports`` (in the order of ``controllers`` and
``brokers``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.launch.ports import LOOPBACK, free_port
from tiered.errors import ErrorCode, TieredError

Layout = dict[str, Any]

FILE_NAME = "cluster.json"

LOCAL, DISTRIBUTED = "local", "distributed"
PROFILES = (LOCAL, DISTRIBUTED)
DISTRIBUTED_SPARK_WORKERS = 2
ENSEMBLE_SIZE = 3
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

    @property
    def chosen_profile(self) -> str:
        return self.profile or LOCAL

    @property
    def chosen_metadata(self) -> str:
        if self.metadata is not None:
            return self.metadata
        return "zookeeper" if self.chosen_profile == DISTRIBUTED else "kraft"

    def check(self) -> None:
        """INVALID_REQUEST, naming the flags and the valid values, for a request no cluster
        can meet."""
        if self.brokers < 1:
            raise TieredError(ErrorCode.INVALID_REQUEST, "--brokers must be at least 1")
        if self.spark_workers is not None and self.spark_workers < 0:
            raise TieredError(
                ErrorCode.INVALID_REQUEST, "--spark-workers must be 0 or more (0: no Spark cluster)"
            )
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


def address(port: int) -> str:
    return f"{LOOPBACK}:{port}"


def managed_zookeeper(request: ClusterRequest) -> bool:
    """Whether ``up`` starts the cluster's ZooKeeper (a server or the ensemble)."""
    return request.chosen_metadata == "zookeeper" and not request.zookeeper


def create(request: ClusterRequest) -> Layout:
    """A new cluster's layout, every port a free one."""
    distributed = request.chosen_profile == DISTRIBUTED
    layout: Layout = {
        "profile": request.chosen_profile,
        "metadata": request.chosen_metadata,
        "zookeeper_managed": managed_zookeeper(request),
    }
    if distributed:
        layout["zookeeper_ensemble"] = [
            {"client": free_port(), "quorum": free_port(), "election": free_port()}
            for _ in range(ENSEMBLE_SIZE)
        ]
        layout["zookeeper"] = zookeeper_hosts(layout) + STORE_CHROOT
        layout["s3_endpoint"] = f"http://{address(free_port())}"
    else:
        layout["zookeeper"] = (
            address(free_port()) if layout["zookeeper_managed"] else request.zookeeper
        )
    layout["controllers"] = [free_port(), free_port()]
    layout["brokers"] = [free_port() for _ in range(request.brokers)]
    add_kafka_listeners(layout)
    add_metrics(layout)
    spark_workers = request.spark_workers
    if spark_workers is None and distributed:
        spark_workers = DISTRIBUTED_SPARK_WORKERS
    if spark_workers:
        add_spark(layout, spark_workers)
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
    layout["kafka_brokers"] = [free_port() for _ in layout["brokers"]]
    layout["kafka_bootstrap_servers"] = ",".join(address(p) for p in layout["kafka_brokers"])


def add_metrics(layout: Layout) -> None:
    """A Prometheus port (``metrics.port``) per controller and per broker."""
    layout["controller_metrics_ports"] = [free_port() for _ in layout["controllers"]]
    layout["broker_metrics_ports"] = [free_port() for _ in layout["brokers"]]


def zookeeper_hosts(layout: Layout) -> str:
    """The ensemble's members as ``H:P,H:P,H:P`` (client ports), without a chroot."""
    return ",".join(address(member["client"]) for member in layout["zookeeper_ensemble"])


def remote_storage_root() -> str:
    """The distributed profile's ``remote.storage.root``: a bucket of its S3 endpoint."""
    return f"s3://{S3_BUCKET}/{S3_PREFIX}"


def profile_of(layout: Layout) -> str:
    return str(layout.get("profile", LOCAL))


def add_spark(layout: Layout, workers: int) -> None:
    """A Spark master (``spark_master``, ``spark_master_web``:
    docs/operations/distributed-profile.md) and
    ``workers`` workers, each with its own port and web UI port."""
    layout["spark_master"] = f"spark://{address(free_port())}"
    layout["spark_master_web"] = f"http://{address(free_port())}"
    layout["spark_workers"] = [
        {"port": free_port(), "web_port": free_port()} for _ in range(workers)
    ]


def spark_workers(layout: Layout) -> int:
    return len(layout.get("spark_workers", []))


def check_request(layout: Layout, request: ClusterRequest) -> None:
    """A cluster's profile, Spark workers, config overrides and security are chosen on its first ``up``:
    asking for others later is an error (its processes were configured for them)."""
    recorded = {
        "--profile": profile_of(layout),
        "--spark-workers": spark_workers(layout),
        "--controller-config": layout.get("controller_config", {}),
        "--broker-config": layout.get("broker_config", {}),
        "--secure": bool(layout.get("secure", False)),
    }
    requested = {
        "--profile": request.profile,
        "--spark-workers": request.spark_workers,
        "--controller-config": request.controller_config,
        "--broker-config": request.broker_config,
        "--secure": request.secure,
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
