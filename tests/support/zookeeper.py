"""Real ZooKeeper 3.8 servers for tests (a standalone server, a three-server ensemble) plus kazoo
helpers.

The servers themselves (Debian's jars, the JVM command, the ``srvr`` readiness probe, start/stop)
live in the ``cli.launch.zookeeper`` package, which ``tiered-cluster up`` uses as well. Its defaults
suit tests:
the JVM dies with the thread that started it (``PR_SET_PDEATHSIG``, so a killed test run leaves no
JVM behind; start servers from the main thread or another long-lived thread) and runs with
``forceSync=no`` (it survives a kill of the JVM, not a crash of the machine).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from cli.launch.zookeeper import (
    DEFAULT_CLASSPATH,
    HOST,
    JAVA_DIR,
    JVM_FLAGS,
    MAIN_CLASS,
    ZooKeeperEnsemble,
    ZooKeeperError,
    ZooKeeperServer,
    four_letter_word,
    is_serving,
)
from tiered.rlmm.zookeeper_backend import ZooKeeperBackend
from tiered.security.zookeeper_auth import NO_SECURITY, ZooKeeperSecurity
from tiered.zk_client import connection_retry

__all__ = [
    "DEFAULT_CLASSPATH",
    "HOST",
    "JAVA_DIR",
    "JVM_FLAGS",
    "KAZOO_START_TIMEOUT",
    "MAIN_CLASS",
    "ZooKeeperEnsemble",
    "ZooKeeperError",
    "ZooKeeperServer",
    "four_letter_word",
    "fresh_chroot",
    "is_serving",
    "running_ensemble",
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
def running_ensemble(base_dir: Path, **options: Any) -> Iterator[ZooKeeperEnsemble]:
    """A started, formed three-server ensemble under ``base_dir`` (``ZooKeeperEnsemble``'s
    ``options``), stopped afterwards. Start it from a long-lived thread (the members die with it)."""
    ensemble = ZooKeeperEnsemble(base_dir, **options)
    ensemble.start()
    try:
        ensemble.wait_until_formed()
        yield ensemble
    finally:
        ensemble.stop()


@contextlib.contextmanager
def fresh_chroot(
    server: ZooKeeperServer | ZooKeeperEnsemble,
    prefix: str = "tiered-test",
    security: ZooKeeperSecurity = NO_SECURITY,
) -> Iterator[str]:
    """``<connect string>/<prefix>-<hex>``: a new chroot on ``server``, removed afterwards (by a
    client with ``security``'s credentials: the owner of znodes created with ACLs)."""
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
        cleaner = ZooKeeperBackend(server.connect_string, security=security)
        try:
            cleaner.remove_by_prefix(chroot.lstrip("/"))
        finally:
            cleaner.close()
