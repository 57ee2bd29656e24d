"""The Kafka listener over TLS, in the test process: real handshakes from ``ssl`` clients and from
librdkafka; the principal of each connection reaches the handler; refused clients (no
certificate where one is required, another CA, expired) are closed with one INFO line."""

from __future__ import annotations

import logging
import ssl
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.metadata.v12.request import MetadataRequest

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import RequestContext
from broker.listener.server import KafkaServer
from broker.listener.tls_stream import TlsListener
from cli.security.certs import KeystoreFiles
from tests.support.certs import ADMIN_DN, KEY_PASSWORD, ClusterCertificates
from tests.support.kafka_wire import OneTopicHandler, WireClient, serving
from tiered.security.principal import ANONYMOUS, KafkaPrincipal
from tiered.security.ssl_principal import SslPrincipalMapper
from tiered.security.tls import TlsSettings

REGISTRY = ApiVersionRegistry({18: (0, 4), 3: (0, 12), 0: (3, 11), 1: (4, 12), 10: (0, 6)})
METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


class RecordingHandler(OneTopicHandler):
    def __init__(self) -> None:
        super().__init__()
        self.contexts: list[RequestContext] = []

    def metadata(self, request: Any, context: RequestContext) -> Any:
        self.contexts.append(context)
        return super().metadata(request, context)

    def fetch(self, request: Any, context: RequestContext) -> Any:
        raise NotImplementedError

    find_coordinator = fetch


def _listener(certificates: ClusterCertificates, **keys: str) -> TlsListener:
    properties = {**certificates.server_properties(certificates.broker), **keys}
    return TlsListener(
        TlsSettings.from_properties(properties, "SSL").server_context(),
        SslPrincipalMapper.from_properties(properties, "SSL"),
    )


@pytest.fixture
def handler() -> RecordingHandler:
    return RecordingHandler()


def _serve(handler: RecordingHandler, certificates: ClusterCertificates, **keys: str) -> Any:
    return serving(handler, REGISTRY, name="SSL", tls=_listener(certificates, **keys))


def _connect(
    server: KafkaServer, certificates: ClusterCertificates, keystore: KeystoreFiles | None
) -> WireClient:
    properties = certificates.client_properties(keystore)
    client = WireClient(server.address)
    context = TlsSettings.from_properties(properties).client_context()
    client.sock = context.wrap_socket(client.sock, server_hostname="localhost")
    return client


def test_the_handler_sees_the_principal_of_the_client_certificate(
    handler: RecordingHandler, certificates: ClusterCertificates
) -> None:
    with _serve(handler, certificates, **{"ssl.client.auth": "required"}) as server:
        client = _connect(server, certificates, certificates.admin)
        try:
            assert client.call(METADATA).topics[0].name == "orders"
        finally:
            client.close()
    context = handler.contexts[0]
    assert context.principal == KafkaPrincipal("User", ADMIN_DN)
    assert (context.listener, context.client_host) == ("SSL", "127.0.0.1")
    assert context.requester.principal == context.principal


def test_mapping_rules_name_the_principal_and_no_certificate_is_anonymous_when_requested(
    handler: RecordingHandler, certificates: ClusterCertificates
) -> None:
    keys = {
        "ssl.client.auth": "requested",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U",
    }
    with _serve(handler, certificates, **keys) as server:
        for keystore in (certificates.admin, None):
            client = _connect(server, certificates, keystore)
            try:
                client.call(METADATA)
            finally:
                client.close()
    assert [c.principal for c in handler.contexts] == [KafkaPrincipal("User", "ADMIN"), ANONYMOUS]


@pytest.mark.parametrize(
    ("who", "reason"),
    [
        ("nobody", "PEER_DID_NOT_RETURN_A_CERTIFICATE"),
        ("stranger", "unable to get local issuer certificate"),
        ("expired", "certificate has expired"),
    ],
)
def test_a_refused_client_is_closed_with_one_info_line(
    handler: RecordingHandler,
    certificates: ClusterCertificates,
    caplog: pytest.LogCaptureFixture,
    who: str,
    reason: str,
) -> None:
    keystore = None if who == "nobody" else getattr(certificates, who)
    caplog.set_level(logging.INFO, logger="broker.listener")
    with _serve(handler, certificates, **{"ssl.client.auth": "required"}) as server:
        client = _connect(server, certificates, keystore)
        try:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                client.call(METADATA)
        finally:
            client.close()
    assert handler.contexts == []
    lines = [r for r in caplog.records if "TLS handshake" in r.getMessage()]
    assert len(lines) == 1 and reason in lines[0].getMessage(), caplog.text
    assert lines[0].levelno == logging.INFO and lines[0].exc_info is None


def test_librdkafka_produces_over_tls(
    handler: RecordingHandler, certificates: ClusterCertificates
) -> None:
    with _serve(handler, certificates, **{"ssl.client.auth": "required"}) as server:
        handler.port = server.address[1]
        producer = Producer(
            {
                "bootstrap.servers": f"localhost:{server.address[1]}",
                "security.protocol": "SSL",
                "ssl.ca.location": str(certificates.ca),
                "ssl.certificate.location": str(certificates.admin.certificate),
                "ssl.key.location": str(certificates.admin.private_key),
                "ssl.key.password": KEY_PASSWORD,
                "log_level": 3,
            }
        )
        # Large values too: a frame past the listener's read buffer, across many TLS records.
        values = [bytes([i % 256]) * (100 if i % 10 else 300_000) for i in range(50)]
        for value in values:
            producer.produce("orders", value=value, partition=0)
        assert producer.flush(30) == 0
    received = [consumed.record.value for _, batch in handler.produced for consumed in batch]
    assert received == values
