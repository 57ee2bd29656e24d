"""A real cluster shared by a module's Kafka protocol tests (one per metadata mode), and what
those tests share: clients on its Kafka listeners, a poll for a topic's tiered state."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from tests.support.cluster import Cluster, kafka_address
from tests.support.kafka_wire import WireClient
from tests.support.zookeeper import fresh_chroot

MODES = ("kraft", "zookeeper")
QUIET = {"log_level": 3}  # librdkafka: errors only
MAX_REQUEST_BYTES = 1024 * 1024  # the brokers' socket.request.max.bytes


@contextlib.contextmanager
def shared_cluster(
    request: pytest.FixtureRequest,
    root: Path,
    broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
    controller_overrides: Mapping[str, str] | None = None,
    kafka_listener: str = "PLAINTEXT",
    brokers: int = 2,
    credentials: grpc.ChannelCredentials | None = None,
) -> Iterator[Cluster]:
    """A started cluster of ``brokers`` brokers in ``request.param``'s metadata mode, for a
    module-scoped fixture (``broker_overrides``: more properties of a broker, by id;
    ``controller_overrides``: of both controllers; ``kafka_listener``: the name of the brokers'
    Kafka listener; ``credentials``: the test's gRPC channels', for a cluster whose gRPC is
    TLS); the processes' logs are printed if a test of the module failed."""
    mode = request.param
    with contextlib.ExitStack() as stack:
        zk_connect = None
        if mode == "zookeeper":
            server = request.getfixturevalue("zookeeper_server")
            zk_connect = stack.enter_context(fresh_chroot(server, "tiered-kafka"))
        cluster = Cluster(
            root,
            mode,
            zk_connect,
            brokers=brokers,
            broker_extra={"socket.request.max.bytes": str(MAX_REQUEST_BYTES)},
            controller_extra=dict(controller_overrides or {}),
            credentials=credentials,
        )
        for broker in cluster.brokers.values():
            listeners = broker.properties["listeners"]
            broker.properties["listeners"] = listeners.replace(
                "PLAINTEXT://", f"{kafka_listener}://"
            )
        for broker_id, properties in (broker_overrides or {}).items():
            cluster.brokers[broker_id].properties.update(properties)
        failed_before = request.session.testsfailed
        try:
            cluster.start()
            yield cluster
        finally:
            if request.session.testsfailed > failed_before:
                print(cluster.dump_logs())
            cluster.close()


def module_cluster(prefix: str) -> Any:
    """A module-scoped ``cluster`` fixture: one shared cluster per metadata mode."""

    @pytest.fixture(scope="module", params=MODES)
    def cluster(
        request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Cluster]:
        with shared_cluster(request, tmp_path_factory.mktemp(f"{prefix}-{request.param}")) as c:
            yield c

    return cluster


def kafka_bootstrap(cluster: Cluster, broker_id: int | None = None) -> str:
    """Every broker's Kafka listener, or one broker's."""
    if broker_id is None:
        return cluster.kafka_bootstrap
    return kafka_address(cluster.brokers[broker_id].properties)


def confluent_admin(cluster: Cluster, broker_id: int | None = None) -> ConfluentAdmin:
    return ConfluentAdmin({"bootstrap.servers": kafka_bootstrap(cluster, broker_id), **QUIET})


def wire_client(cluster: Cluster, broker_id: int) -> WireClient:
    """A raw connection to a broker's Kafka listener; close it (or use ``connected``)."""
    host, _, port = kafka_bootstrap(cluster, broker_id).rpartition(":")
    return WireClient((host, int(port)))


@contextlib.contextmanager
def connected(cluster: Cluster, broker_id: int) -> Iterator[WireClient]:
    client = wire_client(cluster, broker_id)
    try:
        yield client
    finally:
        client.close()


def result_error(future: Any, timeout_s: float = 30.0) -> Any:
    """The KafkaError a confluent-kafka future failed with, or None."""
    error = future.exception(timeout_s)
    return None if error is None else error.args[0]
