"""What every network-partition scenario starts from: a ``tiered-cluster up --loopback-hosts``
cluster whose processes each live in their own cgroup, inside the test's network namespace, so
that ``tests.support.network.Network`` can cut the links between them; and the cluster's own
view of itself (``tiered-cluster status``)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from cli.cluster import LocalCluster
from cli.launch.cgroups import CGROUP_ROOT_ENV
from tests.cli.test_cluster_cli import cluster_cli
from tests.support.network import Network

UP_TIMEOUT_S = 300.0


@contextmanager
def partitioned_cluster(
    data: Path, *up_args: str, environment: Mapping[str, str] | None = None
) -> Iterator[tuple[Network, dict[str, Any]]]:
    """A cluster started by ``tiered-cluster up --data-dir DATA --loopback-hosts *UP_ARGS``,
    every process on its own address and in its own cgroup, and the network that cuts between
    them: ``(network, cluster.json)``. ``environment`` is added to every process's (e.g.
    ``TIERED_FAILPOINTS``). Stopped, and the network closed, on exit."""
    network = Network.create({})
    extra = {CGROUP_ROOT_ENV: str(network.cgroup_root), **(environment or {})}
    os.environ.update(extra)
    local = LocalCluster(data)
    try:
        # The distributed profile starts a dozen JVMs and daemons one stage after another.
        up = cluster_cli(
            "up", "--data-dir", str(data), "--loopback-hosts", *up_args, timeout_s=UP_TIMEOUT_S
        )
        assert up.returncode == 0, up.stderr
        layout = json.loads((data / "cluster.json").read_text())
        network.hosts.update(layout["hosts"])
        yield network, layout
    finally:
        for name in extra:
            os.environ.pop(name, None)
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


LOG_TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f"  # tiered.daemon_logging's asctime


def log_matches(data: Path, name: str, pattern: str) -> list[tuple[datetime, re.Match[str]]]:
    """Each line of the process ``name``'s log (``DATA/logs/NAME.log``) that ``pattern``
    matches, with the time it was logged, in order."""
    found: list[tuple[datetime, re.Match[str]]] = []
    for line in (data / "logs" / f"{name}.log").read_text(errors="replace").splitlines():
        match = re.search(pattern, line)
        if match is not None:
            found.append((datetime.strptime(line[:23], LOG_TIME_FORMAT), match))
    return found


def kafka_address(layout: dict[str, Any], name: str) -> str:
    """``host:port`` of the Kafka listener of the broker ``name``, from ``cluster.json``."""
    return f"{layout['hosts'][name]}:{layout['kafka_brokers'][broker_id(name) - 1]}"
