"""Shared fixtures: one real ZooKeeper server per test run, one chroot per test; a three-server
ensemble of a test's own; one S3 endpoint (moto server) per test run, one bucket per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from tests.support.certs import certificates  # noqa: F401 - fixture
from tests.support.s3 import (  # noqa: F401 - fixtures
    _s3_session_proxy,
    s3_endpoint,
    s3_proxy,
    s3_store,
)
from tests.support.zookeeper import (
    ZooKeeperEnsemble,
    ZooKeeperServer,
    fresh_chroot,
    running_ensemble,
    start_kazoo_client,
)


def _close(client: KazooClient) -> None:
    client.stop()
    client.close()


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper server for the whole run. Tests must not stop, restart or kill it:
    they use a private ``ZooKeeperServer`` for that."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper_ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    """Three ZooKeeper servers on loopback, formed (one leader, two followers), stopped after the
    test: free to be killed, stopped and restarted member by member."""
    with running_ensemble(tmp_path / "ensemble") as ensemble:
        yield ensemble


@pytest.fixture
def zk_connect(zookeeper_server: ZooKeeperServer) -> Iterator[str]:
    """``127.0.0.1:PORT/tiered-test-<hex>``: the shared server with a fresh chroot."""
    if not zookeeper_server.is_running:
        pytest.fail(
            "the session ZooKeeper server is down (did a test stop it?); tests that "
            "stop, restart or kill ZooKeeper must use their own ZooKeeperServer"
        )
    with fresh_chroot(zookeeper_server) as connect:
        yield connect


@pytest.fixture
def kazoo_client(zk_connect: str) -> Iterator[KazooClient]:
    """A started KazooClient inside this test's chroot; stopped and closed afterwards."""
    client = start_kazoo_client(zk_connect)
    try:
        yield client
    finally:
        _close(client)
