"""A standalone ZooKeeper 3.8 server (``ZooKeeperServerMain``): for tests and for
``tiered-cluster up``. It serves once ``srvr`` answers ``Mode: standalone``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tiered.ports import free_port
from tiered.zookeeper.process import HOST, ZooKeeperProcess, server_mode
from tiered.zookeeper.requirements import DEFAULT_CLASSPATH, ZooKeeperError

__all__ = ["MAIN_CLASS", "STANDALONE", "ZooKeeperServer", "is_serving"]

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
STANDALONE = "standalone"
_PORT_ATTEMPTS = 3


def is_serving(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a standalone ZooKeeper serves requests on ``host:port`` (``srvr`` says so)."""
    return server_mode(host, port, timeout) == STANDALONE


class ZooKeeperServer(ZooKeeperProcess):
    """One standalone ZooKeeper server on a loopback port (a free one unless given), with the
    paths and options of ``ZooKeeperProcess``.

    ``restart()`` keeps the port and the data directory, so client sessions survive it (if the
    restart is shorter than their session timeout).
    """

    main_class = MAIN_CLASS
    serving_modes = frozenset({STANDALONE})

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
        super().__init__(
            base_dir,
            port=port if port is not None else free_port(HOST),
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            java=java,
            classpath=classpath,
            tick_time_ms=tick_time_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            die_with_parent=die_with_parent,
            force_sync=force_sync,
            config_path=config_path,
            log_path=log_path,
            pid_file=pid_file,
        )
        # The port may change only until the first successful start (then clients know it).
        self._port_settled = port is not None

    def start(self) -> None:
        """Start the JVM and wait until the server serves requests.

        Raises ``ZooKeeperError`` if java or a jar is missing, the port is taken (a port chosen
        here is replaced by another free one, until the first successful start), or the server
        does not serve within ``start_timeout`` (the JVM is killed then)."""
        self._check_startable()
        attempts = 1 if self._port_settled else _PORT_ATTEMPTS
        for attempt in range(attempts):
            last = attempt + 1 == attempts
            if self._port_accepts_connections():
                if last:
                    raise ZooKeeperError(self._port_in_use_message())
                self.port = free_port(HOST)
                continue
            try:
                self._start_once()
            except ZooKeeperError:
                if last or "Address already in use" not in self._log_of_last_start():
                    raise
                self.port = free_port(HOST)
            else:
                self._port_settled = True
                return
