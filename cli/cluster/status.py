"""``tiered-cluster status``: every process of a local cluster with its role, pid, whether it is
alive, its ports and, in a cluster made with ``--loopback-hosts``, its own address (``host``),
which controller is active, and whether it reaches each broker
(docs/operations/distributed-profile.md: the JSON shape is a contract)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from cli.cluster import layout as layouts
from cli.cluster.daemons import ClusterFiles
from cli.cluster.spec import BROKER, CONTROLLER, ProcessSpec
from cli.launch.ports import LOOPBACK
from tiered.admin import AdminClient, ClusterDescription
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


def describe_cluster(
    processes: Sequence[dict[str, Any]], credentials: grpc.ChannelCredentials | None = None
) -> ClusterDescription | None:
    """The cluster as the active controller describes it, asked of the live controllers (with the
    admin's ``credentials`` in a secure cluster); None if none answers."""
    addresses = [
        layouts.address(p.get("host", LOOPBACK), p["ports"]["client"])
        for p in processes
        if p["role"] == CONTROLLER and p["alive"]
    ]
    if not addresses:
        return None
    try:
        with AdminClient(
            ",".join(addresses),
            timeout_s=ASK_TIMEOUT_S,
            discovery_timeout_s=ASK_TIMEOUT_S / 2,
            credentials=credentials,
        ) as admin:
            return admin.describe_cluster()
    except TieredError:
        return None


def active_controller(
    processes: Sequence[dict[str, Any]], cluster: ClusterDescription | None
) -> str | None:
    """The name of the live controller that described ``cluster`` (None if none did)."""
    if cluster is None:
        return None
    controllers = {
        layouts.address(p.get("host", LOOPBACK), p["ports"]["client"]): p["name"]
        for p in processes
        if p["role"] == CONTROLLER and p["alive"]
    }
    return controllers.get(cluster.controller_endpoint)


def add_reachability(
    processes: Sequence[dict[str, Any]],
    broker_ids: Mapping[str, int],
    cluster: ClusterDescription | None,
) -> None:
    """Gives each broker's entry (``broker_ids``: its name -> broker id) ``reachable`` and
    ``last_reached_ms`` as the active controller sees it: a broker it has not reached within its
    ``controller.request.timeout.ms`` is unreachable (what it owes waits), and so is one not
    registered with it (``last_reached_ms`` null). Both null when no controller answered."""
    described = {} if cluster is None else {b.broker_id: b for b in cluster.brokers}
    for p in processes:
        if p["name"] not in broker_ids:
            continue
        broker = described.get(broker_ids[p["name"]])
        if cluster is None:
            p["reachable"], p["last_reached_ms"] = None, None
        elif broker is None:
            p["reachable"], p["last_reached_ms"] = False, None
        else:
            p["reachable"], p["last_reached_ms"] = broker.reachable, broker.last_reached_ms


def status_of(
    processes: list[dict[str, Any]],
    broker_ids: Mapping[str, int],
    cluster: ClusterDescription | None,
) -> dict[str, Any]:
    """The status document, from the processes and the active controller's description."""
    add_reachability(processes, broker_ids, cluster)
    return {"active_controller": active_controller(processes, cluster), "processes": processes}


def cluster_status(
    files: ClusterFiles,
    specs: Sequence[ProcessSpec],
    credentials: grpc.ChannelCredentials | None = None,
) -> dict[str, Any]:
    processes = process_status(files, specs)
    broker_ids = {s.name: int(s.properties["node.id"]) for s in specs if s.role == BROKER}
    return status_of(processes, broker_ids, describe_cluster(processes, credentials))


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
    lines.extend(_unreachable_line(p) for p in status["processes"] if p.get("reachable") is False)
    return "\n".join(line.rstrip() for line in lines)


def _unreachable_line(process: dict[str, Any]) -> str:
    since_ms = process["last_reached_ms"]
    if since_ms is None:
        return f"unreachable: {process['name']} is not registered with the active controller"
    return (
        f"unreachable: {process['name']}, last reached by the active controller "
        f"{since_ms / 1000:.1f}s ago"
    )


def all_alive(status: dict[str, Any]) -> bool:
    return all(p["alive"] for p in status["processes"])


def all_reachable(status: dict[str, Any]) -> bool:
    """No broker the active controller finds unreachable (unknown, with no controller
    answering, is not unreachable)."""
    return not any(p.get("reachable") is False for p in status["processes"])
