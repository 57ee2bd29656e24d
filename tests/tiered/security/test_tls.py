"""TLS settings under Kafka's keys, the certificates ``cli.security.certs`` writes, and the
principal of a client certificate (DEFAULT and ``ssl.principal.mapping.rules``), over real
handshakes between ``ssl`` contexts on a socket pair."""

from __future__ import annotations

import re
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from cli.security.certs import CertificateAuthority
from tests.support.certs import (
    ADMIN_DN,
    BROKER_DN,
    KEY_PASSWORD,
    ClusterCertificates,
)
from tiered.security.principal import ANONYMOUS, KafkaPrincipal
from tiered.security.ssl_principal import (
    NoMatchingRuleError,
    SslPrincipalMapper,
    distinguished_name,
)
from tiered.security.tls import ClientAuth, TlsSettings


def _certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


# ------------------------------------------------------------------------------ settings


def test_settings_read_kafkas_keys(certificates: ClusterCertificates) -> None:
    settings = TlsSettings.from_properties(
        {
            **certificates.server_properties(certificates.broker),
            "ssl.client.auth": "REQUIRED",
            "ssl.enabled.protocols": "TLSv1.3",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert settings.client_auth is ClientAuth.REQUIRED
    assert settings.enabled_protocols == ("TLSv1.3",)
    assert not settings.verify_hostname
    defaults = TlsSettings.from_properties({})
    assert defaults.client_auth is ClientAuth.NONE
    assert defaults.enabled_protocols == ("TLSv1.2", "TLSv1.3")
    assert defaults.verify_hostname


def test_a_listeners_own_keys_win(certificates: ClusterCertificates) -> None:
    values = {"ssl.client.auth": "requested", "listener.name.grpc.ssl.client.auth": "required"}
    assert TlsSettings.from_properties(values, "GRPC").client_auth is ClientAuth.REQUIRED
    assert TlsSettings.from_properties(values, "SSL").client_auth is ClientAuth.REQUESTED


@pytest.mark.parametrize(
    ("key", "value", "valid"),
    [
        ("ssl.client.auth", "sometimes", "required, requested, none"),
        ("ssl.enabled.protocols", "TLSv1.1", "TLSv1.2, TLSv1.3"),
        ("ssl.enabled.protocols", " , ", "TLSv1.2, TLSv1.3"),
        ("ssl.keystore.type", "JKS", "PEM"),
        ("ssl.truststore.type", "PKCS12", "PEM"),
        ("ssl.endpoint.identification.algorithm", "http", "https"),
    ],
)
def test_a_bad_value_names_the_key_and_the_valid_values(key: str, value: str, valid: str) -> None:
    with pytest.raises(ValueError, match=re.escape(key)) as raised:
        TlsSettings.from_properties({key: value})
    assert valid in str(raised.value)


def test_a_wrong_key_password_is_refused_without_showing_it(
    certificates: ClusterCertificates, tmp_path: Path
) -> None:
    keystore = str(certificates.admin.keystore)
    right = TlsSettings.from_properties(
        {"ssl.keystore.location": keystore, "ssl.key.password": KEY_PASSWORD}
    )
    assert KEY_PASSWORD not in repr(right)
    right.client_context()  # the encrypted key loads
    with pytest.raises(ValueError, match=r"ssl\.key\.password") as raised:
        TlsSettings.from_properties(
            {"ssl.keystore.location": keystore, "ssl.key.password": "wrong-secret"}
        )
    assert "wrong-secret" not in str(raised.value)
    with pytest.raises(ValueError, match=r"ssl\.keystore\.location"):
        TlsSettings.from_properties({"ssl.keystore.location": str(tmp_path / "missing.pem")})


def test_written_files_are_pem_keystores_readable_by_their_owner_only(
    certificates: ClusterCertificates,
) -> None:
    files = certificates.controller
    assert files.keystore.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    encrypted = certificates.broker.keystore.read_bytes()
    assert encrypted.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
    assert b"-----BEGIN CERTIFICATE-----" in files.keystore.read_bytes()
    for private in (files.keystore, files.private_key):
        assert private.stat().st_mode & 0o077 == 0
    leaf = _certificate(files.certificate)
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]


# ------------------------------------------------------------------------------ handshakes


def _handshake(
    server: ssl.SSLContext, client: ssl.SSLContext, server_hostname: str = "localhost"
) -> tuple[bytes | None, BaseException | None]:
    """A real handshake over a socket pair: the server's view of the client certificate (DER),
    or the error the server saw."""
    server_sock, client_sock = socket.socketpair()
    outcome: list[tuple[bytes | None, BaseException | None]] = []

    def serve() -> None:
        try:
            with server.wrap_socket(server_sock, server_side=True) as tls:
                outcome.append((tls.getpeercert(binary_form=True), None))
                tls.recv(1)
        except (ssl.SSLError, OSError) as e:
            outcome.append((None, e))

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client.wrap_socket(client_sock, server_hostname=server_hostname) as tls:
            tls.sendall(b"x")
            tls.recv(1)  # the server's verdict on a TLS 1.3 client certificate arrives here
    except (ssl.SSLError, OSError):
        pass
    thread.join(10)
    return outcome[0]


def _server(certificates: ClusterCertificates, client_auth: str) -> ssl.SSLContext:
    return TlsSettings.from_properties(
        certificates.server_properties(certificates.broker, **{"ssl.client.auth": client_auth})
    ).server_context()


def _client(certificates: ClusterCertificates, keystore: object = None) -> ssl.SSLContext:
    properties = certificates.client_properties(keystore)  # type: ignore[arg-type]
    return TlsSettings.from_properties(properties).client_context()


def test_required_client_auth_refuses_no_certificate_another_ca_and_an_expired_one(
    certificates: ClusterCertificates,
) -> None:
    server = _server(certificates, "required")
    der, error = _handshake(server, _client(certificates, certificates.admin))
    assert error is None and der is not None
    mapper = SslPrincipalMapper()
    assert mapper.principal_of_der(der) == KafkaPrincipal("User", ADMIN_DN)
    for refused, reason in [
        (None, "PEER_DID_NOT_RETURN_A_CERTIFICATE"),
        (certificates.stranger, "unable to get local issuer certificate"),
        (certificates.expired, "certificate has expired"),
    ]:
        _, error = _handshake(server, _client(certificates, refused))
        assert error is not None and reason in str(error), (refused, error)


def test_requested_client_auth_lets_a_client_without_certificate_in_as_anonymous(
    certificates: ClusterCertificates,
) -> None:
    der, error = _handshake(_server(certificates, "requested"), _client(certificates))
    assert error is None
    assert SslPrincipalMapper().principal_of_der(der) == ANONYMOUS


def test_clients_verify_the_servers_host_name_unless_told_not_to(
    certificates: ClusterCertificates,
) -> None:
    server = _server(certificates, "none")
    _, error = _handshake(server, _client(certificates), server_hostname="127.0.0.1")
    assert error is None  # the IP SAN matches
    lenient = TlsSettings.from_properties(
        {**certificates.client_properties(None), "ssl.endpoint.identification.algorithm": ""}
    ).client_context()
    _, error = _handshake(server, lenient, server_hostname="broker.example.com")
    assert error is None
    _, error = _handshake(server, _client(certificates), server_hostname="broker.example.com")
    assert error is not None  # the client gave up: the server saw the connection drop


# ------------------------------------------------------------------------------ principals


def test_the_default_name_is_javas_rfc2253_form() -> None:
    ca = CertificateAuthority.create()
    assert distinguished_name(ca.issue(BROKER_DN).certificate) == BROKER_DN
    escaped = ca.issue("CN=a\\,b\\+c,O=x\\=y").certificate
    assert distinguished_name(escaped) == "CN=a\\,b\\+c,O=x\\=y"
    with_email = ca.issue("CN=alice,1.2.840.113549.1.9.1=alice@example.com").certificate
    # Java names only RFC 2253's keywords; emailAddress is its OID and the DER value in hex.
    assert distinguished_name(with_email) == (
        "CN=alice,1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d"
    )


@pytest.mark.parametrize(
    ("rules", "name"),
    [
        ("DEFAULT", BROKER_DN),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/", "broker-1@tiered"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1/U", "BROKER-1"),
        ("RULE:^CN=(.*?),OU=brokers.*$/$1/L, DEFAULT", "broker-1"),
        ("RULE:^CN=(.*?),OU=users.*$/$1/, DEFAULT", BROKER_DN),  # first matching rule wins
        ("RULE:^CN=([^,]*).*$/svc\\/$1/", "svc/broker-1"),  # an escaped slash in the replacement
        ("RULE:^CN=(.*?),.*$/$1-$9/", "broker-1-$9"),  # a group past the last is literal
    ],
)
def test_mapping_rules(rules: str, name: str) -> None:
    certificate = CertificateAuthority.create().issue(BROKER_DN).certificate
    assert SslPrincipalMapper(rules).principal_of(certificate) == KafkaPrincipal("User", name)


def test_no_matching_rule_authenticates_nobody_and_bad_rules_are_refused() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*?),OU=users.*$/$1/")
    with pytest.raises(NoMatchingRuleError, match=r"ssl\.principal\.mapping\.rules"):
        mapper.name_of(BROKER_DN)
    for bad in ("RULE:^CN=(.*)$/$1/X", "NOT-A-RULE", "RULE:^CN=(.*$/$1/"):
        with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
            SslPrincipalMapper(bad)
