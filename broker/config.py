"""The broker's server configuration (``tiered-broker --config broker.properties``). Errors name
the key and what is valid. Topic configs are ``tiered.config``'s, read by every daemon alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from broker.groups.group_config import GroupConfig
from broker.listener.protocol import DEFAULT_MAX_REQUEST_BYTES
from broker.listener.sasl import parse_enabled_mechanisms
from broker.listener.server import DEFAULT_RECEIVE_BUFFER_BYTES, ListenerSettings
from broker.listener.tls_stream import TlsListener
from broker.rlm.manager import RemoteLogManagerConfig
from tiered import config as keys
from tiered.metrics_endpoint import DEFAULT_HOST as DEFAULT_METRICS_HOST
from tiered.metrics_endpoint import metrics_host
from tiered.net import (
    GRPC,
    KAFKA_LISTENER_NAMES,
    SASL_LISTENER_NAMES,
    TLS_LISTENER_NAMES,
    Listener,
    advertised_listeners,
    parse_listeners,
)
from tiered.properties import bool_property, int_property
from tiered.rsm import config_from_properties as rsm_config_from_properties
from tiered.security.grpc_tls import GrpcSecurity
from tiered.security.scram import ScramMechanism
from tiered.security.ssl_principal import SslPrincipalMapper
from tiered.security.tls import TlsSettings
from tiered.security.zookeeper_auth import NO_SECURITY, ZooKeeperSecurity, security_properties
from tiered.source_address import parse as parse_source_address

DEFAULT_LISTENERS = "GRPC://127.0.0.1:9091,PLAINTEXT://127.0.0.1:9092"


def _listeners(values: Mapping[str, str]) -> tuple[dict[str, Listener], dict[str, Listener]]:
    """(bound, advertised) listeners by name; ValueError naming ``listeners`` when there is no
    gRPC one (a broker is reached by the controller and the CLIs over gRPC)."""
    listeners = parse_listeners(values.get("listeners", DEFAULT_LISTENERS))
    grpc_listener = listeners.get(GRPC)
    if grpc_listener is None or grpc_listener.port == 0:
        raise ValueError(
            f"listeners={values.get('listeners')!r} has no gRPC listener with a port; a broker "
            f"needs one, e.g. listeners=GRPC://127.0.0.1:9091,PLAINTEXT://127.0.0.1:9092 (a "
            f"scheme-less host:port is the gRPC listener too)"
        )
    return listeners, advertised_listeners(listeners, values.get("advertised.listeners"))


def _sasl_mechanisms(
    values: Mapping[str, str], listeners: Mapping[str, Listener]
) -> tuple[ScramMechanism, ...]:
    """``sasl.enabled.mechanisms`` of the SASL listeners (checked whenever it is set)."""
    if "sasl.enabled.mechanisms" in values or any(n in SASL_LISTENER_NAMES for n in listeners):
        return parse_enabled_mechanisms(values.get("sasl.enabled.mechanisms"))
    return ()


@dataclass(frozen=True)
class KafkaListener:
    """One of the broker's Kafka listeners: how it binds and serves (its TLS from
    ``listener.name.<name>.ssl.*`` or ``ssl.*``), its address as registered for clients
    (``advertised.listeners``; port 0: the port bound) and, on a SASL listener, the mechanisms
    it logs clients in with (() on the others)."""

    settings: ListenerSettings
    advertised: Listener
    sasl_mechanisms: tuple[ScramMechanism, ...] = ()

    @property
    def name(self) -> str:
        return self.settings.name


def _kafka_listeners(
    values: Mapping[str, str],
    listeners: Mapping[str, Listener],
    advertised: Mapping[str, Listener],
) -> tuple[KafkaListener, ...]:
    """Every Kafka listener in ``listeners`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL: one per
    name, as Kafka), in its order."""
    mechanisms = _sasl_mechanisms(values, listeners)
    return tuple(
        KafkaListener(
            _kafka_settings(values, listener),
            advertised[name],
            mechanisms if name in SASL_LISTENER_NAMES else (),
        )
        for name, listener in listeners.items()
        if name in KAFKA_LISTENER_NAMES
    )


def _receive_buffer_bytes(values: Mapping[str, str]) -> int | None:
    """``socket.receive.buffer.bytes``: Kafka's default, -1 for the OS's."""
    key = "socket.receive.buffer.bytes"
    size = int_property(values, key, DEFAULT_RECEIVE_BUFFER_BYTES, minimum=-1)
    if size == 0:
        raise ValueError(f"{key}=0 is not valid; expected -1 (the OS default) or a size > 0")
    return None if size == -1 else size


def _kafka_settings(values: Mapping[str, str], listener: Listener) -> ListenerSettings:
    tls = None
    if listener.name in TLS_LISTENER_NAMES:
        tls = TlsListener(
            TlsSettings.from_properties(values, listener.name).server_context(),
            SslPrincipalMapper.from_properties(values, listener.name),
        )
    return ListenerSettings(
        name=listener.name,
        tls=tls,
        host=listener.host,
        port=listener.port,
        max_request_bytes=int_property(
            values, "socket.request.max.bytes", DEFAULT_MAX_REQUEST_BYTES, minimum=1024
        ),
        handler_threads=int_property(values, "num.io.threads", 8, minimum=1),
        receive_buffer_bytes=_receive_buffer_bytes(values),
        connections_max_idle_s=int_property(
            values, "connections.max.idle.ms", 600_000, minimum=1000
        )
        / 1000,
    )


@dataclass(frozen=True)
class TopicAutoCreation:
    """Kafka's ``auto.create.topics.enable`` (default true) and ``num.partitions`` (default 1):
    whether a Metadata request that allows it creates a missing topic, and with how many
    partitions. ``default.replication.factor`` is accepted at 1 only (one replica each)."""

    enabled: bool = True
    partitions: int = 1

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> TopicAutoCreation:
        replication = int_property(values, "default.replication.factor", 1)
        if replication != 1:
            raise ValueError(
                f"default.replication.factor={values['default.replication.factor']!r} is not "
                "valid; valid values: 1 (each partition has one replica, on the broker that "
                "leads it)"
            )
        return cls(
            enabled=bool_property(values, "auto.create.topics.enable", True),
            partitions=int_property(values, "num.partitions", 1, minimum=1),
        )


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    host: str
    port: int
    log_dir: Path
    remote_storage_enabled: bool
    rlm: RemoteLogManagerConfig
    rlmm: dict[str, str] = field(default_factory=dict)
    rsm: dict[str, str] = field(default_factory=dict)
    metrics_port: int | None = None  # None: no metrics endpoint; 0: any free port
    metrics_host: str = DEFAULT_METRICS_HOST
    # Where its ZooKeeper and S3 connections come from (source.address): None, the kernel picks.
    source_address: str | None = None
    controller_bootstrap: tuple[str, ...] = ()  # KRaft mode: controller.quorum.bootstrap.servers
    zookeeper_connect: str | None = None  # ZooKeeper mode: where brokers register
    # The process's ZooKeeper identity and znode ACLs (registration and a ZooKeeper RLMM).
    zookeeper_security: ZooKeeperSecurity = NO_SECURITY
    heartbeat_interval_s: float = 2.0
    # The Kafka listeners (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), in ``listeners`` order.
    kafka_listeners: tuple[KafkaListener, ...] = ()
    grpc_advertised: Listener | None = None  # None: host:port
    grpc_security: GrpcSecurity = field(default_factory=GrpcSecurity)
    groups: GroupConfig = field(default_factory=GroupConfig)  # the group.* keys
    topic_auto_creation: TopicAutoCreation = field(default_factory=TopicAutoCreation)
    properties: Mapping[str, str] = field(default_factory=dict)  # the file, for DescribeConfigs

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> BrokerConfig:
        if "node.id" not in values and "broker.id" not in values:
            raise ValueError("node.id is required")
        node_id = int_property(values, "node.id", int_property(values, "broker.id", -1), minimum=0)
        listeners, advertised = _listeners(values)
        host, port = listeners[GRPC].host, listeners[GRPC].port
        if "log.dirs" not in values:
            raise ValueError("log.dirs is required")
        log_dir = Path(values["log.dirs"].split(",")[0].strip())
        rlmm = {k: v for k, v in values.items() if k.startswith("rlmm.")}
        rlmm.update(security_properties(values))
        rlmm.setdefault("rlmm.sqlite.path", str(log_dir / "__rlmm.db"))
        rlmm["broker.id"] = str(node_id)
        rsm = rsm_config_from_properties(values)
        rsm.setdefault("remote.storage.root", str(log_dir / "__remote"))
        return cls(
            node_id=node_id,
            host=host,
            port=port,
            log_dir=log_dir,
            remote_storage_enabled=bool_property(values, "remote.log.storage.system.enable", True),
            rlm=RemoteLogManagerConfig(
                broker_id=node_id,
                copier_threads=int_property(values, keys.COPIER_THREAD_POOL_SIZE, 10, minimum=1),
                expiration_threads=int_property(
                    values, keys.EXPIRATION_THREAD_POOL_SIZE, 10, minimum=1
                ),
                reader_threads=int_property(values, keys.READER_THREADS, 10, minimum=1),
                task_interval_s=int_property(values, keys.TASK_INTERVAL_MS, 30_000, minimum=1)
                / 1000,
                custom_metadata_max_bytes=int_property(
                    values, keys.CUSTOM_METADATA_MAX_BYTES, 128, 0
                ),
            ),
            rlmm=rlmm,
            rsm=rsm,
            metrics_port=(
                int_property(values, "metrics.port", 0, minimum=0)
                if "metrics.port" in values
                else None
            ),
            metrics_host=metrics_host(values),
            source_address=parse_source_address(values),
            controller_bootstrap=tuple(
                a.strip()
                for a in values.get("controller.quorum.bootstrap.servers", "").split(",")
                if a.strip()
            ),
            zookeeper_connect=values.get("zookeeper.connect") or None,
            zookeeper_security=ZooKeeperSecurity.from_config(values),
            heartbeat_interval_s=int_property(
                values, "broker.heartbeat.interval.ms", 2000, minimum=10
            )
            / 1000,
            kafka_listeners=_kafka_listeners(values, listeners, advertised),
            grpc_advertised=advertised[GRPC],
            grpc_security=GrpcSecurity.from_properties(values),
            groups=GroupConfig.from_properties(values),
            topic_auto_creation=TopicAutoCreation.from_properties(values),
            properties=MappingProxyType(dict(values)),
        )
