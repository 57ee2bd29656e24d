"""A cluster with TLS everywhere, as real processes: gRPC over mutual TLS between the controllers,
the brokers and the test (``listener.security.protocol.map=GRPC:SSL``), and brokers whose Kafka
listener is SSL with a required client certificate. A disable completes over mutual TLS,
confluent-kafka produces and consumes over SSL, the admin CLI describes with ``--command-config``;
clients without a certificate, with one from another CA or an expired one are refused on both
listeners, and no key password shows in any log. In both metadata modes (one cluster each): the
brokers join the cluster, and learn what they host, by a different route in each."""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cli.security.certs import KeystoreFiles
from cli.security.client_config import channel_credentials
from tests.support.certs import KEY_PASSWORD, ClusterCertificates, write_properties
from tests.support.cluster import Cluster, kafka_address
from tests.support.kafka_clients import confluent_produce, consume, sample, wait_hosted
from tests.support.kafka_cluster import MODES, shared_cluster
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import AdminClient
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError

pytestmark = pytest.mark.processes

GRPC_TLS = {"listener.security.protocol.map": "GRPC:SSL"}
REFUSED = ("nobody", "stranger", "expired")


def _keystore(certificates: ClusterCertificates, who: str) -> KeystoreFiles | None:
    return None if who == "nobody" else getattr(certificates, who)


def _credentials(certificates: ClusterCertificates, who: str) -> grpc.ChannelCredentials:
    credentials = channel_credentials(certificates.client_properties(_keystore(certificates, who)))
    assert credentials is not None
    return credentials


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    certificates: ClusterCertificates,
) -> Iterator[Cluster]:
    broker = {
        **GRPC_TLS,
        **certificates.server_properties(certificates.broker, **{"ssl.client.auth": "required"}),
    }
    with shared_cluster(
        request,
        tmp_path_factory.mktemp(f"tls-cluster-{request.param}"),
        broker_overrides={1: broker, 2: broker},
        controller_overrides={
            **GRPC_TLS,
            **certificates.server_properties(certificates.controller),
        },
        kafka_listener="SSL",
        credentials=_credentials(certificates, "admin"),
    ) as c:
        yield c


def test_a_disable_completes_over_mutual_tls(cluster: Cluster) -> None:
    """Registration and heartbeats (KRaft: with the metadata stream), AssignPartitions and
    DisableRemoteTopic all ran between processes that only speak mutual TLS."""
    topic = cluster.tiered_topic(
        "secured", 1, {"remote.storage.enable": "true", "segment.bytes": "2000"}
    )
    cluster.admin.incremental_alter_configs("secured", {"remote.storage.enable": "false"})
    disabled = cluster.wait_for_state("secured", TieredState.DISABLED)
    assert disabled.tiered_epoch == 1
    entry = cluster.log_dirs(topic.partitions[0].leader)[(topic.topic_id, 0)]
    assert not entry.copying and entry.tiered_epoch == 1


def test_confluent_kafka_produces_and_consumes_over_ssl(
    cluster: Cluster, certificates: ClusterCertificates
) -> None:
    cluster.admin.create_topic("ssl-records", 1)
    wait_hosted(cluster, "ssl-records")
    ssl_config: dict[str, Any] = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certificates.ca),
        "ssl.certificate.location": str(certificates.admin.certificate),
        "ssl.key.location": str(certificates.admin.private_key),
        "ssl.key.password": KEY_PASSWORD,
    }
    messages = sample(200, size=2000)
    confluent_produce(cluster, "ssl-records", messages, **ssl_config)
    read = consume(cluster, "ssl-records", {0: 0}, len(messages), **ssl_config)
    assert [(m.key, m.value) for m in read] == [(m.key, m.value) for m in messages]


def _tls_handshake_refused(address: str, context: ssl.SSLContext) -> str | None:
    """The client's ``host:port`` when the handshake was refused, None when it went through."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as plain:
        client = "{}:{}".format(*plain.getsockname()[:2])
        try:
            with context.wrap_socket(plain, server_hostname="localhost") as tls:
                tls.sendall(b"\x00\x00\x00\x00")  # TLS 1.3: the verdict comes with the first read
                return client if tls.recv(1) == b"" else None
        except (ssl.SSLError, ConnectionError):
            return client


@pytest.mark.parametrize("who", REFUSED)
def test_the_kafka_ssl_listener_refuses_with_one_log_line(
    cluster: Cluster, certificates: ClusterCertificates, who: str
) -> None:
    from tiered.security.tls import TlsSettings

    broker = cluster.brokers[1]
    context = TlsSettings.from_properties(
        certificates.client_properties(_keystore(certificates, who))
    ).client_context()
    seen = len(broker.output)
    client = _tls_handshake_refused(kafka_address(broker.properties), context)
    assert client is not None
    reason = {
        "nobody": "PEER_DID_NOT_RETURN_A_CERTIFICATE",
        "stranger": "unable to get local issuer certificate",
        "expired": "certificate has expired",
    }[who]
    poll_until(
        lambda: any(reason in line for line in broker.output[seen:]),
        timeout=10,
        what=f"the broker to log the refused handshake ({reason})",
    )
    # this client's lines only: the clients of the tests before may close theirs meanwhile
    lines = [line for line in broker.output[seen:] if f"TLS handshake with {client} " in line]
    assert len(lines) == 1 and "INFO" in lines[0], lines
    assert not any("Traceback" in line for line in broker.output)


@pytest.mark.parametrize("who", REFUSED)
def test_grpc_refuses_clients_without_a_valid_certificate(
    cluster: Cluster, certificates: ClusterCertificates, who: str
) -> None:
    with (
        AdminClient(
            cluster.bootstrap, timeout_s=5, credentials=_credentials(certificates, who)
        ) as admin,
        pytest.raises(TieredError) as refused,
    ):
        admin.describe_cluster()
    assert refused.value.code is ErrorCode.BROKER_NOT_AVAILABLE
    with AdminClient(cluster.bootstrap, timeout_s=5) as plaintext, pytest.raises(TieredError):
        plaintext.describe_cluster()


def _cli(cluster: Cluster, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.topics",
            "--bootstrap-server",
            cluster.bootstrap,
            "--command-config",
            str(config),
            *args,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_the_cli_describes_with_command_config_and_without_a_certificate_is_refused(
    cluster: Cluster, certificates: ClusterCertificates, tmp_path: Path
) -> None:
    cluster.admin.create_topic("cli-tls", 2)
    admin = write_properties(
        tmp_path / "admin.properties", certificates.client_properties(certificates.admin)
    )
    described = _cli(cluster, admin, "--describe", "--topic", "cli-tls")
    assert described.returncode == 0, described.stderr
    assert "cli-tls" in described.stdout
    anonymous = write_properties(
        tmp_path / "anonymous.properties", certificates.client_properties(None)
    )
    refused = _cli(cluster, anonymous, "--describe", "--topic", "cli-tls")
    assert refused.returncode == 1
    assert refused.stderr.startswith("BROKER_NOT_AVAILABLE: "), refused.stderr
    assert "requires a client certificate (set ssl.keystore.location)" in refused.stderr
    assert "Traceback" not in refused.stderr
    bad = write_properties(tmp_path / "bad.properties", {"security.protocol": "SASL_PLAIN"})
    invalid = _cli(cluster, bad, "--describe")
    assert invalid.returncode == 1 and invalid.stderr.startswith("INVALID_CONFIG: ")
    assert "security.protocol" in invalid.stderr and "PLAINTEXT, SSL" in invalid.stderr


def test_no_key_password_in_any_log(cluster: Cluster) -> None:
    for process in [*cluster.controllers, *cluster.brokers.values()]:
        assert not any(re.search(re.escape(KEY_PASSWORD), line) for line in process.output)
