"""Free TCP ports for processes laid out together (a local cluster, a test's servers), and whether
something listens on one."""

from __future__ import annotations

import socket
import threading

__all__ = ["LOOPBACK", "accepts_connections", "free_port"]

LOOPBACK = "127.0.0.1"
_ATTEMPTS = 100

_handed_out: set[tuple[str, int]] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that is free right now and that this process has not handed out
    before: the kernel may offer a port again as soon as it is closed, and two daemons of one
    cluster laid out together must not be given the same one. Raises ``OSError`` if no such
    port turns up."""
    for _ in range(_ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port: int = sock.getsockname()[1]
        with _handed_out_lock:
            if (host, port) not in _handed_out:
                _handed_out.add((host, port))
                return port
    raise OSError(f"no free port on {host} in {_ATTEMPTS} tries")


def accepts_connections(port: int, host: str = LOOPBACK, timeout_s: float = 1.0) -> bool:
    """Whether something listens on ``host:port`` (a TCP connection is accepted)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
