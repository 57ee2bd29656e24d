"""``tiered-cluster up --secure`` as an operator uses it, in KRaft and ZooKeeper mode: the files it
writes (and their modes), confluent-kafka over SASL_SSL with the generated SCRAM admin and over
SSL with the admin's certificate, clients without credentials or with a wrong password refused,
the CLIs with and without ``admin.properties``, ``status``, ZooKeeper znodes an unauthenticated
client cannot change, the daemons' calls refused to a certificate without ClusterAction, and no
secret in any log. One cluster per mode for the module; the clients' tests run on both
(``secure``)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic
from cryptography import x509
from kazoo.exceptions import NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kio.schema.errors import ErrorCode as KafkaErrorCode

from cli.kafka_client.client import KafkaClient
from cli.kafka_client.client_security import KafkaClientSecurity
from cli.kafka_client.connection import KafkaConnection, open_connection
from cli.security.certs import CertificateAuthority
from cli.security.client_config import channel_credentials
from tests.support.group_requests import SYNC, group_request, join_member, subscription
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tests.support.secrets import assert_no_secrets
from tests.support.sockets import listening_addresses
from tests.support.zookeeper import start_kazoo_client
from tiered.admin import AdminClient
from tiered.errors import ErrorCode, TieredError
from tiered.properties import load_properties
from tiered.rpc.v1 import broker_pb2 as broker_pb
from tiered.rpc.v1 import broker_pb2_grpc as broker_grpc
from tiered.rpc.v1 import controller_pb2 as controller_pb
from tiered.rpc.v1 import controller_pb2_grpc as controller_grpc
from tiered.rpc.v1 import metadata_pb2 as metadata_pb
from tiered.rpc.v1 import records_pb2
from tiered.security.zookeeper_auth import ZooKeeperSecurity, read_jaas_credentials
from tiered.zk_client import ZkClient

pytestmark = pytest.mark.processes

PRIVATE = 0o600


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@dataclass(frozen=True)
class SecureCluster:
    dir: Path
    bootstrap: str  # what up printed last: the controllers
    layout: dict[str, Any]

    @property
    def config(self) -> Path:
        return self.dir / "config"

    @property
    def admin_properties(self) -> str:
        return str(self.config / "admin.properties")

    def sasl(self) -> dict[str, str]:
        return load_properties(self.config / "admin-sasl.properties")

    def ssl(self) -> dict[str, str]:
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.config / "ca.pem"),
            "ssl.certificate.location": str(self.config / "admin.pem"),
            "ssl.key.location": str(self.config / "admin.key"),
        }

    def secrets(self) -> list[str]:
        found = [self.sasl()["sasl.password"]]
        jaas = self.config / "zookeeper.jaas"
        if jaas.exists():
            found.append(read_jaas_credentials(str(jaas)).password)
        return found


def _up(root: Path, *flags: str) -> Iterator[SecureCluster]:
    data = root / "cluster"
    result = run_module("cli.cluster", "up", "--data-dir", str(data), "--secure", *flags)
    try:
        assert result.returncode == 0, result.stderr
        layout = json.loads((data / "cluster.json").read_text())
        yield SecureCluster(data, result.stdout.strip().splitlines()[-1], layout)
    finally:
        down = run_module("cli.cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="module")
def kraft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from _up(tmp_path_factory.mktemp("secure-kraft"), "--brokers", "2")


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from _up(
        tmp_path_factory.mktemp("secure-zk"), "--metadata", "zookeeper", "--brokers", "1"
    )


@pytest.fixture(
    scope="module", params=["kraft", pytest.param("zookeeper", marks=pytest.mark.zookeeper)]
)
def secure(request: pytest.FixtureRequest) -> SecureCluster:
    """Each mode's cluster in turn, for the tests of what clients see (the same in both)."""
    cluster: SecureCluster = request.getfixturevalue(request.param)
    return cluster


def addresses(value: str, count: int) -> list[str]:
    parts = value.split(",")
    assert len(parts) == count and all(p.startswith("127.0.0.1:") for p in parts), value
    return parts


# --------------------------------------------------------------------------------- files


def test_up_writes_the_ca_certificates_and_client_configs_readable_by_the_owner_only(
    kraft: SecureCluster,
) -> None:
    layout = kraft.layout
    assert kraft.bootstrap == ",".join(f"127.0.0.1:{p}" for p in layout["controllers"])
    sasl_ssl = addresses(layout["kafka_bootstrap_servers"], 2)
    ssl = addresses(layout["kafka_ssl_bootstrap_servers"], 2)
    assert not set(ssl) & set(sasl_ssl)
    holders = ["controller-0", "controller-1", "broker-1", "broker-2", "admin"]
    private = [
        "ca.key",
        "admin.properties",
        "admin-sasl.properties",
        *(f"{name}.key" for name in holders),
        *(f"{name}.keystore.pem" for name in holders),
    ]
    for name in private:
        assert stat.S_IMODE((kraft.config / name).stat().st_mode) == PRIVATE, name
    for name in holders:
        certificate = x509.load_pem_x509_certificate((kraft.config / f"{name}.pem").read_bytes())
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert load_properties(kraft.admin_properties) == {
        "security.protocol": "SSL",
        "ssl.truststore.location": str(kraft.config / "ca.pem"),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(kraft.config / "admin.keystore.pem"),
    }
    sasl = kraft.sasl()
    assert {k: v for k, v in sasl.items() if k != "sasl.password"} == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "ssl.ca.location": str(kraft.config / "ca.pem"),
    }
    assert len(sasl["sasl.password"]) >= 24
    broker = load_properties(kraft.config / "broker-1.properties")
    assert broker["authorizer.enabled"] == "true"
    assert broker["allow.everyone.if.no.acl.found"] == "false"
    assert broker["listener.security.protocol.map"] == "GRPC:SSL"
    assert broker["super.users"].split(";") == [
        "User:CN=controller-0,OU=controllers,O=tiered",
        "User:CN=controller-1,OU=controllers,O=tiered",
        "User:CN=broker-1,OU=brokers,O=tiered",
        "User:CN=broker-2,OU=brokers,O=tiered",
        "User:CN=admin,OU=users,O=tiered",
        "User:admin",
    ]
    for properties in kraft.config.glob("*.properties"):
        if properties.name != "admin-sasl.properties":
            assert sasl["sasl.password"] not in properties.read_text(), properties


# --------------------------------------------------------------------------------- Kafka clients


def test_the_scram_admin_produces_and_reads_over_sasl_ssl(secure: SecureCluster) -> None:
    bootstrap = {"bootstrap.servers": secure.layout["kafka_bootstrap_servers"], **secure.sasl()}
    topic = "secure-records"
    admin = KafkaAdmin(bootstrap)

    def logged_in() -> bool:
        # The brokers learn the admin's credentials a moment after up created it.
        try:
            admin.list_topics(timeout=5)
        except KafkaException:
            return False
        return True

    poll_until(logged_in, timeout=30, what="a SASL_SSL login as the admin")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    values = [f"record-{i}".encode() for i in range(5)]

    def produced() -> bool:
        producer = Producer({**bootstrap, "message.timeout.ms": 5000})
        failures: list[KafkaError] = []
        for value in values:
            producer.produce(
                topic, value, partition=0, on_delivery=lambda e, _m: e and failures.append(e)
            )
        return producer.flush(10) == 0 and not failures

    poll_until(produced, timeout=30, what="a SASL_SSL produce as the admin")
    assert consume(bootstrap, topic, len(values)) == values


def consume(config: dict[str, Any], topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**config, "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []

        def read() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
            return len(got) >= count

        poll_until(read, timeout=30, what=f"{count} records of {topic}")
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("who", ["no credentials", "a wrong password"])
def test_a_client_without_credentials_or_with_a_wrong_password_is_refused(
    secure: SecureCluster, who: str
) -> None:
    config: dict[str, Any] = {"bootstrap.servers": secure.layout["kafka_bootstrap_servers"]}
    if who == "no credentials":
        config.update(
            {"security.protocol": "SSL", "ssl.ca.location": secure.sasl()["ssl.ca.location"]}
        )
    else:
        config.update({**secure.sasl(), "sasl.password": "not-the-admin-password"})
    errors: list[KafkaError] = []
    admin = KafkaAdmin({**config, "error_cb": errors.append})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    if who == "a wrong password":

        def told() -> bool:
            admin.poll(0.5)  # serves error_cb
            return any(e.code() == KafkaError._AUTHENTICATION for e in errors)

        poll_until(told, timeout=15, what="an authentication error")


def test_the_ssl_listener_takes_the_admin_certificate_and_refuses_a_client_without_one(
    secure: SecureCluster,
) -> None:
    ssl = {"bootstrap.servers": secure.layout["kafka_ssl_bootstrap_servers"], **secure.ssl()}
    brokers = KafkaAdmin(ssl).list_topics(timeout=30).brokers
    # Metadata over SSL names the brokers by their SSL listeners.
    assert {f"{b.host}:{b.port}" for b in brokers.values()} == set(
        secure.layout["kafka_ssl_bootstrap_servers"].split(",")
    )
    anonymous = {k: v for k, v in ssl.items() if "certificate" not in k and "key" not in k}
    with pytest.raises(KafkaException):
        KafkaAdmin(anonymous).list_topics(timeout=5)


# --------------------------------------------------------------------------------- the CLIs


def test_the_clis_work_with_admin_properties_and_are_refused_without(
    secure: SecureCluster,
) -> None:
    admin = ["--bootstrap-server", secure.bootstrap, "--command-config", secure.admin_properties]
    created = run_module(
        "cli.topics", *admin, "--create", "--topic", "cli-topic", "--partitions", "1"
    )
    assert created.returncode == 0, created.stderr
    described = run_module("cli.topics", *admin, "--describe", "--topic", "cli-topic")
    assert described.returncode == 0 and "cli-topic" in described.stdout, described.stderr
    granted = run_module(
        "cli.acls", *admin, "--add", "--allow-principal", "User:alice",
        "--operation", "Describe", "--topic", "cli-topic",
    )  # fmt: skip
    assert granted.returncode == 0, granted.stderr
    listed = run_module("cli.acls", *admin, "--list", "--topic", "cli-topic")
    assert "principal=User:alice" in listed.stdout, listed.stderr
    for module, args in (
        ("cli.topics", ["--describe"]),
        (
            "cli.configs",
            ["--describe", "--entity-type", "topics", "--entity-name", "cli-topic"],
        ),
        ("cli.acls", ["--list"]),
    ):
        refused = run_module(module, "--bootstrap-server", secure.bootstrap, *args)
        assert refused.returncode == 1, (module, refused.stdout, refused.stderr)
        assert "BROKER_NOT_AVAILABLE" in refused.stderr, (module, refused.stderr)


def test_tiered_consumer_groups_over_sasl_ssl_and_ssl_with_the_admin_files(
    secure: SecureCluster, tmp_path: Path
) -> None:
    """A member logged in over SASL_SSL (the product's client), seen by the tool with
    admin-sasl.properties on the SASL_SSL listeners and admin.properties on the SSL ones."""
    sasl_listeners = secure.layout["kafka_bootstrap_servers"]
    security = KafkaClientSecurity.from_properties(secure.sasl())
    group = f"secure-{uuid.uuid4().hex[:6]}"
    members: list[KafkaConnection] = []

    def joined() -> bool:
        # The brokers learn the admin's credentials a moment after up created it.
        try:
            with KafkaClient(sasl_listeners, security) as client:
                coordinator = client.coordinator(group)
        except TieredError as e:
            if e.code is ErrorCode.SASL_AUTHENTICATION_FAILED:
                return False
            raise
        member = open_connection(coordinator.host, coordinator.port, security)
        answer = join_member(member, 5, group, protocols=(("range", subscription(["t"])),))
        identity = {"group_id": group, "generation_id": answer.generation_id}
        identity |= {"member_id": answer.member_id}
        synced = member.call(group_request(SYNC, 3, **identity, assignments=()))
        assert synced.error_code == KafkaErrorCode.none, synced
        members.append(member)
        return True

    poll_until(joined, timeout=30, what="a member logged in over SASL_SSL")
    try:
        sasl = ["--bootstrap-server", sasl_listeners, "--command-config",
                str(secure.config / "admin-sasl.properties")]  # fmt: skip
        state = run_module("cli.consumer_groups", *sasl, "--describe", "--group", group,
                           "--state", "--format", "json")  # fmt: skip
        assert state.returncode == 0, state.stderr
        (described,) = json.loads(state.stdout)
        assert (described["state"], described["members"]) == ("Stable", 1)
        ssl = ["--bootstrap-server", secure.layout["kafka_ssl_bootstrap_servers"],
               "--command-config", secure.admin_properties]  # fmt: skip
        listed = run_module("cli.consumer_groups", *ssl, "--list")
        assert listed.returncode == 0, listed.stderr
        assert group in listed.stdout.splitlines()
        wrong = tmp_path / "wrong.properties"
        wrong.write_text(
            "".join(f"{k}={v}\n" for k, v in secure.sasl().items() if k != "sasl.password")
            + "sasl.password=not-the-admin-password\n"
        )
        refused = run_module("cli.consumer_groups", "--bootstrap-server", sasl_listeners,
                             "--command-config", str(wrong), "--list")  # fmt: skip
        assert refused.returncode == 1
        assert refused.stderr.startswith("SASL_AUTHENTICATION_FAILED: "), refused.stderr
        shown = refused.stdout + refused.stderr
        assert "not-the-admin-password" not in shown and secure.sasl()["sasl.password"] not in shown
        plain = run_module("cli.consumer_groups", "--bootstrap-server", sasl_listeners, "--list")
        assert plain.returncode == 1 and "BROKER_NOT_AVAILABLE" in plain.stderr, plain.stderr
        no_certificate = tmp_path / "no-certificate.properties"
        no_certificate.write_text(
            f"security.protocol=SSL\nssl.truststore.location={secure.config / 'ca.pem'}\n"
        )
        anonymous = run_module("cli.consumer_groups", *ssl[:2], "--command-config",
                               str(no_certificate), "--list")  # fmt: skip
        assert anonymous.returncode == 1
        assert "does it require a client certificate" in anonymous.stderr, anonymous.stderr
    finally:
        for member in members:
            member.close()


def test_status_answers_on_a_secure_cluster(kraft: SecureCluster) -> None:
    result = run_module("cli.cluster", "status", "--data-dir", str(kraft.dir), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(result.stdout)
    assert status["active_controller"] in ("controller-0", "controller-1")
    broker = next(p for p in status["processes"] if p["name"] == "broker-1")
    assert broker["ports"]["kafka_ssl"] == kraft.layout["kafka_ssl_brokers"][0]


def test_no_secret_reaches_a_log_in_kraft_mode(kraft: SecureCluster) -> None:
    assert_no_secrets(kraft.secrets(), root=kraft.dir)


# --------------------------------------------------------------------------------- ZooKeeper


@pytest.mark.zookeeper
def test_an_unauthenticated_zookeeper_client_cannot_change_the_cluster_znodes(
    zookeeper: SecureCluster,
) -> None:
    connect = zookeeper.layout["zookeeper"]
    hosts, _, chroot = connect.partition("/")
    assert chroot == "tiered", connect
    broker = load_properties(zookeeper.config / "broker-1.properties")
    assert broker["zookeeper.set.acl"] == "true"
    assert broker["zookeeper.jaas.config.file"] == str(zookeeper.config / "zookeeper.jaas")
    assert stat.S_IMODE((zookeeper.config / "zookeeper.jaas").stat().st_mode) == PRIVATE
    # The cluster serves: a topic created with the admin's certificate.
    admin = ["--bootstrap-server", zookeeper.bootstrap, "--command-config",
             zookeeper.admin_properties]  # fmt: skip
    created = run_module(
        "cli.topics", *admin, "--create", "--topic", "zk-topic", "--partitions", "1"
    )
    assert created.returncode == 0, created.stderr
    # Over TLS with a certificate from the cluster CA, but without the digest identity.
    client = start_kazoo_client(hosts, **zookeeper_tls_only(zookeeper))
    try:
        children = client.get_children("/tiered")
        assert {"brokers", "config"} <= set(children), children
        for child in children:
            with pytest.raises(NoAuthError):
                client.create(f"/tiered/{child}/intruder", b"x")
            with pytest.raises(NoAuthError):
                client.set(f"/tiered/{child}", b"x")
        with pytest.raises(NoAuthError):
            client.create("/tiered/intruder", b"x")
        with pytest.raises(NoAuthError):
            client.delete("/tiered/brokers", recursive=True)
    finally:
        client.stop()
        client.close()
    status = run_module("cli.cluster", "status", "--data-dir", str(zookeeper.dir))
    assert status.returncode == 0, status.stdout + status.stderr
    assert_no_secrets(zookeeper.secrets(), root=zookeeper.dir)


def zookeeper_tls_only(cluster: SecureCluster) -> dict[str, Any]:
    """kazoo's TLS options from the cluster's ZooKeeper client config, without its identity."""
    config = load_properties(cluster.layout["zookeeper_client_config"])
    del config["zookeeper.jaas.config.file"]
    return ZooKeeperSecurity.from_config(config).kazoo_tls_options()


@pytest.mark.zookeeper
def test_the_managed_zookeeper_serves_tls_only_and_every_daemon_connects_with_tls(
    zookeeper: SecureCluster,
) -> None:
    assert zookeeper.layout["zookeeper_tls"] is True
    client_config = Path(zookeeper.layout["zookeeper_client_config"])
    assert stat.S_IMODE(client_config.stat().st_mode) == PRIVATE
    for name in ("controller-0", "controller-1", "broker-1"):
        properties = load_properties(zookeeper.config / f"{name}.properties")
        assert properties["zookeeper.ssl.client.enable"] == "true"
        assert properties["zookeeper.ssl.keystore.location"] == str(
            zookeeper.config / f"{name}.keystore.pem"
        )
    hosts = zookeeper.layout["zookeeper"].partition("/")[0]
    # The cluster's own client config connects (the TLS link and the cluster's identity).
    security = ZooKeeperSecurity.from_config(load_properties(client_config))
    owner = ZkClient(zookeeper.layout["zookeeper"], 10.0, security)
    try:
        owner.start(15.0)
        assert "brokers" in owner.kazoo.get_children(owner.chroot)
    finally:
        owner.close()
    # A CLI that touches ZooKeeper, with that config: the znode ACL migration.
    migrated = run_module(
        "tiered.security.zookeeper_migration", "--zookeeper.connect",
        zookeeper.layout["zookeeper"], "--config", str(client_config), "--zookeeper.acl", "secure",
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.startswith("secure: set the ACL of "), migrated.stdout
    # A plaintext client gets no session: no plaintext port is open.
    plaintext = ZkClient(hosts, 2.0)
    try:
        with pytest.raises(KazooTimeoutError):
            plaintext.kazoo.start(timeout=4.0)
    finally:
        plaintext.close()
    assert "clientPort=" not in (zookeeper.config / "zookeeper.cfg").read_text().replace(
        "secureClientPort=", ""
    )
    pid = int((zookeeper.dir / "pids" / "zookeeper.pid").read_text())
    host, port = hosts.rsplit(":", 1)
    assert listening_addresses(pid) == {(host, int(port))}


# --------------------------------------------------------------------------------- more clients


def test_kafka_python_produces_and_reads_over_sasl_ssl(secure: SecureCluster) -> None:
    """An independent client (kafka-python's own SCRAM and TLS) as the SCRAM admin."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPythonPartition

    sasl = secure.sasl()
    config: dict[str, Any] = {
        "bootstrap_servers": secure.layout["kafka_bootstrap_servers"].split(","),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": sasl["sasl.username"],
        "sasl_plain_password": sasl["sasl.password"],
        "ssl_cafile": sasl["ssl.ca.location"],
    }
    topic = "kafka-python-secure"
    admin = KafkaAdmin({"bootstrap.servers": secure.layout["kafka_bootstrap_servers"], **sasl})
    poll_until(lambda: _listed(admin), timeout=30, what="a SASL_SSL login as the admin")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = KafkaProducer(**config)
    try:
        for i in range(5):
            producer.send(topic, f"kp-{i}".encode(), partition=0).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(**config, enable_auto_commit=False, consumer_timeout_ms=20_000)
    try:
        consumer.assign([KafkaPythonPartition(topic, 0)])
        consumer.seek_to_beginning()
        got = [m.value for _, m in zip(range(5), consumer, strict=False)]
    finally:
        consumer.close()
    assert got == [f"kp-{i}".encode() for i in range(5)]


def _listed(admin: KafkaAdmin) -> bool:
    try:
        admin.list_topics(timeout=5)
    except KafkaException:
        return False
    return True


def _mallory(cluster: SecureCluster) -> grpc.ChannelCredentials:
    """Credentials of a certificate the cluster's own CA signed, so that the TLS handshake
    succeeds and the authorizer decides: its principal holds no ACL."""
    ca = CertificateAuthority.load(cluster.config / "ca.pem", cluster.config / "ca.key")
    mallory = ca.issue("CN=mallory,OU=users,O=tiered")
    return grpc.ssl_channel_credentials(
        root_certificates=(cluster.config / "ca.pem").read_bytes(),
        private_key=mallory.private_key_pem(),
        certificate_chain=mallory.certificate_pem,
    )


def _refused(call: Callable[[], object]) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        call()
    assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED, refused.value
    details = str(refused.value.details())
    assert details.startswith("CLUSTER_AUTHORIZATION_FAILED: User:CN=mallory,OU=users,O=tiered")


def test_a_certificate_without_cluster_action_may_make_none_of_the_daemons_calls(
    secure: SecureCluster,
) -> None:
    """The controller refuses RegisterBroker, BrokerHeartbeat and FetchMetadata, a broker
    RemovePartitions and DisableRemoteTopic, each PERMISSION_DENIED, and nothing changes: the
    registered brokers, their addresses and the partition the call named."""
    admin_credentials = channel_credentials(load_properties(secure.admin_properties))
    with AdminClient(secure.bootstrap, timeout_s=30, credentials=admin_credentials) as admin:
        topic = f"kept-{uuid.uuid4().hex[:6]}"
        topic_id = admin.create_topic(topic, 1, wait_hosted=True)
        leader = admin.describe_topic(topic, include_partition_state=False).partitions[0].leader
        before = admin.describe_cluster()
        active = before.controller_endpoint.rpartition("://")[2]
    mallory = _mallory(secure)
    hijacked = before.brokers[0].broker_id
    incarnation = uuid.uuid4().bytes
    with grpc.secure_channel(active, mallory) as channel:
        controller = controller_grpc.ControllerServiceStub(channel)  # type: ignore[no-untyped-call]
        for broker_id in (hijacked, 99):  # a registered broker taken over, a new one added
            registration = metadata_pb.RegisterBrokerRecord(
                broker_id=broker_id, host="127.0.0.66", port=1, incarnation_id=incarnation
            )
            _refused(
                lambda r=registration: controller.RegisterBroker(
                    controller_pb.RegisterBrokerRequest(registration=r), timeout=30
                )
            )
        _refused(
            lambda: controller.BrokerHeartbeat(
                controller_pb.BrokerHeartbeatRequest(
                    broker_id=hijacked, incarnation_id=incarnation
                ),
                timeout=30,
            )
        )
        received: list[controller_pb.FetchMetadataResponse] = []
        stream = controller.FetchMetadata(
            controller_pb.FetchMetadataRequest(broker_id=hijacked, from_offset=0), timeout=30
        )
        _refused(lambda: received.extend(stream))
        assert received == []  # not one batch of the metadata log: ACLs, SCRAM keys
    partition = records_pb2.TopicIdPartition(topic_id=topic_id.bytes, partition=0)
    broker_address = f"127.0.0.1:{secure.layout['brokers'][leader - 1]}"
    with grpc.secure_channel(broker_address, mallory) as channel:
        broker = broker_grpc.BrokerServiceStub(channel)  # type: ignore[no-untyped-call]
        _refused(
            lambda: broker.RemovePartitions(
                broker_pb.RemovePartitionsRequest(
                    controller_epoch=before.controller_epoch, partitions=[partition]
                ),
                timeout=30,
            )
        )
        entry = broker_pb.DisableRemoteTopicEntry(
            partition=partition, tiered_epoch=1, policy="delete"
        )
        _refused(
            lambda: broker.DisableRemoteTopic(
                broker_pb.DisableRemoteTopicRequest(
                    controller_epoch=before.controller_epoch, entries=[entry]
                ),
                timeout=30,
            )
        )
    with AdminClient(secure.bootstrap, timeout_s=30, credentials=admin_credentials) as admin:
        after = admin.describe_cluster()
    assert [(b.broker_id, b.host, b.port, b.fenced) for b in after.brokers] == [
        (b.broker_id, b.host, b.port, b.fenced) for b in before.brokers
    ]
    with grpc.secure_channel(broker_address, admin_credentials) as channel:
        broker = broker_grpc.BrokerServiceStub(channel)  # type: ignore[no-untyped-call]
        hosted = broker.DescribeLogDirs(broker_pb.DescribeLogDirsRequest(), timeout=30)
    assert (topic_id.bytes, 0) in {
        (d.partition.topic_id, d.partition.partition) for d in hosted.partitions
    }


def test_an_idempotent_producer_needs_write_on_some_topic(secure: SecureCluster) -> None:
    """InitProducerId as Kafka authorizes it: IdempotentWrite on the cluster, or Write on any
    topic. A SCRAM user who may only Describe the topic is refused a producer id; with Write on
    it she gets one."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    bootstrap = secure.layout["kafka_bootstrap_servers"]
    admin = KafkaAdmin({"bootstrap.servers": bootstrap, **secure.sasl()})
    poll_until(lambda: _listed(admin), timeout=30, what="a SASL_SSL login as the admin")
    topic, password = "idempotent-orders", uuid.uuid4().hex
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    upsertion = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
    )
    admin.alter_user_scram_credentials([upsertion])["carol"].result(timeout=30)
    carol = {
        **secure.sasl(),
        "bootstrap.servers": bootstrap,
        "sasl.username": "carol",
        "sasl.password": password,
        "enable.idempotence": True,
        "message.timeout.ms": 8000,
    }

    def grant(operation: AclOperation) -> None:
        acl = AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:carol",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        admin.create_acls([acl])[acl].result(timeout=30)

    def refused() -> bool:
        # No callbacks: librdkafka raises the fatal error while it would call them.
        producer = Producer(carol)
        try:
            producer.produce(topic, b"x")
            producer.flush(10)
        except KafkaException as e:
            return bool(e.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED)
        return False

    def produced() -> bool:
        failures: list[KafkaError] = []
        producer = Producer(carol)
        producer.produce(topic, b"x", on_delivery=lambda e, _m: e and failures.append(e))
        return producer.flush(10) == 0 and not failures

    grant(AclOperation.DESCRIBE)  # her Metadata answers; a producer id needs a Write
    poll_until(refused, timeout=60, what="carol's producer id refused")
    grant(AclOperation.WRITE)
    poll_until(produced, timeout=60, what="carol's idempotent produce")
