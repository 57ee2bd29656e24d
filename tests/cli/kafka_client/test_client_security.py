"""The client side of SCRAM (``cli.kafka_client.scram_client``) against the broker's server side,
and the Kafka client properties ``--command-config`` takes (Java's keys and librdkafka's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.kafka_client.client_security import KafkaClientSecurity
from cli.kafka_client.scram_client import ScramClientError, ScramSaslClient
from tiered.security.scram import (
    ScramAuthenticationError,
    ScramCredential,
    ScramMechanism,
    ScramSaslServer,
)

PASSWORD = "pa,ss=word"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_login_completes_and_the_server_is_verified(mechanism: ScramMechanism) -> None:
    credential = ScramCredential.from_password(mechanism, PASSWORD)
    server = ScramSaslServer(mechanism, lambda user: credential if user == "a=b,c" else None)
    client = ScramSaslClient(mechanism, "a=b,c", PASSWORD)
    server_first = server.evaluate_response(client.first_message())
    server_final = server.evaluate_response(client.final_message(server_first))
    client.verify_server_final(server_final)
    assert server.is_complete and server.username == "a=b,c"
    assert PASSWORD not in repr(client)


def test_a_wrong_password_is_refused_by_the_server() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_512
    credential = ScramCredential.from_password(mechanism, PASSWORD)
    server = ScramSaslServer(mechanism, lambda user: credential)
    client = ScramSaslClient(mechanism, "alice", "guess")
    server_first = server.evaluate_response(client.first_message())
    with pytest.raises(ScramAuthenticationError):
        server.evaluate_response(client.final_message(server_first))


def test_a_server_that_does_not_know_the_password_is_not_believed() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    impostor = ScramSaslServer(
        mechanism, lambda user: ScramCredential.from_password(mechanism, "another password")
    )
    client = ScramSaslClient(mechanism, "alice", PASSWORD)
    server_first = impostor.evaluate_response(client.first_message())
    client.final_message(server_first)
    # The impostor cannot check the proof, so it can only make up a signature.
    with pytest.raises(ScramClientError, match="signature is wrong"):
        client.verify_server_final(b"v=" + b"AAAA" * 11)


@pytest.mark.parametrize(
    ("server_first", "why"),
    [
        (b"r=someone-elses,s=c2FsdA==,i=4096", "nonce does not extend"),
        (b"r={nonce}x,s=c2FsdA==,i=10", "iterations"),
        (b"garbage", "invalid SCRAM server first message"),
    ],
)
def test_a_bad_server_first_message_is_refused(server_first: bytes, why: str) -> None:
    client = ScramSaslClient(ScramMechanism.SCRAM_SHA_512, "alice", PASSWORD)
    nonce = client.first_message().decode().split("r=", 1)[1]
    with pytest.raises(ScramClientError, match=why):
        client.final_message(server_first.replace(b"{nonce}", nonce.encode()))


# --------------------------------------------------------------------------------- properties


def test_kafka_java_keys_and_librdkafka_keys_give_the_same_login(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    java = KafkaClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="admin" password="{PASSWORD}";',
            "ssl.truststore.location": str(ca),
        }
    )
    rdkafka = KafkaClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "admin",
            "sasl.password": PASSWORD,
            "ssl.ca.location": str(ca),
        }
    )
    assert java.scram == rdkafka.scram and java.scram is not None
    assert java.scram.username == "admin" and java.scram.password == PASSWORD
    assert java.tls is not None and rdkafka.tls is not None
    assert java.tls.truststore_location == rdkafka.tls.truststore_location == ca
    assert PASSWORD not in repr(java) + repr(rdkafka)


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"security.protocol": "KERBEROS"}, "security.protocol=KERBEROS is not valid; valid values: "
         "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI is not supported; valid "
         "values: SCRAM-SHA-256, SCRAM-SHA-512"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
          "sasl.jaas.config": "x.PlainLoginModule required username=\"a\" password=\"b\";"},
         "must hold one org.apache.kafka.common.security.scram.ScramLoginModule entry"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
          "sasl.jaas.config": "x.ScramLoginModule required username=\"a\";"},
         "password is missing from sasl.jaas.config's ScramLoginModule"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/x.pem"},
         "ssl.certificate.location and ssl.key.location go together"),
    ],
)  # fmt: skip
def test_bad_properties_name_the_key_and_the_valid_values(
    properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError) as refused:
        KafkaClientSecurity.from_properties(properties)
    assert message in str(refused.value)
