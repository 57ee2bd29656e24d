"""A client's security settings, as Kafka's tools read them from ``--command-config FILE``:
``security.protocol`` (PLAINTEXT, the default, or SSL) and the ``ssl.*`` keys of
``tiered.security.tls`` (``ssl.truststore.location``; ``ssl.keystore.location`` and
``ssl.key.password`` for a client certificate). The admin CLIs reach the cluster over gRPC, so
these settings become the credentials of their channels."""

from __future__ import annotations

from collections.abc import Mapping

import grpc

from tiered.net import PLAINTEXT, SSL
from tiered.security.tls import TlsSettings

__all__ = ["SECURITY_PROTOCOL", "channel_credentials"]

SECURITY_PROTOCOL = "security.protocol"
_PROTOCOLS = (PLAINTEXT, SSL)


def channel_credentials(values: Mapping[str, str]) -> grpc.ChannelCredentials | None:
    """None for PLAINTEXT; TLS credentials (mutual with a keystore) for SSL. ValueError naming
    the key and the valid values for a bad setting."""
    protocol = values.get(SECURITY_PROTOCOL, PLAINTEXT).strip().upper()
    if protocol not in _PROTOCOLS:
        raise ValueError(
            f"{SECURITY_PROTOCOL}={protocol} is not valid for the admin CLIs; valid values: "
            f"{', '.join(_PROTOCOLS)}"
        )
    if protocol == PLAINTEXT:
        return None
    return TlsSettings.from_properties(values).grpc_channel_credentials()
