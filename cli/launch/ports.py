"""Free TCP ports for processes laid out together (a local cluster, a test's servers), and whether
something listens on one."""

from __future__ import annotations

import os
import random
import socket
import threading
from pathlib import Path

__all__ = ["LOOPBACK", "accepts_connections", "free_port"]

LOOPBACK = "127.0.0.1"
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10_000
_ATTEMPTS = 200
PORT_SHARE_ENV = "TIERED_PORT_SHARE"
"""``I/N``: this process and its children take ports from the I-th of N equal shares of the
range only (0-based), so that N test runners side by side never pick the same port."""

_handed_out: set[tuple[str, int]] = set()
_handed_out_lock = threading.Lock()


def _below_ephemeral_range() -> range:
    try:
        first_ephemeral = int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768  # Linux's default range starts there
    ports = range(LOWEST_PORT, max(first_ephemeral, LOWEST_PORT + 1000))
    share = os.environ.get(PORT_SHARE_ENV)
    if not share:
        return ports
    index, count = (int(part) for part in share.split("/"))
    size = len(ports) // count
    return ports[index * size : (index + 1) * size]


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that is free now, that this process has not handed out before,
    and that lies below the kernel's ephemeral range. A port is usually bound some time after it
    is chosen (a daemon starting, the last of a cluster seconds later), and one in the ephemeral
    range may meanwhile become the local port of any outgoing connection; and two daemons laid
    out together must not be given the same one. ``OSError`` if no such port turns up."""
    ports = _below_ephemeral_range()
    for _ in range(_ATTEMPTS):
        port = random.choice(ports)
        with _handed_out_lock:
            if (host, port) in _handed_out:
                continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
        with _handed_out_lock:
            if (host, port) in _handed_out:
                continue
            _handed_out.add((host, port))
        return port
    raise OSError(f"no free port on {host} in {ports} after {_ATTEMPTS} tries")


def accepts_connections(port: int, host: str = LOOPBACK, timeout_s: float = 1.0) -> bool:
    """Whether something listens on ``host:port`` (a TCP connection is accepted)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
