"""How a daemon's gRPC listener, and the channels it opens to the other daemons, are secured.

``listener.security.protocol.map=GRPC:SSL`` turns TLS on for the gRPC listener with the ``ssl.*``
keys (``listener.name.grpc.ssl.*`` first), and then every channel the process opens to another
daemon (controller to broker, broker to controller) is mutual TLS with the same keystore: a
cluster's gRPC is TLS throughout or not at all. The gRPC listener requires a client certificate
unless ``ssl.client.auth=none`` says otherwise (the controller and the brokers identify each
other by theirs); grpcio cannot ask for an optional one, so ``requested`` is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc

from tiered.net import GRPC, SSL, grpc_security_protocol
from tiered.security.ssl_principal import SslPrincipalMapper
from tiered.security.tls import CLIENT_AUTH, KEYSTORE_LOCATION, ClientAuth, TlsSettings

__all__ = ["GrpcSecurity"]


@dataclass(frozen=True)
class GrpcSecurity:
    """Plaintext (the default: no credentials) or TLS."""

    server_credentials: grpc.ServerCredentials | None = None
    channel_credentials: grpc.ChannelCredentials | None = None
    principal_mapper: SslPrincipalMapper = field(default_factory=SslPrincipalMapper)

    @property
    def tls(self) -> bool:
        return self.server_credentials is not None

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> GrpcSecurity:
        """ValueError naming the key for a bad or missing setting."""
        if grpc_security_protocol(values) != SSL:
            return cls()
        settings = TlsSettings.from_properties(values, GRPC, ClientAuth.REQUIRED)
        if settings.client_auth is ClientAuth.REQUESTED:
            raise ValueError(
                f"{CLIENT_AUTH}=requested is not available on the GRPC listener (grpcio cannot "
                f"ask for an optional certificate); valid values: required, none"
            )
        if settings.keystore_location is None:
            raise ValueError(
                f"GRPC:SSL in listener.security.protocol.map needs {KEYSTORE_LOCATION} (the "
                f"process's key and certificate chain, PEM)"
            )
        return cls(
            settings.grpc_server_credentials(),
            settings.grpc_channel_credentials(),
            SslPrincipalMapper.from_properties(values, GRPC),
        )
