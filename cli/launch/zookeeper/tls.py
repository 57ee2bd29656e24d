"""A ZooKeeper server that speaks TLS only: clients on ``secureClientPort`` (Netty's connection
factory; no plaintext ``clientPort`` is opened) with a client certificate required, and, in an
ensemble, the quorum and election links too (``sslQuorum``, without port unification, so a
plaintext peer is refused rather than served).

Key and trust stores are PEM, as ``cli.security.certs`` writes them: the keystore is the private
key followed by the certificate chain, the truststore the CA certificates every peer's and
client's certificate must chain to. The same keystore is the client certificate of the ``srvr``
readiness probe (the certificates are for TLS servers and clients alike).
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cli.launch.zookeeper.requirements import JAVA_DIR

__all__ = ["NETTY_CLASSPATH", "ServerTls"]

NETTY_CLASSPATH: tuple[Path, ...] = (JAVA_DIR / "netty-codec.jar",)
"""What Netty's TLS handler needs beyond ``zookeeper.jar``'s manifest ``Class-Path``."""
NETTY_CONNECTION_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
_PEM = "PEM"


@dataclass(frozen=True)
class ServerTls:
    """A ZooKeeper server's TLS: ``keystore`` (PEM key then chain) and ``truststore`` (PEM CA
    certificates)."""

    keystore: Path
    truststore: Path

    def client_port_settings(self, host: str, port: int) -> dict[str, object]:
        """The config's client side: TLS on ``host:port``, a client certificate required."""
        return {
            "secureClientPort": port,
            "secureClientPortAddress": host,
            "serverCnxnFactory": NETTY_CONNECTION_FACTORY,
            "ssl.keyStore.location": self.keystore,
            "ssl.keyStore.type": _PEM,
            "ssl.trustStore.location": self.truststore,
            "ssl.trustStore.type": _PEM,
            "ssl.clientAuth": "need",
            # A client is who its certificate (chained to the cluster CA) and its digest
            # credentials say, whatever address it comes from.
            "ssl.hostnameVerification": "false",
        }

    def quorum_settings(self) -> dict[str, object]:
        """The config's quorum side: followers' and votes' links over mutual TLS, and no
        plaintext accepted on the same ports."""
        return {
            "sslQuorum": "true",
            "portUnification": "false",
            "ssl.quorum.keyStore.location": self.keystore,
            "ssl.quorum.keyStore.type": _PEM,
            "ssl.quorum.trustStore.location": self.truststore,
            "ssl.quorum.trustStore.type": _PEM,
            "ssl.quorum.clientAuth": "need",
        }

    def client_context(self) -> ssl.SSLContext:
        """For a client of the server (the ``srvr`` probe): the server's certificate verified,
        the keystore presented."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_verify_locations(cafile=self.truststore)
        context.load_cert_chain(self.keystore)
        return context

    def connect(self, host: str, port: int, timeout: float) -> ssl.SSLSocket:
        """A TLS connection to ``host:port`` (``OSError``, ``ssl.SSLError`` included, if it
        fails)."""
        sock = socket.create_connection((host, port), timeout=timeout)
        try:
            return self.client_context().wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
