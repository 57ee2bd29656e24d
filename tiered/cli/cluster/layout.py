"""``DIR/cluster.json``: the processes of a local cluster and their ports, chosen on the first
``up`` and kept (a later ``up`` restarts a killed process on the same ports). Its keys are a
contract (DESIGN.md sections 10 to 12): ``kafka_bootstrap_servers``, ``zookeeper``,
``spark_master`` and ``spark_master_web``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tiered.errors import ErrorCode, TieredError
from tiered.ports import LOOPBACK, free_port

Layout = dict[str, Any]

FILE_NAME = "cluster.json"


def address(port: int) -> str:
    return f"{LOOPBACK}:{port}"


def create(
    brokers: int, metadata: str, zookeeper: str | None, spark_workers: int, *, managed_zk: bool
) -> Layout:
    """A new cluster's layout, every port a free one."""
    layout: Layout = {
        "metadata": metadata,
        "zookeeper": address(free_port()) if managed_zk else zookeeper,
        "zookeeper_managed": managed_zk,
        "controllers": [free_port(), free_port()],
        "brokers": [free_port() for _ in range(brokers)],
    }
    add_kafka_listeners(layout)
    if spark_workers:
        add_spark(layout, spark_workers)
    return layout


def load(path: Path) -> Layout | None:
    """The layout at ``path`` (brought up to date: written before brokers had a Kafka listener,
    it gains them), or None if there is none."""
    if not path.exists():
        return None
    layout: Layout = json.loads(path.read_text())
    if "kafka_brokers" not in layout:
        add_kafka_listeners(layout)
        save(path, layout)
    return layout


def save(path: Path, layout: Layout) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(layout, indent=1))


def add_kafka_listeners(layout: Layout) -> None:
    """A Kafka listener port per broker, and ``kafka_bootstrap_servers`` (DESIGN.md section
    10: ``HOST:PORT,...`` in broker-id order)."""
    layout["kafka_brokers"] = [free_port() for _ in layout["brokers"]]
    layout["kafka_bootstrap_servers"] = ",".join(address(p) for p in layout["kafka_brokers"])


def add_spark(layout: Layout, workers: int) -> None:
    """A Spark master (``spark_master``, ``spark_master_web``: DESIGN.md section 12) and
    ``workers`` workers, each with its own port and web UI port."""
    layout["spark_master"] = f"spark://{address(free_port())}"
    layout["spark_master_web"] = f"http://{address(free_port())}"
    layout["spark_workers"] = [
        {"port": free_port(), "web_port": free_port()} for _ in range(workers)
    ]


def spark_workers(layout: Layout) -> int:
    return len(layout.get("spark_workers", []))


def check_spark_workers(layout: Layout, requested: int | None) -> None:
    """A cluster's Spark workers are chosen on its first ``up``: asking another count later is an
    error (its controllers were configured for that cluster)."""
    if requested is not None and requested != spark_workers(layout):
        raise TieredError(
            ErrorCode.INVALID_REQUEST,
            f"--spark-workers {requested} does not match the cluster in this directory, which "
            f"has {spark_workers(layout)} Spark workers; valid values: {spark_workers(layout)} "
            "(or leave the flag out), or run down and remove the directory to lay it out anew",
        )


def port_of(url: str) -> int:
    """The port of ``spark://H:P``, ``http://H:P`` or ``H:P[/chroot]``."""
    _, _, rest = url.rpartition("//")
    return int(rest.split("/", 1)[0].rpartition(":")[2])
