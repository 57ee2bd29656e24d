"""The controller's many-topic alter (AlterTopicConfigs, what Kafka's AlterConfigs and
IncrementalAlterConfigs become) and DescribeMetadata, on an in-process controller: each topic
answered on its own, the accepted ones in one store write, nothing for a rejected one or with
validate_only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.admin_operations import TopicAlteration
from controller.controller import Controller
from controller.store import TopicChange
from tests.support.controller import reloaded, running_controller
from tiered.cluster.model import BrokerRegistration, TieredState, TopicMetadata
from tiered.config import ConfigOperation, apply_config_operations
from tiered.errors import ErrorCode, TieredError
from tiered.net import PLAINTEXT, Listener

SET, DELETE, APPEND, SUBTRACT = (
    ConfigOperation.SET,
    ConfigOperation.DELETE,
    ConfigOperation.APPEND,
    ConfigOperation.SUBTRACT,
)
TIERED = {"remote.storage.enable": "true"}


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as controller:
        yield controller


@pytest.fixture
def writes(controller: Controller, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The topics of each ``update_topics`` call from now on."""
    calls: list[list[str]] = []
    update_topics = controller.store.writes.update_topics

    def counting(changes: list[TopicChange]) -> None:
        calls.append([after.name for _, after, _ in changes])
        update_topics(changes)

    monkeypatch.setattr(controller.store.writes, "update_topics", counting)
    return calls


def error_code(result: TopicMetadata | TieredError) -> ErrorCode | None:
    return result.code if isinstance(result, TieredError) else None


def test_accepted_topics_are_one_write_and_rejected_ones_change_nothing(
    controller: Controller, writes: list[list[str]]
) -> None:
    for name in ("a", "b", "c", "d"):
        controller.admin.create_topic(name, 2, TIERED)
    before = reloaded(controller)
    results = controller.admin.alter_topic_configs(
        [
            TopicAlteration("a", (("retention.ms", SET, "60000"),)),
            TopicAlteration(
                "b",
                (
                    ("remote.log.disable.policy", SET, "purge"),
                    ("remote.storage.enable", SET, "false"),
                ),
            ),
            TopicAlteration("c", (("remote.storage.enable", SET, "false"),)),
            TopicAlteration("missing", (("retention.ms", SET, "1"),)),
            TopicAlteration("d", (("retention.ms", APPEND, "1"),)),
        ]
    )
    assert [error_code(r) for r in results] == [
        None,
        ErrorCode.INVALID_REQUEST,
        None,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
    ]
    assert writes == [["a", "c"]]
    after = reloaded(controller)
    assert after["a"].configs == {**TIERED, "retention.ms": "60000"}
    assert (after["c"].tiered_state, after["c"].tiered_epoch) == (TieredState.DISABLING, 1)
    assert after["b"] == before["b"] and after["d"] == before["d"]
    assert "c" in controller.disablements


def test_validate_only_and_unchanged_topics_write_nothing(
    controller: Controller, writes: list[list[str]]
) -> None:
    controller.admin.create_topic("a", 1, TIERED)
    [planned] = controller.admin.alter_topic_configs(
        [TopicAlteration("a", (("remote.storage.enable", SET, "false"),))], validate_only=True
    )
    assert isinstance(planned, TopicMetadata) and planned.tiered_state is TieredState.DISABLING
    [same] = controller.admin.alter_topic_configs(
        [TopicAlteration("a", (("retention.ms", DELETE, ""),))]
    )
    assert same == reloaded(controller)["a"]
    assert writes == []
    assert reloaded(controller)["a"].tiered_state is TieredState.ENABLED


def test_a_topic_named_twice_is_rejected_both_times(controller: Controller) -> None:
    controller.admin.create_topic("a", 1, {})
    results = controller.admin.alter_topic_configs(
        [TopicAlteration("a", (("retention.ms", SET, "1"),)), TopicAlteration("a", ())]
    )
    assert [error_code(r) for r in results] == [ErrorCode.INVALID_REQUEST] * 2
    assert "appears more than once" in str(results[0])


def test_replace_sets_the_whole_config_set(controller: Controller) -> None:
    controller.admin.create_topic("a", 1, {**TIERED, "retention.ms": "60000"})
    [after] = controller.admin.alter_topic_configs(
        [TopicAlteration.replacing("a", {**TIERED, "segment.ms": "1000"})]
    )
    assert isinstance(after, TopicMetadata)
    assert reloaded(controller)["a"].configs == {**TIERED, "segment.ms": "1000"}


def test_list_operations_apply_to_list_configs_only() -> None:
    assert apply_config_operations({}, [("cleanup.policy", APPEND, "compact")]) == {
        "cleanup.policy": "delete,compact"  # appended to the default
    }
    assert apply_config_operations(
        {"cleanup.policy": "delete,compact"}, [("cleanup.policy", SUBTRACT, "delete, x")]
    ) == {"cleanup.policy": "compact"}
    for operation in (APPEND, SUBTRACT):
        with pytest.raises(TieredError) as rejected:
            apply_config_operations({}, [("retention.ms", operation, "1")])
        assert rejected.value.code is ErrorCode.INVALID_REQUEST
        assert f"{operation.name} is not valid for retention.ms" in rejected.value.message
    with pytest.raises(TieredError) as unknown:
        apply_config_operations({}, [("no.such.key", APPEND, "1")])
    assert unknown.value.code is ErrorCode.INVALID_CONFIG
    with pytest.raises(TieredError) as twice:
        apply_config_operations({}, [("retention.ms", SET, "1"), ("retention.ms", DELETE, "")])
    assert twice.value.code is ErrorCode.INVALID_REQUEST


def test_describe_metadata_lists_placements_and_live_brokers(controller: Controller) -> None:
    topic = controller.admin.create_topic("a", 3, {})
    everything = controller.admin.describe_metadata()
    assert everything.topics == [topic]
    assert [b.broker_id for b in everything.brokers] == [1]
    assert everything.cluster_id and everything.cluster_id == controller.config.cluster_id
    named = controller.admin.describe_metadata(["a", "missing"])
    assert named.topics[0] == topic
    assert error_code(named.topics[1]) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_registration_with_a_bad_kafka_endpoint_is_refused(controller: Controller) -> None:
    bad = BrokerRegistration(2, "h", 1, kafka_endpoints=(Listener(PLAINTEXT, "h", 0),))
    with pytest.raises(ValueError, match="Kafka endpoints"):
        controller.brokers.register(bad)
    good = BrokerRegistration(2, "h", 1, kafka_endpoints=(Listener(PLAINTEXT, "k", 9092),))
    controller.brokers.register(good)
    brokers = controller.admin.describe_metadata([]).brokers
    assert [b.broker_id for b in brokers] == [1, 2] and brokers[1] == good
