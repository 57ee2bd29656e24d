"""A real cluster shared by a module's Kafka protocol tests (one per metadata mode), and what
those tests share: clients on its Kafka listeners, a poll for a topic's tiered state."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from tests.support.cluster import Cluster, kafka_address
from tests.support.kafka_wire import WireClient
from tests.support.zookeeper import ZooKeeperServer, start_kazoo_client
from tiered.rlmm.zookeeper_backend import ZooKeeperBackend

MODES = ("kraft", "zookeeper")
QUIET = {"log_level": 3}  # librdkafka: errors only
MAX_REQUEST_BYTES = 1024 * 1024  # the brokers' socket.request.max.bytes


@contextlib.contextmanager
def _chroot(server: ZooKeeperServer) -> Iterator[str]:
    chroot = f"/tiered-kafka-{uuid.uuid4().hex}"
    client = start_kazoo_client(server.connect_string)
    try:
        client.create(chroot)
    finally:
        client.stop()
        client.close()
    try:
        yield f"{server.connect_string}{chroot}"
    finally:
        cleaner = ZooKeeperBackend(server.connect_string)
        try:
            cleaner.remove_by_prefix(chroot.lstrip("/"))
        finally:
            cleaner.close()


@contextlib.contextmanager
def shared_cluster(request: pytest.FixtureRequest, root: Path) -> Iterator[Cluster]:
    """A started two-broker cluster in ``request.param``'s metadata mode, for a module-scoped
    fixture; the processes' logs are printed if a test of the module failed."""
    mode = request.param
    with contextlib.ExitStack() as stack:
        zk_connect = None
        if mode == "zookeeper":
            zk_connect = stack.enter_context(_chroot(request.getfixturevalue("zookeeper_server")))
        cluster = Cluster(
            root,
            mode,
            zk_connect,
            broker_extra={"socket.request.max.bytes": str(MAX_REQUEST_BYTES)},
        )
        failed_before = request.session.testsfailed
        try:
            cluster.start()
            yield cluster
        finally:
            if request.session.testsfailed > failed_before:
                print(cluster.dump_logs())
            cluster.close()


def kafka_bootstrap(cluster: Cluster, broker_id: int | None = None) -> str:
    """Every broker's Kafka listener, or one broker's."""
    if broker_id is None:
        return cluster.kafka_bootstrap
    return kafka_address(cluster.brokers[broker_id].properties)


def confluent_admin(cluster: Cluster, broker_id: int | None = None) -> ConfluentAdmin:
    return ConfluentAdmin({"bootstrap.servers": kafka_bootstrap(cluster, broker_id), **QUIET})


def wire_client(cluster: Cluster, broker_id: int) -> WireClient:
    host, _, port = kafka_bootstrap(cluster, broker_id).rpartition(":")
    return WireClient((host, int(port)))


def result_error(future: Any, timeout_s: float = 30.0) -> Any:
    """The KafkaError a confluent-kafka future failed with, or None."""
    error = future.exception(timeout_s)
    return None if error is None else error.args[0]
