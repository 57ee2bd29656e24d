"""Config entries as Kafka's DescribeConfigs and CreateTopics describe them, in plain Python:
value, source, default or not, read-only, type.

A topic lists every topic config (``tiered.config.TOPIC_CONFIG_DEF``, which gives each its
type): a key set on the topic is a DYNAMIC_TOPIC_CONFIG, any other the DEFAULT_CONFIG; then two
read-only entries that are state rather than config: ``remote.log.tiered.state`` (ENABLED |
DISABLING | DISABLED) and ``remote.log.tiered.epoch``. A broker lists its own properties file as
read-only STATIC_BROKER_CONFIG entries (its configs are static), secrets hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.kafka.convert import ConfigSource
from tiered import config as keys
from tiered.cluster.model import TieredState
from tiered.config_def import ConfigType
from tiered.security.sensitive_configs import is_sensitive_config

__all__ = [
    "READ_ONLY_TOPIC_KEYS",
    "TIERED_EPOCH_KEY",
    "TIERED_STATE_KEY",
    "ConfigDescription",
    "broker_entries",
    "new_topic_entries",
    "topic_entries",
]

TIERED_STATE_KEY = "remote.log.tiered.state"
TIERED_EPOCH_KEY = "remote.log.tiered.epoch"
READ_ONLY_TOPIC_KEYS = frozenset({TIERED_STATE_KEY, TIERED_EPOCH_KEY})

_STATE_TYPES: Mapping[str, ConfigType] = {
    TIERED_STATE_KEY: ConfigType.STRING,
    TIERED_EPOCH_KEY: ConfigType.INT,
}


def _type_of(name: str) -> ConfigType:
    return keys.TOPIC_CONFIG_DEF[name].type if name in keys.TOPIC_CONFIG_DEF else ConfigType.LONG


@dataclass(frozen=True)
class ConfigDescription:
    name: str
    value: str | None  # None for a sensitive value
    source: ConfigSource
    is_default: bool
    read_only: bool
    config_type: ConfigType
    is_sensitive: bool = False


def topic_entries(
    entries: Iterable[tuple[str, str, bool]], state: TieredState, tiered_epoch: int
) -> list[ConfigDescription]:
    """A topic's ``(name, value, is_default)`` entries, then its tiered state and epoch."""
    described = [
        ConfigDescription(
            name,
            value,
            ConfigSource.DEFAULT_CONFIG if is_default else ConfigSource.DYNAMIC_TOPIC_CONFIG,
            is_default,
            read_only=False,
            config_type=_type_of(name),
        )
        for name, value, is_default in entries
    ]
    for name, value in ((TIERED_STATE_KEY, state.value), (TIERED_EPOCH_KEY, str(tiered_epoch))):
        described.append(
            ConfigDescription(
                name,
                value,
                ConfigSource.DYNAMIC_TOPIC_CONFIG,
                is_default=False,
                read_only=True,
                config_type=_STATE_TYPES[name],
            )
        )
    return described


def new_topic_entries(configs: Mapping[str, str]) -> list[ConfigDescription]:
    """The entries of a topic created with ``configs`` (CreateTopics' answer)."""
    return [
        ConfigDescription(
            name,
            configs.get(name, default),
            ConfigSource.DYNAMIC_TOPIC_CONFIG if name in configs else ConfigSource.DEFAULT_CONFIG,
            name not in configs,
            read_only=False,
            config_type=_type_of(name),
        )
        for name, default in sorted(keys.TOPIC_CONFIG_DEFAULTS.items())
    ]


def broker_entries(properties: Mapping[str, str]) -> list[ConfigDescription]:
    """A broker's static configs, by name; values of secret-looking keys hidden."""
    described = []
    for name, value in sorted(properties.items()):
        secret = is_sensitive_config(name)
        described.append(
            ConfigDescription(
                name,
                None if secret else value,
                ConfigSource.STATIC_BROKER_CONFIG,
                is_default=False,
                read_only=True,
                config_type=ConfigType.STRING,
                is_sensitive=secret,
            )
        )
    return described
