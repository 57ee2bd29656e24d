"""TLS from a process's ZooKeeper clients to ZooKeeper's ``secureClientPort``, under Kafka's key
names (its ``zookeeper.ssl.*`` client keys):

===============================================  ================================================
``zookeeper.ssl.client.enable``                  ``true``: every ZooKeeper client of the process
                                                 connects over TLS (default ``false``)
``zookeeper.ssl.keystore.location``              a PEM file with the private key and the
                                                 certificate chain, leaf first (as
                                                 ``ssl.keystore.location`` for the listeners):
                                                 the client certificate a server with
                                                 ``ssl.clientAuth=need`` asks for
``zookeeper.ssl.keystore.type``                  ``PEM`` (the only type; also the default)
``zookeeper.ssl.keystore.password``              the password of an encrypted (PKCS#8) key
``zookeeper.ssl.truststore.location``            the CA certificates (PEM) the server's
                                                 certificate must chain to (without it, the
                                                 system's CAs)
``zookeeper.ssl.truststore.type``                ``PEM`` (the only type; also the default)
``zookeeper.ssl.endpoint.identification.algorithm``  ``HTTPS`` (default: the server's
                                                 certificate must name the host of the connect
                                                 string) or empty (it need not)
===============================================  ================================================

The keys other than ``zookeeper.ssl.client.enable`` are read only when it is ``true``. TLS
protects the link; the digest credentials of ``zookeeper.jaas.config.file`` stay the identity
ZooKeeper's ACLs name (``tiered.security.zookeeper_auth``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiered.properties import bool_property
from tiered.security.tls import readable_file

__all__ = [
    "CLIENT_ENABLE_KEY",
    "ENDPOINT_IDENTIFICATION_KEY",
    "KEYSTORE_LOCATION_KEY",
    "KEYSTORE_PASSWORD_KEY",
    "KEYSTORE_TYPE_KEY",
    "TLS_KEYS",
    "TRUSTSTORE_LOCATION_KEY",
    "TRUSTSTORE_TYPE_KEY",
    "ZooKeeperTls",
]

CLIENT_ENABLE_KEY = "zookeeper.ssl.client.enable"
KEYSTORE_LOCATION_KEY = "zookeeper.ssl.keystore.location"
KEYSTORE_TYPE_KEY = "zookeeper.ssl.keystore.type"
KEYSTORE_PASSWORD_KEY = "zookeeper.ssl.keystore.password"
TRUSTSTORE_LOCATION_KEY = "zookeeper.ssl.truststore.location"
TRUSTSTORE_TYPE_KEY = "zookeeper.ssl.truststore.type"
ENDPOINT_IDENTIFICATION_KEY = "zookeeper.ssl.endpoint.identification.algorithm"
TLS_KEYS = (
    CLIENT_ENABLE_KEY,
    KEYSTORE_LOCATION_KEY,
    KEYSTORE_TYPE_KEY,
    KEYSTORE_PASSWORD_KEY,
    TRUSTSTORE_LOCATION_KEY,
    TRUSTSTORE_TYPE_KEY,
    ENDPOINT_IDENTIFICATION_KEY,
)
_PEM = "PEM"
_HTTPS = "HTTPS"


@dataclass(frozen=True)
class ZooKeeperTls:
    """How a process's ZooKeeper clients speak TLS: the files, checked readable when parsed."""

    keystore_location: Path | None = None
    keystore_password: str | None = field(default=None, repr=False)
    truststore_location: Path | None = None
    verify_hostname: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ZooKeeperTls | None:
        """The ``zookeeper.ssl.*`` keys of ``config``; None unless ``zookeeper.ssl.client.enable``
        is ``true``. ValueError naming the key, the value and what is valid for a bad value, a
        file that cannot be read or a keystore without its key and certificate."""
        if not bool_property(config, CLIENT_ENABLE_KEY, False):
            return None

        def get(key: str) -> str:
            return str(config.get(key) or "").strip()

        for type_key in (KEYSTORE_TYPE_KEY, TRUSTSTORE_TYPE_KEY):
            value = get(type_key) or _PEM
            if value.upper() != _PEM:
                raise ValueError(f"{type_key}={value!r} is not valid; valid values: {_PEM}")
        algorithm = config.get(ENDPOINT_IDENTIFICATION_KEY)
        algorithm = _HTTPS if algorithm is None else algorithm.strip()
        if algorithm.upper() not in (_HTTPS, ""):
            raise ValueError(
                f"{ENDPOINT_IDENTIFICATION_KEY}={algorithm!r} is not valid; valid values: "
                f"{_HTTPS}, empty (no host name verification)"
            )
        settings = cls(
            keystore_location=readable_file(KEYSTORE_LOCATION_KEY, get(KEYSTORE_LOCATION_KEY)),
            keystore_password=get(KEYSTORE_PASSWORD_KEY) or None,
            truststore_location=readable_file(
                TRUSTSTORE_LOCATION_KEY, get(TRUSTSTORE_LOCATION_KEY)
            ),
            verify_hostname=algorithm.upper() == _HTTPS,
        )
        settings._check_files()
        return settings

    def kazoo_options(self) -> dict[str, Any]:
        """``KazooClient``'s TLS arguments: the server verified against the truststore (and its
        host name, unless turned off), the keystore presented as the client certificate."""
        keystore = None if self.keystore_location is None else str(self.keystore_location)
        return {
            "use_ssl": True,
            "verify_certs": True,
            "check_hostname": self.verify_hostname,
            "ca": None if self.truststore_location is None else str(self.truststore_location),
            # One PEM file holds both (kazoo loads a client certificate only given both).
            "certfile": keystore,
            "keyfile": keystore,
            "keyfile_password": self.keystore_password,
        }

    def _check_files(self) -> None:
        """What kazoo would only find out at the first connection, said now with the key."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if self.keystore_location is not None:
            try:
                context.load_cert_chain(
                    self.keystore_location,
                    password=self.keystore_password.encode() if self.keystore_password else b"",
                )
            except ssl.SSLError as e:
                raise ValueError(
                    f"{KEYSTORE_LOCATION_KEY}={self.keystore_location}: cannot load a private key "
                    f"and its certificate chain from it ({e.reason}); expected PEM, the key first, "
                    f"encrypted only with {KEYSTORE_PASSWORD_KEY}"
                ) from None
        if self.truststore_location is not None:
            try:
                context.load_verify_locations(cafile=self.truststore_location)
            except ssl.SSLError as e:
                raise ValueError(
                    f"{TRUSTSTORE_LOCATION_KEY}={self.truststore_location}: not PEM CA "
                    f"certificates ({e.reason})"
                ) from None
