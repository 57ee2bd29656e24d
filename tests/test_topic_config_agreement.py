"""One topic-config definition, read alike everywhere: every key, with good and bad values, gets
the same answer from the controller's validation and from a broker asked to host a partition with
it; the documentation's table is the definition's."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.broker import Broker
from controller.tiered_state import plan_config_change
from tests.support.in_process_broker import in_process_broker
from tests.support.processes import REPO
from tiered.api import TopicIdPartition
from tiered.cluster.model import TieredState, TopicMetadata
from tiered.config import TOPIC_CONFIG_DEF
from tiered.config_def import Boolean, Choice, ConfigKey, IntRange, ListOf
from tiered.errors import ErrorCode, TieredError

_ALWAYS_BAD = ("", " ", "x", "1_000", "\u0661\u0662", "true false")


def _good_values(key: ConfigKey[object]) -> list[str]:
    rule = key.rule
    values = [key.default]
    if isinstance(rule, Boolean):
        values += ["true", "FALSE", " True "]
    elif isinstance(rule, IntRange):
        values += [str(rule.minimum), str(rule.maximum), f" {rule.minimum + 1} "]
    elif isinstance(rule, Choice):
        values += [str(c.value).upper() for c in rule.choices]
    elif isinstance(rule, ListOf):
        values += [",".join(rule.choices), " DELETE , delete "]
    return values


def _bad_values(key: ConfigKey[object]) -> list[str]:
    rule = key.rule
    values = list(_ALWAYS_BAD)
    if isinstance(rule, Boolean):
        values += ["yes", "1"]
    elif isinstance(rule, IntRange):
        values += [str(rule.minimum - 1), str(rule.maximum + 1), "1.5", "0x10"]
    elif isinstance(rule, Choice):
        values += ["archive"]
    elif isinstance(rule, ListOf):
        values += [",".join(rule.choices) + ",bogus", "delete,"]
    return values


CASES = [
    (key.name, value, good)
    for key in TOPIC_CONFIG_DEF
    for good, values in ((True, _good_values(key)), (False, _bad_values(key)))
    for value in values
]


def _controller_answer(configs: dict[str, str]) -> ErrorCode | None:
    topic = TopicMetadata("t", uuid.uuid4(), (1,), {}, TieredState.DISABLED, 0)
    try:
        plan_config_change(topic, configs)
    except TieredError as error:
        return error.code
    return None


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with in_process_broker(tmp_path_factory.mktemp("agreement")) as broker:
        yield broker


def _broker_answer(broker: Broker, configs: dict[str, str]) -> ErrorCode | None:
    tp = TopicIdPartition(uuid.uuid4(), "t", 0)
    (outcome,) = broker.hosting.assign([(tp, configs, 0)])
    return None if outcome is None else outcome.code


@pytest.mark.parametrize(("key", "value", "good"), CASES)
def test_controller_and_broker_give_every_value_the_same_answer(
    broker: Broker, key: str, value: str, good: bool
) -> None:
    configs = {key: value}
    controller = _controller_answer(configs)
    assert (controller is None) == good, f"{key}={value!r}: controller answered {controller}"
    assert _broker_answer(broker, configs) == controller


def test_each_bad_value_gets_the_error_code_its_key_defines() -> None:
    for key in TOPIC_CONFIG_DEF:
        expected = key.rule.error
        for value in _bad_values(key):
            with pytest.raises(TieredError) as caught:
                key.parse(value)
            assert caught.value.code is expected, (key.name, value)
            assert key.name in caught.value.message


def test_the_design_documents_the_definition() -> None:
    design = (Path(REPO) / "docs" / "design.md").read_text()
    found = re.search(
        r"<!-- topic-configs:begin -->\n(.*?)\n<!-- topic-configs:end -->", design, re.DOTALL
    )
    assert found is not None, "docs/design.md lacks the topic-configs markers"
    assert found.group(1).strip() == TOPIC_CONFIG_DEF.markdown_table(), (
        "docs/design.md's topic config table differs from tiered.config.TOPIC_CONFIG_DEF; "
        "paste:\n" + TOPIC_CONFIG_DEF.markdown_table()
    )
