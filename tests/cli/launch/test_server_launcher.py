"""cli.launch.server_launcher.start_on_free_ports, how every launcher (ZooKeeper, an ensemble, the S3
endpoint) copes with a port it cannot have: a real listening socket takes the port, the server's
start is a recorded stand-in (no process is spawned)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launch.ports import free_port
from cli.launch.server_launcher import ServerLauncher, start_on_free_ports


class StartupError(RuntimeError):
    pass


class StandIn(ServerLauncher):
    """A launcher whose start the test plays: ``log`` is what its last start wrote."""

    error = StartupError
    server_name = "the stand-in"

    def __init__(self, tmp_path: Path, port: int) -> None:
        super().__init__(
            port=port,
            log_path=tmp_path / "stand-in.log",
            pid_file=None,
            start_timeout=1.0,
            stop_timeout=1.0,
            die_with_parent=True,
        )
        self.log = ""

    def _spawn(self) -> None:
        raise AssertionError("the tests start nothing")

    def _serves_now(self) -> bool:
        return False

    def _log_of_last_start(self) -> str:
        return self.log


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def test_a_taken_port_is_refused_when_no_attempt_is_left(tmp_path: Path, taken_port: int) -> None:
    server = StandIn(tmp_path, taken_port)
    starts: list[int] = []
    with pytest.raises(StartupError) as refusal:
        start_on_free_ports(
            [server],
            attempts=1,
            start=lambda: starts.append(server.port),
            choose_ports=lambda: None,
        )
    assert str(refusal.value) == (
        f"port {taken_port} is already in use (something listens on 127.0.0.1:{taken_port}); "
        "cannot start the stand-in there"
    )
    assert starts == []  # nothing was started on it


def test_a_taken_port_is_replaced_while_attempts_are_left(tmp_path: Path, taken_port: int) -> None:
    server = StandIn(tmp_path, taken_port)
    starts: list[int] = []

    def choose() -> None:
        server.port = free_port()

    start_on_free_ports(
        [server], attempts=3, start=lambda: starts.append(server.port), choose_ports=choose
    )
    assert starts == [server.port] and server.port != taken_port


def test_a_failed_bind_is_retried_on_another_port_and_other_failures_are_not(
    tmp_path: Path,
) -> None:
    server = StandIn(tmp_path, free_port())
    ports: list[int] = []

    def start_failing_to_bind_once() -> None:
        ports.append(server.port)
        if len(ports) == 1:
            server.log = "java.net.BindException: Address already in use"
            raise StartupError("exited with code 1 during startup")
        server.log = "serving"

    def choose() -> None:
        server.port = free_port()

    start_on_free_ports([server], attempts=3, start=start_failing_to_bind_once, choose_ports=choose)
    assert len(ports) == 2 and ports[0] != ports[1]

    def start_failing() -> None:
        server.log = "java.lang.ClassNotFoundException"
        raise StartupError("exited with code 1 during startup")

    with pytest.raises(StartupError, match="exited with code 1"):
        start_on_free_ports([server], attempts=3, start=start_failing, choose_ports=choose)
