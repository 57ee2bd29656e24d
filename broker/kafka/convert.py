"""What every Kafka API of the broker shares at the edge: error codes and messages, the numbers
Kafka's config APIs use, and the no-throttle answer.

Errors travel as Kafka codes with a message naming the key and the valid values (the gRPC path's
own words, ``TieredError.message``). TIERED_STORAGE_DISABLEMENT_IN_PROGRESS is not a Kafka code
(clients cannot decode it): on the wire it is INVALID_CONFIG whose message starts with
``TIERED_STORAGE_DISABLEMENT_IN_PROGRESS:`` (docs/design.md §4).
"""

from __future__ import annotations

import datetime
import enum

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i32Timedelta

from tiered.errors import ErrorCode, TieredError

__all__ = [
    "NO_THROTTLE",
    "UNKNOWN_AUTHORIZED_OPERATIONS",
    "ConfigSource",
    "KafkaError",
    "ResourceType",
    "duration_ms",
    "kafka_error",
]

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
UNKNOWN_AUTHORIZED_OPERATIONS = -(2**31)  # "not requested" in Metadata / DescribeCluster

KafkaError = tuple[KafkaErrorCode, str | None]


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type numbers."""

    TOPIC = 2
    BROKER = 4


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs config_source numbers (the ones this broker answers)."""

    DYNAMIC_TOPIC_CONFIG = 1
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


def kafka_error(error: TieredError | None) -> KafkaError:
    """(Kafka error code, message) for a domain error; (NONE, None) for none. A code Kafka does
    not have is UNKNOWN_SERVER_ERROR, its name leading the message."""
    if error is None:
        return KafkaErrorCode.none, None
    if error.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS:
        return KafkaErrorCode.invalid_config, f"{error.code.name}: {error.message}"
    try:
        return KafkaErrorCode(int(error.code)), error.message
    except ValueError:
        return KafkaErrorCode.unknown_server_error, f"{error.code.name}: {error.message}"


def duration_ms(value: datetime.timedelta) -> int:
    """A kio duration (a timedelta) as Kafka's milliseconds."""
    return int(value.total_seconds() * 1000)
