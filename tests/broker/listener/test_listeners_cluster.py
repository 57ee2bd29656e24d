"""Brokers serving PLAINTEXT, SSL and SASL_SSL Kafka listeners at once, as real processes in both
metadata modes: confluent-kafka produces and reads on each listener, and the Metadata each client
gets names the brokers by that listener's advertised host:port (the SSL listener is advertised
as ``localhost``, the others as ``127.0.0.1``), as Kafka answers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin

from cli import configs
from cli.launch.ports import free_port
from tests.support.certs import KEY_PASSWORD, ClusterCertificates
from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    confluent_produce,
    consume,
    in_partition_order,
    sample,
    wait_hosted,
    without_offsets,
)
from tests.support.kafka_cluster import MODES, QUIET
from tests.support.polling import poll_until
from tests.support.zookeeper import fresh_chroot
from tiered.net import PLAINTEXT, SASL_SSL, SSL, Listener

pytestmark = pytest.mark.processes

USER, PASSWORD = "carol", "carol-Pw-listeners-8d2e"
ADVERTISED_HOST = {PLAINTEXT: "127.0.0.1", SSL: "localhost", SASL_SSL: "127.0.0.1"}


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    certificates: ClusterCertificates,
) -> Iterator[Cluster]:
    mode = request.param
    with contextlib.ExitStack() as stack:
        zk_connect = None
        if mode == "zookeeper":
            server = request.getfixturevalue("zookeeper_server")
            zk_connect = stack.enter_context(fresh_chroot(server, "tiered-listeners"))
        c = Cluster(
            tmp_path_factory.mktemp(f"listeners-{mode}"),
            mode,
            zk_connect,
            broker_extra={
                **certificates.server_properties(certificates.broker),
                "listener.name.ssl.ssl.client.auth": "required",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            },
        )
        for broker in c.brokers.values():
            ports = {SSL: free_port(), SASL_SSL: free_port()}
            broker.properties["listeners"] += "".join(
                f",{name}://127.0.0.1:{port}" for name, port in ports.items()
            )
            broker.properties["advertised.listeners"] = ",".join(
                f"{name}://{ADVERTISED_HOST[name]}:{port}" for name, port in ports.items()
            )
        failed_before = request.session.testsfailed
        try:
            c.start()
            code = configs.main(
                [
                    "--bootstrap-server",
                    c.bootstrap,
                    "--alter",
                    "--entity-type",
                    "users",
                    "--entity-name",
                    USER,
                    "--add-config",
                    f"SCRAM-SHA-512=[password={PASSWORD}]",
                ]
            )
            assert code == 0
            yield c
        finally:
            if request.session.testsfailed > failed_before:
                print(c.dump_logs())
            c.close()


def endpoints(cluster: Cluster, name: str) -> dict[int, Listener]:
    """Each broker's ``name`` listener as advertised, from the ``kafka listener on`` line it
    printed (the registration's source)."""
    found = {}
    for broker_id, broker in cluster.brokers.items():
        [line] = [line for line in broker.output if f"kafka listener on {name}://" in line]
        found[broker_id] = Listener.parse(line.rpartition(" ")[2])
    return found


def client_config(cluster: Cluster, certificates: ClusterCertificates, name: str) -> dict[str, Any]:
    bootstrap = ",".join(e.address for _, e in sorted(endpoints(cluster, name).items()))
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "security.protocol": name}
    if name != PLAINTEXT:
        config["ssl.ca.location"] = str(certificates.ca)
        config["broker.address.family"] = "v4"  # localhost: the listeners bind 127.0.0.1
    if name == SSL:
        config["ssl.certificate.location"] = str(certificates.admin.certificate)
        config["ssl.key.location"] = str(certificates.admin.private_key)
        config["ssl.key.password"] = KEY_PASSWORD
    if name == SASL_SSL:
        config.update(
            {"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD}
        )
    return config


def test_every_broker_prints_and_registers_each_listener_in_order(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        announced = [line for line in broker.output if "kafka listener on" in line]
        assert [line.rpartition(" ")[2].partition("://")[0] for line in announced] == [
            PLAINTEXT,
            SSL,
            SASL_SSL,
        ]
    assert all(e.host == "localhost" for e in endpoints(cluster, SSL).values())


@pytest.mark.parametrize("name", [PLAINTEXT, SSL, SASL_SSL])
def test_each_listener_produces_reads_and_names_brokers_by_its_own_endpoints(
    cluster: Cluster, certificates: ClusterCertificates, name: str
) -> None:
    config = client_config(cluster, certificates, name)
    admin = ConfluentAdmin({**QUIET, **config})

    answers: list[Any] = []

    def metadata() -> bool:
        try:
            answers.append(admin.list_topics(timeout=5))
        except KafkaException:  # SASL_SSL: until the brokers have learnt the user
            return False
        return True

    poll_until(metadata, timeout=30, what=f"Metadata on the {name} listener")
    found = answers[-1]
    assert {b.id: (b.host, b.port) for b in found.brokers.values()} == {
        broker_id: (e.host, e.port) for broker_id, e in endpoints(cluster, name).items()
    }
    assert found.controller_id in found.brokers

    topic = f"records-{name.lower().replace('_', '-')}"
    cluster.admin.create_topic(topic, 2)
    wait_hosted(cluster, topic)
    messages = sample(20, partitions=2, tag=name)
    confluent_produce(cluster, topic, messages, **config)
    read = consume(cluster, topic, {0: 0, 1: 0}, len(messages), **config)
    assert without_offsets(in_partition_order(read)) == sorted(messages, key=lambda m: m.partition)
