"""A ZooKeeper 3.8 ensemble on loopback (``QuorumPeerMain``): for tests and for
``tiered-cluster up``.

Each member (``QuorumPeer``, server id 1..n) is its own JVM with its own config file, data
directory (with its ``myid``), client port, log and pid file; the config names every member as
``server.N=HOST:quorumPort:electionPort``, HOST the member's own loopback address (``127.0.0.1``
unless ``hosts`` gives each its own), on which it listens for clients, followers and votes. A
member serves once ``srvr`` answers ``Mode: leader`` or ``Mode: follower``, which needs a quorum:
members are started together.
The ensemble is formed when exactly one running member leads and the others follow.

Its settings are fast ones (``tickTime`` 500 ms, small ``initLimit`` and ``syncLimit``), so that a
new leader is elected within seconds of the old one's death. Ports are chosen once (free ones
unless given) and kept across restarts of a member or of the whole ensemble; members find each
other and clients find them by those ports.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

from cli.launch.ports import free_port
from cli.launch.server_launcher import PORT_ATTEMPTS, ServerContext, start_on_free_ports
from cli.launch.zookeeper.process import HOST, ProcessOptions, ZooKeeperProcess
from cli.launch.zookeeper.requirements import DEFAULT_CLASSPATH, ZooKeeperError
from cli.launch.zookeeper.tls import ServerTls

__all__ = [
    "FOLLOWER",
    "LEADER",
    "QUORUM_MAIN_CLASS",
    "PeerPorts",
    "QuorumPeer",
    "ZooKeeperEnsemble",
]

QUORUM_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
LEADER = "leader"
FOLLOWER = "follower"
_POLL_INTERVAL = 0.05


@dataclass(frozen=True)
class PeerPorts:
    """A member's ports: clients connect to ``client``, followers to the leader's ``quorum``,
    and members vote over ``election``."""

    client: int
    quorum: int
    election: int

    @classmethod
    def free(cls, host: str = HOST) -> PeerPorts:
        return cls(free_port(host), free_port(host), free_port(host))


class QuorumPeer(ZooKeeperProcess):
    """One member of a ``ZooKeeperEnsemble`` (which creates them): server ``server_id`` of
    ``servers`` (every member's ports, shared with the ensemble) on ``hosts`` (every member's
    address)."""

    main_class = QUORUM_MAIN_CLASS
    serving_modes = frozenset({LEADER, FOLLOWER})

    def __init__(
        self,
        base_dir: Path,
        *,
        server_id: int,
        servers: dict[int, PeerPorts],
        hosts: dict[int, str],
        init_limit: int,
        sync_limit: int,
        **options: Unpack[ProcessOptions],
    ) -> None:
        super().__init__(base_dir, port=servers[server_id].client, host=hosts[server_id], **options)
        self.server_id = server_id
        self._servers = servers
        self._hosts = hosts
        self.init_limit = init_limit
        self.sync_limit = sync_limit

    def __repr__(self) -> str:
        return f"QuorumPeer({self.server_id}, {self.connect_string})"

    @property
    def ports(self) -> PeerPorts:
        return self._servers[self.server_id]

    def _settings(self) -> dict[str, object]:
        settings = super()._settings()
        if self.tls is not None:
            settings.update(self.tls.quorum_settings())
        settings.update(
            initLimit=self.init_limit,
            syncLimit=self.sync_limit,
            # A static membership: no dynamic config file is split off next to this one.
            reconfigEnabled="false",
            standaloneEnabled="false",
        )
        for server_id, ports in sorted(self._servers.items()):
            settings[f"server.{server_id}"] = (
                f"{self._hosts[server_id]}:{ports.quorum}:{ports.election}"
            )
        return settings

    def _prepare_data_dir(self) -> None:
        super()._prepare_data_dir()
        (self.data_dir / "myid").write_text(f"{self.server_id}\n", encoding="ascii")


class ZooKeeperEnsemble(ServerContext):
    """``size`` ZooKeeper servers on loopback forming one ensemble.

    ``base_dir`` holds ``server-N/`` for member N (its ``data/`` and, unless ``config_paths`` /
    ``log_paths`` say otherwise, ``zoo.cfg`` and ``zookeeper.log``). ``ports`` (one ``PeerPorts``
    per member, server ids 1..size in order) defaults to free ports, which may be replaced until
    the first successful start if one turns out to be taken. ``hosts`` (one loopback address per
    member, default ``127.0.0.1`` for all) are where each listens. ``pid_files`` (one per member)
    receive each JVM's pid. ``die_with_parent`` and ``force_sync`` are as for a single server
    (``cli.launch.zookeeper.process``); ``start_timeout`` bounds each ``start``. ``tls`` (one for
    all, or one per member: each its own certificate) makes every member TLS-only: clients,
    followers and votes (``cli.launch.zookeeper.tls``).
    """

    def __init__(
        self,
        base_dir: Path | str,
        *,
        size: int = 3,
        ports: Sequence[PeerPorts] | None = None,
        start_timeout: float = 60.0,
        stop_timeout: float = 10.0,
        java: str | None = None,
        classpath: Sequence[Path | str] = DEFAULT_CLASSPATH,
        tick_time_ms: int = 500,
        init_limit: int = 10,
        sync_limit: int = 4,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 10000,
        die_with_parent: bool = True,
        force_sync: bool = False,
        config_paths: Sequence[Path | str] | None = None,
        log_paths: Sequence[Path | str] | None = None,
        pid_files: Sequence[Path | str] | None = None,
        hosts: Sequence[str] | None = None,
        tls: ServerTls | Sequence[ServerTls] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"size={size}: an ensemble needs at least one member")
        for key, given in (
            ("ports", ports),
            ("config_paths", config_paths),
            ("log_paths", log_paths),
            ("pid_files", pid_files),
            ("hosts", hosts),
            ("tls", tls if isinstance(tls, Sequence) else None),
        ):
            if given is not None and len(given) != size:
                raise ValueError(f"{key}: {len(given)} given for an ensemble of {size} members")
        self.base_dir = Path(base_dir).resolve()
        self.start_timeout = start_timeout
        self._ports_settled = ports is not None
        self._hosts = {
            server_id: hosts[server_id - 1] if hosts is not None else HOST
            for server_id in range(1, size + 1)
        }
        self._servers = {
            server_id: ports[server_id - 1]
            if ports is not None
            else PeerPorts.free(self._hosts[server_id])
            for server_id in range(1, size + 1)
        }
        self.members = [
            QuorumPeer(
                self.base_dir / f"server-{server_id}",
                server_id=server_id,
                servers=self._servers,
                hosts=self._hosts,
                init_limit=init_limit,
                sync_limit=sync_limit,
                start_timeout=start_timeout,
                stop_timeout=stop_timeout,
                java=java,
                classpath=classpath,
                tick_time_ms=tick_time_ms,
                min_session_timeout_ms=min_session_timeout_ms,
                max_session_timeout_ms=max_session_timeout_ms,
                die_with_parent=die_with_parent,
                force_sync=force_sync,
                config_path=None if config_paths is None else config_paths[server_id - 1],
                log_path=None if log_paths is None else log_paths[server_id - 1],
                pid_file=None if pid_files is None else pid_files[server_id - 1],
                tls=tls[server_id - 1] if isinstance(tls, Sequence) else tls,
            )
            for server_id in self._servers
        ]

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble({self.connect_string})"

    # -- addresses -------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        """``HOST1:P1,HOST2:P2,...``, for KazooClient(hosts=...) and
        ``zookeeper.connect``."""
        return ",".join(member.connect_string for member in self.members)

    @property
    def ports(self) -> list[PeerPorts]:
        """Every member's ports, in server-id order (to record and give back next time)."""
        return [self._servers[server_id] for server_id in sorted(self._servers)]

    def member(self, server_id: int) -> QuorumPeer:
        """Member ``server_id`` (1..size)."""
        if server_id not in self._servers:
            raise ValueError(f"server id {server_id}: valid ids are 1..{len(self.members)}")
        return self.members[server_id - 1]

    @property
    def pids(self) -> dict[int, int | None]:
        return {member.server_id: member.pid for member in self.members}

    # -- lifecycle -------------------------------------------------------------

    def start(self, server_ids: Iterable[int] | None = None) -> None:
        """Start the given members (default: all) together and wait until each serves (leads
        or follows); the others, if running, must make a quorum with them.

        Raises ``ZooKeeperError`` if one already runs, java or a jar is missing, a client port is
        taken (ports chosen here are replaced by free ones until the first successful start of
        the whole ensemble), or a member does not serve within ``start_timeout`` (the members
        started here are killed then)."""
        chosen = (
            list(self.members)
            if server_ids is None
            else [self.member(server_id) for server_id in sorted(set(server_ids))]
        )
        for member in chosen:
            member._check_startable()
        whole = not self._ports_settled and len(chosen) == len(self.members)
        start_on_free_ports(
            chosen,
            attempts=PORT_ATTEMPTS if whole else 1,
            start=lambda: self._start_together(chosen),
            choose_ports=self._choose_ports,
        )
        self._ports_settled = True

    def stop(self) -> None:
        """SIGTERM every running member at once; wait for each (SIGKILL after its timeout)."""
        for member in self.members:
            member.request_stop()
        for member in self.members:
            member.stop()

    def kill(self) -> None:
        """SIGKILL every running member."""
        for member in self.members:
            member.kill()

    def detach(self) -> dict[int, int | None]:
        """Leave every member running on its own and forget them; their pids by server id.
        See ``ZooKeeperProcess.detach`` (create the ensemble with ``die_with_parent=False``)."""
        return {member.server_id: member.detach() for member in self.members}

    def close(self) -> None:
        self.stop()

    # -- introspection ---------------------------------------------------------

    def modes(self) -> dict[int, str | None]:
        """What ``srvr`` says each member is (None: down, or without a quorum)."""
        return {member.server_id: member.mode(timeout=0.5) for member in self.members}

    def leader(self) -> QuorumPeer | None:
        """The member that says it leads, if exactly one does."""
        leaders = [self.member(i) for i, mode in self.modes().items() if mode == LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def wait_until_formed(self, timeout: float | None = None) -> QuorumPeer:
        """Wait until exactly one running member leads and every other running member follows
        (members this object did not start count as running when they answer); return the
        leader. ``ZooKeeperError`` after ``timeout`` (default ``start_timeout``)."""
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            modes = self.modes()
            running = {
                i: mode
                for i, mode in modes.items()
                if mode is not None or self.member(i).is_running
            }
            leaders = [i for i, mode in running.items() if mode == LEADER]
            if len(leaders) == 1 and all(
                mode == FOLLOWER for i, mode in running.items() if i != leaders[0]
            ):
                return self.member(leaders[0])
            if time.monotonic() >= deadline:
                raise ZooKeeperError(
                    f"ZooKeeper ensemble {self.connect_string} not formed (one leader, the "
                    f"other running members followers) after {timeout}s: modes {modes}"
                )
            time.sleep(_POLL_INTERVAL)

    # -- internals -------------------------------------------------------------

    def _choose_ports(self) -> None:
        for member in self.members:
            ports = PeerPorts.free(member.host)
            self._servers[member.server_id] = ports
            member.port = ports.client

    def _start_together(self, members: Sequence[QuorumPeer]) -> None:
        """Spawn every member first (none can serve without a quorum), then wait for each."""
        try:
            for member in members:
                member._spawn()
            deadline = time.monotonic() + self.start_timeout
            for member in members:
                member._await_serving(deadline)
        except BaseException:
            for member in members:
                member.kill()
            raise
