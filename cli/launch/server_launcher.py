"""What every launcher of a local server shares (ZooKeeper's JVMs, Spark's master and workers, the
S3 endpoint): one :class:`~cli.launch.child_process.ChildProcess` at a time, spawned with the
launcher's log file, pid file and death signal (``die_with_parent``).

``start()`` refuses a server already running and a port something already listens on (the
readiness probe would take that for this server); a port the launcher chose itself is instead
replaced by another free one, as is one the server failed to bind, until the first successful
start (then clients know it). It then spawns the server and waits until the probe says it
serves: the child is killed if it exits first (the error shows its log's tail at once) or does
not serve within ``start_timeout``. ``stop()`` is SIGTERM, then SIGKILL after
``stop_timeout``; ``kill()`` a crash; ``detach()`` leaves a daemon running with its pid file;
``close()`` stops it and removes a directory the launcher made.

A subclass spawns its command (``_spawn``, through ``_spawn_child``), probes it
(``_serves_now``) and names it (``server_name``, ``describe``).
"""

from __future__ import annotations

import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

from cli.launch.child_process import LOG_TAIL_LINES, ChildProcess
from cli.launch.ports import LOOPBACK, accepts_connections, free_port
from tiered.daemon_logging import log_tail

__all__ = [
    "PORT_ATTEMPTS",
    "SecondsAlias",
    "ServerContext",
    "ServerLauncher",
    "base_directory",
    "start_on_free_ports",
]

PORT_ATTEMPTS = 3
"""Starts tried on ports chosen here before giving up (another process may take a free port)."""
_ADDRESS_IN_USE = "Address already in use"


def base_directory(given: Path | str | None, prefix: str) -> Path:
    """``given`` resolved, or a new temporary directory named ``prefix...`` if None."""
    return Path(tempfile.mkdtemp(prefix=prefix) if given is None else given).resolve()


class SecondsAlias:
    """A launcher's attribute of seconds under a second name (``start_timeout_s`` for
    ``start_timeout``), for a launcher whose constructor spells it so."""

    def __init__(self, attribute: str) -> None:
        self._attribute = attribute

    def __get__(self, launcher: object, owner: type | None = None) -> float:
        return float(getattr(launcher, self._attribute))

    def __set__(self, launcher: object, seconds: float) -> None:
        setattr(launcher, self._attribute, seconds)


class ServerContext(ABC):
    """A server, or a group of them, that ``with`` starts and then closes."""

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ServerLauncher(ServerContext):
    """One server run as a child process on ``host:port`` (``host`` a loopback address,
    ``127.0.0.1`` unless given); see the module docstring."""

    error: ClassVar[type[Exception]]
    """What its failures raise."""
    server_name: ClassVar[str]
    """What it is, for messages: ``ZooKeeper``, ``the S3 endpoint``."""
    kills_group: ClassVar[bool] = False
    """Whether SIGKILL takes its whole process group (see ``ChildProcess``)."""
    poll_interval_s: ClassVar[float] = 0.05
    log_tail_lines: ClassVar[int] = LOG_TAIL_LINES

    def __init__(
        self,
        *,
        port: int | None,
        log_path: Path,
        pid_file: Path | str | None,
        start_timeout: float,
        stop_timeout: float,
        die_with_parent: bool,
        owned_dir: Path | None = None,
        host: str = LOOPBACK,
    ) -> None:
        self.host = host
        self.port = port if port is not None else free_port(host)
        self._port_settled = port is not None
        self.log_path = log_path
        self.pid_file = Path(pid_file).resolve() if pid_file is not None else None
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.die_with_parent = die_with_parent
        self.last_start_seconds: float | None = None
        """How long the last start took, from the spawn until it served."""
        self._owned_dir = owned_dir
        self._child: ChildProcess | None = None
        self._last_child: ChildProcess | None = None  # the latest, kept for its log once gone

    # -- what subclasses provide -----------------------------------------------

    @abstractmethod
    def _spawn(self) -> None:
        """Start the process (``_spawn_child``) without waiting for it to serve."""

    @abstractmethod
    def _serves_now(self) -> bool:
        """The readiness probe: whether this server serves now."""

    def _not_serving_detail(self) -> str:
        """What a timeout's message adds after the timeout (the probe's last answer)."""
        return ""

    def describe(self) -> str:
        """The server, for messages."""
        return f"{self.server_name} on port {self.port}"

    # -- state -----------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    @property
    def is_running(self) -> bool:
        return self._child is not None and self._child.is_running

    def log_tail(self, lines: int | None = None) -> str:
        return log_tail(self.log_path, self.log_tail_lines if lines is None else lines)

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start the server and wait until it serves; ``error`` (and the child killed) if it
        already runs, something else listens on its port, or it exits or does not serve within
        ``start_timeout`` (see the module docstring)."""
        self._check_startable()
        start_on_free_ports(
            [self],
            attempts=1 if self._port_settled else PORT_ATTEMPTS,
            start=self._start_once,
            choose_ports=self._choose_port,
        )
        self._port_settled = True

    def request_stop(self) -> None:
        """SIGTERM the server without waiting for it (``stop()`` then waits): stops many at
        once."""
        if self._child is not None:
            self._child.request_stop()

    def stop(self) -> None:
        """SIGTERM the server, SIGKILL it after ``stop_timeout``; wait for it either way; its pid
        file removed."""
        child, self._child = self._child, None
        if child is not None:
            child.stop(self.stop_timeout)

    def kill(self) -> None:
        """SIGKILL the server (a crash: no clean shutdown) and reap it; its pid file removed."""
        child, self._child = self._child, None
        if child is not None:
            child.kill()

    def detach(self) -> int | None:
        """Leave the server running on its own and forget it; return its pid.

        For a daemon started by a short-lived command: create the launcher with
        ``die_with_parent=False`` (else the server dies with the starting thread anyway) and stop
        it later by its pid (``pid_file``, kept). ``stop()``, ``kill()`` and ``close()`` no longer
        touch it."""
        child, self._child = self._child, None
        return child.detach() if child is not None else None

    def close(self) -> None:
        """Stop the server and remove its directory if this launcher created it."""
        self.stop()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)

    # -- for subclasses and groups of servers ---------------------------------

    def _check_startable(self) -> None:
        if self.is_running:
            raise self.error(f"{self.describe()} is already running")

    def _spawn_child(
        self,
        command: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if self._child is not None:  # one that exited on its own: reaped, its log closed
            self._child.kill()
        self._child = self._last_child = ChildProcess(
            command,
            log_path=self.log_path,
            cwd=cwd,
            env=env,
            pid_file=self.pid_file,
            die_with_parent=self.die_with_parent,
            kill_group=self.kills_group,
        )

    def _await_serving(self, deadline: float | None = None) -> None:
        """Return once the spawned server serves; ``error`` if it exits first or ``deadline``
        (default: ``start_timeout`` after its spawn) passes (the child is left running)."""
        child = self._child
        if child is None:
            raise self.error(f"{self.describe()} was not launched")
        self.last_start_seconds = child.wait_until_serving(
            self._serves_now,
            what=self.describe(),
            timeout_s=self.start_timeout,
            error=self.error,
            deadline=deadline,
            detail=self._not_serving_detail,
            poll_interval_s=self.poll_interval_s,
            tail_lines=self.log_tail_lines,
        )

    def _start_once(self) -> None:
        self._spawn()
        try:
            self._await_serving()
        except BaseException:
            self.kill()
            raise

    def _choose_port(self) -> None:
        self.port = free_port(self.host)

    def _port_in_use_message(self) -> str | None:
        """Why this server cannot start on its port (None: nothing listens there)."""
        if not accepts_connections(self.port, self.host):
            return None
        return (
            f"port {self.port} is already in use (something listens on {self.host}:{self.port}); "
            f"cannot start {self.server_name} there"
        )

    def _log_of_last_start(self) -> str:
        return self._last_child.log_of_this_run() if self._last_child is not None else ""


def start_on_free_ports(
    launchers: Sequence[ServerLauncher],
    *,
    attempts: int,
    start: Callable[[], None],
    choose_ports: Callable[[], None],
) -> None:
    """Run ``start`` (which starts ``launchers`` and kills them if it fails) unless one of their
    ports is taken. A port found taken before, or one a server failed to bind, is replaced
    (``choose_ports``) while attempts are left; then that refusal or failure is raised."""
    error = launchers[0].error
    for attempt in range(attempts):
        last = attempt + 1 == attempts
        refusals = [m for m in (launcher._port_in_use_message() for launcher in launchers) if m]
        if refusals:
            if last:
                raise error(refusals[0])
            choose_ports()
            continue
        try:
            start()
        except error:
            if last or not any(_ADDRESS_IN_USE in s._log_of_last_start() for s in launchers):
                raise
            choose_ports()
        else:
            return
