"""Topic config, topic name and partition count validation (docs/design.md §4)."""

from __future__ import annotations

import dataclasses

import pytest

from tiered.config import (
    TOPIC_CONFIG_DEF,
    TOPIC_CONFIG_DEFAULTS,
    RemoteLogDisablePolicy,
    TopicConfig,
    delete_delay_ms,
    disable_policy,
    effective_topic_configs,
    remote_storage_enabled,
    validate_partition_count,
    validate_topic_config_keys,
    validate_topic_configs,
    validate_topic_name,
)
from tiered.errors import ErrorCode, TieredError

KAFKA_DEFAULTS = {
    "remote.storage.enable": "false",
    "remote.log.disable.policy": "retain",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.log.delete.delay.ms": "0",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "cleanup.policy": "delete",
}
BOOLEAN_KEYS = ("remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable")
TIERED = {"remote.storage.enable": "true"}


def rejected(configs: dict[str, str], code: ErrorCode) -> str:
    """Validates ``configs``, expecting ``code``; returns the message."""
    with pytest.raises(TieredError) as caught:
        validate_topic_configs(configs)
    assert caught.value.code is code, caught.value
    return caught.value.message


# ----------------------------------------------------------------------------- keys and defaults


def test_defaults_are_kafkas() -> None:
    assert dict(TOPIC_CONFIG_DEFAULTS) == KAFKA_DEFAULTS
    with pytest.raises(TypeError):
        TOPIC_CONFIG_DEFAULTS["retention.ms"] = "1"  # type: ignore[index]


def test_the_defaults_are_valid_and_already_normalized() -> None:
    assert validate_topic_configs(TOPIC_CONFIG_DEFAULTS) == KAFKA_DEFAULTS
    assert validate_topic_configs({}) == {}


def test_the_typed_config_has_one_field_per_defined_key_with_its_default() -> None:
    typed = TopicConfig.of({})
    fields = {f.name for f in dataclasses.fields(TopicConfig)}
    assert fields == {key.name.replace(".", "_") for key in TOPIC_CONFIG_DEF}
    assert typed.segment_bytes == 1073741824
    assert typed.local_retention_ms == -2
    assert typed.cleanup_policy == ("delete",)
    assert typed.remote_log_disable_policy is RemoteLogDisablePolicy.RETAIN
    assert typed.remote_storage_enable is False


def test_the_typed_config_reads_the_values_set() -> None:
    typed = TopicConfig.of(
        {
            "remote.storage.enable": " TRUE ",
            "segment.bytes": "4096",
            "cleanup.policy": "delete,delete",
            "remote.log.delete.on.disable": "true",
        }
    )
    assert typed.remote_storage_enable is True
    assert typed.segment_bytes == 4096
    assert typed.cleanup_policy == ("delete",)
    assert typed.disable_policy is RemoteLogDisablePolicy.DELETE


def test_the_typed_config_refuses_what_validation_refuses() -> None:
    with pytest.raises(TieredError) as caught:
        TopicConfig.of({"segment.bytes": "13"})
    assert caught.value.code is ErrorCode.INVALID_CONFIG
    assert caught.value.message == rejected({"segment.bytes": "13"}, ErrorCode.INVALID_CONFIG)


def test_unknown_key_is_invalid_config_and_lists_the_known_keys() -> None:
    message = rejected({"retention.ms": "1", "retention.mss": "1"}, ErrorCode.INVALID_CONFIG)
    assert message.startswith("unknown topic config 'retention.mss'; known: ")
    assert message.endswith(", ".join(sorted(KAFKA_DEFAULTS)))


def test_keys_alone_are_checked_as_in_a_config_set() -> None:
    validate_topic_config_keys([])
    validate_topic_config_keys(KAFKA_DEFAULTS)
    with pytest.raises(TieredError) as caught:
        validate_topic_config_keys(["retention.ms", "zz.typo", "retention.mss"])
    assert caught.value.code is ErrorCode.INVALID_CONFIG
    # the first in sorted order, with the message an unknown key in a config set gets
    assert caught.value.message == rejected({"retention.mss": "1"}, ErrorCode.INVALID_CONFIG)


def test_server_keys_are_not_topic_keys() -> None:
    rejected({"remote.log.manager.copier.thread.pool.size": "4"}, ErrorCode.INVALID_CONFIG)


# ----------------------------------------------------------------------------- booleans and policy


@pytest.mark.parametrize("key", BOOLEAN_KEYS)
@pytest.mark.parametrize("value", ["yes", "1", "", "tru", "true false", "on"])
def test_non_boolean_is_invalid_request(key: str, value: str) -> None:
    message = rejected({key: value}, ErrorCode.INVALID_REQUEST)
    assert message == f"{key}={value!r} is not valid; valid values: true, false"


@pytest.mark.parametrize("key", BOOLEAN_KEYS)
def test_booleans_are_normalized(key: str) -> None:
    assert validate_topic_configs({key: " TRUE "}) == {key: "true"}
    assert validate_topic_configs({key: "False"}) == {key: "false"}


def test_bad_policy_is_invalid_request_naming_the_valid_values() -> None:
    message = rejected({"remote.log.disable.policy": "purge"}, ErrorCode.INVALID_REQUEST)
    assert message == "remote.log.disable.policy='purge' is not valid; valid values: retain, delete"


def test_policy_is_normalized() -> None:
    assert validate_topic_configs({"remote.log.disable.policy": " DELETE"}) == {
        "remote.log.disable.policy": "delete"
    }


def test_policy_parse_keeps_raising_value_error() -> None:
    assert RemoteLogDisablePolicy.parse(" Retain ") is RemoteLogDisablePolicy.RETAIN
    with pytest.raises(ValueError, match="valid values: retain, delete"):
        RemoteLogDisablePolicy.parse("purge")


def test_kafka_39_delete_on_disable_means_the_delete_policy() -> None:
    configs = validate_topic_configs(
        {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"}
    )
    assert disable_policy(configs) is RemoteLogDisablePolicy.DELETE
    assert disable_policy({"remote.log.disable.policy": "delete"}) is RemoteLogDisablePolicy.DELETE
    assert disable_policy({}) is RemoteLogDisablePolicy.RETAIN
    assert (
        disable_policy({"remote.log.delete.on.disable": "false"}) is RemoteLogDisablePolicy.RETAIN
    )
    both = {"remote.log.disable.policy": "delete", "remote.log.delete.on.disable": "true"}
    assert disable_policy(validate_topic_configs(both)) is RemoteLogDisablePolicy.DELETE


def test_an_explicit_retain_contradicting_delete_on_disable_is_rejected() -> None:
    message = rejected(
        {"remote.log.disable.policy": "retain", "remote.log.delete.on.disable": "true"},
        ErrorCode.INVALID_REQUEST,
    )
    assert "remote.log.disable.policy" in message and "remote.log.delete.on.disable" in message


def test_disable_policy_rejects_bad_values() -> None:
    with pytest.raises(TieredError) as caught:
        disable_policy({"remote.log.disable.policy": "purge"})
    assert caught.value.code is ErrorCode.INVALID_REQUEST


def test_remote_storage_enabled() -> None:
    assert remote_storage_enabled({"remote.storage.enable": "true"}) is True
    assert remote_storage_enabled({"remote.storage.enable": "false"}) is False
    assert remote_storage_enabled({}) is False
    with pytest.raises(TieredError) as caught:
        remote_storage_enabled({"remote.storage.enable": "maybe"})
    assert caught.value.code is ErrorCode.INVALID_REQUEST


def test_effective_topic_configs_overlays_the_defaults() -> None:
    effective = effective_topic_configs({"retention.ms": "1000", "remote.storage.enable": "true"})
    assert effective == {**KAFKA_DEFAULTS, "retention.ms": "1000", "remote.storage.enable": "true"}
    assert effective_topic_configs({}) == KAFKA_DEFAULTS


# ----------------------------------------------------------------------------- integers

INT_RANGES = {
    "retention.ms": (-1, 2**63 - 1),
    "retention.bytes": (-1, 2**63 - 1),
    "local.retention.ms": (-2, 2**63 - 1),
    "local.retention.bytes": (-2, 2**63 - 1),
    "segment.bytes": (14, 2**31 - 1),
    "segment.ms": (1, 2**63 - 1),
    "remote.log.delete.delay.ms": (0, 2**63 - 1),
}


@pytest.mark.parametrize("key", sorted(INT_RANGES))
def test_integer_bounds(key: str) -> None:
    low, high = INT_RANGES[key]
    assert validate_topic_configs({key: str(low)}) == {key: str(low)}
    assert validate_topic_configs({key: f" {high} "}) == {key: str(high)}
    for bad in (str(low - 1), str(high + 1)):
        message = rejected({key: bad}, ErrorCode.INVALID_CONFIG)
        assert message.startswith(
            f"{key}={bad!r} is not valid; expected an integer from {low} to {high}"
        )


@pytest.mark.parametrize("key", sorted(INT_RANGES))
@pytest.mark.parametrize("value", ["", " ", "abc", "1.5", "1e3", "1_000", "0x10", "\u0663", "1 2"])
def test_non_integers_are_invalid_config(key: str, value: str) -> None:
    message = rejected({key: value}, ErrorCode.INVALID_CONFIG)
    assert message.startswith(f"{key}={value!r} is not valid; expected an integer from ")


def test_the_delete_delay_defaults_to_at_once_and_reads_the_value_set() -> None:
    assert delete_delay_ms({}) == 0
    assert delete_delay_ms({"remote.log.delete.delay.ms": " 600000 "}) == 600000
    assert TopicConfig.of({"remote.log.delete.delay.ms": "5"}).remote_log_delete_delay_ms == 5


@pytest.mark.parametrize("value", ["-1", "soon", "1.5", str(2**63)])
def test_a_negative_or_non_numeric_delete_delay_is_invalid_config_naming_the_key(
    value: str,
) -> None:
    message = rejected(
        {"remote.storage.enable": "false", "remote.log.delete.delay.ms": value},
        ErrorCode.INVALID_CONFIG,
    )
    assert message == (
        f"remote.log.delete.delay.ms={value!r} is not valid; expected an integer from 0 to "
        f"{2**63 - 1} (0: delete at once)"
    )


# ----------------------------------------------------------------------------- cleanup.policy


@pytest.mark.parametrize(
    ("value", "normalized"),
    [
        ("delete", "delete"),
        ("compact", "compact"),
        ("compact,delete", "compact,delete"),
        (" Delete , compact ", "delete,compact"),
        ("delete,delete", "delete"),
    ],
)
def test_cleanup_policy_values(value: str, normalized: str) -> None:
    assert validate_topic_configs({"cleanup.policy": value}) == {"cleanup.policy": normalized}


@pytest.mark.parametrize("value", ["", "purge", "delete,", "delete;compact", "compacted"])
def test_bad_cleanup_policy_is_invalid_config(value: str) -> None:
    message = rejected({"cleanup.policy": value}, ErrorCode.INVALID_CONFIG)
    assert message == (
        f"cleanup.policy={value!r} is not valid; valid values: a comma-separated list of "
        "delete, compact"
    )


@pytest.mark.parametrize("cleanup", ["compact", "delete,compact", " COMPACT "])
def test_tiering_a_compacted_topic_is_invalid_config(cleanup: str) -> None:
    message = rejected({**TIERED, "cleanup.policy": cleanup}, ErrorCode.INVALID_CONFIG)
    assert "remote.storage.enable" in message and "cleanup.policy" in message
    assert "compacted" in message
    # Not tiered: a compacted topic is fine.
    assert validate_topic_configs({"remote.storage.enable": "false", "cleanup.policy": cleanup})


# ----------------------------------------------------------------------------- value length


def test_an_over_long_value_is_invalid_config_without_echoing_it() -> None:
    value = "7" * 5000
    message = rejected({"retention.ms": value}, ErrorCode.INVALID_CONFIG)
    assert "retention.ms" in message and "4096" in message and "5000" in message
    assert value[:100] not in message
    # At the limit the length is fine, and the value is checked as usual.
    message = rejected({"retention.ms": "x" * 4096}, ErrorCode.INVALID_CONFIG)
    assert "expected an integer" in message and len(message) < 300
    rejected({"remote.log.disable.policy": "delete" * 1000}, ErrorCode.INVALID_CONFIG)


# ----------------------------------------------------------------------------- local retention


@pytest.mark.parametrize(
    ("total_key", "local_key"),
    [("retention.ms", "local.retention.ms"), ("retention.bytes", "local.retention.bytes")],
)
def test_local_retention_must_not_exceed_total_when_tiered(total_key: str, local_key: str) -> None:
    message = rejected({**TIERED, total_key: "1000", local_key: "1001"}, ErrorCode.INVALID_CONFIG)
    assert f"{local_key}=1001" in message and f"{total_key}=1000" in message
    assert "-2" in message and "0 to 1000" in message
    # Kafka also refuses unlimited local retention under a limited total one.
    rejected({**TIERED, total_key: "1000", local_key: "-1"}, ErrorCode.INVALID_CONFIG)
    for local in ("1000", "0", "-2"):
        assert validate_topic_configs({**TIERED, total_key: "1000", local_key: local})
    # An unlimited total allows any local retention.
    assert validate_topic_configs({**TIERED, total_key: "-1", local_key: "99999"})


def test_local_ms_above_the_default_retention_is_rejected_when_tiered() -> None:
    rejected({**TIERED, "local.retention.ms": "604800001"}, ErrorCode.INVALID_CONFIG)
    assert validate_topic_configs({**TIERED, "local.retention.ms": "604800000"})


def test_local_retention_is_not_checked_when_not_tiered() -> None:
    # Kafka checks it only with remote.storage.enable=true; enabling checks it then.
    configs = {"retention.ms": "1000", "local.retention.ms": "5000"}
    assert validate_topic_configs(configs) == configs
    rejected({**configs, **TIERED}, ErrorCode.INVALID_CONFIG)


# ----------------------------------------------------------------------------- normalization


def test_normalization_and_purity() -> None:
    given = {
        "remote.storage.enable": " True",
        "remote.log.disable.policy": "Delete ",
        "retention.ms": " 86400000 ",
        "cleanup.policy": " delete",
        "segment.bytes": "1048576",
    }
    copy = dict(given)
    assert validate_topic_configs(given) == {
        "remote.storage.enable": "true",
        "remote.log.disable.policy": "delete",
        "retention.ms": "86400000",
        "cleanup.policy": "delete",
        "segment.bytes": "1048576",
    }
    assert given == copy


def test_the_first_problem_in_key_order_is_reported() -> None:
    message = rejected({"segment.ms": "0", "retention.ms": "x"}, ErrorCode.INVALID_CONFIG)
    assert message.startswith("retention.ms=")


def test_non_string_values_are_invalid_config() -> None:
    rejected({"retention.ms": 1000}, ErrorCode.INVALID_CONFIG)  # type: ignore[dict-item]


# ----------------------------------------------------------------------------- topic names


@pytest.mark.parametrize("name", ["a", "orders", "my_topic.v1-2", "A" * 249, "...", "_", "-"])
def test_valid_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "must not be empty"),
        ("a" * 250, "the limit is 249"),
        (".", "'.' and '..' are not allowed"),
        ("..", "'.' and '..' are not allowed"),
        ("a b", "illegal characters ' '"),
        ("a/b", "illegal characters '/'"),
        ("caf\u00e9", "illegal characters '\u00e9'"),
        ("x:y*", "illegal characters '*:'"),
    ],
)
def test_invalid_topic_names(name: str, rule: str) -> None:
    with pytest.raises(TieredError) as caught:
        validate_topic_name(name)
    assert caught.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    assert rule in caught.value.message
    assert len(caught.value.message) < 300


# ----------------------------------------------------------------------------- partition counts


@pytest.mark.parametrize("n", [1, 3, 10_000])
def test_valid_partition_counts(n: int) -> None:
    validate_partition_count(n)


@pytest.mark.parametrize("n", [0, -1, 10_001, True, 2.0, "3"])
def test_invalid_partition_counts(n: object) -> None:
    with pytest.raises(TieredError) as caught:
        validate_partition_count(n)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INVALID_PARTITIONS
    assert "1 to 10000" in caught.value.message
