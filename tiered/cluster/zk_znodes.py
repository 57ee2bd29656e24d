"""The data of the znodes that brokers and controllers both read (docs/design.md §3.1): a
broker's registration ``/brokers/ids/{id}`` and the active controller's ``/controller``. Both
follow Kafka's JSON."""

from __future__ import annotations

import json
import time
import uuid

from tiered.cluster.model import BrokerRegistration
from tiered.net import Listener

__all__ = [
    "BROKER_REGISTRATION_VERSION",
    "CONTROLLER_ZNODE_VERSION",
    "decode_broker_registration",
    "decode_controller",
    "encode_broker_registration",
    "encode_controller",
]

BROKER_REGISTRATION_VERSION = 5
CONTROLLER_ZNODE_VERSION = 2


def _now_ms() -> int:
    return int(time.time() * 1000)


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def encode_broker_registration(
    registration: BrokerRegistration, timestamp_ms: int | None = None
) -> bytes:
    """``{"version": 5, "host": ..., "port": ..., "incarnation_id": ..., "timestamp": "<ms>",
    "endpoints": ["PLAINTEXT://host:port"], "listener_security_protocol_map": {...}}``: Kafka's
    JSON, whose ``endpoints`` are the Kafka listeners; ``host`` and ``port`` are the gRPC
    endpoint."""
    return _json(
        {
            "version": BROKER_REGISTRATION_VERSION,
            "host": registration.host,
            "port": registration.port,
            "incarnation_id": str(registration.incarnation_id),
            "timestamp": str(_now_ms() if timestamp_ms is None else timestamp_ms),
            "endpoints": [str(e) for e in registration.kafka_endpoints],
            "listener_security_protocol_map": {
                e.name: e.name for e in registration.kafka_endpoints
            },
        }
    )


def decode_broker_registration(broker_id: int, data: bytes) -> BrokerRegistration:
    """The registration in ``/brokers/ids/{broker_id}``; ValueError if it is not one (a
    registration without ``endpoints``, written before brokers had Kafka listeners, has none)."""
    try:
        value = json.loads(data)
        incarnation = value.get("incarnation_id")
        endpoints = value.get("endpoints") or []
        if not isinstance(endpoints, list):
            raise TypeError(f"endpoints is a {type(endpoints).__name__}, not a list")
        return BrokerRegistration(
            broker_id=broker_id,
            host=str(value["host"]),
            port=int(value["port"]),
            incarnation_id=uuid.UUID(str(incarnation)) if incarnation else uuid.UUID(int=0),
            kafka_endpoints=tuple(Listener.parse(str(e), "endpoints") for e in endpoints),
        )
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"broker {broker_id}: bad registration {data[:200]!r}: {e}") from e


def encode_controller(controller_id: int, endpoint: str) -> bytes:
    """``{"version": 2, "brokerid": ..., "timestamp": "<ms>", "endpoint": "host:port"}``."""
    return _json(
        {
            "version": CONTROLLER_ZNODE_VERSION,
            "brokerid": controller_id,
            "timestamp": str(_now_ms()),
            "endpoint": endpoint,
        }
    )


def decode_controller(data: bytes) -> tuple[int, str]:
    """(controller id, endpoint) of ``/controller``'s JSON; ValueError if it is not that."""
    try:
        value = json.loads(data)
        return int(value["brokerid"]), str(value.get("endpoint", ""))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"bad /controller data {data[:200]!r}: {e}") from e
