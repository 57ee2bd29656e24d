"""The ZooKeeper test fixture itself: serving, chroot isolation, restart, crash, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState

from tests.support.polling import poll_until
from tests.support.zookeeper import ZooKeeperError, ZooKeeperServer, start_kazoo_client

pytestmark = [pytest.mark.zookeeper, pytest.mark.processes]

REPO_ROOT = Path(__file__).resolve().parents[3]
DEADLINE = 20.0


@pytest.fixture
def private_server(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A server of this test's own, free to be restarted or killed."""
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_server_serves(zookeeper_server: ZooKeeperServer, kazoo_client: KazooClient) -> None:
    assert zookeeper_server.is_running
    assert zookeeper_server.connect_string == f"127.0.0.1:{zookeeper_server.port}"
    assert "Mode: standalone" in zookeeper_server.four_letter_word("srvr")

    kazoo_client.create("/topics/orders", b"tiered", makepath=True)
    data, stat = kazoo_client.get("/topics/orders")
    assert data == b"tiered"
    assert stat.version == 0
    assert kazoo_client.get_children("/") == ["topics"]


_seen_chroots: list[str] = []


@pytest.mark.parametrize("run", ["first", "second"])
def test_chroots_are_isolated(
    run: str, zookeeper_server: ZooKeeperServer, zk_connect: str, kazoo_client: KazooClient
) -> None:
    server, _, chroot = zk_connect.partition("/")
    assert server == zookeeper_server.connect_string
    assert chroot.startswith("tiered-test-")

    # Every test starts in an empty chroot even though the other run wrote the same path.
    assert kazoo_client.get_children("/") == []
    kazoo_client.create("/owner", run.encode())
    assert kazoo_client.get("/owner")[0] == run.encode()

    root = start_kazoo_client(zookeeper_server.connect_string)
    try:
        assert root.get(f"/{chroot}/owner")[0] == run.encode()
        for previous in _seen_chroots:
            assert previous != chroot
            # The previous test's chroot was deleted recursively at its teardown.
            assert root.exists(f"/{previous}") is None
    finally:
        root.stop()
        root.close()
    _seen_chroots.append(chroot)


def test_restart_keeps_data_and_session(private_server: ZooKeeperServer) -> None:
    client = start_kazoo_client(private_server.connect_string)
    lost = threading.Event()

    def on_state(state: str) -> None:
        if state != KazooState.CONNECTED:
            lost.set()

    try:
        client.add_listener(on_state)
        client.create("/persistent", b"kept")
        client.create("/ephemeral", b"session", ephemeral=True)
        session_id = client.client_id[0]
        port, data_dir = private_server.port, private_server.data_dir

        private_server.restart()

        assert (private_server.port, private_server.data_dir) == (port, data_dir)
        assert lost.wait(DEADLINE), "client never noticed the restart"
        poll_until(
            lambda: client.state == KazooState.CONNECTED, DEADLINE, what="kazoo to reconnect"
        )
        assert client.client_id[0] == session_id
        assert client.get("/persistent")[0] == b"kept"
        # The ephemeral node survived: the session was not expired by the restart.
        assert client.get("/ephemeral")[0] == b"session"
    finally:
        client.stop()
        client.close()


def test_kill_then_start_on_wiped_data_dir(private_server: ZooKeeperServer) -> None:
    client = start_kazoo_client(private_server.connect_string)
    try:
        client.create("/before-crash", b"x")
    finally:
        client.stop()
        client.close()
    old_pid = private_server.pid

    private_server.kill()
    assert not private_server.is_running
    private_server.wipe_data()
    assert not private_server.data_dir.exists()
    private_server.start()

    assert private_server.pid != old_pid
    fresh = start_kazoo_client(private_server.connect_string)
    try:
        assert fresh.exists("/before-crash") is None
        fresh.create("/after-crash", b"y")
        assert fresh.get("/after-crash")[0] == b"y"
    finally:
        fresh.stop()
        fresh.close()


def test_refuses_a_port_in_use(private_server: ZooKeeperServer, tmp_path: Path) -> None:
    clash = ZooKeeperServer(tmp_path / "clash", port=private_server.port)
    with pytest.raises(ZooKeeperError, match="already in use"):
        clash.start()
    assert not clash.is_running
    assert private_server.is_running


def test_startup_failure_reports_log_tail(tmp_path: Path) -> None:
    # A classpath without ZooKeeper: the JVM exits at once with an error in the log.
    broken = ZooKeeperServer(tmp_path / "broken", classpath=["/usr/share/java/slf4j-simple.jar"])
    with pytest.raises(ZooKeeperError) as excinfo:
        broken.start()
    message = str(excinfo.value)
    assert "exited with code" in message
    assert "ZooKeeperServerMain" in message  # "Could not find or load main class ..."
    assert str(broken.log_path) in message
    assert not broken.is_running


def _process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    # An unreaped zombie (state after the "(comm)" field) is dead as well.
    return stat.rpartition(")")[2].split()[0] == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_jvm_dies_with_its_parent(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from tests.support.zookeeper import ZooKeeperServer\n"
        "server = ZooKeeperServer(sys.argv[1])\n"
        "server.start()\n"
        "print(server.pid, flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    parent = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path / "zk")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
        env=env,
        text=True,
    )
    jvm_pid: int | None = None
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"helper did not report a JVM pid: {line!r}"
        pid = jvm_pid = int(line)
        assert not _process_gone(pid)

        parent.kill()
        parent.wait()

        poll_until(lambda: _process_gone(pid), DEADLINE, what=f"JVM {pid} to die")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if jvm_pid is not None and not _process_gone(jvm_pid):
            os.kill(jvm_pid, signal.SIGKILL)
