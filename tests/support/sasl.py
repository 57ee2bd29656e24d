"""A SCRAM login on a raw Kafka connection (``WireClient``), step by step as librdkafka makes
it: ApiVersions, SaslHandshake v1, then SaslAuthenticate rounds carrying kafka-python's SCRAM
client's messages."""

from __future__ import annotations

from typing import Any

from kafka.net.sasl.scram import ScramClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from tests.support.kafka_wire import WireClient


def scram_login(
    client: WireClient, user: str, password: str, mechanism: str = "SCRAM-SHA-512"
) -> Any:
    """The last SaslAuthenticate response of a login (the first one's, when that one failed)."""
    assert client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    handshake = client.call(SaslHandshakeRequest(mechanism=mechanism), 2)
    assert handshake.error_code == ErrorCode.none, handshake
    scram = ScramClient(user, password, mechanism)
    first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first_message()), 3)
    if first.error_code != ErrorCode.none:
        return first
    scram.process_server_first_message(first.auth_bytes)
    return client.call(SaslAuthenticateRequest(auth_bytes=scram.final_message()), 4)
