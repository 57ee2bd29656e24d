"""One ZooKeeper JVM on loopback: its config file, the spawn, the ``srvr`` readiness probe, stop,
kill -9, ``detach`` and the pid file. ``ZooKeeperServer`` (standalone) and ``QuorumPeer`` (a member
of an ensemble) say what else goes into the config and which ``srvr`` modes mean serving.

A JVM keeps, by default under one base directory, its config file, ``data/`` and
``zookeeper.log`` (its stdout and stderr). It counts as started once ``srvr`` answers with a
serving mode (``ruok`` answers before the server serves requests).

Two options tell a test's throwaway server from a daemon:

- ``die_with_parent`` (default on): the JVM gets ``SIGTERM`` when the thread that started it dies
  (``PR_SET_PDEATHSIG``, Linux), so a killed test run leaves no JVM behind. Start such servers from
  the main thread or another long-lived thread: the death signal follows the starting *thread*, not
  the process. A daemon that must outlive its starter (``tiered-cluster up``) turns it off and
  calls ``detach()`` after ``start()``.
- ``force_sync`` (default off): ``forceSync=yes`` fsyncs the transaction log before every
  acknowledgement (durable across a power loss, as production ZooKeeper runs); off, a write
  survives a kill of the JVM (the page cache keeps the log) but not a crash of the machine.

``tls`` (a ``cli.launch.zookeeper.tls.ServerTls``) makes the client port TLS-only
(``secureClientPort``, a client certificate required; no plaintext port is opened); the ``srvr``
probe then speaks TLS with the server's own certificate.

The JVM always runs in its own session, so a terminal's Ctrl-C does not reach it. Its process
(spawn, pid file, readiness wait, stop, kill, detach) is run as every local server's is
(:mod:`cli.launch.server_launcher`).
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, TypedDict

from cli.launch.server_launcher import ServerLauncher, base_directory
from cli.launch.zookeeper.requirements import (
    DEFAULT_CLASSPATH,
    ENSURE_ENV_HINT,
    ZooKeeperError,
    check_requirements,
    find_java,
)
from cli.launch.zookeeper.tls import NETTY_CLASSPATH, ServerTls

__all__ = [
    "HOST",
    "JVM_FLAGS",
    "ProcessOptions",
    "ZooKeeperProcess",
    "four_letter_word",
    "server_mode",
]

JVM_FLAGS: tuple[str, ...] = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dzookeeper.jmx.log4j.disable=true",
)
HOST = "127.0.0.1"
_MODE_PREFIX = "Mode: "


def four_letter_word(
    host: str, port: int, command: str, timeout: float = 1.0, tls: ServerTls | None = None
) -> str:
    """Send a ZooKeeper four-letter command (over TLS with ``tls``'s certificate, to a TLS-only
    server) and return the whole reply.

    Raises ``OSError`` (``ssl.SSLError`` included) when nothing answers on ``host:port``."""
    connection = (
        socket.create_connection((host, port), timeout=timeout)
        if tls is None
        else tls.connect(host, port, timeout)
    )
    with connection as sock:
        sock.sendall(command.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _mode_in(reply: str) -> str | None:
    for line in reply.splitlines():
        if line.startswith(_MODE_PREFIX):
            return line[len(_MODE_PREFIX) :].strip()
    return None


def server_mode(
    host: str, port: int, timeout: float = 1.0, tls: ServerTls | None = None
) -> str | None:
    """What ``srvr`` says the server on ``host:port`` is (``standalone``, ``leader``,
    ``follower``, ``observer``); None when nothing answers or it does not serve (a member of an
    ensemble without a quorum)."""
    try:
        return _mode_in(four_letter_word(host, port, "srvr", timeout, tls))
    except OSError:
        return None


class ProcessOptions(TypedDict, total=False):
    """The options of ``ZooKeeperProcess`` besides its directory and port."""

    start_timeout: float
    stop_timeout: float
    java: str | None
    classpath: Sequence[Path | str]
    tick_time_ms: int
    min_session_timeout_ms: int
    max_session_timeout_ms: int
    die_with_parent: bool
    force_sync: bool
    config_path: Path | str | None
    log_path: Path | str | None
    pid_file: Path | str | None
    tls: ServerTls | None


class ZooKeeperProcess(ServerLauncher):
    """One ZooKeeper JVM serving clients on ``host:port`` (``host`` a loopback address, ``HOST``
    unless given; ``port`` a free one if None, which may be replaced until the first successful
    start if it turns out to be taken).

    ``base_dir`` holds ``data/`` and, unless ``config_path`` / ``log_path`` say otherwise,
    ``zoo.cfg`` and ``zookeeper.log``; without it a temporary directory is made (and removed by
    ``close()``). ``pid_file``, if given, receives the JVM's pid as soon as it is spawned and is
    removed when this object stops or kills the JVM (not by ``detach()``).

    Subclasses set ``main_class`` and ``serving_modes`` and may add settings (``_settings``) and
    files in the data directory (``_prepare_data_dir``).
    """

    main_class: ClassVar[str]
    serving_modes: ClassVar[frozenset[str]]
    error = ZooKeeperError
    server_name = "ZooKeeper"
    poll_interval_s = 0.02
    log_tail_lines = 60

    def __init__(
        self,
        base_dir: Path | str | None,
        *,
        port: int | None,
        start_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        java: str | None = None,
        classpath: Sequence[Path | str] = DEFAULT_CLASSPATH,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 10000,
        die_with_parent: bool = True,
        force_sync: bool = False,
        config_path: Path | str | None = None,
        log_path: Path | str | None = None,
        pid_file: Path | str | None = None,
        host: str = HOST,
        tls: ServerTls | None = None,
    ) -> None:
        self.base_dir = base_directory(base_dir, "tiered-zk-")
        default_log = self.base_dir / "zookeeper.log"
        super().__init__(
            port=port,
            log_path=Path(log_path).resolve() if log_path is not None else default_log,
            pid_file=pid_file,
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            die_with_parent=die_with_parent,
            owned_dir=self.base_dir if base_dir is None else None,
            host=host,
        )
        self._java = java
        self.tls = tls
        self.classpath = tuple(Path(p) for p in classpath) + (
            NETTY_CLASSPATH if tls is not None else ()
        )
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.force_sync = force_sync
        self._config_path = Path(config_path).resolve() if config_path is not None else None
        self._last_srvr_reply = ""

    # -- paths and addresses ---------------------------------------------------

    @property
    def connect_string(self) -> str:
        """``HOST:PORT``, for KazooClient(hosts=...) and ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def config_path(self) -> Path:
        return self._config_path or self.base_dir / "zoo.cfg"

    # -- lifecycle (start, stop, request_stop, kill, detach, close: ServerLauncher's) ---------

    def restart(self) -> None:
        """Stop and start again on the same port with the same data directory."""
        self.stop()
        self.start()

    def wipe_data(self) -> None:
        """Delete the data directory (all znodes and sessions). The JVM must be down."""
        if self.is_running:
            raise ZooKeeperError("wipe_data() needs a stopped server")
        shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- introspection ---------------------------------------------------------

    def four_letter_word(self, command: str, timeout: float = 1.0) -> str:
        return four_letter_word(self.host, self.port, command, timeout, self.tls)

    def mode(self, timeout: float = 1.0) -> str | None:
        """What ``srvr`` says this port's server is (see ``server_mode``)."""
        return server_mode(self.host, self.port, timeout, self.tls)

    def is_serving(self, timeout: float = 1.0) -> bool:
        """Whether a server of this kind serves on this port (ours or not)."""
        return self.mode(timeout) in self.serving_modes

    # -- for subclasses and the ensemble --------------------------------------

    def _settings(self) -> dict[str, object]:
        """The config file's settings (a subclass adds its own)."""
        client_port: dict[str, object] = (
            {"clientPort": self.port, "clientPortAddress": self.host}
            if self.tls is None
            else self.tls.client_port_settings(self.host, self.port)
        )
        return {
            "tickTime": self.tick_time_ms,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "dataDir": self.data_dir,
            **client_port,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
            "maxClientCnxns": 0,
            "forceSync": "yes" if self.force_sync else "no",
        }

    def _prepare_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def _check_startable(self) -> None:
        super()._check_startable()
        check_requirements(self._java, self.classpath)

    def _spawn(self) -> None:
        """Write the config and start the JVM, without waiting for it to serve."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_data_dir()
        self._write_config(self._settings())
        self._spawn_child(self._command(), cwd=self.base_dir)

    def _serves_now(self) -> bool:
        try:
            self._last_srvr_reply = self.four_letter_word("srvr", timeout=0.5)
        except OSError as exc:
            self._last_srvr_reply = repr(exc)
        return _mode_in(self._last_srvr_reply) in self.serving_modes

    def _not_serving_detail(self) -> str:
        wanted = " or ".join(sorted(self.serving_modes))
        return f" (wanted Mode: {wanted}; last srvr reply: {self._last_srvr_reply.strip()!r})"

    # -- internals -------------------------------------------------------------

    def _write_config(self, settings: Mapping[str, object]) -> None:
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items()), encoding="utf-8"
        )

    def _command(self) -> list[str]:
        check_requirements(self._java, self.classpath)
        java = find_java(self._java)
        if java is None:
            raise ZooKeeperError(f"cannot run ZooKeeper: missing java; {ENSURE_ENV_HINT}")
        return [
            java,
            *JVM_FLAGS,
            "-cp",
            os.pathsep.join(str(p) for p in self.classpath),
            self.main_class,
            str(self.config_path),
        ]
