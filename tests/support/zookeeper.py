"""A real ZooKeeper 3.8 server for tests, run as a plain JVM.

The server uses the jars of Debian's ``zookeeper`` package (``/usr/share/java``;
``scripts/ensure_env.sh`` installs it) plus ``slf4j-simple.jar`` as the logging
binding. ``zookeeper.jar``'s manifest ``Class-Path`` pulls in the rest
(zookeeper-jute, netty, jetty, jackson, metrics, slf4j-api, ...).

Each server gets a free loopback port and its own directory holding ``zoo.cfg``,
``data/`` and ``zookeeper.log`` (the JVM's stdout and stderr). The JVM runs in
its own session and gets ``SIGTERM`` when the thread that started it dies
(``PR_SET_PDEATHSIG``), so a killed test run leaves no JVM behind. Start servers
from the main thread or another long-lived thread: the death signal follows the
starting *thread*, not the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from kazoo.client import KazooClient

__all__ = [
    "DEFAULT_CLASSPATH",
    "KAZOO_CONNECTION_RETRY",
    "ZooKeeperError",
    "ZooKeeperServer",
    "start_kazoo_client",
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
_PR_SET_PDEATHSIG = 1
_POLL_INTERVAL = 0.02
_LOG_TAIL_LINES = 60

# Reconnect quickly after a server restart (kazoo's default backoff grows to an hour).
KAZOO_CONNECTION_RETRY: dict[str, float] = {
    "max_tries": -1,
    "delay": 0.05,
    "backoff": 2,
    "max_delay": 1.0,
}
KAZOO_START_TIMEOUT = 15.0


class ZooKeeperError(RuntimeError):
    """The ZooKeeper test server could not be started or stopped."""


def free_port(host: str = HOST) -> int:
    """Return a TCP port on ``host`` that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def four_letter_word(host: str, port: int, command: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the whole reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode("ascii"))
        chunks: list[bytes] = []
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")


def start_kazoo_client(hosts: str, **kwargs: Any) -> KazooClient:
    """A started KazooClient with test-friendly reconnect backoff. Stop and close it."""
    kwargs.setdefault("connection_retry", dict(KAZOO_CONNECTION_RETRY))
    client = KazooClient(hosts=hosts, **kwargs)
    client.start(timeout=KAZOO_START_TIMEOUT)
    return client


def _death_signal_preexec() -> Callable[[], None] | None:
    """Build a ``preexec_fn`` that asks the kernel to SIGTERM the child when we die."""
    if not sys.platform.startswith("linux"):
        return None
    # Resolve prctl before fork: the child should do as little as possible.
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent_pid = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        # The parent may have died between fork and prctl: nobody would signal us.
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


class ZooKeeperServer:
    """One standalone ZooKeeper server on a loopback port.

    ``restart()`` keeps the port and the data directory, so client sessions
    survive it (if the restart is shorter than their session timeout).
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
        """``127.0.0.1:PORT``, for KazooClient(hosts=...)."""
        return f"{HOST}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    @property
    def config_path(self) -> Path:
        return self.base_dir / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.base_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the JVM and wait until the server serves requests."""
        if self.is_running:
            raise ZooKeeperError(f"ZooKeeper on port {self.port} is already running")
        # A port picked by us may have been taken since; pick another (first start only).
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
        self._forget_process()

    def kill(self) -> None:
        """SIGKILL the JVM (a crash: no clean shutdown) and reap it."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._forget_process()

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

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "<no log file>"
        return "\n".join(text.splitlines()[-lines:])

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
        if self._java is not None:
            return self._java
        java_home = os.environ.get("JAVA_HOME")
        if java_home and (Path(java_home) / "bin" / "java").is_file():
            return str(Path(java_home) / "bin" / "java")
        found = shutil.which("java")
        if found is None:
            raise ZooKeeperError("java not found; run scripts/ensure_env.sh")
        return found

    def _command(self) -> list[str]:
        missing = [str(p) for p in self.classpath if not p.is_file()]
        if missing:
            raise ZooKeeperError(
                f"ZooKeeper jars missing: {', '.join(missing)}; run scripts/ensure_env.sh"
            )
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
            # A test server: survive a kill of the JVM (the page cache keeps the log), but do
            # not pay an fsync per transaction. Production ZooKeeper keeps forceSync=yes.
            "forceSync": "no",
        }
        self.config_path.write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items()), encoding="utf-8"
        )

    def _start_once(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        command = self._command()
        log = open(self.log_path, "ab")  # noqa: SIM115 - kept open while the JVM runs
        self._log_offset = log.tell()
        log.write(f"---- starting: {' '.join(command)}\n".encode())
        log.flush()
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                start_new_session=True,
                preexec_fn=_death_signal_preexec(),  # noqa: PLW1509 - needed for PDEATHSIG
            )
        except BaseException:
            log.close()
            raise
        self._process = process
        self._log = log
        try:
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

    def _forget_process(self) -> None:
        self._process = None
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
