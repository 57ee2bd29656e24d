"""The address a daemon's outgoing connections come from (``source.address``), chosen once per
process by its ``main``: a host with several addresses (a process per loopback address, as
``tiered-cluster up --loopback-hosts`` runs them) then shows each connection between two processes
as coming from the one that opened it, so that a cut of the packets between two addresses cuts
exactly that pair. Unset, the kernel picks the source (127.0.0.1 for every loopback destination).

It is a fact of the process, not of a component's configuration: the RSM and RLMM settings a
controller ships to Spark executors on other hosts do not carry it.

Only the libraries that let a socket be bound before it connects follow it: the ZooKeeper client
(kazoo, ``tiered.zk_client``) and S3 (aiohttp under s3fs, ``tiered.rsm.s3``). gRPC channels
(brokers to controllers and back, the CLIs) cannot choose their source: grpcio offers no option.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

__all__ = ["KEY", "bound_socket", "choose", "chosen", "connect", "parse"]

KEY = "source.address"

_chosen: str | None = None


def parse(values: Mapping[str, str]) -> str | None:
    """``source.address`` of a daemon's properties (None when unset or empty); ValueError naming
    the key unless it is an IP address."""
    text = values.get(KEY, "").strip()
    if not text:
        return None
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(
            f"{KEY}={text!r} is not valid; expected an IP address of this host, e.g. 127.0.0.11 "
            "(or leave it unset: the kernel picks the source)"
        ) from None


def choose(address: str | None) -> None:
    """Have this process's outgoing connections (where the library allows) come from
    ``address``; None: from whatever the kernel picks."""
    global _chosen  # noqa: PLW0603 - one value per process, by design (module docstring)
    _chosen = address


def chosen() -> str | None:
    return _chosen


def bound_socket(family: int, type_: int, proto: int = 0) -> socket.socket:
    """A new socket, bound to the chosen source address (any port) if there is one. OSError if
    the chosen address is of another family than ``family`` (it cannot reach that destination
    from there) or not an address of this host."""
    sock = socket.socket(family, type_, proto)
    if _chosen is None:
        return sock
    try:
        if family != _family(_chosen):
            raise OSError(f"{KEY}={_chosen} cannot reach a destination of another address family")
        sock.bind((_chosen, 0))
    except BaseException:
        sock.close()
        raise
    return sock


def connect(address: tuple[str, int], timeout: float | None = None) -> socket.socket:
    """``socket.create_connection`` from the chosen source address, if there is one."""
    return socket.create_connection(
        address, timeout, source_address=None if _chosen is None else (_chosen, 0)
    )


def _family(address: str) -> int:
    return socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
