"""Topic configs, defined once (:data:`TOPIC_CONFIG_DEF`, in the style of Kafka's
``ConfigDef``), and what reads them: validation, the typed :class:`TopicConfig`, incremental
alterations; also the server keys both daemons share, and the rules for topic names and
partition counts. The definitions and errors are documented in ``docs/design.md``.

Validation is pure: :func:`validate_topic_configs` either returns the whole normalized set or
raises a :class:`~tiered.errors.TieredError` for the first problem found (keys are checked in
sorted order, then the rules that span keys). Every message names the key, the bad value (or its
length, for an over-long value) and what is valid. Error codes follow Kafka where Kafka has the
check, and the project's contract where it is explicit:

- an unknown key, a bad integer (``remote.log.delete.delay.ms`` negative, say), a bad
  ``cleanup.policy``, an over-long value, tiering a compacted topic, local retention above total
  retention: ``INVALID_CONFIG`` (40);
- a non-boolean for a boolean key, a ``remote.log.disable.policy`` other than retain/delete, or a
  policy that contradicts ``remote.log.delete.on.disable``: ``INVALID_REQUEST`` (42).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tiered.config_def import (
    INT32_MAX,
    LONG_MAX,
    Boolean,
    Choice,
    ConfigDef,
    ConfigKey,
    ConfigType,
    IntRange,
    ListOf,
    shown,
)
from tiered.errors import ErrorCode, TieredError

REMOTE_STORAGE_ENABLE = "remote.storage.enable"
REMOTE_LOG_DISABLE_POLICY = "remote.log.disable.policy"
REMOTE_LOG_COPY_DISABLE = "remote.log.copy.disable"
REMOTE_LOG_DELETE_ON_DISABLE = "remote.log.delete.on.disable"
REMOTE_LOG_DELETE_DELAY_MS = "remote.log.delete.delay.ms"
CUSTOM_METADATA_MAX_BYTES = "remote.log.metadata.custom.metadata.max.bytes"
COPIER_THREAD_POOL_SIZE = "remote.log.manager.copier.thread.pool.size"
EXPIRATION_THREAD_POOL_SIZE = "remote.log.manager.expiration.thread.pool.size"
READER_THREADS = "remote.log.reader.threads"
TASK_INTERVAL_MS = "remote.log.manager.task.interval.ms"

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
LOCAL_RETENTION_MS = "local.retention.ms"
LOCAL_RETENTION_BYTES = "local.retention.bytes"
SEGMENT_BYTES = "segment.bytes"
SEGMENT_MS = "segment.ms"
CLEANUP_POLICY = "cleanup.policy"

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"

MAX_CONFIG_VALUE_LENGTH = 4096
"""The longest topic config value accepted, in characters."""
MAX_TOPIC_NAME_LENGTH = 249
"""Kafka's limit on a topic name's length."""
MAX_PARTITIONS = 10_000
"""The most partitions a topic may have."""

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})
"""Kafka's ``Topic.isInternal``: topics its coordinators own. Never created for a client, never
deleted by one, never tiered; Metadata marks them ``is_internal``."""


class RemoteLogDisablePolicy(enum.Enum):
    """What happens to a topic's remote data when tiered storage is disabled (KIP-950)."""

    RETAIN = "retain"
    DELETE = "delete"

    @classmethod
    def parse(cls, value: str) -> RemoteLogDisablePolicy:
        """The policy named by ``value`` (a wire or journal field); ValueError otherwise."""
        try:
            return cls(value.strip().lower())
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise ValueError(
                f"{REMOTE_LOG_DISABLE_POLICY}={shown(value)} is not valid; valid values: {valid}"
            ) from None


# ----------------------------------------------------------------------------- the definition

TOPIC_CONFIG_DEF = ConfigDef(
    ConfigKey(
        REMOTE_STORAGE_ENABLE,
        ConfigType.BOOLEAN,
        "false",
        Boolean(ErrorCode.INVALID_REQUEST),
        "Tier the topic's closed segments to remote storage. Setting it to false on a tiered "
        "topic starts a disablement (ENABLED to DISABLING to DISABLED); true enables it again.",
    ),
    ConfigKey(
        REMOTE_LOG_DISABLE_POLICY,
        ConfigType.STRING,
        "retain",
        Choice(RemoteLogDisablePolicy, ErrorCode.INVALID_REQUEST),
        "What a disablement does with the remote data: retain keeps it readable until retention "
        "expires it; delete removes it with the bulk delete.",
    ),
    ConfigKey(
        REMOTE_LOG_COPY_DISABLE,
        ConfigType.BOOLEAN,
        "false",
        Boolean(ErrorCode.INVALID_REQUEST),
        "Stop copying new segments while the remote data stays readable and expires by "
        "retention (Kafka 3.9).",
    ),
    ConfigKey(
        REMOTE_LOG_DELETE_ON_DISABLE,
        ConfigType.BOOLEAN,
        "false",
        Boolean(ErrorCode.INVALID_REQUEST),
        "Kafka 3.9's form of the delete policy: true disables with "
        f"{REMOTE_LOG_DISABLE_POLICY}=delete; it may not contradict that key.",
    ),
    ConfigKey(
        REMOTE_LOG_DELETE_DELAY_MS,
        ConfigType.LONG,
        "0",
        IntRange(0, LONG_MAX, " (0: delete at once)"),
        "How long a delete-policy disablement waits, from the topic reaching DISABLED, before its "
        "bulk delete starts; read once, at DISABLED. Until then the remote data stays readable, "
        f"and {REMOTE_STORAGE_ENABLE}=true or {REMOTE_LOG_DISABLE_POLICY}=retain cancels it.",
    ),
    ConfigKey(
        RETENTION_MS,
        ConfigType.LONG,
        "604800000",
        IntRange(-1, LONG_MAX, " (-1: unlimited)"),
        "How long a record is kept in all, local and remote.",
    ),
    ConfigKey(
        RETENTION_BYTES,
        ConfigType.LONG,
        "-1",
        IntRange(-1, LONG_MAX, " (-1: unlimited)"),
        "The most bytes a partition keeps in all, local and remote.",
    ),
    ConfigKey(
        LOCAL_RETENTION_MS,
        ConfigType.LONG,
        "-2",
        IntRange(-2, LONG_MAX, f" (-2: the value of {RETENTION_MS})"),
        "How long a tiered record stays in the local log; at most retention.ms.",
    ),
    ConfigKey(
        LOCAL_RETENTION_BYTES,
        ConfigType.LONG,
        "-2",
        IntRange(-2, LONG_MAX, f" (-2: the value of {RETENTION_BYTES})"),
        "The most bytes of a tiered partition kept in the local log; at most retention.bytes.",
    ),
    ConfigKey(
        SEGMENT_BYTES,
        ConfigType.INT,
        "1073741824",
        # Kafka's floor: the overhead of one legacy record.
        IntRange(14, INT32_MAX),
        "The size at which the active segment is rolled; only closed segments are tiered.",
    ),
    ConfigKey(
        SEGMENT_MS,
        ConfigType.LONG,
        "604800000",
        IntRange(1, LONG_MAX),
        "The age at which the active segment is rolled.",
    ),
    ConfigKey(
        CLEANUP_POLICY,
        ConfigType.LIST,
        CLEANUP_POLICY_DELETE,
        ListOf((CLEANUP_POLICY_DELETE, CLEANUP_POLICY_COMPACT)),
        "delete removes old segments by retention; compact keeps the last record of each key "
        "(a compacted topic cannot be tiered).",
    ),
)
"""Every topic config key accepted: type, Kafka's default, valid values, documentation."""

TOPIC_CONFIG_DEFAULTS: Mapping[str, str] = TOPIC_CONFIG_DEF.defaults
"""Every topic config key with its default. A topic stores only the keys set on it;
:func:`effective_topic_configs` overlays them on these."""


@dataclass(frozen=True)
class TopicConfig:
    """A topic's configs, typed: each key of :data:`TOPIC_CONFIG_DEF` (its dots as underscores),
    its value set on the topic or its default."""

    remote_storage_enable: bool
    remote_log_disable_policy: RemoteLogDisablePolicy
    remote_log_copy_disable: bool
    remote_log_delete_on_disable: bool
    remote_log_delete_delay_ms: int
    retention_ms: int
    retention_bytes: int
    local_retention_ms: int
    local_retention_bytes: int
    segment_bytes: int
    segment_ms: int
    cleanup_policy: tuple[str, ...]

    @classmethod
    def of(cls, configs: Mapping[str, str]) -> TopicConfig:
        """The typed configs of a topic's config set, after :func:`validate_topic_configs`
        (which raises for the first problem found)."""
        normalized = validate_topic_configs(configs)
        values: dict[str, Any] = {
            key.name.replace(".", "_"): key.value_in(normalized) for key in TOPIC_CONFIG_DEF
        }
        return cls(**values)

    @property
    def disable_policy(self) -> RemoteLogDisablePolicy:
        """The policy a disablement follows: DELETE when ``remote.log.disable.policy`` is delete
        or ``remote.log.delete.on.disable`` is true, else RETAIN."""
        return _effective_policy(self.remote_log_disable_policy, self.remote_log_delete_on_disable)


def _effective_policy(
    policy: RemoteLogDisablePolicy, delete_on_disable: bool
) -> RemoteLogDisablePolicy:
    """Kafka 3.9's ``remote.log.delete.on.disable=true`` is the delete policy by another name."""
    return RemoteLogDisablePolicy.DELETE if delete_on_disable else policy


# ----------------------------------------------------------------------------- validation


def validate_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Checks every key and value of a topic's config set (the keys set on the topic, not the
    defaults) and returns it normalized: values stripped, booleans and policies lower-cased,
    ``cleanup.policy`` as a comma list without spaces. Raises :class:`TieredError` for the first
    problem found; the input is never modified."""
    normalized: dict[str, str] = {}
    for key in sorted(configs, key=str):
        raw = configs[key]
        _check_known_key(key)
        if not isinstance(raw, str):
            raise TieredError(
                ErrorCode.INVALID_CONFIG,
                f"{key} has a value of type {type(raw).__name__}; valid values are strings",
            )
        if len(raw) > MAX_CONFIG_VALUE_LENGTH:
            raise TieredError(
                ErrorCode.INVALID_CONFIG,
                f"the value of {key} is {len(raw)} characters long; the limit is "
                f"{MAX_CONFIG_VALUE_LENGTH}",
            )
        normalized[key] = TOPIC_CONFIG_DEF[key].normalize(raw)
    _check_across_keys(normalized)
    return normalized


def validate_topic_config_keys(keys: Iterable[str]) -> None:
    """Checks that every key (of configs a request deletes, say) is a topic config, in sorted
    order, with the error :func:`validate_topic_configs` gives an unknown key: deleting a typo
    must fail as setting one does, not pass as done while it changed nothing."""
    for key in sorted(keys, key=str):
        _check_known_key(key)


def _check_known_key(key: object) -> None:
    if not isinstance(key, str) or key not in TOPIC_CONFIG_DEF:
        known = ", ".join(sorted(TOPIC_CONFIG_DEFAULTS))
        raise TieredError(
            ErrorCode.INVALID_CONFIG, f"unknown topic config {shown(str(key))}; known: {known}"
        )


def _check_across_keys(configs: Mapping[str, str]) -> None:
    """The rules that span keys, on a normalized set."""
    policy = configs.get(REMOTE_LOG_DISABLE_POLICY)
    if policy == RemoteLogDisablePolicy.RETAIN.value and (
        configs.get(REMOTE_LOG_DELETE_ON_DISABLE) == "true"
    ):
        raise TieredError(
            ErrorCode.INVALID_REQUEST,
            f"{REMOTE_LOG_DISABLE_POLICY}='retain' contradicts "
            f"{REMOTE_LOG_DELETE_ON_DISABLE}='true'; valid: {REMOTE_LOG_DISABLE_POLICY}=delete, "
            f"or {REMOTE_LOG_DELETE_ON_DISABLE}=false, or only one of the two",
        )
    if configs.get(REMOTE_STORAGE_ENABLE) != "true":
        return
    # Kafka checks the following only for a topic with remote storage enabled
    # (LogConfig.validateTopicLogConfigValues).
    effective = effective_topic_configs(configs)
    cleanup = effective[CLEANUP_POLICY]
    if CLEANUP_POLICY_COMPACT in cleanup.split(","):
        raise TieredError(
            ErrorCode.INVALID_CONFIG,
            f"{REMOTE_STORAGE_ENABLE}='true' is not valid with {CLEANUP_POLICY}={cleanup!r}: "
            f"tiered storage is not supported for compacted topics; valid: "
            f"{CLEANUP_POLICY}={CLEANUP_POLICY_DELETE} or {REMOTE_STORAGE_ENABLE}=false",
        )
    for total_key, local_key in (
        (RETENTION_MS, LOCAL_RETENTION_MS),
        (RETENTION_BYTES, LOCAL_RETENTION_BYTES),
    ):
        total, local = int(effective[total_key]), int(effective[local_key])
        if total == -1 or local == -2:
            continue
        if local == -1 or local > total:
            raise TieredError(
                ErrorCode.INVALID_CONFIG,
                f"{local_key}={local} is not valid with {total_key}={total}; valid values: "
                f"-2 (the value of {total_key}) or an integer from 0 to {total}",
            )


def effective_topic_configs(configs: Mapping[str, str]) -> dict[str, str]:
    """Every accepted key: the defaults, overlaid by the keys set in ``configs``."""
    return {**TOPIC_CONFIG_DEFAULTS, **configs}


def remote_storage_enabled(configs: Mapping[str, str]) -> bool:
    """Whether ``remote.storage.enable`` is true in a topic's config set (default false)."""
    enabled: bool = TOPIC_CONFIG_DEF[REMOTE_STORAGE_ENABLE].value_in(configs)
    return enabled


def disable_policy(configs: Mapping[str, str]) -> RemoteLogDisablePolicy:
    """The policy a disablement of this topic follows (:attr:`TopicConfig.disable_policy`)."""
    return _effective_policy(
        TOPIC_CONFIG_DEF[REMOTE_LOG_DISABLE_POLICY].value_in(configs),
        TOPIC_CONFIG_DEF[REMOTE_LOG_DELETE_ON_DISABLE].value_in(configs),
    )


def delete_delay_ms(configs: Mapping[str, str]) -> int:
    """How long a delete-policy disablement of this topic waits, from DISABLED, before its bulk
    delete starts (``remote.log.delete.delay.ms``, default 0: at once)."""
    delay: int = TOPIC_CONFIG_DEF[REMOTE_LOG_DELETE_DELAY_MS].value_in(configs)
    return delay


# ----------------------------------------------------------------------------- alterations

LIST_CONFIG_KEYS: frozenset[str] = frozenset({CLEANUP_POLICY})
"""The topic configs whose value is a comma list: APPEND and SUBTRACT work on these only."""


class ConfigOperation(enum.Enum):
    """Kafka's IncrementalAlterConfigs operations, with Kafka's numbers."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def apply_config_operations(
    configs: Mapping[str, str], operations: Iterable[tuple[str, ConfigOperation, str]]
) -> dict[str, str]:
    """A topic's config set (the keys set on it) after ``(key, operation, value)`` operations,
    as Kafka's IncrementalAlterConfigs applies them: SET and DELETE a key; APPEND and SUBTRACT
    the comma-separated items of ``value`` to and from a list config's current value (its
    default when unset). Raises :class:`TieredError` before applying anything: INVALID_REQUEST
    for a key named twice or APPEND/SUBTRACT on a config that is not a list, INVALID_CONFIG for
    an unknown key (the keys that are not SET; set values are checked with the whole new set,
    by :func:`validate_topic_configs`)."""
    operations = list(operations)
    keys = [key for key, _, _ in operations]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise TieredError(
            ErrorCode.INVALID_REQUEST,
            f"config {shown(repeated[0])} is altered more than once in one request; valid: "
            f"one operation per config key",
        )
    validate_topic_config_keys(key for key, op, _ in operations if op is not ConfigOperation.SET)
    for key, op, _ in operations:
        if op in (ConfigOperation.APPEND, ConfigOperation.SUBTRACT) and key not in LIST_CONFIG_KEYS:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"{op.name} is not valid for {key}, which is not a list config; valid: SET or "
                f"DELETE, or {op.name} on a list config ({', '.join(sorted(LIST_CONFIG_KEYS))})",
            )
    new = dict(configs)
    for key, op, value in operations:
        if op is ConfigOperation.SET:
            new[key] = value
        elif op is ConfigOperation.DELETE:
            new.pop(key, None)
        else:
            current = effective_topic_configs(new)[key]
            items = [i.strip() for i in current.split(",") if i.strip()]
            changed = [i.strip() for i in value.split(",") if i.strip()]
            if op is ConfigOperation.APPEND:
                items += [i for i in changed if i not in items]
            else:
                items = [i for i in items if i not in changed]
            new[key] = ",".join(items)
    return new


# ----------------------------------------------------------------------------- names and counts

_TOPIC_NAME_ILLEGAL = re.compile(r"[^a-zA-Z0-9._-]")


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; raises ``INVALID_TOPIC_EXCEPTION`` naming the rule broken."""
    if not isinstance(name, str):
        raise TieredError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"a topic name must be a string, not {type(name).__name__}",
        )
    if not name:
        raise TieredError(ErrorCode.INVALID_TOPIC_EXCEPTION, "a topic name must not be empty")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise TieredError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {shown(name)} is {len(name)} characters long; the limit is "
            f"{MAX_TOPIC_NAME_LENGTH}",
        )
    if name in (".", ".."):
        raise TieredError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {name!r} is not valid: '.' and '..' are not allowed as topic names",
        )
    illegal = sorted(set(_TOPIC_NAME_ILLEGAL.findall(name)))
    if illegal:
        raise TieredError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {shown(name)} contains illegal characters {''.join(illegal)!r}; valid "
            f"characters: ASCII letters, digits, '.', '_' and '-'",
        )


def validate_partition_count(n: int) -> None:
    """A topic has 1 to :data:`MAX_PARTITIONS` partitions; else ``INVALID_PARTITIONS``."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_PARTITIONS:
        raise TieredError(
            ErrorCode.INVALID_PARTITIONS,
            f"partition count {n!r} is not valid; valid values: an integer from 1 to "
            f"{MAX_PARTITIONS}",
        )
