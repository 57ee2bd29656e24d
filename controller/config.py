"""The controller's server configuration (``tiered-controller --config controller.properties``).
Errors name the key and what is valid."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from tiered.metrics_endpoint import DEFAULT_HOST as DEFAULT_METRICS_HOST
from tiered.metrics_endpoint import metrics_host
from tiered.net import parse_listener
from tiered.properties import int_property
from tiered.retry import ExponentialBackoff
from tiered.retry_policies import BROKER_REQUEST_BACKOFF
from tiered.rsm import config_from_properties as rsm_config_from_properties
from tiered.security.authorizer import AuthorizerConfig
from tiered.security.grpc_tls import GrpcSecurity
from tiered.security.spark_auth import settings_of_secret_file
from tiered.security.zookeeper_auth import security_properties
from tiered.source_address import parse as parse_source_address

SPARK_IDLE_TIMEOUT_KEY = "bulk.delete.spark.idle.timeout.ms"
DEFAULT_SPARK_IDLE_TIMEOUT_MS = 600_000
MAX_INT = 2**31 - 1
VERIFY_INTERVAL_KEY = "remote.storage.verify.interval.ms"


def _milliseconds(values: Mapping[str, str], key: str, default: int, meaning: str) -> int:
    """``values[key]``, milliseconds in 0..MAX_INT (``default`` when absent or blank); the error
    names the key, the value, the range and ``meaning`` (what 0 means, the default)."""
    raw = values.get(key)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_INT:
        raise ValueError(
            f"{key}={raw.strip()!r} is not valid; expected milliseconds, an integer in "
            f"0..{MAX_INT} ({meaning})"
        )
    return value


def verify_interval_ms(values: Mapping[str, str]) -> int:
    """``remote.storage.verify.interval.ms``: how often the active controller runs a pass of its
    own verify of remote storage (controller.periodic_verify); 0 or absent: never (the
    default)."""
    return _milliseconds(values, VERIFY_INTERVAL_KEY, 0, "0: no periodic verify, the default")


def spark_idle_timeout_ms(values: Mapping[str, str]) -> int:
    """``bulk.delete.spark.idle.timeout.ms``: how long the bulk delete's Spark executors are
    kept without a task before they are given back to the workers (dynamic allocation's
    ``executorIdleTimeout``, which Spark counts in whole seconds; 0: as soon as a job ends).
    Default 10 minutes."""
    return _milliseconds(
        values,
        SPARK_IDLE_TIMEOUT_KEY,
        DEFAULT_SPARK_IDLE_TIMEOUT_MS,
        f"0: executors given back as soon as a job ends; default {DEFAULT_SPARK_IDLE_TIMEOUT_MS}",
    )


def _spark_settings(values: Mapping[str, str]) -> dict[str, str]:
    """The ``spark.*`` keys; the Spark secret's file (kept with the bulk delete's keys, read
    where the session is built) checked here, so that a bad one stops the controller at start."""
    settings_of_secret_file(values)
    return {k: v for k, v in values.items() if k.startswith("spark.")}


@dataclass(frozen=True)
class ControllerConfig:
    node_id: int
    host: str
    port: int
    store: dict[str, str] = field(default_factory=dict)  # metadata.store and its backend's keys
    broker_session_timeout_s: float = 9.0
    request_timeout_s: float = 30.0
    backoff: ExponentialBackoff = BROKER_REQUEST_BACKOFF
    max_entries_per_request: int = 5000
    spark: dict[str, str] = field(default_factory=dict)
    spark_idle_timeout_ms: int = DEFAULT_SPARK_IDLE_TIMEOUT_MS
    # remote.storage.verify.interval.ms: the periodic verify's interval; 0 is off.
    verify_interval_ms: int = 0
    # The brokers' remote storage and RLMM settings, for the bulk-delete job (delete policy).
    remote: dict[str, str] = field(default_factory=dict)
    # The Prometheus endpoint: none without ``metrics.port``; port 0 is any free port.
    metrics_port: int | None = None
    metrics_host: str = DEFAULT_METRICS_HOST
    # Where its ZooKeeper and S3 connections come from (source.address): None, the kernel picks.
    source_address: str | None = None
    # TLS on the gRPC listener and on the channels to the brokers (listener.security.protocol.map)
    grpc_security: GrpcSecurity = field(default_factory=GrpcSecurity)
    authorizer: AuthorizerConfig = field(default_factory=AuthorizerConfig)

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def metadata_mode(self) -> str:
        return self.store.get("metadata.store", "kraft").strip().lower()

    @property
    def cluster_id(self) -> str:
        """The id Kafka clients see (Metadata, DescribeCluster): ``metadata.cluster.id`` when
        set, else derived from where the metadata lives, so every controller of one cluster
        gives the same; 22 characters of URL-safe base64, as Kafka's."""
        given = self.store.get("metadata.cluster.id", "").strip()
        if given:
            return given
        if self.metadata_mode == "kraft":
            where = str(Path(self.store.get("metadata.log.dir", "")).resolve())
        else:
            where = self.store.get("zookeeper.connect", "")
        derived = uuid.uuid5(uuid.NAMESPACE_URL, f"tiered:{self.metadata_mode}:{where}")
        return base64.urlsafe_b64encode(derived.bytes).decode().rstrip("=")

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> ControllerConfig:
        if "node.id" not in values:
            raise ValueError("node.id is required")
        host, port = parse_listener(values.get("listeners", "127.0.0.1:9093"))
        store = {k: v for k, v in values.items() if k.startswith(("metadata.", "zookeeper."))}
        mode = store.get("metadata.store", "kraft").strip().lower()
        if mode == "kraft" and "metadata.log.dir" not in store:
            raise ValueError("metadata.log.dir is required with metadata.store=kraft")
        if mode == "zookeeper" and "zookeeper.connect" not in store:
            raise ValueError("zookeeper.connect is required with metadata.store=zookeeper")
        default = BROKER_REQUEST_BACKOFF
        initial_ms = int_property(
            values, "controller.retry.backoff.ms", round(default.initial_s * 1000), minimum=1
        )
        max_ms = int_property(
            values,
            "controller.retry.backoff.max.ms",
            round(default.max_s * 1000),
            minimum=initial_ms,
        )
        return cls(
            node_id=int_property(values, "node.id", 0, minimum=0),
            host=host,
            port=port,
            store=store,
            broker_session_timeout_s=int_property(values, "broker.session.timeout.ms", 9000, 100)
            / 1000,
            request_timeout_s=int_property(values, "controller.request.timeout.ms", 30_000, 100)
            / 1000,
            backoff=replace(default, initial_s=initial_ms / 1000, max_s=max_ms / 1000),
            max_entries_per_request=int_property(
                values, "controller.max.partitions.per.request", 5000, 1
            ),
            spark=_spark_settings(values),
            spark_idle_timeout_ms=spark_idle_timeout_ms(values),
            verify_interval_ms=verify_interval_ms(values),
            remote={
                **{k: v for k, v in values.items() if k.startswith(("rlmm.", "bulk.delete."))},
                **security_properties(values),  # a ZooKeeper RLMM's identity
                **rsm_config_from_properties(
                    values
                ),  # the brokers' storage plugin, configured alike
            },
            metrics_port=_metrics_port(values),
            metrics_host=metrics_host(values),
            source_address=parse_source_address(values),
            grpc_security=GrpcSecurity.from_properties(values),
            authorizer=AuthorizerConfig.from_properties(values),
        )


def _metrics_port(values: Mapping[str, str]) -> int | None:
    if not values.get("metrics.port", "").strip():
        return None
    port = int_property(values, "metrics.port", 0, minimum=0)
    if port > 65535:
        raise ValueError(
            f"metrics.port={port} is not valid; expected a port in 0..65535 (0: any free port)"
        )
    return port
