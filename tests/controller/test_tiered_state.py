"""The per-topic tiered state machine (docs/design.md §2) and the config changes that drive it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from controller import tiered_state
from controller.tiered_state import (
    InvalidTieredTransition,
    attached_model_count,
    complete_disablement,
    fire,
    initial_topic_state,
    plan_config_change,
)
from tiered.cluster.model import TieredState, TopicMetadata
from tiered.errors import ErrorCode, TieredError

ENABLED, DISABLING, DISABLED = TieredState.ENABLED, TieredState.DISABLING, TieredState.DISABLED
TRIGGERS = ("disable", "enable", "disablement_completed")
IN_PROGRESS = "in progress"
INVALID = "invalid"

# docs/design.md §2, written out independently of the module under test.
EXPECTED: dict[tuple[TieredState, str], TieredState | str] = {
    (ENABLED, "disable"): DISABLING,
    (ENABLED, "enable"): INVALID,
    (ENABLED, "disablement_completed"): INVALID,
    (DISABLING, "disable"): IN_PROGRESS,
    (DISABLING, "enable"): IN_PROGRESS,
    (DISABLING, "disablement_completed"): DISABLED,
    (DISABLED, "disable"): INVALID,
    (DISABLED, "enable"): ENABLED,
    (DISABLED, "disablement_completed"): INVALID,
}

ON = {"remote.storage.enable": "true"}
OFF = {"remote.storage.enable": "false"}


def topic(
    state: TieredState = ENABLED,
    epoch: int = 0,
    configs: Mapping[str, str] | None = None,
    name: str = "orders",
) -> TopicMetadata:
    if configs is None:
        configs = OFF if state is not ENABLED else ON
    return TopicMetadata(
        name=name,
        topic_id=uuid.UUID(int=42),
        replicas=(0, 1, 2),
        configs=configs,
        tiered_state=state,
        tiered_epoch=epoch,
    )


def snapshot(t: TopicMetadata) -> tuple[Any, ...]:
    return (t.name, t.topic_id, t.replicas, dict(t.configs), t.tiered_state, t.tiered_epoch)


# ----------------------------------------------------------------------------- the table


def test_the_table_covers_every_state_and_trigger() -> None:
    assert set(EXPECTED) == {(s, t) for s in TieredState for t in TRIGGERS}
    assert set(tiered_state.TRIGGERS) == set(TRIGGERS)


@pytest.mark.parametrize("state", list(TieredState), ids=lambda s: s.value)
@pytest.mark.parametrize("trigger", TRIGGERS)
def test_every_state_and_trigger(state: TieredState, trigger: str) -> None:
    before = topic(state, epoch=3)
    expected = EXPECTED[(state, trigger)]
    if expected == IN_PROGRESS:
        with pytest.raises(TieredError) as caught:
            fire(before, trigger)
        assert caught.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
        assert "'orders'" in caught.value.message
        assert "epoch 3" in caught.value.message
        assert trigger in caught.value.message
    elif expected == INVALID:
        with pytest.raises(InvalidTieredTransition) as invalid:
            fire(before, trigger)
        assert isinstance(invalid.value, ValueError)
        message = str(invalid.value)
        assert repr(trigger) in message and state.value in message and "'orders'" in message
    else:
        after = fire(before, trigger)
        assert after.tiered_state is expected
        assert after.tiered_epoch == (4 if trigger == "disable" else 3)
        assert (after.name, after.topic_id, after.replicas) == (
            "orders",
            uuid.UUID(int=42),
            (0, 1, 2),
        )
        assert dict(after.configs) == dict(before.configs)
    assert snapshot(before) == snapshot(topic(state, epoch=3))  # the input is never changed
    assert attached_model_count() == 1


@pytest.mark.parametrize("state", list(TieredState), ids=lambda s: s.value)
@pytest.mark.parametrize("trigger", ["to_DISABLED", "to_ENABLED", "trigger", "", "DISABLE"])
def test_unknown_triggers_are_invalid(state: TieredState, trigger: str) -> None:
    with pytest.raises(InvalidTieredTransition):
        fire(topic(state), trigger)
    assert attached_model_count() == 1


def test_invalid_transition_message_lists_the_valid_triggers() -> None:
    with pytest.raises(InvalidTieredTransition, match=r"valid triggers in ENABLED: disable$"):
        fire(topic(ENABLED), "disablement_completed")
    with pytest.raises(InvalidTieredTransition, match=r"valid triggers in DISABLED: enable$"):
        fire(topic(DISABLED), "disable")


# ----------------------------------------------------------------------------- epochs


def test_disable_raises_the_epoch_by_exactly_one() -> None:
    for epoch in (0, 1, 7, 2**40):
        assert fire(topic(ENABLED, epoch), "disable").tiered_epoch == epoch + 1


def test_enable_and_completion_keep_the_epoch() -> None:
    assert fire(topic(DISABLED, 5), "enable").tiered_epoch == 5
    assert fire(topic(DISABLING, 5), "disablement_completed").tiered_epoch == 5
    assert complete_disablement(topic(DISABLING, 5)) == topic(DISABLING, 5).with_tiered_state(
        DISABLED, 5
    )


def test_a_full_cycle_and_a_second_disable() -> None:
    t = topic(ENABLED, 0)
    t = fire(t, "disable")
    assert (t.tiered_state, t.tiered_epoch) == (DISABLING, 1)
    t = complete_disablement(t)
    assert (t.tiered_state, t.tiered_epoch) == (DISABLED, 1)
    t = fire(t, "enable")
    assert (t.tiered_state, t.tiered_epoch) == (ENABLED, 1)
    t = fire(t, "disable")
    assert (t.tiered_state, t.tiered_epoch) == (DISABLING, 2)


def test_initial_topic_state() -> None:
    assert initial_topic_state({"remote.storage.enable": "true"}) == (ENABLED, 0)
    assert initial_topic_state({"remote.storage.enable": " TRUE "}) == (ENABLED, 0)
    assert initial_topic_state({"remote.storage.enable": "false"}) == (DISABLED, 0)
    assert initial_topic_state({}) == (DISABLED, 0)
    assert initial_topic_state({"retention.ms": "1000"}) == (DISABLED, 0)
    with pytest.raises(TieredError) as caught:
        initial_topic_state({"remote.storage.enable": "yes"})
    assert caught.value.code is ErrorCode.INVALID_REQUEST


# ----------------------------------------------------------------------------- config changes


def test_enabled_to_false_disables() -> None:
    before = topic(ENABLED, 2, {"remote.storage.enable": "true", "retention.ms": "1000"})
    after, trigger = plan_config_change(before, {"remote.storage.enable": " False "})
    assert trigger == "disable"
    assert (after.tiered_state, after.tiered_epoch) == (DISABLING, 3)
    assert dict(after.configs) == {"remote.storage.enable": "false"}  # replaced, normalized
    assert snapshot(before)[3:] == (
        {"remote.storage.enable": "true", "retention.ms": "1000"},
        ENABLED,
        2,
    )


def test_enabled_without_the_key_disables() -> None:
    after, trigger = plan_config_change(topic(ENABLED), {"retention.ms": "1000"})
    assert trigger == "disable"
    assert after.tiered_state is DISABLING


def test_enabled_staying_true_fires_nothing() -> None:
    after, trigger = plan_config_change(
        topic(ENABLED, 1), {"remote.storage.enable": "TRUE", "retention.ms": " 5000 "}
    )
    assert trigger is None
    assert (after.tiered_state, after.tiered_epoch) == (ENABLED, 1)
    assert dict(after.configs) == {"remote.storage.enable": "true", "retention.ms": "5000"}


def test_disabled_to_true_enables_with_the_same_epoch() -> None:
    after, trigger = plan_config_change(topic(DISABLED, 4), {"remote.storage.enable": "true"})
    assert trigger == "enable"
    assert (after.tiered_state, after.tiered_epoch) == (ENABLED, 4)


def test_disabled_staying_false_fires_nothing() -> None:
    for configs in ({"remote.storage.enable": "false"}, {}, {"segment.bytes": "1048576"}):
        after, trigger = plan_config_change(topic(DISABLED, 4), configs)
        assert trigger is None
        assert (after.tiered_state, after.tiered_epoch) == (DISABLED, 4)
        assert dict(after.configs) == configs


def test_disabling_allows_other_config_changes() -> None:
    before = topic(DISABLING, 3, {"remote.storage.enable": "false", "retention.ms": "1000"})
    new = {"remote.storage.enable": "false", "retention.ms": "2000", "segment.ms": "60000"}
    after, trigger = plan_config_change(before, new)
    assert trigger is None
    assert (after.tiered_state, after.tiered_epoch) == (DISABLING, 3)
    assert dict(after.configs) == new


def test_disabling_allows_restating_the_effective_policy() -> None:
    before = topic(DISABLING, 3, {"remote.storage.enable": "false"})
    new = {"remote.storage.enable": "false", "remote.log.disable.policy": "retain"}
    assert plan_config_change(before, new)[1] is None


@pytest.mark.parametrize(
    ("current", "new"),
    [
        ({}, {"remote.log.disable.policy": "delete"}),
        ({"remote.log.disable.policy": "delete"}, {"remote.log.disable.policy": "retain"}),
        ({"remote.log.disable.policy": "delete"}, {}),
        ({}, {"remote.log.delete.on.disable": "true"}),
        ({"remote.log.delete.on.disable": "true"}, {"remote.log.delete.on.disable": "false"}),
    ],
)
def test_disabling_rejects_policy_changes(current: dict[str, str], new: dict[str, str]) -> None:
    before = topic(DISABLING, 3, {"remote.storage.enable": "false", **current})
    expected = snapshot(before)
    with pytest.raises(TieredError) as caught:
        plan_config_change(before, {"remote.storage.enable": "false", **new})
    assert caught.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
    assert "'orders'" in caught.value.message and "epoch 3" in caught.value.message
    assert ("remote.log.disable.policy" in caught.value.message) or (
        "remote.log.delete.on.disable" in caught.value.message
    )
    assert snapshot(before) == expected


@pytest.mark.parametrize(
    ("current", "new"),
    [
        ({"remote.storage.enable": "false"}, {"remote.storage.enable": "true"}),  # enable
        ({"remote.storage.enable": "false"}, {}),  # the key deleted: a change of its own
        ({}, {"remote.storage.enable": "false"}),  # disable again
        ({}, {"remote.storage.enable": "true"}),
    ],
)
def test_disabling_rejects_remote_storage_enable(
    current: dict[str, str], new: dict[str, str]
) -> None:
    before = topic(DISABLING, 3, current)
    expected = snapshot(before)
    with pytest.raises(TieredError) as caught:
        plan_config_change(before, new)
    assert caught.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
    assert snapshot(before) == expected


def test_disabling_with_requested_keys() -> None:
    before = topic(DISABLING, 3, {"remote.storage.enable": "false", "retention.ms": "1000"})
    same = {"remote.storage.enable": "false", "retention.ms": "1000"}
    # The request names remote.storage.enable (any value, even the current one): rejected.
    with pytest.raises(TieredError) as caught:
        plan_config_change(before, same, requested_keys={"remote.storage.enable"})
    assert caught.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
    # The request names only retention.ms: allowed.
    changed = {"remote.storage.enable": "false", "retention.ms": "2000"}
    after, trigger = plan_config_change(before, changed, requested_keys=["retention.ms"])
    assert trigger is None and dict(after.configs) == changed


def test_tiering_a_compacted_topic_is_invalid_config() -> None:
    before = topic(DISABLED, 0, {"cleanup.policy": "compact"})
    with pytest.raises(TieredError) as caught:
        plan_config_change(before, {"cleanup.policy": "compact", "remote.storage.enable": "true"})
    assert caught.value.code is ErrorCode.INVALID_CONFIG
    assert snapshot(before) == snapshot(topic(DISABLED, 0, {"cleanup.policy": "compact"}))


@pytest.mark.parametrize("state", list(TieredState), ids=lambda s: s.value)
def test_invalid_configs_are_rejected_in_every_state(state: TieredState) -> None:
    before = topic(state, 1)
    expected = snapshot(before)
    for configs, code in (
        ({"remote.log.disable.policy": "purge"}, ErrorCode.INVALID_REQUEST),
        ({"no.such.key": "1"}, ErrorCode.INVALID_CONFIG),
        ({"retention.ms": "soon"}, ErrorCode.INVALID_CONFIG),
    ):
        with pytest.raises(TieredError) as caught:
            plan_config_change(before, {**before.configs, **configs})
        assert caught.value.code is code
        assert snapshot(before) == expected


# ----------------------------------------------------------------------------- O(1) per event


def test_the_machine_keeps_one_model_through_100k_events(monkeypatch: pytest.MonkeyPatch) -> None:
    machine = tiered_state._MACHINE
    added: list[object] = []
    monkeypatch.setattr(machine, "add_model", lambda model, initial=None: added.append(model))
    count = 100_000
    done = 0
    for i in range(count):
        t = TopicMetadata(f"t{i}", uuid.UUID(int=i), (0,), ON, ENABLED, i % 5)
        after = fire(t, "disable")
        done += after.tiered_epoch == i % 5 + 1
    assert done == count
    assert added == []  # no model attached per event: add_model scans the models
    assert attached_model_count() == 1


def test_rejections_leave_the_one_model() -> None:
    for _ in range(100):
        with pytest.raises(TieredError):
            fire(topic(DISABLING), "disable")
        with pytest.raises(InvalidTieredTransition):
            fire(topic(ENABLED), "enable")
    assert attached_model_count() == 1


def test_concurrent_events_on_distinct_topics() -> None:
    results: dict[int, list[TopicMetadata]] = {}
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            out = []
            for i in range(2_000):
                t = topic(ENABLED, i, name=f"w{n}-{i}")
                t = complete_disablement(fire(t, "disable"))
                out.append(fire(t, "enable"))
            results[n] = out
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for n, out in results.items():
        assert [(t.name, t.tiered_state, t.tiered_epoch) for t in out] == [
            (f"w{n}-{i}", ENABLED, i + 1) for i in range(2_000)
        ]
    assert attached_model_count() == 1
