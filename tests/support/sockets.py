"""The TCP sockets a process holds, read from ``/proc`` (Linux): where it listens and where its
connections come from and go to. For tests that check which address each process of a cluster
binds (``tiered-cluster up --loopback-hosts``) and which source address the kernel gives its
connections."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

LISTEN = "0A"
ESTABLISHED = "01"


@dataclass(frozen=True)
class TcpSocket:
    local: tuple[str, int]
    remote: tuple[str, int]
    state: str  # /proc/net/tcp's hex state: LISTEN, ESTABLISHED, ...

    @property
    def listening(self) -> bool:
        return self.state == LISTEN


def _address(text: str) -> tuple[str, int]:
    """``/proc/net/tcp{,6}``'s ``HEX:PORT``: the address in 32-bit words of host byte order
    (little-endian here); an IPv4-mapped IPv6 address (a JVM's socket) as the IPv4 one."""
    hex_address, _, hex_port = text.partition(":")
    raw = bytes.fromhex(hex_address)
    packed = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), int(hex_port, 16)


def _sockets_by_inode(pid: int) -> dict[int, TcpSocket]:
    found = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], int(fields[9])
            found[inode] = TcpSocket(_address(local), _address(remote), state)
    return found


def tcp_sockets(pid: int) -> list[TcpSocket]:
    """The TCP sockets process ``pid`` holds open (its file descriptors'), listening or
    connected."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = str(fd.readlink())
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    by_inode = _sockets_by_inode(pid)
    return [by_inode[inode] for inode in sorted(inodes) if inode in by_inode]


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """Every ``(address, port)`` process ``pid`` listens on."""
    return {s.local for s in tcp_sockets(pid) if s.listening}
