"""Test support code (real external services for integration tests)."""

from tests.support.zookeeper import (
    ZooKeeperError,
    ZooKeeperServer,
    start_kazoo_client,
)

__all__ = ["ZooKeeperError", "ZooKeeperServer", "start_kazoo_client"]
