"""The broker's Kafka listeners: one ``KafkaServer`` per listener in ``listeners`` (PLAINTEXT,
SSL, SASL_PLAINTEXT, SASL_SSL), all serving one ``BrokerKafkaHandler``, since the handler holds
state of the broker rather than of a listener (producer id blocks, waiting fetches). Each
request carries its listener's name (``RequestContext.listener``), which is how Metadata answers
with that listener's endpoints."""

from __future__ import annotations

from dataclasses import dataclass

from broker.admin_forwarder import ControllerAdmin
from broker.agent import BrokerAgent
from broker.config import BrokerConfig, KafkaListener
from broker.kafka.handler import BrokerKafkaHandler
from broker.kafka.log_dirs_api import LocalPartition
from broker.kafka.this_broker import ThisBroker
from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.sasl import Authentication, SaslAuthentication, ScramCredentials
from broker.listener.server import KafkaServer
from tiered.security.access import AccessControl

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
    config: BrokerConfig,
    agent: BrokerAgent,
    controller: ControllerAdmin,
    credentials: ScramCredentials,
    access: AccessControl,
) -> KafkaListeners | None:
    """Binds every Kafka listener, in ``listeners`` order; None without one. Raises
    ``KafkaListenerBindError`` if a bind fails, the listeners bound before it closed."""
    if not config.kafka_listeners:
        return None
    this = ThisBroker(
        config.node_id,
        tuple(listener.advertised for listener in config.kafka_listeners),
        config.log_dir,
        config.properties,
    )

    def local_partitions() -> list[LocalPartition]:
        return [
            (d.topic_id_partition.topic, d.topic_id_partition.partition, d.local_size_bytes)
            for d in agent.describe_log_dirs()
        ]

    handler = BrokerKafkaHandler(
        this,
        controller,
        local_partitions,
        agent,
        access=access,
        topic_auto_creation=config.topic_auto_creation,
        group_config=config.groups,
    )
    registry = ApiVersionRegistry()
    started: list[KafkaServer] = []
    for listener in config.kafka_listeners:
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
