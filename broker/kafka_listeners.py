"""The broker's Kafka listeners: one ``KafkaServer`` per listener in ``listeners`` (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL), all serving one ``BrokerKafkaHandler``, since the handler holds
state of the broker rather than of a listener (producer id blocks, waiting fetches). Each
request carries its listener's name (``RequestContext.listener``), which is how Metadata answers
with that listener's endpoints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.config import KafkaListener
from broker.kafka.handler import BrokerKafkaHandler
from broker.kafka.this_broker import ThisBroker
from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.sasl import Authentication, SaslAuthentication, ScramCredentials
from broker.listener.server import KafkaServer

__all__ = ["KafkaListenerBindError", "KafkaListeners", "start_kafka_listeners"]


class KafkaListenerBindError(OSError):
    """A Kafka listener could not be bound (the others are closed again)."""

    def __init__(self, listener: KafkaListener, cause: OSError) -> None:
        settings = listener.settings
        super().__init__(
            f"cannot listen on {settings.host}:{settings.port} (Kafka {listener.name}): {cause}"
        )


@dataclass
class KafkaListeners:
    """The started listeners and what they serve; ``this`` names the broker with every
    listener's endpoint as bound."""

    this: ThisBroker
    handler: BrokerKafkaHandler
    servers: tuple[KafkaServer, ...]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        self.handler.close()  # once no listener hands it requests


def authentication(listener: KafkaListener, credentials: ScramCredentials) -> Authentication | None:
    """A SASL listener's authentication (None: the listener authenticates nobody)."""
    if not listener.sasl_mechanisms:
        return None
    return SaslAuthentication(listener.sasl_mechanisms, credentials, listener.name)


def start_kafka_listeners(
    listeners: Sequence[KafkaListener],
    this: ThisBroker,
    handler: BrokerKafkaHandler,
    credentials: ScramCredentials,
) -> KafkaListeners:
    """Binds every listener, in order, each port 0 bound marked on ``this``. Raises
    ``KafkaListenerBindError`` if a bind fails, the listeners bound before it stopped and the
    handler closed."""
    registry = ApiVersionRegistry()
    started: list[KafkaServer] = []
    for listener in listeners:
        server = KafkaServer(
            handler, listener.settings, registry, authentication(listener, credentials)
        )
        try:
            server.start()
        except OSError as e:
            KafkaListeners(this, handler, tuple(started)).stop()
            raise KafkaListenerBindError(listener, e) from e
        started.append(server)
        this.bound_to(listener.name, server.address[1])
    return KafkaListeners(this, handler, tuple(started))
