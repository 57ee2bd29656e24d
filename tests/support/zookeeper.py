"""A real ZooKeeper 3.8 server for tests: ``tiered.zookeeper_server`` plus kazoo helpers.

The server itself (Debian's jars, the JVM command, the ``srvr`` readiness probe, start/stop) lives
in ``tiered.zookeeper_server``, which ``tiered-cluster up`` uses as well. Its defaults suit tests:
the JVM dies with the thread that started it (``PR_SET_PDEATHSIG``, so a killed test run leaves no
JVM behind; start servers from the main thread or another long-lived thread) and runs with
``forceSync=no`` (it survives a kill of the JVM, not a crash of the machine).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from kazoo.client import KazooClient

from tiered.rlmm.zookeeper_backend import ZooKeeperBackend
from tiered.zk_client import connection_retry
from tiered.zookeeper_server import (
    DEFAULT_CLASSPATH,
    HOST,
    JAVA_DIR,
    JVM_FLAGS,
    MAIN_CLASS,
    ZooKeeperError,
    ZooKeeperServer,
    four_letter_word,
    is_serving,
)

__all__ = [
    "DEFAULT_CLASSPATH",
    "HOST",
    "JAVA_DIR",
    "JVM_FLAGS",
    "KAZOO_START_TIMEOUT",
    "MAIN_CLASS",
    "ZooKeeperError",
    "ZooKeeperServer",
    "four_letter_word",
    "fresh_chroot",
    "is_serving",
    "start_kazoo_client",
]

KAZOO_START_TIMEOUT = 15.0


def start_kazoo_client(hosts: str, **kwargs: Any) -> KazooClient:
    """A started KazooClient with test-friendly reconnect backoff. Stop and close it."""
    # The product's reconnect policy (kazoo's default backoff grows to an hour).
    kwargs.setdefault("connection_retry", connection_retry(session_timeout_s=3.0))
    client = KazooClient(hosts=hosts, **kwargs)
    client.start(timeout=KAZOO_START_TIMEOUT)
    return client


@contextlib.contextmanager
def fresh_chroot(server: ZooKeeperServer, prefix: str = "tiered-test") -> Iterator[str]:
    """``127.0.0.1:PORT/<prefix>-<hex>``: a new chroot on ``server``, removed afterwards."""
    chroot = f"/{prefix}-{uuid.uuid4().hex}"
    admin = start_kazoo_client(server.connect_string)
    try:
        admin.create(chroot)  # kazoo does not create a missing chroot
    finally:
        admin.stop()
        admin.close()
    try:
        yield f"{server.connect_string}{chroot}"
    finally:
        # The backend's batched delete: kazoo's recursive delete is one round trip per znode.
        cleaner = ZooKeeperBackend(server.connect_string)
        try:
            cleaner.remove_by_prefix(chroot.lstrip("/"))
        finally:
            cleaner.close()
