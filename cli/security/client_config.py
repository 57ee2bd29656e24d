"""A client's security settings, as Kafka's tools read them from ``--command-config FILE``:
``security.protocol`` (PLAINTEXT, the default, or SSL) and the ``ssl.*`` keys of
``tiered.security.tls`` (``ssl.truststore.location``; ``ssl.keystore.location`` and
``ssl.key.password`` for a client certificate). The admin CLIs reach the cluster over gRPC, so
these settings become the credentials of their channels.

A refused TLS handshake reaches a gRPC client as "Socket closed" at best; ``explain_refusal``
repeats the handshake with the ``ssl`` module to tell the operator what was wrong (no
certificate, another CA's, an expired one, an untrusted server). A gRPC server closes the
connection after the handshake without an alert when it refuses the client's certificate, so
that case is told from what this client presents.
"""

from __future__ import annotations

import datetime
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from tiered.net import PLAINTEXT, SSL
from tiered.security.tls import TlsSettings

__all__ = ["SECURITY_PROTOCOL", "ClientSecurity", "channel_credentials"]

SECURITY_PROTOCOL = "security.protocol"
_PROTOCOLS = (PLAINTEXT, SSL)
_PROBE_TIMEOUT_S = 3.0
# What a handshake failure means for the operator, by the OpenSSL reason it carries.
_HINTS = {
    "CERTIFICATE_REQUIRED": "the server requires a client certificate (ssl.keystore.location)",
    "UNKNOWN_CA": "the server does not trust this client's certificate (another CA's)",
    "BAD_CERTIFICATE": "the server refused this client's certificate",
    "CERTIFICATE_EXPIRED": "this client's certificate has expired",
    "CERTIFICATE_VERIFY_FAILED": "this client does not trust the server's certificate "
    "(ssl.truststore.location)",
    "WRONG_VERSION_NUMBER": "the server does not speak TLS (security.protocol=PLAINTEXT?)",
}


def channel_credentials(values: Mapping[str, str]) -> grpc.ChannelCredentials | None:
    """None for PLAINTEXT; TLS credentials (mutual with a keystore) for SSL."""
    return ClientSecurity.from_properties(values).credentials


@dataclass(frozen=True)
class ClientSecurity:
    tls: TlsSettings | None = None  # None: PLAINTEXT
    credentials: grpc.ChannelCredentials | None = None

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> ClientSecurity:
        """ValueError naming the key and the valid values for a bad setting."""
        protocol = values.get(SECURITY_PROTOCOL, PLAINTEXT).strip().upper()
        if protocol not in _PROTOCOLS:
            raise ValueError(
                f"{SECURITY_PROTOCOL}={protocol} is not valid for the admin CLIs; valid values: "
                f"{', '.join(_PROTOCOLS)}"
            )
        if protocol == PLAINTEXT:
            return cls()
        tls = TlsSettings.from_properties(values)
        return cls(tls, tls.grpc_channel_credentials())

    def explain_refusal(self, address: str) -> str | None:
        """Why a TLS handshake with ``address`` (``host:port``) fails, or None when it does not
        (or this client does not use TLS)."""
        if self.tls is None:
            return None
        host, _, port = address.rpartition(":")
        context = self.tls.client_context()
        context.set_alpn_protocols(["h2"])  # gRPC servers refuse a client without it
        try:
            with (
                socket.create_connection((host, int(port)), timeout=_PROBE_TIMEOUT_S) as plain,
                context.wrap_socket(plain, server_hostname=host) as tls,
            ):
                # TLS 1.3: the server judges the client's certificate after the client is done.
                if tls.recv(1):
                    return None
        except ssl.SSLError as e:
            reason = str(e.reason or e)
            hint = next((h for key, h in _HINTS.items() if key in reason), None)
            return f"the TLS handshake with {address} failed: {reason}" + (
                f" ({hint})" if hint else ""
            )
        except (OSError, ValueError):  # a timeout: the server accepted us and waits
            return None
        return f"{address} closed the TLS connection after the handshake: {self._suspect()}"

    def _suspect(self) -> str:
        """Why a server would refuse this client's certificate, as far as the client can tell."""
        assert self.tls is not None
        certificate = self.tls.certificate()
        if certificate is None:
            return "it requires a client certificate (set ssl.keystore.location)"
        if certificate.not_valid_after_utc < datetime.datetime.now(datetime.UTC):
            return (
                f"this client's certificate expired on {certificate.not_valid_after_utc:%Y-%m-%d}"
            )
        return (
            f"it refused this client's certificate ({certificate.subject.rfc4514_string()}); "
            f"is it issued by the cluster's CA?"
        )
