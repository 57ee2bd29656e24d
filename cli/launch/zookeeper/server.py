"""A standalone ZooKeeper 3.8 server (``ZooKeeperServerMain``): for tests and for
``tiered-cluster up``. It serves once ``srvr`` answers ``Mode: standalone``."""

from __future__ import annotations

from pathlib import Path
from typing import Unpack

from cli.launch.zookeeper.process import HOST, ProcessOptions, ZooKeeperProcess, server_mode

__all__ = ["MAIN_CLASS", "STANDALONE", "ZooKeeperServer", "is_serving"]

MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
STANDALONE = "standalone"


def is_serving(host: str, port: int, timeout: float = 1.0) -> bool:
    """Whether a standalone ZooKeeper serves requests on ``host:port`` (``srvr`` says so)."""
    return server_mode(host, port, timeout) == STANDALONE


class ZooKeeperServer(ZooKeeperProcess):
    """One standalone ZooKeeper server on a loopback port (a free one unless given) of ``host``,
    with the paths and options of ``ZooKeeperProcess``.

    ``start()`` raises ``ZooKeeperError`` if java or a jar is missing, the port is taken (a port
    chosen here is replaced by another free one, until the first successful start), or the
    server does not serve within ``start_timeout`` (the JVM is killed then). ``restart()`` keeps
    the port and the data directory, so client sessions survive it (if the restart is shorter
    than their session timeout).
    """

    main_class = MAIN_CLASS
    serving_modes = frozenset({STANDALONE})

    def __init__(
        self,
        base_dir: Path | str | None = None,
        *,
        port: int | None = None,
        host: str = HOST,
        **options: Unpack[ProcessOptions],
    ) -> None:
        super().__init__(base_dir, port=port, host=host, **options)
