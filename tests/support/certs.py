"""Certificates for TLS tests: one cluster CA, and what it issues (a broker, a controller, an admin
client, an expired client), plus a client certificate from another CA; PEM files as Kafka's
``ssl.keystore.type=PEM`` reads them. One set per test session (the ``certificates`` fixture)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.security.certs import CertificateAuthority, KeystoreFiles, ValidityWindow

BROKER_DN = "CN=broker-1,OU=brokers,O=tiered"
CONTROLLER_DN = "CN=controller,OU=controllers,O=tiered"
ADMIN_DN = "CN=admin,OU=users,O=tiered"
EXPIRED_DN = "CN=expired,OU=users,O=tiered"
STRANGER_DN = "CN=stranger,OU=users,O=elsewhere"
KEY_PASSWORD = "kafka-key-secret"  # the broker's and the admin's keys; it must never show


@dataclass(frozen=True)
class ClusterCertificates:
    ca: Path  # the cluster CA's certificate: every truststore
    broker: KeystoreFiles  # encrypted with KEY_PASSWORD
    controller: KeystoreFiles
    admin: KeystoreFiles  # encrypted with KEY_PASSWORD
    expired: KeystoreFiles
    stranger: KeystoreFiles  # from another CA

    def server_properties(self, keystore: KeystoreFiles, **extra: str) -> dict[str, str]:
        """A daemon's ``ssl.*`` keys for ``keystore``, trusting the cluster CA."""
        properties = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore.keystore),
            "ssl.truststore.location": str(self.ca),
            **extra,
        }
        if keystore in (self.broker, self.admin):
            properties["ssl.key.password"] = KEY_PASSWORD
        return properties

    def client_properties(self, keystore: KeystoreFiles | None) -> dict[str, str]:
        """A ``--command-config`` for a client presenting ``keystore`` (None: no certificate)."""
        properties = {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(self.ca),
        }
        if keystore is not None:
            properties["ssl.keystore.type"] = "PEM"
            properties["ssl.keystore.location"] = str(keystore.keystore)
        if keystore in (self.broker, self.admin):
            properties["ssl.key.password"] = KEY_PASSWORD
        return properties


def write_properties(path: Path, properties: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    return path


def issue_certificates(directory: Path) -> ClusterCertificates:
    ca = CertificateAuthority.create("CN=tiered-test-ca,O=tiered")
    other = CertificateAuthority.create("CN=another-ca,O=elsewhere")
    return ClusterCertificates(
        ca=ca.write_certificate(directory / "ca.pem"),
        broker=ca.issue(BROKER_DN).write_pem_files(directory, "broker", key_password=KEY_PASSWORD),
        controller=ca.issue(CONTROLLER_DN).write_pem_files(directory, "controller"),
        admin=ca.issue(ADMIN_DN).write_pem_files(directory, "admin", key_password=KEY_PASSWORD),
        expired=ca.issue(
            EXPIRED_DN, ValidityWindow.days_from_now(-1, starting_days_ago=30)
        ).write_pem_files(directory, "expired"),
        stranger=other.issue(STRANGER_DN).write_pem_files(directory, "stranger"),
    )


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> ClusterCertificates:
    return issue_certificates(tmp_path_factory.mktemp("certificates"))
