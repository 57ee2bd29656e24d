"""A cluster's process as data (:class:`ProcessSpec`), the roles processes play and their
names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

CONTROLLER, BROKER, ZOOKEEPER, S3, SPARK_MASTER, SPARK_WORKER = (
    "controller", "broker", "zookeeper", "s3", "spark-master", "spark-worker",
)  # fmt: skip
ROLES = (CONTROLLER, BROKER, ZOOKEEPER, S3, SPARK_MASTER, SPARK_WORKER)
STOP_ORDER = (BROKER, CONTROLLER, SPARK_WORKER, SPARK_MASTER, S3, ZOOKEEPER)
"""Brokers leave while the controllers answer, controllers while Spark runs their jobs' last
tasks and ZooKeeper and S3 hold their state."""


def controller_name(index: int) -> str:
    """``controller-0``, ``controller-1``."""
    return f"{CONTROLLER}-{index}"


def broker_name(broker_id: int) -> str:
    """``broker-1``, ... (ids from 1)."""
    return f"{BROKER}-{broker_id}"


def zookeeper_member_name(server_id: int) -> str:
    """An ensemble member: ``zookeeper-1``, ... (server ids from 1)."""
    return f"{ZOOKEEPER}-{server_id}"


def spark_worker_name(index: int) -> str:
    """``spark-worker-1``, ... (from 1)."""
    return f"{SPARK_WORKER}-{index}"


@dataclass(frozen=True)
class ProcessSpec:
    """One process of a cluster. ``launch`` starts it as a daemon (pid file, log) and returns at
    once or once it serves; ``serving`` says whether it serves now; ``marker`` is a piece of its
    command line (a stale pid reused by another program is not taken for it). ``stage``: specs
    of one stage start together, after every earlier stage serves. ``host``: the loopback address
    the process binds and is reached at, in a cluster made with ``--loopback-hosts`` (None
    otherwise: 127.0.0.1, shared)."""

    name: str
    role: str
    stage: int
    ports: Mapping[str, int]
    marker: str
    launch: Callable[[], None]
    serving: Callable[[], bool]
    properties: Mapping[str, str] = field(default_factory=dict)
    host: str | None = None
