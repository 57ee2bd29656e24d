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

The JVM always runs in its own session, so a terminal's Ctrl-C does not reach it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, ClassVar, Self, TypedDict

from tiered.child_process import death_signal_preexec
from tiered.daemon_logging import log_tail
from tiered.zookeeper.requirements import (
    DEFAULT_CLASSPATH,
    ENSURE_ENV_HINT,
    ZooKeeperError,
    check_requirements,
    find_java,
)

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
_POLL_INTERVAL = 0.02
_LOG_TAIL_LINES = 60
_MODE_PREFIX = "Mode: "


def four_letter_word(host: str, port: int, command: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole reply.

    Raises ``OSError`` when nothing answers on ``host:port``."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
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


def server_mode(host: str, port: int, timeout: float = 1.0) -> str | None:
    """What ``srvr`` says the server on ``host:port`` is (``standalone``, ``leader``,
    ``follower``, ``observer``); None when nothing answers or it does not serve (a member of an
    ensemble without a quorum)."""
    try:
        return _mode_in(four_letter_word(host, port, "srvr", timeout))
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


class ZooKeeperProcess:
    """One ZooKeeper JVM serving clients on ``127.0.0.1:port``.

    ``base_dir`` holds ``data/`` and, unless ``config_path`` / ``log_path`` say otherwise,
    ``zoo.cfg`` and ``zookeeper.log``; without it a temporary directory is made (and removed by
    ``close()``). ``pid_file``, if given, receives the JVM's pid as soon as it is spawned and is
    removed when this object stops or kills the JVM (not by ``detach()``).

    Subclasses set ``main_class`` and ``serving_modes`` and may add settings (``_settings``) and
    files in the data directory (``_prepare_data_dir``).
    """

    main_class: ClassVar[str]
    serving_modes: ClassVar[frozenset[str]]

    def __init__(
        self,
        base_dir: Path | str | None,
        *,
        port: int,
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
    ) -> None:
        self._owns_dir = base_dir is None
        self.base_dir = Path(
            tempfile.mkdtemp(prefix="tiered-zk-") if base_dir is None else base_dir
        ).resolve()
        self.port = port
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._java = java
        self.classpath = tuple(Path(p) for p in classpath)
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.die_with_parent = die_with_parent
        self.force_sync = force_sync
        self._config_path = Path(config_path).resolve() if config_path is not None else None
        self._log_path = Path(log_path).resolve() if log_path is not None else None
        self.pid_file = Path(pid_file).resolve() if pid_file is not None else None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_offset = 0
        self._spawned_at = 0.0
        self.last_start_seconds: float | None = None

    # -- paths and addresses ---------------------------------------------------

    @property
    def host(self) -> str:
        return HOST

    @property
    def connect_string(self) -> str:
        """``127.0.0.1:PORT``, for KazooClient(hosts=...) and ``zookeeper.connect``."""
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def config_path(self) -> Path:
        return self._config_path or self.base_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self._log_path or self.base_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the JVM and wait until it serves (``start_timeout``; the JVM is killed then).

        Raises ``ZooKeeperError`` if it already runs, java or a jar is missing, something else
        listens on the port, or it does not serve in time."""
        self._check_startable()
        if self._port_accepts_connections():
            raise ZooKeeperError(self._port_in_use_message())
        self._start_once()

    def stop(self) -> None:
        """SIGTERM the JVM, SIGKILL it after ``stop_timeout``; wait for it either way."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._forget_process(remove_pid_file=process is not None)

    def request_stop(self) -> None:
        """SIGTERM the JVM without waiting for it (``stop()`` then waits): stops many at once."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    def kill(self) -> None:
        """SIGKILL the JVM (a crash: no clean shutdown) and reap it."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._forget_process(remove_pid_file=process is not None)

    def detach(self) -> int | None:
        """Leave the JVM running on its own and forget it; return its pid.

        For a daemon started by a short-lived command: create the server with
        ``die_with_parent=False`` (else the JVM dies with the starting thread anyway) and stop it
        later by its pid (``pid_file``). ``stop()``, ``kill()`` and ``close()`` no longer touch it.
        """
        pid = self.pid
        self._forget_process(remove_pid_file=False)
        return pid

    def restart(self) -> None:
        """Stop and start again on the same port with the same data directory."""
        self.stop()
        self.start()

    def wipe_data(self) -> None:
        """Delete the data directory (all znodes and sessions). The JVM must be down."""
        if self.is_running:
            raise ZooKeeperError("wipe_data() needs a stopped server")
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop the JVM and remove its directory if this object created it."""
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- introspection ---------------------------------------------------------

    def four_letter_word(self, command: str, timeout: float = 1.0) -> str:
        return four_letter_word(HOST, self.port, command, timeout)

    def mode(self, timeout: float = 1.0) -> str | None:
        """What ``srvr`` says this port's server is (see ``server_mode``)."""
        return server_mode(HOST, self.port, timeout)

    def is_serving(self, timeout: float = 1.0) -> bool:
        """Whether a server of this kind serves on this port (ours or not)."""
        return self.mode(timeout) in self.serving_modes

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    # -- for subclasses and the ensemble --------------------------------------

    def _settings(self) -> dict[str, object]:
        """The config file's settings (a subclass adds its own)."""
        return {
            "tickTime": self.tick_time_ms,
            "minSessionTimeout": self.min_session_timeout_ms,
            "maxSessionTimeout": self.max_session_timeout_ms,
            "dataDir": self.data_dir,
            "clientPort": self.port,
            "clientPortAddress": HOST,
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,mntr",
            "maxClientCnxns": 0,
            "forceSync": "yes" if self.force_sync else "no",
        }

    def _prepare_data_dir(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def _check_startable(self) -> None:
        if self.is_running:
            raise ZooKeeperError(f"ZooKeeper on port {self.port} is already running")
        check_requirements(self._java, self.classpath)

    def _port_in_use_message(self) -> str:
        # Readiness is probed over the port, so another server listening there would pass for
        # ours: refuse to start then.
        return (
            f"port {self.port} is already in use (something listens on {self.connect_string}); "
            "cannot start ZooKeeper there"
        )

    def _port_accepts_connections(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=1.0):
                return True
        except OSError:
            return False

    def _log_of_last_start(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def _start_once(self) -> None:
        self._spawn()
        try:
            self._wait_until_serving(self._spawned_at + self.start_timeout)
        except BaseException:
            self.kill()
            raise

    def _spawn(self) -> None:
        """Write the config and start the JVM, without waiting for it to serve."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_data_dir()
        self._write_config(self._settings())
        command = self._command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open while the JVM runs
        self._log_offset = log.tell()
        log.write(f"---- starting: {' '.join(command)}\n".encode())
        log.flush()
        preexec = death_signal_preexec() if self.die_with_parent else None
        self._spawned_at = time.monotonic()
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                start_new_session=True,
                preexec_fn=preexec,  # noqa: PLW1509 - needed for PDEATHSIG
            )
        except BaseException:
            log.close()
            raise
        self._process = process
        self._log = log
        try:
            if self.pid_file is not None:
                self.pid_file.parent.mkdir(parents=True, exist_ok=True)
                self.pid_file.write_text(f"{process.pid}\n", encoding="utf-8")
        except BaseException:
            self.kill()
            raise

    def _wait_until_serving(self, deadline: float) -> None:
        """Poll ``srvr`` until it reports a serving mode; ``ZooKeeperError`` if the JVM exits or
        ``deadline`` passes first (the JVM is left running)."""
        process = self._process
        assert process is not None, "_wait_until_serving() before _spawn()"
        wanted = " or ".join(sorted(self.serving_modes))
        last_reply = ""
        while True:
            code = process.poll()
            if code is not None:
                raise ZooKeeperError(
                    f"ZooKeeper on port {self.port} exited with code {code} during startup; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                last_reply = self.four_letter_word("srvr", timeout=0.5)
            except OSError as exc:
                last_reply = repr(exc)
            if _mode_in(last_reply) in self.serving_modes:
                self.last_start_seconds = time.monotonic() - self._spawned_at
                return
            if time.monotonic() >= deadline:
                raise ZooKeeperError(
                    f"ZooKeeper on port {self.port} not serving (Mode: {wanted}) after "
                    f"{self.start_timeout}s (last srvr reply: {last_reply.strip()!r}); "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

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

    def _forget_process(self, *, remove_pid_file: bool) -> None:
        if remove_pid_file and self.pid_file is not None:
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
        self._process = None
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
