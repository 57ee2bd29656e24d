"""CreatePartitions in the controller: the plan of one topic (``controller.partition_growth``:
Kafka's checks and messages, the placement) and the operation on an in-process controller (the
accepted topics in one store write, nothing for a refused one or with validate_only)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.controller import Controller
from controller.partition_growth import PartitionIncrease, grown_topic, place_partitions
from controller.store.base import PartitionGrowth
from tests.support.controller import reloaded, running_controller
from tiered.cluster.model import BrokerRegistration, TieredState, TopicMetadata
from tiered.errors import ErrorCode, TieredError

ORDERS = TopicMetadata("orders", uuid.UUID(int=1), (1, 2))


def refusal(
    increase: PartitionIncrease,
    registered: tuple[int, ...] = (1, 2, 3),
    live: tuple[int, ...] = (1, 2),
) -> TieredError:
    with pytest.raises(TieredError) as failure:
        grown_topic(ORDERS, increase, registered, live)
    return failure.value


@pytest.mark.parametrize(
    ("increase", "code", "message"),
    [
        (PartitionIncrease("orders", 2), 37, "Topic already has 2 partition(s)."),
        (
            PartitionIncrease("orders", 1),
            37,
            "The topic orders currently has 2 partition(s); 1 would not be an increase.",
        ),
        (
            PartitionIncrease("orders", 4, ((1,),)),
            39,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            PartitionIncrease("orders", 3, ((),)),
            39,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            PartitionIncrease("orders", 3, ((9,),)),
            39,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            PartitionIncrease("orders", 3, ((1, 1),)),
            39,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            PartitionIncrease("orders", 3, ((1, 2),)),
            39,
            "The manual partition assignment includes a partition with 2 replica(s), but this "
            "is not consistent with previous partitions, which have 1 replica(s).",
        ),
        (
            PartitionIncrease("orders", 3, ((3,),)),
            39,
            "All brokers specified in the manual partition assignment for partition 2 are "
            "fenced or in controlled shutdown.",
        ),
    ],
)
def test_refusals_are_kafkas(increase: PartitionIncrease, code: int, message: str) -> None:
    error = refusal(increase)
    assert (int(error.code), error.message) == (code, message)


def test_a_count_past_the_limit_and_no_live_broker_are_refused() -> None:
    assert refusal(PartitionIncrease("orders", 10**9)).code is ErrorCode.INVALID_PARTITIONS
    assert refusal(PartitionIncrease("orders", 3), live=()).code is (
        ErrorCode.INVALID_REPLICATION_FACTOR
    )


def test_new_partitions_are_appended_where_asked_or_spread() -> None:
    asked = grown_topic(ORDERS, PartitionIncrease("orders", 4, ((3,), (1,))), (1, 2, 3), (1, 3))
    assert asked.replicas == (1, 2, 3, 1)
    assert asked.with_replicas(ORDERS.replicas) == ORDERS  # nothing else changed
    spread = place_partitions([1, 2, 3], 6)
    assert sorted(spread) == [1, 1, 2, 2, 3, 3]
    assert all(spread[i] != spread[i + 1] for i in range(5))


# ------------------------------------------------------------------------------- the operation


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as controller:
        controller.brokers.register(BrokerRegistration(2, "127.0.0.1", 2))
        yield controller


@pytest.fixture
def writes(controller: Controller, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The topics of each ``add_partitions`` call from now on."""
    calls: list[list[str]] = []
    add_partitions = controller.store.writes.add_partitions

    def counting(growths: list[PartitionGrowth]) -> None:
        calls.append([after.name for _, after in growths])
        add_partitions(growths)

    monkeypatch.setattr(controller.store.writes, "add_partitions", counting)
    return calls


def test_accepted_topics_are_one_write_and_refused_ones_change_nothing(
    controller: Controller, writes: list[list[str]]
) -> None:
    for name in ("a", "b", "c"):
        controller.admin.create_topic(name, 1, {"remote.storage.enable": "true"})
    controller.admin.alter_configs("c", set_={"remote.storage.enable": "false"})
    before = reloaded(controller)
    results = controller.admin.create_partitions(
        [
            PartitionIncrease("a", 3, ((2,), (1,))),
            PartitionIncrease("b", 1),
            PartitionIncrease("c", 2),
            PartitionIncrease("missing", 2),
        ]
    )
    codes = [r.code if isinstance(r, TieredError) else None for r in results]
    assert codes == [None, ErrorCode.INVALID_PARTITIONS, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert writes == [["a", "c"]]
    after = reloaded(controller)
    assert after["a"].replicas == (before["a"].replicas[0], 2, 1)
    assert after["b"] == before["b"]
    # A disabling topic grows and stays as it was: the new partition is stopped at its epoch.
    assert after["c"].partition_count == 2
    assert (after["c"].tiered_state, after["c"].tiered_epoch) == (TieredState.DISABLING, 1)
    assert controller.admin.describe_metadata(["a"]).topics == [after["a"]]


def test_a_deleted_topic_whose_remote_data_is_being_deleted_is_unknown(
    controller: Controller,
) -> None:
    controller.admin.create_topic("gone", 1, {"remote.storage.enable": "true"})
    controller.admin.delete_topic("gone")
    assert [j.topic for j in controller.admin.describe_deleted_topics()] == ["gone"]
    [result] = controller.admin.create_partitions([PartitionIncrease("gone", 2)])
    assert isinstance(result, TieredError)
    assert result.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_validate_only_and_a_topic_named_twice_write_nothing(
    controller: Controller, writes: list[list[str]]
) -> None:
    controller.admin.create_topic("a", 1, {})
    [planned] = controller.admin.create_partitions([PartitionIncrease("a", 5)], validate_only=True)
    assert isinstance(planned, TopicMetadata) and planned.partition_count == 5
    twice = controller.admin.create_partitions([PartitionIncrease("a", 2)] * 2)
    assert all(isinstance(r, TieredError) and r.message == "Duplicate topic name." for r in twice)
    assert writes == []
    assert reloaded(controller)["a"].partition_count == 1
