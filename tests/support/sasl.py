"""A SCRAM login on a raw Kafka connection (``WireClient``), step by step as librdkafka makes
it: ApiVersions, then the product's login (SaslHandshake v1, SaslAuthenticate rounds)."""

from __future__ import annotations

from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest

from cli.kafka_client.client_security import ScramLogin
from cli.kafka_client.connection import scram_login as product_scram_login
from tests.support.kafka_wire import WireClient
from tiered.security.scram import ScramMechanism


def scram_login(
    client: WireClient, user: str, password: str, mechanism: str = "SCRAM-SHA-512"
) -> Any:
    """The last SaslAuthenticate response of a login (the first one's, when that one failed)."""
    assert client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    login = ScramLogin(ScramMechanism.from_name(mechanism), user, password)
    return product_scram_login(client, login)
