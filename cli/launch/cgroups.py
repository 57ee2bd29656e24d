"""Each process of a local cluster in a cgroup of its own, when ``TIERED_CGROUP_ROOT`` names where
(``<root>/<process name>``; its children, Spark's executors say, stay in it).

The network partition tests set it: a socket belongs to the cgroup of the process that made it,
so a firewall rule can drop exactly what one process sends to another, while every process talks
from the same loopback interface. Unset, commands run as they are."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CGROUP_ROOT_ENV", "in_own_cgroup"]

CGROUP_ROOT_ENV = "TIERED_CGROUP_ROOT"


def in_own_cgroup(command: Sequence[str], name: str, root: Path | None = None) -> list[str]:
    """``command``, started in the cgroup ``<root>/<name>`` before it runs (so that every socket
    it opens is that cgroup's), when ``root`` is given or ``TIERED_CGROUP_ROOT`` is set; else
    unchanged."""
    if root is None:
        configured = os.environ.get(CGROUP_ROOT_ENV)
        if not configured:
            return list(command)
        root = Path(configured)
    cgroup = root / name
    cgroup.mkdir(parents=True, exist_ok=True)
    return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup), *command]
