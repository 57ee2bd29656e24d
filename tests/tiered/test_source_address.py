"""``source.address``: a daemon's outgoing ZooKeeper and S3 connections come from the address it
chooses (``tiered-cluster up --loopback-hosts`` gives each process its own), checked by the
address a local listener sees them come from."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from controller.config import ControllerConfig
from tiered import source_address
from tiered.rsm.s3 import S3Credentials, S3Settings
from tiered.zk_client import ZkClient

SOURCE = "127.0.0.23"


@pytest.fixture
def chosen() -> Iterator[str]:
    source_address.choose(SOURCE)
    try:
        yield SOURCE
    finally:
        source_address.choose(None)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(5)
        yield server


def _peer_of_next_connection(server: socket.socket) -> str:
    connection, (peer, _) = server.accept()
    connection.close()
    return str(peer)


def test_the_key_is_an_ip_address_or_unset() -> None:
    assert source_address.parse({}) is None
    assert source_address.parse({"source.address": " "}) is None
    assert source_address.parse({"source.address": " 127.0.0.11 "}) == "127.0.0.11"
    with pytest.raises(ValueError) as bad:
        source_address.parse({"source.address": "localhost"})
    assert str(bad.value).startswith(
        "source.address='localhost' is not valid; expected an IP address of this host"
    )


def test_both_daemons_read_it(tmp_path: Path) -> None:
    broker = BrokerConfig.from_properties(
        {"node.id": "1", "log.dirs": str(tmp_path), "source.address": "127.0.0.13"}
    )
    controller = ControllerConfig.from_properties(
        {"node.id": "1000", "metadata.log.dir": str(tmp_path), "source.address": "127.0.0.11"}
    )
    assert (broker.source_address, controller.source_address) == ("127.0.0.13", "127.0.0.11")
    unset = BrokerConfig.from_properties({"node.id": "1", "log.dirs": str(tmp_path)})
    assert unset.source_address is None


def test_without_a_choice_the_kernel_picks_the_source(listener: socket.socket) -> None:
    with source_address.connect(listener.getsockname()):
        assert _peer_of_next_connection(listener) == "127.0.0.1"


def test_connections_come_from_the_chosen_address(chosen: str, listener: socket.socket) -> None:
    with source_address.connect(listener.getsockname(), timeout=5):
        assert _peer_of_next_connection(listener) == chosen
    with pytest.raises(OSError, match="another address family"):
        source_address.bound_socket(socket.AF_INET6, socket.SOCK_STREAM)


def test_zookeeper_connections_come_from_the_chosen_address(
    chosen: str, listener: socket.socket
) -> None:
    host, port = listener.getsockname()
    client = ZkClient(f"{host}:{port}", session_timeout_s=5)
    # What kazoo's connection loop calls to reach a server of the connect string.
    with client.kazoo.handler.create_connection(address=(host, port), timeout=5):
        assert _peer_of_next_connection(listener) == chosen


class _RecordingHandler(BaseHTTPRequestHandler):
    peers: list[str] = []

    def do_GET(self) -> None:
        self.peers.append(self.client_address[0])
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_s3_connections_come_from_the_chosen_address(chosen: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RecordingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        settings = S3Settings(
            "bucket", "", f"http://{host!s}:{port}", "us-east-1", S3Credentials("k", "s")
        )
        with pytest.raises(FileNotFoundError):  # the server answers 404 to everything
            settings.filesystem().ls("bucket/prefix")
        assert _RecordingHandler.peers and set(_RecordingHandler.peers) == {chosen}
    finally:
        server.shutdown()
        server.server_close()
