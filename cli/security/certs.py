"""A certificate authority of our own, and the certificates it signs for the cluster's processes and
admin users (``tiered-cluster up --secure``, and the tests).

Every certificate carries SAN ``IP:127.0.0.1`` and ``DNS:localhost`` (clients verify host names, as
librdkafka does by default) and is valid for both TLS server and client use, so one keystore serves
a process's listeners and the mutual-TLS channels it opens. Files are PEM as Kafka's
``ssl.keystore.type=PEM`` reads them: the keystore is the private key followed by the certificate
chain (leaf first); ``ssl.key.password`` encrypts the key (PKCS#8) when given.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

__all__ = [
    "DEFAULT_SUBJECT_ALTERNATIVE_NAMES",
    "CertificateAuthority",
    "IssuedCertificate",
    "KeystoreFiles",
    "ValidityWindow",
    "write_private_file",
]

DEFAULT_SUBJECT_ALTERNATIVE_NAMES: tuple[x509.GeneralName, ...] = (
    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    x509.DNSName("localhost"),
)
_PRIVATE_FILE_MODE = 0o600


@dataclass(frozen=True, slots=True)
class ValidityWindow:
    not_before: datetime.datetime
    not_after: datetime.datetime

    @classmethod
    def days_from_now(cls, days: float, *, starting_days_ago: float = 1.0) -> ValidityWindow:
        """From ``starting_days_ago`` (clock skew between hosts) until ``days`` from now; a
        negative ``days`` gives a certificate that has already expired."""
        now = datetime.datetime.now(datetime.UTC)
        return cls(
            now - datetime.timedelta(days=starting_days_ago), now + datetime.timedelta(days=days)
        )


@dataclass(frozen=True, slots=True)
class KeystoreFiles:
    """What ``write_pem_files`` wrote: the leaf certificate, its private key, and the combined
    keystore (key then chain) that ``ssl.keystore.location`` names."""

    certificate: Path
    private_key: Path
    keystore: Path


@dataclass(frozen=True)
class IssuedCertificate:
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey
    chain: tuple[x509.Certificate, ...] = ()  # the issuers above the leaf

    @property
    def certificate_pem(self) -> bytes:
        return b"".join(
            c.public_bytes(serialization.Encoding.PEM) for c in (self.certificate, *self.chain)
        )

    def private_key_pem(self, password: str | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return self.private_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )

    def write_pem_files(
        self, directory: Path, name: str, *, key_password: str | None = None
    ) -> KeystoreFiles:
        """``NAME.pem`` (the chain), ``NAME.key`` and ``NAME.keystore.pem`` in ``directory``; the
        files holding the key are readable by their owner only."""
        directory.mkdir(parents=True, exist_ok=True)
        key_pem = self.private_key_pem(key_password)
        files = KeystoreFiles(
            directory / f"{name}.pem", directory / f"{name}.key", directory / f"{name}.keystore.pem"
        )
        files.certificate.write_bytes(self.certificate_pem)
        write_private_file(files.private_key, key_pem)
        write_private_file(files.keystore, key_pem + self.certificate_pem)
        return files


class CertificateAuthority:
    """A self-signed CA that issues leaf certificates."""

    def __init__(self, certificate: x509.Certificate, private_key: ec.EllipticCurvePrivateKey):
        self.certificate = certificate
        self.private_key = private_key

    @classmethod
    def create(
        cls, subject: str = "CN=tiered-ca,O=tiered", validity: ValidityWindow | None = None
    ) -> CertificateAuthority:
        """A new CA named ``subject`` (an RFC 4514 string, e.g. ``CN=ca,O=tiered``)."""
        window = validity or ValidityWindow.days_from_now(3650)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name.from_rfc4514_string(subject)
        certificate = (
            _builder(name, name, key.public_key(), window)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        return cls(certificate, key)

    @classmethod
    def load(cls, certificate_path: Path, key_path: Path) -> CertificateAuthority:
        """The CA that ``write_certificate`` and ``write_private_key`` wrote; ValueError naming
        the file when one is not a PEM certificate or unencrypted EC key."""
        try:
            certificate = x509.load_pem_x509_certificate(certificate_path.read_bytes())
        except ValueError:
            raise ValueError(f"{certificate_path} is not a PEM certificate") from None
        try:
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        except (ValueError, TypeError):
            raise ValueError(f"{key_path} is not an unencrypted PEM private key") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} is not an EC private key")
        return cls(certificate, key)

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def write_private_key(self, path: Path) -> Path:
        """The CA's private key (PEM, readable by its owner only), to issue more certificates
        later (``load``)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private_file(
            path,
            self.private_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        return path

    def write_certificate(self, path: Path) -> Path:
        """The CA's certificate, what ``ssl.truststore.location`` names."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.certificate_pem)
        return path

    def issue(
        self,
        subject: str,
        validity: ValidityWindow | None = None,
        subject_alternative_names: Sequence[x509.GeneralName] = DEFAULT_SUBJECT_ALTERNATIVE_NAMES,
    ) -> IssuedCertificate:
        """A certificate for ``subject`` (RFC 4514, e.g. ``CN=broker-1,OU=brokers,O=tiered``),
        signed by this CA, for TLS servers and clients alike."""
        window = validity or ValidityWindow.days_from_now(825)
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(
            x509.Name.from_rfc4514_string(subject),
            self.certificate.subject,
            key.public_key(),
            window,
        )
        builder = (
            builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.private_key.public_key()),
                critical=False,
            )
        )
        if subject_alternative_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(list(subject_alternative_names)), critical=False
            )
        return IssuedCertificate(builder.sign(self.private_key, hashes.SHA256()), key)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    window: ValidityWindow,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(window.not_before)
        .not_valid_after(window.not_after)
    )


def write_private_file(path: Path, data: bytes) -> None:
    """Writes ``data`` to ``path``, readable and writable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, _PRIVATE_FILE_MODE)
    os.fchmod(fd, _PRIVATE_FILE_MODE)  # also when the file was already there
    with os.fdopen(fd, "wb") as f:
        f.write(data)
