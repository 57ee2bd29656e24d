"""A standalone ZooKeeper 3.8 server run as a plain JVM: for tests and for ``tiered-cluster up``.

The server uses the jars of Debian's ``zookeeper`` package (``/usr/share/java``;
``scripts/ensure_env.sh`` installs it with a headless JRE and ``libslf4j-java``) plus
``slf4j-simple.jar`` as the logging binding. ``zookeeper.jar``'s manifest ``Class-Path`` pulls in
the rest (zookeeper-jute, netty, jetty, jackson, metrics, slf4j-api, ...). ``missing_requirements``
names whatever of java and those jars is absent.

A server listens on ``127.0.0.1`` on a port chosen once (a free one unless given) and keeps, by
default under one base directory, ``zoo.cfg``, ``data/`` and ``zookeeper.log`` (the JVM's stdout
and stderr). It counts as started once the ``srvr`` four-letter word answers ``Mode: standalone``
(``ruok`` answers before the server serves requests).

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
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from tiered.child_process import death_signal_preexec
from tiered.daemon_logging import log_tail
from tiered.ports import free_port

__all__ = [
    "DEFAULT_CLASSPATH",
    "HOST",
    "JAVA_DIR",
    "JVM_FLAGS",
    "MAIN_CLASS",
    "ZooKeeperError",
    "ZooKeeperServer",
    "check_requirements",
    "find_java",
    "four_letter_word",
    "is_serving",
    "missing_requirements",
]

JAVA_DIR = Path("/usr/share/java")
DEFAULT_CLASSPATH: tuple[Path, ...] = (
    JAVA_DIR / "zookeeper.jar",
    JAVA_DIR / "slf4j-simple.jar",
)
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JVM_FLAGS: tuple[str, ...] = (
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dzookeeper.jmx.log4j.disable=true",
)
HOST = "127.0.0.1"
ENSURE_ENV_HINT = (
    "run scripts/ensure_env.sh (it installs Debian's zookeeper, default-jre-headless and "
    "libslf4j-java)"
)
_POLL_INTERVAL = 0.02
_LOG_TAIL_LINES = 60


class ZooKeeperError(RuntimeError):
    """A ZooKeeper server could not be started or stopped, or cannot run on this machine."""


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


def is_serving(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a standalone ZooKeeper serves requests on ``host:port`` (``srvr`` says so)."""
    try:
        return "Mode: standalone" in four_letter_word(host, port, "srvr", timeout)
    except OSError:
        return False


def find_java(java: str | None = None) -> str | None:
    """The java executable: ``java`` if given, else ``$JAVA_HOME/bin/java``, else ``java`` on
    ``PATH``; ``None`` if there is none."""
    if java is not None:
        return java if Path(java).is_file() or shutil.which(java) else None
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def missing_requirements(
    java: str | None = None, classpath: Sequence[Path | str] = DEFAULT_CLASSPATH
) -> list[str]:
    """What a ZooKeeper server needs and this machine lacks: java and/or jars (empty if none)."""
    missing = [] if find_java(java) else [f"java ({java or 'not in $JAVA_HOME/bin nor on PATH'})"]
    missing += [str(p) for p in classpath if not Path(p).is_file()]
    return missing


def check_requirements(
    java: str | None = None, classpath: Sequence[Path | str] = DEFAULT_CLASSPATH
) -> None:
    """Raise ``ZooKeeperError`` naming what is missing and ``scripts/ensure_env.sh``."""
    missing = missing_requirements(java, classpath)
    if missing:
        raise ZooKeeperError(
            f"cannot run ZooKeeper: missing {', '.join(missing)}; {ENSURE_ENV_HINT}"
        )


class ZooKeeperServer:
    """One standalone ZooKeeper server on a loopback port.

    ``base_dir`` holds ``data/`` and, unless ``config_path`` / ``log_path`` say otherwise,
    ``zoo.cfg`` and ``zookeeper.log``; without it a temporary directory is made (and removed by
    ``close()``). ``pid_file``, if given, receives the JVM's pid as soon as it is spawned and is
    removed when this object stops or kills the JVM (not by ``detach()``).

    ``restart()`` keeps the port and the data directory, so client sessions survive it (if the
    restart is shorter than their session timeout).
    """

    def __init__(
        self,
        base_dir: Path | str | None = None,
        *,
        port: int | None = None,
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
        # The port may change only until the first successful start (then clients know it).
        self._port_settled = port is not None
        self.port = port if port is not None else free_port()
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
        """Start the JVM and wait until the server serves requests.

        Raises ``ZooKeeperError`` if java or a jar is missing, the port is taken (a port chosen
        here is replaced by another free one, until the first successful start), or the server
        does not serve within ``start_timeout`` (the JVM is killed then)."""
        if self.is_running:
            raise ZooKeeperError(f"ZooKeeper on port {self.port} is already running")
        check_requirements(self._java, self.classpath)
        attempts = 1 if self._port_settled else 3
        for attempt in range(attempts):
            # Readiness is probed over the port, so another server listening there would
            # pass for ours: refuse to start then.
            if self._port_accepts_connections():
                if attempt + 1 == attempts:
                    raise ZooKeeperError(
                        f"port {self.port} is already in use (something listens on "
                        f"{self.connect_string}); cannot start ZooKeeper there"
                    )
                self.port = free_port()
                continue
            try:
                self._start_once()
            except ZooKeeperError:
                if (
                    attempt + 1 == attempts
                    or "Address already in use" not in self._log_of_last_start()
                ):
                    raise
                self.port = free_port()
            else:
                self._port_settled = True
                return

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
        """Delete the data directory (all znodes and sessions). Server must be down."""
        if self.is_running:
            raise ZooKeeperError("wipe_data() needs a stopped server")
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop the server and remove its directory if this object created it."""
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

    def is_serving(self, timeout: float = 1.0) -> bool:
        """Whether a standalone ZooKeeper serves on this server's port (ours or not)."""
        return is_serving(HOST, self.port, timeout)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    # -- internals -------------------------------------------------------------

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

    def _java_executable(self) -> str:
        found = find_java(self._java)
        if found is None:
            raise ZooKeeperError(f"cannot run ZooKeeper: missing java; {ENSURE_ENV_HINT}")
        return found

    def _command(self) -> list[str]:
        check_requirements(self._java, self.classpath)
        return [
            self._java_executable(),
            *JVM_FLAGS,
            "-cp",
            os.pathsep.join(str(p) for p in self.classpath),
            MAIN_CLASS,
            str(self.config_path),
        ]

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        settings = {
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
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items()), encoding="utf-8"
        )

    def _start_once(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        command = self._command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open while the JVM runs
        self._log_offset = log.tell()
        log.write(f"---- starting: {' '.join(command)}\n".encode())
        log.flush()
        preexec = death_signal_preexec() if self.die_with_parent else None
        started = time.monotonic()
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
            self._wait_until_serving(process, started + self.start_timeout)
        except BaseException:
            self.kill()
            raise
        self.last_start_seconds = time.monotonic() - started

    def _wait_until_serving(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        # `ruok` answers before the server serves; `srvr` says "Mode: standalone" once it does.
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
            if "Mode: standalone" in last_reply:
                return
            if time.monotonic() >= deadline:
                raise ZooKeeperError(
                    f"ZooKeeper on port {self.port} not serving after {self.start_timeout}s "
                    f"(last srvr reply: {last_reply.strip()!r}); log {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

    def _forget_process(self, *, remove_pid_file: bool) -> None:
        if remove_pid_file and self.pid_file is not None:
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
        self._process = None
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
