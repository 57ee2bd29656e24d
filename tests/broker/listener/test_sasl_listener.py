"""The SASL layer of the Kafka listener (``broker.listener.sasl`` in ``broker.listener.server``): a
listener in this process with a one-topic handler, logged into by confluent-kafka, kafka-python
and a raw wire client. The process tests (``test_scram_cluster``) run the same on real brokers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaProducer
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import RequestContext
from broker.listener.sasl import AUTHENTICATION_FAILED, SaslAuthentication
from broker.listener.server import KafkaServer, ListenerSettings
from tests.support.kafka_wire import OneTopicHandler, WireClient
from tests.support.sasl import scram_login
from tiered.security.principal import ANONYMOUS, KafkaPrincipal
from tiered.security.scram import ScramCredential, ScramMechanism

SHA512 = ScramMechanism.SCRAM_SHA_512
QUIET = {"log_level": 3}
PASSWORD = "alice-s3cret"
REGISTRY = ApiVersionRegistry(
    {18: (0, 4), 3: (0, 12), 0: (3, 11), 1: (4, 12), 10: (0, 6), 17: (1, 1), 36: (0, 2)}
)


class RecordingHandler(OneTopicHandler):
    """Remembers who produced."""

    def __init__(self) -> None:
        super().__init__()
        self.principals: list[KafkaPrincipal] = []

    def produce(self, request: Any, context: RequestContext) -> Any:
        self.principals.append(context.principal)
        return super().produce(request, context)

    def fetch(self, request: Any, context: RequestContext) -> Any:
        raise NotImplementedError

    find_coordinator = fetch


@pytest.fixture(scope="module")
def credentials() -> dict[tuple[str, ScramMechanism], ScramCredential]:
    return {("alice", SHA512): ScramCredential.from_password(SHA512, PASSWORD)}


def _serve(handler: RecordingHandler, authentication: SaslAuthentication | None) -> KafkaServer:
    server = KafkaServer(handler, ListenerSettings(), REGISTRY, authentication)
    server.start()
    handler.port = server.address[1]
    return server


@pytest.fixture
def sasl(
    credentials: dict[tuple[str, ScramMechanism], ScramCredential],
) -> Iterator[tuple[RecordingHandler, str]]:
    handler = RecordingHandler()
    server = _serve(handler, SaslAuthentication((SHA512,), lambda u, m: credentials.get((u, m))))
    try:
        yield handler, f"127.0.0.1:{server.address[1]}"
    finally:
        server.stop()


def _confluent(bootstrap: str, password: str, **extra: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": password,
            **QUIET,
            **extra,
        }
    )


def authentication_error(bootstrap: str, password: str, user: str = "alice") -> KafkaError:
    """The error librdkafka reports for a refused login (its error callback)."""
    errors: list[KafkaError] = []
    producer = _confluent(
        bootstrap,
        password,
        **{"sasl.username": user, "error_cb": errors.append, "log_level": 0},
        **{"reconnect.backoff.ms": 1000},
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        producer.poll(0.1)
        refused = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if refused:
            return refused[0]
    raise AssertionError(f"no authentication error within 20 s: {errors}")


def test_confluent_kafka_logs_in_and_produces_as_the_user(
    sasl: tuple[RecordingHandler, str],
) -> None:
    handler, bootstrap = sasl
    producer = _confluent(bootstrap, PASSWORD)
    delivered: list[Any] = []
    producer.produce("orders", b"hello", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None]
    assert handler.principals == [KafkaPrincipal("User", "alice")]


def test_confluent_kafka_with_a_wrong_password_is_refused(
    sasl: tuple[RecordingHandler, str],
) -> None:
    handler, bootstrap = sasl
    refused = authentication_error(bootstrap, "wrong")
    assert AUTHENTICATION_FAILED.format(mechanism="SCRAM-SHA-512") in refused.str()
    assert handler.principals == []


def test_kafka_python_logs_in_and_produces(sasl: tuple[RecordingHandler, str]) -> None:
    handler, bootstrap = sasl
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password=PASSWORD,
        enable_idempotence=False,  # the handler serves no InitProducerId
    )
    try:
        producer.send("orders", b"hi").get(timeout=30)
    finally:
        producer.close()
    assert handler.principals == [KafkaPrincipal("User", "alice")]


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", PASSWORD)])
def test_a_failed_login_is_answered_58_alike_then_closed(
    sasl: tuple[RecordingHandler, str], user: str, password: str
) -> None:
    _, bootstrap = sasl
    host, _, port = bootstrap.rpartition(":")
    client = WireClient((host, int(port)))
    try:
        final = scram_login(client, user, password)
        assert final.error_code == ErrorCode.sasl_authentication_failed
        # Whether the user exists or not: the same step, the same words.
        assert final.error_message == AUTHENTICATION_FAILED.format(mechanism="SCRAM-SHA-512")
        assert client.closed_by_peer()
    finally:
        client.close()


def test_requests_before_authentication_close_the_connection_unanswered(
    sasl: tuple[RecordingHandler, str],
) -> None:
    _, bootstrap = sasl
    host, _, port = bootstrap.rpartition(":")
    client = WireClient((host, int(port)))
    try:
        client.send(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            1,
        )
        assert client.closed_by_peer()
    finally:
        client.close()


def test_a_successful_login_then_serves_requests_and_refuses_another_handshake(
    sasl: tuple[RecordingHandler, str],
) -> None:
    _, bootstrap = sasl
    host, _, port = bootstrap.rpartition(":")
    client = WireClient((host, int(port)))
    try:
        final = scram_login(client, "alice", PASSWORD)
        assert final.error_code == ErrorCode.none and final.auth_bytes.startswith(b"v=")
        again = client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 5)
        assert again.error_code == ErrorCode.illegal_sasl_state
        metadata = client.call(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            6,
        )
        assert [t.name for t in metadata.topics] == ["orders"]
    finally:
        client.close()


def test_an_unsupported_mechanism_is_answered_33_then_closed(
    sasl: tuple[RecordingHandler, str],
) -> None:
    _, bootstrap = sasl
    host, _, port = bootstrap.rpartition(":")
    client = WireClient((host, int(port)))
    try:
        answer = client.call(SaslHandshakeRequest(mechanism="PLAIN"))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert answer.mechanisms == ("SCRAM-SHA-512",)
        assert client.closed_by_peer()
    finally:
        client.close()


def test_a_plaintext_listener_answers_sasl_requests_illegal_sasl_state() -> None:
    handler = RecordingHandler()
    server = _serve(handler, None)
    client = WireClient(("127.0.0.1", server.address[1]))
    try:
        answer = client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert answer.error_code == ErrorCode.illegal_sasl_state
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{server.address[1]}", **QUIET})
        producer.produce("orders", b"x")
        assert producer.flush(30) == 0
        deadline = time.monotonic() + 10
        while not handler.principals and time.monotonic() < deadline:
            time.sleep(0.01)
        assert handler.principals == [ANONYMOUS]
    finally:
        client.close()
        server.stop()
