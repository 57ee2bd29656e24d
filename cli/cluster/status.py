"""``tiered-cluster status``: every process of a local cluster with its role, pid, whether it is
alive, its ports and, in a cluster made with ``--loopback-hosts``, its own address (``host``), and
which controller is active (docs/operations/distributed-profile.md: the JSON shape is a
contract)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from cli.cluster import layout as layouts
from cli.cluster.daemons import ClusterFiles
from cli.cluster.spec import CONTROLLER, ProcessSpec
from cli.launch.ports import LOOPBACK
from tiered.admin import AdminClient
from tiered.errors import TieredError

ASK_TIMEOUT_S = 2.0
"""How long the controllers are asked which of them is active: a dead cluster answers quickly
with its table all the same."""


def process_status(files: ClusterFiles, specs: Sequence[ProcessSpec]) -> list[dict[str, Any]]:
    return [
        {
            "name": spec.name,
            "role": spec.role,
            "pid": files.recorded_pid(spec.name),
            "alive": files.running(spec.name, spec.marker) is not None,
            **({} if spec.host is None else {"host": spec.host}),
            "ports": dict(spec.ports),
        }
        for spec in specs
    ]


def active_controller(
    processes: Sequence[dict[str, Any]], credentials: grpc.ChannelCredentials | None = None
) -> str | None:
    """The name of the active controller, as the live controllers tell (asked with the admin's
    ``credentials`` in a secure cluster); None if none answers."""
    controllers = {
        layouts.address(p.get("host", LOOPBACK), p["ports"]["client"]): p["name"]
        for p in processes
        if p["role"] == CONTROLLER and p["alive"]
    }
    if not controllers:
        return None
    addresses = ",".join(controllers)
    try:
        with AdminClient(
            addresses,
            timeout_s=ASK_TIMEOUT_S,
            discovery_timeout_s=ASK_TIMEOUT_S / 2,
            credentials=credentials,
        ) as admin:
            endpoint = admin.describe_cluster().controller_endpoint
    except TieredError:
        return None
    return controllers.get(endpoint)


def cluster_status(
    files: ClusterFiles,
    specs: Sequence[ProcessSpec],
    credentials: grpc.ChannelCredentials | None = None,
) -> dict[str, Any]:
    processes = process_status(files, specs)
    return {
        "active_controller": active_controller(processes, credentials),
        "processes": processes,
    }


def status_table(status: dict[str, Any]) -> str:
    """The status as an aligned table (a HOST column when the processes have their own
    addresses), then the active controller."""
    hosts = any("host" in p for p in status["processes"])
    rows = [("NAME", "ROLE", "PID", "ALIVE", *(("HOST",) if hosts else ()), "PORTS")]
    for p in status["processes"]:
        ports = " ".join(f"{kind}={port}" for kind, port in p["ports"].items())
        pid = "-" if p["pid"] is None else str(p["pid"])
        host = (p.get("host", "-"),) if hosts else ()
        rows.append((p["name"], p["role"], pid, "yes" if p["alive"] else "NO", *host, ports))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]
    lines.append(f"active controller: {status['active_controller'] or 'none answered'}")
    return "\n".join(line.rstrip() for line in lines)


def all_alive(status: dict[str, Any]) -> bool:
    return all(p["alive"] for p in status["processes"])
