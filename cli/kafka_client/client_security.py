"""How a Kafka protocol client reaches the brokers' Kafka listeners, from the client properties
Kafka's tools take with ``--command-config`` (Java's key names) or librdkafka's:

- ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
- ``sasl.mechanism``: SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, GSSAPI, is not served);
- the SCRAM user: ``sasl.jaas.config`` (``...ScramLoginModule required username="u"
  password="p";``) or librdkafka's ``sasl.username`` and ``sasl.password``;
- TLS: the ``ssl.*`` keys of ``tiered.security.tls`` (``ssl.truststore.location``,
  ``ssl.keystore.location`` with ``ssl.keystore.type=PEM``, ``ssl.key.password``,
  ``ssl.endpoint.identification.algorithm``), or librdkafka's ``ssl.ca.location``,
  ``ssl.certificate.location`` and ``ssl.key.location``.

So both files ``tiered-cluster up --secure`` writes work: ``admin.properties`` (SSL with the
admin's certificate, for the brokers' SSL listeners) and ``admin-sasl.properties`` (SCRAM over
SASL_SSL). A bad setting is a ValueError naming the key and the valid values; no message or repr
shows a password.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from tiered.net import KAFKA_LISTENER_NAMES, PLAINTEXT, SASL_LISTENER_NAMES, TLS_LISTENER_NAMES
from tiered.security.jaas import JaasSyntaxError, parse_jaas_entries
from tiered.security.scram import ScramMechanism
from tiered.security.tls import KEY_PASSWORD, TRUSTSTORE_LOCATION, TlsSettings

__all__ = ["KafkaClientSecurity", "ScramLogin"]

SECURITY_PROTOCOL = "security.protocol"
SASL_MECHANISM = "sasl.mechanism"
SASL_JAAS_CONFIG = "sasl.jaas.config"
SASL_USERNAME = "sasl.username"
SASL_PASSWORD = "sasl.password"
CA_LOCATION = "ssl.ca.location"
CERTIFICATE_LOCATION = "ssl.certificate.location"
KEY_LOCATION = "ssl.key.location"
_KAFKA_DEFAULT_MECHANISM = "GSSAPI"
_SCRAM_LOGIN_MODULE = "ScramLoginModule"


@dataclass(frozen=True)
class ScramLogin:
    mechanism: ScramMechanism
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class KafkaClientSecurity:
    protocol: str = PLAINTEXT
    tls: TlsSettings | None = None
    # librdkafka's separate certificate and key files, loaded beside ``tls``'s settings.
    certificate_and_key: tuple[str, str] | None = None
    scram: ScramLogin | None = None

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> KafkaClientSecurity:
        protocol = values.get(SECURITY_PROTOCOL, PLAINTEXT).strip().upper()
        if protocol not in KAFKA_LISTENER_NAMES:
            raise ValueError(
                f"{SECURITY_PROTOCOL}={protocol} is not valid; valid values: "
                f"{', '.join(KAFKA_LISTENER_NAMES)}"
            )
        tls, pair = (None, None)
        if protocol in TLS_LISTENER_NAMES:
            tls, pair = _tls(values)
        scram = _scram(values) if protocol in SASL_LISTENER_NAMES else None
        return cls(protocol, tls, pair, scram)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of a connection (None: no TLS)."""
        if self.tls is None:
            return None
        context = self.tls.client_context()
        if self.certificate_and_key is not None:
            certificate, key = self.certificate_and_key
            try:
                context.load_cert_chain(
                    certificate,
                    key,
                    password=self.tls.key_password.encode() if self.tls.key_password else None,
                )
            except (OSError, ssl.SSLError):
                raise ValueError(
                    f"{CERTIFICATE_LOCATION}={certificate} and {KEY_LOCATION}={key}: cannot load "
                    f"the certificate and its key; check {KEY_PASSWORD}"
                ) from None
        return context


def _tls(values: Mapping[str, str]) -> tuple[TlsSettings, tuple[str, str] | None]:
    java_keys = dict(values)
    if CA_LOCATION in values and TRUSTSTORE_LOCATION not in values:
        java_keys[TRUSTSTORE_LOCATION] = values[CA_LOCATION]
    tls = TlsSettings.from_properties(java_keys)
    certificate, key = values.get(CERTIFICATE_LOCATION), values.get(KEY_LOCATION)
    if (certificate is None) != (key is None):
        raise ValueError(f"{CERTIFICATE_LOCATION} and {KEY_LOCATION} go together: set both")
    return tls, None if certificate is None or key is None else (certificate.strip(), key.strip())


def _scram(values: Mapping[str, str]) -> ScramLogin:
    name = values.get(SASL_MECHANISM, _KAFKA_DEFAULT_MECHANISM).strip()
    try:
        mechanism = ScramMechanism.from_name(name)
    except ValueError:
        raise ValueError(
            f"{SASL_MECHANISM}={name} is not supported; valid values: "
            f"{', '.join(ScramMechanism.names())}"
        ) from None
    jaas = values.get(SASL_JAAS_CONFIG)
    if jaas is not None:
        try:
            entries = parse_jaas_entries(jaas)
        except JaasSyntaxError as e:
            raise ValueError(f"{SASL_JAAS_CONFIG}: {e}") from None
        if len(entries) != 1 or not entries[0].login_module.endswith(_SCRAM_LOGIN_MODULE):
            raise ValueError(
                f"{SASL_JAAS_CONFIG} must hold one org.apache.kafka.common.security.scram."
                f"ScramLoginModule entry for {mechanism}"
            )
        options = entries[0].options
        username, password = options.get("username"), options.get("password")
        where = f"{SASL_JAAS_CONFIG}'s ScramLoginModule"
        missing = "username" if username is None else "password"
    else:
        username, password = values.get(SASL_USERNAME), values.get(SASL_PASSWORD)
        where = "the client properties"
        missing = SASL_USERNAME if username is None else SASL_PASSWORD
    if username is None or password is None:
        raise ValueError(
            f"{missing} is missing from {where}: {mechanism} needs a user "
            f"({SASL_JAAS_CONFIG}, or {SASL_USERNAME} and {SASL_PASSWORD})"
        )
    return ScramLogin(mechanism, username, password)
