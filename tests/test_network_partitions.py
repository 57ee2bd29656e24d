"""The partition harness itself (``tests.support.network``), on two small processes in the test's
own network namespace: a cut stops one process reaching the other (new connections and one made
before the cut), both ways when asked, leaves every other pair alone, and heals; a client without
an address of its own (``Network.spawn``) is cut from one process both ways, and from nothing
else."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launch.cgroups import CGROUP_ROOT_ENV, in_own_cgroup
from tests.support.network import Network
from tests.support.polling import poll_until

pytestmark = [pytest.mark.netns, pytest.mark.timeout(600)]

HOSTS = {"a": "127.0.0.11", "b": "127.0.0.12", "c": "127.0.0.13"}
PORT = 7070

# Serves on its host: answers "pong" to every line, and on "call HOST" calls that host's server
# and answers "ok" or "failed".
_PEER = r"""
import socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
kept = {}
def call(target):
    try:
        c = kept.get(target)
        if c is None:
            c = kept[target] = socket.create_connection((target, port), timeout=1.0)
        c.sendall(b"ping\n")
        return c.recv(16).startswith(b"pong")
    except OSError:
        kept.pop(target, None)
        return False
def serve(conn):
    for line in conn.makefile():
        if line.startswith("call "):
            conn.sendall(b"ok\n" if call(line.split()[1]) else b"failed\n")
        else:
            conn.sendall(b"pong\n")
server = socket.create_server((host, port))
print("serving", flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


# A client without an address of its own: keeps one connection to the host named first, and for
# each line on stdin pings it there and on a new connection to the host named second, answering
# "HOST ok|failed" for each.
_CLIENT = r"""
import socket, sys
kept_host, other_host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
kept = None
def ping(conn):
    conn.sendall(b"ping\n")
    return conn.recv(16).startswith(b"pong")
for _ in sys.stdin:
    try:
        if kept is None:
            kept = socket.create_connection((kept_host, port), timeout=1.0)
        first = ping(kept)
    except OSError:
        kept, first = None, False
    try:
        with socket.create_connection((other_host, port), timeout=1.0) as conn:
            second = ping(conn)
    except OSError:
        second = False
    print(kept_host, "ok" if first else "failed", other_host, "ok" if second else "failed",
          flush=True)
"""


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    net = Network.create(HOSTS)
    os.environ[CGROUP_ROOT_ENV] = str(net.cgroup_root)
    peers = []
    try:
        for name, host in HOSTS.items():
            command = in_own_cgroup([sys.executable, "-c", _PEER, host, str(PORT)], name)
            peers.append(subprocess.Popen(command, stdout=subprocess.PIPE))
        for host in HOSTS.values():
            poll_until(lambda h=host: _reaches_server(h), what=f"the peer on {host}")
        yield net
    finally:
        os.environ.pop(CGROUP_ROOT_ENV, None)
        for peer in peers:
            peer.kill()
            peer.wait()
        net.close()


def _reaches_server(host: str) -> bool:
    try:
        socket.create_connection((host, PORT), timeout=0.5).close()
        return True
    except OSError:
        return False


def _ask(sender: str, receiver: str) -> bool:
    """Whether ``sender`` reached ``receiver`` (asked over a connection from this test)."""
    with socket.create_connection((HOSTS[sender], PORT), timeout=5.0) as conn:
        conn.sendall(f"call {HOSTS[receiver]}\n".encode())
        return conn.makefile().readline().strip() == "ok"


def test_a_cut_stops_one_sender_and_heals(network: Network) -> None:
    assert _ask("a", "b") and _ask("b", "a")  # a keeps its connection to b from here on
    network.cut("a", "b")
    assert not _ask("a", "b"), "a reached b across the cut (its kept connection or a new one)"
    assert _ask("b", "a"), "the cut of a -> b also stopped b -> a"
    assert _ask("a", "c") and _ask("c", "b"), "the cut touched another pair"
    network.heal("a", "b")
    poll_until(lambda: _ask("a", "b"), what="a reaching b after the heal")


def test_a_cut_both_ways_is_a_partition(network: Network) -> None:
    network.cut("a", "b", both_ways=True)
    assert not _ask("a", "b") and not _ask("b", "a")
    assert _ask("a", "c") and _ask("b", "c")
    network.heal()
    poll_until(lambda: _ask("a", "b") and _ask("b", "a"), what="both ways after the heal")


def test_a_client_is_cut_from_one_process_both_ways_and_from_nothing_else(
    network: Network,
) -> None:
    client = network.spawn(
        "client",
        [sys.executable, "-c", _CLIENT, HOSTS["b"], HOSTS["c"], str(PORT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert client.stdin is not None and client.stdout is not None

    def reaches() -> list[str]:
        client.stdin.write("go\n")
        client.stdin.flush()
        return client.stdout.readline().split()

    try:
        assert reaches() == [HOSTS["b"], "ok", HOSTS["c"], "ok"]  # its connection to b kept
        network.cut("b", "client")  # b's answers to the client are dropped, on that connection
        assert reaches() == [HOSTS["b"], "failed", HOSTS["c"], "ok"]
        assert _ask("a", "b") and _ask("b", "a"), "the cut of b -> client touched b's other peers"
        network.heal()
        poll_until(lambda: reaches()[1] == "ok", what="the client reaching b after the heal")
        network.cut("client", "b", both_ways=True)
        assert reaches() == [HOSTS["b"], "failed", HOSTS["c"], "ok"]
        assert _ask("a", "b") and _ask("c", "b"), "the client's cut touched b's other peers"
    finally:
        client.kill()
        client.wait()
