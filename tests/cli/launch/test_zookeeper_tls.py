"""ZooKeeper over TLS only (``cli.launch.zookeeper.tls``) and the project's ZooKeeper clients
over it (``zookeeper.ssl.*``): a client with a certificate from the CA is served, a plaintext
client, a client without a certificate and one with a stranger's are not; no plaintext port is
open; the ensemble forms over TLS quorum links and a member without TLS gets no quorum."""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.handlers.threading import KazooTimeoutError

from cli.launch.zookeeper import FOLLOWER, LEADER, ServerTls, server_mode
from cli.security.certs import CertificateAuthority
from tests.support.polling import poll_until
from tests.support.sockets import listening_addresses
from tests.support.zookeeper import ZooKeeperEnsemble, ZooKeeperServer, running_ensemble
from tiered.security.zookeeper_auth import ZooKeeperSecurity
from tiered.zk_client import ZkClient

pytestmark = pytest.mark.zookeeper

REFUSED_WITHIN_S = 4.0


@dataclass(frozen=True)
class Certificates:
    server: ServerTls
    client: Path  # a keystore from the same CA
    stranger: Path  # a keystore from another CA
    ca: Path


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    root = tmp_path_factory.mktemp("zookeeper-tls")
    ca = CertificateAuthority.create()
    ca.write_certificate(root / "ca.pem")
    server = ca.issue("CN=zookeeper,OU=zookeepers,O=tiered").write_pem_files(root, "zookeeper")
    client = ca.issue("CN=broker-1,OU=brokers,O=tiered").write_pem_files(root, "client")
    other = CertificateAuthority.create("CN=other-ca,O=elsewhere")
    stranger = other.issue("CN=broker-1,OU=brokers,O=tiered").write_pem_files(root, "stranger")
    return Certificates(
        ServerTls(server.keystore, root / "ca.pem"),
        client.keystore,
        stranger.keystore,
        root / "ca.pem",
    )


@pytest.fixture(scope="module")
def tls_server(
    certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path_factory.mktemp("zk-tls-server"), tls=certificates.server)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def tls_config(keystore: Path | None, ca: Path) -> dict[str, str]:
    config = {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.truststore.location": str(ca),
        "zookeeper.ssl.truststore.type": "PEM",
    }
    if keystore is not None:
        config["zookeeper.ssl.keystore.location"] = str(keystore)
        config["zookeeper.ssl.keystore.type"] = "PEM"
    return config


def start(connect: str, config: dict[str, str], timeout_s: float = 15.0) -> ZkClient:
    client = ZkClient(connect, 10.0, ZooKeeperSecurity.from_config(config))
    client.kazoo.start(timeout=timeout_s)
    return client


def assert_refused(connect: str, config: dict[str, str]) -> None:
    client = ZkClient(connect, 2.0, ZooKeeperSecurity.from_config(config))
    try:
        with pytest.raises(KazooTimeoutError):
            client.kazoo.start(timeout=REFUSED_WITHIN_S)
    finally:
        client.close()


def test_a_client_with_a_certificate_from_the_ca_reads_and_writes(
    tls_server: ZooKeeperServer, certificates: Certificates
) -> None:
    client = start(tls_server.connect_string, tls_config(certificates.client, certificates.ca))
    try:
        client.kazoo.create("/tls-written", b"over tls")
        assert client.kazoo.get("/tls-written")[0] == b"over tls"
        (connection,) = [client.kazoo._connection._socket]
        assert isinstance(connection, ssl.SSLSocket)
        subject = dict(pair for (pair,) in connection.getpeercert()["subject"])
        assert subject["commonName"] == "zookeeper"
    finally:
        client.close()


def test_a_plaintext_client_is_refused(tls_server: ZooKeeperServer) -> None:
    """The one port is TLS-only: a plaintext client's handshake never gets a session."""
    assert_refused(tls_server.connect_string, {})
    # Nor does a four-letter word in plaintext get an answer.
    assert server_mode(tls_server.host, tls_server.port, timeout=2.0) is None


def test_a_client_without_a_certificate_or_with_a_strangers_is_refused(
    tls_server: ZooKeeperServer, certificates: Certificates
) -> None:
    assert_refused(tls_server.connect_string, tls_config(None, certificates.ca))
    assert_refused(tls_server.connect_string, tls_config(certificates.stranger, certificates.ca))


def test_only_the_tls_port_is_open(tls_server: ZooKeeperServer) -> None:
    """The JVM listens on the TLS port and nowhere else: no plaintext port beside it."""
    assert tls_server.pid is not None
    assert listening_addresses(tls_server.pid) == {(tls_server.host, tls_server.port)}
    config = tls_server.config_path.read_text()
    assert f"secureClientPort={tls_server.port}\n" in config
    assert "clientPort=" not in config.replace("secureClientPort=", "")
    assert "ssl.clientAuth=need\n" in config


# --------------------------------------------------------------------------------- ensemble


@pytest.fixture(scope="module")
def tls_ensemble(
    certificates: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperEnsemble]:
    with running_ensemble(
        tmp_path_factory.mktemp("zk-tls-ensemble"), tls=certificates.server
    ) as ensemble:
        yield ensemble


def test_the_ensemble_forms_over_tls_and_serves_tls_clients(
    tls_ensemble: ZooKeeperEnsemble, certificates: Certificates
) -> None:
    modes = tls_ensemble.modes()
    assert sorted(modes.values(), key=str) == [FOLLOWER, FOLLOWER, LEADER], modes
    for member in tls_ensemble.members:
        config = member.config_path.read_text()
        assert "sslQuorum=true\n" in config and "portUnification=false\n" in config
    client = start(tls_ensemble.connect_string, tls_config(certificates.client, certificates.ca))
    try:
        client.kazoo.create("/ensemble-tls", b"replicated")
        for member in tls_ensemble.members:
            one = start(member.connect_string, tls_config(certificates.client, certificates.ca))
            try:
                one.kazoo.sync("/ensemble-tls")
                assert one.kazoo.get("/ensemble-tls")[0] == b"replicated"
            finally:
                one.close()
    finally:
        client.close()
    assert_refused(tls_ensemble.connect_string, {})


def test_a_plaintext_connection_to_a_quorum_port_gets_no_quorum(
    certificates: Certificates, tmp_path: Path
) -> None:
    """Members 1 and 2 form a quorum over TLS; member 3, configured without TLS on its quorum
    links, is refused by both and never follows (it serves no client), while the other two keep
    serving."""
    ensemble = ZooKeeperEnsemble(tmp_path, tls=certificates.server)
    plaintext = ensemble.member(3)
    try:
        ensemble.start([1, 2])
        ensemble.wait_until_formed()
        plaintext.tls = None
        plaintext._spawn()
        leader = ensemble.leader()
        assert leader is not None
        # The TLS members' side of the refused links: ZooKeeper's words for a plaintext peer.
        poll_until(
            lambda: _refused_plaintext_peer(ensemble),
            timeout=60.0,
            what="a TLS member to refuse member 3's plaintext quorum connection",
        )
        assert server_mode(plaintext.host, plaintext.port, timeout=1.0) is None
        assert plaintext.is_running
        assert {ensemble.member(1).mode(), ensemble.member(2).mode()} == {LEADER, FOLLOWER}
        # A raw plaintext connection to the leader's quorum port is dropped without a reply.
        with socket.create_connection(
            (leader.host, leader.ports.quorum), timeout=REFUSED_WITHIN_S
        ) as sock:
            sock.sendall(b"\x00" * 64)
            with contextlib.suppress(ConnectionResetError):  # dropped either way
                assert sock.recv(64) == b""
    finally:
        ensemble.kill()


def _refused_plaintext_peer(ensemble: ZooKeeperEnsemble) -> bool:
    logs = "".join(ensemble.member(i).log_path.read_text(errors="replace") for i in (1, 2))
    return "Blocked insecure connection attempt" in logs
