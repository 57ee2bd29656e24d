"""The three-server ZooKeeper ensemble launcher (``cli.launch.zookeeper.ensemble``): it forms with one
leader, keeps its leader and its clients' sessions when a follower dies, elects a new leader when
the leader dies, takes a restarted member back, and leaves no JVM behind (or leaves them running,
detached, for a daemon)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState

from cli.launch.zookeeper import FOLLOWER, LEADER, PeerPorts
from tests.support.polling import poll_until
from tests.support.zookeeper import ZooKeeperEnsemble, ZooKeeperError, start_kazoo_client

pytestmark = pytest.mark.zookeeper

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def client(zookeeper_ensemble: ZooKeeperEnsemble) -> Iterator[KazooClient]:
    """A client of the whole ensemble (its connect string names every member)."""
    kazoo = start_kazoo_client(zookeeper_ensemble.connect_string, timeout=10.0)
    try:
        yield kazoo
    finally:
        kazoo.stop()
        kazoo.close()


def _states(client: KazooClient) -> list[str]:
    seen: list[str] = []
    client.add_listener(seen.append)
    return seen


def _session(client: KazooClient) -> int:
    assert client.client_id is not None
    return int(client.client_id[0])


def test_forms_with_one_leader_and_replicates(
    zookeeper_ensemble: ZooKeeperEnsemble, client: KazooClient
) -> None:
    modes = zookeeper_ensemble.modes()
    assert sorted(modes.values(), key=str) == [FOLLOWER, FOLLOWER, LEADER], modes
    leader = zookeeper_ensemble.leader()
    assert leader is not None and modes[leader.server_id] == LEADER
    members = zookeeper_ensemble.members
    assert zookeeper_ensemble.connect_string == ",".join(f"127.0.0.1:{m.port}" for m in members)
    # Each member has its own directory, id, config, log and client port.
    assert len({m.port for m in members}) == 3
    assert len({m.data_dir for m in members}) == 3
    for member in members:
        assert (member.data_dir / "myid").read_text().strip() == str(member.server_id)
        assert f"clientPort={member.port}" in member.config_path.read_text()
        assert member.log_path.is_file()

    client.create("/replicated", b"everywhere")
    for member in members:  # each member serves the write to a client of its own
        direct = start_kazoo_client(member.connect_string)
        try:
            direct.sync("/replicated")
            assert direct.get("/replicated")[0] == b"everywhere"
        finally:
            direct.stop()
            direct.close()


def test_a_follower_kill_keeps_the_leader_and_the_session(
    zookeeper_ensemble: ZooKeeperEnsemble, client: KazooClient
) -> None:
    leader = zookeeper_ensemble.wait_until_formed()
    client.create("/ephemeral", b"mine", ephemeral=True)
    session = _session(client)
    follower = next(m for m in zookeeper_ensemble.members if m is not leader)

    follower.kill()

    assert not follower.is_running and follower.mode() is None
    assert zookeeper_ensemble.wait_until_formed() is leader  # two of three: still a quorum
    # A client of the killed follower loses the request in flight (ConnectionLoss) and moves
    # on to a survivor: retried, as an application would.
    client.retry(client.ensure_path, "/after-follower-kill")
    assert _session(client) == session
    assert client.retry(client.get, "/ephemeral")[0] == b"mine"


def test_a_leader_kill_elects_another_and_keeps_the_session(
    zookeeper_ensemble: ZooKeeperEnsemble, client: KazooClient
) -> None:
    old_leader = zookeeper_ensemble.wait_until_formed()
    client.create("/ephemeral", b"mine", ephemeral=True)
    session = _session(client)
    states = _states(client)

    old_leader.kill()

    new_leader = zookeeper_ensemble.wait_until_formed(timeout=30)
    assert new_leader is not old_leader
    # Every member dropped its clients while electing: the client was suspended, then reconnected
    # to a survivor with its session.
    poll_until(
        lambda: KazooState.SUSPENDED in states and client.state == KazooState.CONNECTED,
        timeout=30,
        what="the client to be suspended and to reconnect",
    )
    client.create("/after-leader-kill", b"ok")
    assert _session(client) == session
    assert client.get("/ephemeral")[0] == b"mine"
    assert KazooState.LOST not in states


@pytest.mark.parametrize("role", [LEADER, FOLLOWER])
def test_a_restarted_member_rejoins_with_what_it_missed(
    zookeeper_ensemble: ZooKeeperEnsemble, client: KazooClient, role: str
) -> None:
    leader = zookeeper_ensemble.wait_until_formed()
    member = (
        leader if role == LEADER else next(m for m in zookeeper_ensemble.members if m is not leader)
    )
    port, pid = member.port, member.pid
    member.kill()
    zookeeper_ensemble.wait_until_formed(timeout=30)
    client.create("/written-while-down", b"missed")

    zookeeper_ensemble.start([member.server_id])  # only what is missing

    assert member.pid != pid and member.port == port
    assert member.mode() == FOLLOWER  # the survivors' leader stays
    zookeeper_ensemble.wait_until_formed()
    direct = start_kazoo_client(member.connect_string)
    try:
        assert direct.get("/written-while-down")[0] == b"missed"
    finally:
        direct.stop()
        direct.close()


def test_pid_files_and_stop(tmp_path: Path) -> None:
    pid_files = [tmp_path / "pids" / f"zk-{i}.pid" for i in (1, 2, 3)]
    ensemble = ZooKeeperEnsemble(tmp_path / "ensemble", pid_files=pid_files)
    ensemble.start()
    try:
        pids = ensemble.pids
        for server_id, pid_file in enumerate(pid_files, start=1):
            assert pid_file.read_text().strip() == str(pids[server_id])
        ports = ensemble.ports
    finally:
        ensemble.stop()
    assert not any(m.is_running for m in ensemble.members)
    assert not any(p.exists() for p in pid_files)
    assert all(_process_gone(pid) for pid in pids.values() if pid is not None)
    # The same ports and data again: a restart of the whole ensemble.
    again = ZooKeeperEnsemble(tmp_path / "ensemble", ports=ports)
    with again:
        assert again.ports == ports and again.wait_until_formed() is not None


def test_bad_layouts_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="pid_files: 2 given for an ensemble of 3"):
        ZooKeeperEnsemble(tmp_path, pid_files=[tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ValueError, match="at least one member"):
        ZooKeeperEnsemble(tmp_path, size=0)
    with pytest.raises(ValueError, match=r"valid ids are 1\.\.3"):
        ZooKeeperEnsemble(tmp_path).member(4)


def test_refuses_a_client_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = [PeerPorts(busy, 1, 2), PeerPorts.free(), PeerPorts.free()]
        ensemble = ZooKeeperEnsemble(tmp_path, ports=ports)
        with pytest.raises(ZooKeeperError, match=f"port {busy} is already in use"):
            ensemble.start()
    assert not any(m.is_running for m in ensemble.members)


def _process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"  # an unreaped zombie is dead as well


_HELPER = (
    "import sys\n"
    "from cli.launch.zookeeper import ZooKeeperEnsemble\n"
    "ensemble = ZooKeeperEnsemble(sys.argv[1], die_with_parent=sys.argv[2] == 'die')\n"
    "ensemble.start()\n"
    "pids = ensemble.pids if sys.argv[2] == 'die' else ensemble.detach()\n"
    "print(ensemble.connect_string, *pids.values(), flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
@pytest.mark.parametrize("how", ["die", "detach"])
def test_members_die_with_their_parent_unless_detached(tmp_path: Path, how: str) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _HELPER, str(tmp_path / "ensemble"), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        text=True,
    )
    pids: list[int] = []
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline()
        assert line.strip(), "the helper did not start its ensemble"
        connect, *pid_texts = line.split()
        pids = [int(p) for p in pid_texts]
        parent.kill()
        parent.wait()
        if how == "die":
            poll_until(lambda: all(_process_gone(p) for p in pids), timeout=30, what="JVMs to die")
        else:
            survivor = start_kazoo_client(connect)  # still serving without its starter
            try:
                survivor.create("/outlived", b"starter")
            finally:
                survivor.stop()
                survivor.close()
            assert not any(_process_gone(p) for p in pids)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in pids:
            if not _process_gone(pid):
                os.kill(pid, signal.SIGKILL)
