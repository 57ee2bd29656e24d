"""What every network-partition scenario starts from: a ``tiered-cluster up --loopback-hosts``
cluster whose processes each live in their own cgroup, inside the test's network namespace, so
that ``tests.support.network.Network`` can cut the links between them; and the cluster's own
view of itself (``tiered-cluster status``)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli.cluster import LocalCluster
from cli.launch.cgroups import CGROUP_ROOT_ENV
from tests.cli.test_cluster_cli import cluster_cli
from tests.support.network import Network


@contextmanager
def partitioned_cluster(data: Path, *up_args: str) -> Iterator[tuple[Network, dict[str, Any]]]:
    """A cluster started by ``tiered-cluster up --data-dir DATA --loopback-hosts *UP_ARGS``,
    every process on its own address and in its own cgroup, and the network that cuts between
    them: ``(network, cluster.json)``. Stopped, and the network closed, on exit."""
    network = Network.create({})
    os.environ[CGROUP_ROOT_ENV] = str(network.cgroup_root)
    local = LocalCluster(data)
    try:
        up = cluster_cli("up", "--data-dir", str(data), "--loopback-hosts", *up_args)
        assert up.returncode == 0, up.stderr
        layout = json.loads((data / "cluster.json").read_text())
        network.hosts.update(layout["hosts"])
        yield network, layout
    finally:
        os.environ.pop(CGROUP_ROOT_ENV, None)
        local.down()
        network.close()


def cluster_status(data: Path) -> tuple[int, dict[str, Any]]:
    """``tiered-cluster status --format json``: its exit status and its JSON."""
    result = cluster_cli("status", "--data-dir", str(data), "--format", "json")
    return result.returncode, json.loads(result.stdout)


def client_address(status: dict[str, Any], name: str) -> str:
    """``host:port`` of the gRPC listener of the process ``name`` (a controller or a broker)."""
    entry = next(p for p in status["processes"] if p["name"] == name)
    return f"{entry['host']}:{entry['ports']['client']}"


def broker_id(name: str) -> int:
    """The id of the broker process ``name`` (``broker-2`` is 2)."""
    return int(name.rpartition("-")[2])


def kafka_address(layout: dict[str, Any], name: str) -> str:
    """``host:port`` of the Kafka listener of the broker ``name``, from ``cluster.json``."""
    return f"{layout['hosts'][name]}:{layout['kafka_brokers'][broker_id(name) - 1]}"
