"""TLS settings under Kafka's key names, and the contexts and gRPC credentials built from them.

Keys (a listener's own ``listener.name.<name lowercased>.<key>`` wins over ``<key>``, as in Kafka):

- ``ssl.keystore.type``: ``PEM`` (the only type read here; also the default);
- ``ssl.keystore.location``: a PEM file with the private key and the certificate chain, leaf first
  (what ``cli.security.certs`` writes); a server needs one, a client only for mutual TLS;
- ``ssl.key.password``: the password of an encrypted (PKCS#8) key, if it is encrypted;
- ``ssl.truststore.type``: ``PEM``; ``ssl.truststore.location``: the CA certificates (PEM) that
  peers' certificates must chain to (a client without one trusts the system's CAs);
- ``ssl.client.auth``: ``required``, ``requested`` or ``none`` (default), on servers;
- ``ssl.enabled.protocols``: a comma list of ``TLSv1.2``, ``TLSv1.3`` (default both);
- ``ssl.endpoint.identification.algorithm``: ``https`` (default; clients verify the server's host
  name against its certificate) or empty (they do not).

gRPC (grpcio) has no setting for the protocol versions or for a requested-but-optional client
certificate: its servers either require and verify one (``required``) or do not ask (``none``,
``requested``), and its clients always verify host names. Passwords and keys are never part of a
message or a repr.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

__all__ = ["ClientAuth", "TlsSettings", "listener_property", "readable_file"]

KEYSTORE_TYPE = "ssl.keystore.type"
KEYSTORE_LOCATION = "ssl.keystore.location"
KEY_PASSWORD = "ssl.key.password"
TRUSTSTORE_TYPE = "ssl.truststore.type"
TRUSTSTORE_LOCATION = "ssl.truststore.location"
CLIENT_AUTH = "ssl.client.auth"
ENABLED_PROTOCOLS = "ssl.enabled.protocols"
ENDPOINT_IDENTIFICATION = "ssl.endpoint.identification.algorithm"

_PEM = "PEM"
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_HTTPS = "https"


class ClientAuth(enum.Enum):
    REQUIRED = "required"
    REQUESTED = "requested"
    NONE = "none"


def listener_property(values: Mapping[str, str], key: str, listener: str | None) -> str | None:
    """``listener.name.<listener>.<key>`` if set, else ``key``, else None (Kafka's lookup)."""
    if listener:
        prefixed = values.get(f"listener.name.{listener.lower()}.{key}")
        if prefixed is not None:
            return prefixed
    return values.get(key)


def _one_of(key: str, value: str, valid: tuple[str, ...]) -> str:
    if value not in valid:
        raise ValueError(f"{key}={value!r} is not valid; valid values: {', '.join(valid)}")
    return value


@dataclass(frozen=True)
class TlsSettings:
    keystore_location: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    truststore_location: Path | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    enabled_protocols: tuple[str, ...] = tuple(_PROTOCOLS)
    verify_hostname: bool = True

    @classmethod
    def from_properties(
        cls,
        values: Mapping[str, str],
        listener: str | None = None,
        client_auth_default: ClientAuth = ClientAuth.NONE,
    ) -> TlsSettings:
        """The ``ssl.*`` keys of ``values`` (for ``listener``, if named); ValueError naming the
        key and the valid values for a bad one, or a file that cannot be read."""

        def get(key: str) -> str | None:
            value = listener_property(values, key, listener)
            return None if value is None else value.strip()

        for type_key in (KEYSTORE_TYPE, TRUSTSTORE_TYPE):
            _one_of(type_key, (get(type_key) or _PEM).upper(), (_PEM,))
        client_auth = _one_of(
            CLIENT_AUTH,
            (get(CLIENT_AUTH) or client_auth_default.value).lower(),
            tuple(a.value for a in ClientAuth),
        )
        protocols_value = get(ENABLED_PROTOCOLS)
        protocols = tuple(
            _one_of(ENABLED_PROTOCOLS, p.strip(), tuple(_PROTOCOLS))
            for p in (
                protocols_value if protocols_value is not None else ",".join(_PROTOCOLS)
            ).split(",")
            if p.strip()
        )
        if not protocols:
            raise ValueError(
                f"{ENABLED_PROTOCOLS} is empty; valid values: a comma list of "
                f"{', '.join(_PROTOCOLS)}"
            )
        algorithm = get(ENDPOINT_IDENTIFICATION)
        algorithm = _HTTPS if algorithm is None else algorithm.lower()
        _one_of(ENDPOINT_IDENTIFICATION, algorithm, (_HTTPS, ""))
        settings = cls(
            keystore_location=readable_file(KEYSTORE_LOCATION, get(KEYSTORE_LOCATION)),
            key_password=get(KEY_PASSWORD) or None,
            truststore_location=readable_file(TRUSTSTORE_LOCATION, get(TRUSTSTORE_LOCATION)),
            client_auth=ClientAuth(client_auth),
            enabled_protocols=protocols,
            verify_hostname=algorithm == _HTTPS,
        )
        settings._private_key_pem()  # a wrong password or a keystore without a key: say so now
        return settings

    # ------------------------------------------------------------------------------ ssl module

    def server_context(self) -> ssl.SSLContext:
        """For a listener: this process's keystore, the truststore to verify client certificates
        against, and ``ssl.client.auth``."""
        if self.keystore_location is None:
            raise ValueError(f"a TLS listener needs {KEYSTORE_LOCATION} (a PEM key and chain)")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._configure(context)
        context.verify_mode = {
            ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
            ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
            ClientAuth.NONE: ssl.CERT_NONE,
        }[self.client_auth]
        return context

    def client_context(self) -> ssl.SSLContext:
        """For a client: verifies the server against the truststore (and its host name unless
        ``ssl.endpoint.identification.algorithm`` is empty), presents the keystore if any."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = self.verify_hostname
        self._configure(context)
        if self.truststore_location is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return context

    def _configure(self, context: ssl.SSLContext) -> None:
        versions = sorted(_PROTOCOLS[p] for p in self.enabled_protocols)
        context.minimum_version, context.maximum_version = versions[0], versions[-1]
        if self.keystore_location is not None:
            try:
                context.load_cert_chain(
                    self.keystore_location,
                    password=self.key_password.encode() if self.key_password else None,
                )
            except ssl.SSLError as e:
                raise ValueError(
                    f"{KEYSTORE_LOCATION}={self.keystore_location}: cannot load the key and "
                    f"certificate chain ({e.reason}); check {KEY_PASSWORD}"
                ) from None
        if self.truststore_location is not None:
            context.load_verify_locations(cafile=self.truststore_location)

    # ------------------------------------------------------------------------------------ gRPC

    def grpc_server_credentials(self) -> grpc.ServerCredentials:
        if self.keystore_location is None:
            raise ValueError(f"a TLS gRPC listener needs {KEYSTORE_LOCATION}")
        require = self.client_auth is ClientAuth.REQUIRED
        if require and self.truststore_location is None:
            raise ValueError(f"{CLIENT_AUTH}=required needs {TRUSTSTORE_LOCATION}")
        key = self._private_key_pem()
        assert key is not None  # there is a keystore
        return grpc.ssl_server_credentials(
            [(key, self._certificate_chain_pem())],
            root_certificates=self._truststore_pem(),
            require_client_auth=require,
        )

    def grpc_channel_credentials(self) -> grpc.ChannelCredentials:
        """Mutual TLS when there is a keystore; server-only TLS otherwise."""
        key = self._private_key_pem()
        return grpc.ssl_channel_credentials(
            root_certificates=self._truststore_pem(),
            private_key=key,
            certificate_chain=self._certificate_chain_pem() if key is not None else None,
        )

    def certificate(self) -> x509.Certificate | None:
        """The keystore's leaf certificate (None without a keystore)."""
        if self.keystore_location is None:
            return None
        return x509.load_pem_x509_certificate(self._certificate_chain_pem())

    def _truststore_pem(self) -> bytes | None:
        return None if self.truststore_location is None else self.truststore_location.read_bytes()

    def _keystore_blocks(self) -> list[bytes]:
        if self.keystore_location is None:
            return []
        return _pem_blocks(self.keystore_location.read_bytes())

    def _certificate_chain_pem(self) -> bytes:
        chain = [b for b in self._keystore_blocks() if b.startswith(b"-----BEGIN CERTIFICATE")]
        if not chain:
            raise ValueError(f"{KEYSTORE_LOCATION}={self.keystore_location} has no certificate")
        return b"".join(chain)

    def _private_key_pem(self) -> bytes | None:
        """The key, unencrypted (grpc reads no encrypted keys), in memory only; None without a
        keystore."""
        if self.keystore_location is None:
            return None
        keys = [b for b in self._keystore_blocks() if b"PRIVATE KEY-----" in b.split(b"\n")[0]]
        if not keys:
            raise ValueError(f"{KEYSTORE_LOCATION}={self.keystore_location} has no private key")
        password = self.key_password.encode() if self.key_password else None
        try:
            key = serialization.load_pem_private_key(keys[0], password)
        except (ValueError, TypeError):
            raise ValueError(
                f"{KEYSTORE_LOCATION}={self.keystore_location}: the private key cannot be read "
                f"with the {KEY_PASSWORD} given (or without one, when none is given)"
            ) from None
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def readable_file(key: str, value: str | None) -> Path | None:
    """The file ``key`` names (None when unset); ValueError naming the key if it cannot be read."""
    if not value:
        return None
    path = Path(value)
    try:
        path.read_bytes()
    except OSError as e:
        raise ValueError(f"{key}={value}: cannot read it ({e.strerror})") from None
    return path


def _pem_blocks(text: bytes) -> list[bytes]:
    blocks: list[bytes] = []
    current: list[bytes] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(b"-----BEGIN "):
            current = [line]
        elif current:
            current.append(line)
            if line.startswith(b"-----END "):
                blocks.append(b"".join(current))
                current = []
    return blocks
