"""Group commit of topic changes (``controller.topic_writes``) on an in-process controller over
a real KRaft store: alters that arrive while a write is in flight share the next write,
validation sees the changes still being written, a failed write fails everything it did not
commit with nothing applied, and other writes wait for the group (in the store's order)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from controller.admin_operations import TopicAlteration
from controller.controller import Controller
from controller.partition_growth import PartitionIncrease
from controller.store import MetadataStoreError, PartialWriteError, TopicChange
from tests.support.controller import reloaded, running_controller
from tests.support.polling import poll_until
from tiered.cluster.model import TieredState, TopicMetadata
from tiered.config import ConfigOperation
from tiered.errors import ErrorCode, TieredError

SET = ConfigOperation.SET
TIERED = {"remote.storage.enable": "true"}


class GatedWrites:
    """The store's ``update_topics``, recording each call's topics; while ``gate`` is clear the
    first call waits in the store (a write in flight); ``failure`` makes the next call raise."""

    def __init__(self, controller: Controller) -> None:
        self.calls: list[list[str]] = []
        self.gate = threading.Event()
        self.in_flight = threading.Event()
        self.failure: Callable[[Sequence[TopicChange]], Exception] | None = None
        self._update_topics = controller.store.writes.update_topics

    def __call__(self, changes: Sequence[TopicChange]) -> None:
        self.calls.append([after.name for _, after, _ in changes])
        self.in_flight.set()
        self.gate.wait(30)
        failure, self.failure = self.failure, None
        if failure is not None:
            raise failure(changes)
        self._update_topics(changes)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as controller:
        yield controller


@pytest.fixture
def gated(controller: Controller, monkeypatch: pytest.MonkeyPatch) -> GatedWrites:
    writes = GatedWrites(controller)
    monkeypatch.setattr(controller.store.writes, "update_topics", writes)
    return writes


def _alter(controller: Controller, name: str, key: str, value: str) -> TopicMetadata | TieredError:
    [result] = controller.admin.alter_topic_configs([TopicAlteration(name, ((key, SET, value),))])
    return result


def _in_threads(*calls: Callable[[], object]) -> tuple[list[threading.Thread], list[object]]:
    results: list[object] = [None] * len(calls)

    def run(index: int, call: Callable[[], object]) -> None:
        results[index] = call()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    return threads, results


def _queued(controller: Controller, count: int) -> None:
    """Waits until ``count`` changes queue behind the write in flight."""
    poll_until(
        lambda: (
            sum(len(s.changes) for s in controller.term.topic_writes._queued.submissions) >= count
        ),
        timeout=10,
        what=f"{count} changes queued",
    )


def test_alters_that_arrive_during_a_write_share_the_next_one(
    controller: Controller, gated: GatedWrites
) -> None:
    names = [f"t{i}" for i in range(6)]
    for name in names:
        controller.admin.create_topic(name, 2, TIERED)
    first, results = _in_threads(lambda: _alter(controller, "t0", "retention.ms", "1000"))
    assert gated.in_flight.wait(10)
    others, more = _in_threads(
        *(lambda n=n: _alter(controller, n, "remote.storage.enable", "false") for n in names[1:])
    )
    _queued(controller, len(names) - 1)
    gated.gate.set()
    for thread in first + others:
        thread.join(30)
    assert gated.calls[0] == ["t0"]
    assert sorted(gated.calls[1]) == names[1:] and len(gated.calls) == 2
    assert all(isinstance(r, TopicMetadata) for r in results + more)
    stored = reloaded(controller)
    assert stored["t0"].configs["retention.ms"] == "1000"
    assert all(stored[n].tiered_state is TieredState.DISABLING for n in names[1:])
    assert all(controller.term.image.topics[n] == stored[n] for n in names)


def test_validation_sees_a_change_still_being_written(
    controller: Controller, gated: GatedWrites
) -> None:
    controller.admin.create_topic("t", 2, TIERED)
    first, results = _in_threads(lambda: _alter(controller, "t", "remote.storage.enable", "false"))
    assert gated.in_flight.wait(10)
    assert controller.term.image.topics["t"].tiered_state is TieredState.ENABLED  # not durable
    again = _alter(controller, "t", "remote.storage.enable", "true")
    assert isinstance(again, TieredError)
    assert again.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
    gated.gate.set()
    first[0].join(30)
    assert isinstance(results[0], TopicMetadata)
    assert results[0].tiered_state is TieredState.DISABLING


def test_a_failed_write_fails_all_it_carried_and_what_queued_with_nothing_applied(
    controller: Controller, gated: GatedWrites
) -> None:
    for name in ("a", "b", "c"):
        controller.admin.create_topic(name, 1, TIERED)
    before = reloaded(controller)
    gated.failure = lambda changes: MetadataStoreError("the disk is gone")
    first, results = _in_threads(lambda: _alter(controller, "a", "retention.ms", "5"))
    assert gated.in_flight.wait(10)
    queued, more = _in_threads(
        lambda: _alter(controller, "b", "retention.ms", "6"),
        lambda: _alter(controller, "c", "remote.storage.enable", "false"),
    )
    _queued(controller, 2)
    gated.gate.set()
    for thread in first + queued:
        thread.join(30)
    assert all(
        isinstance(r, TieredError) and r.code is ErrorCode.NOT_CONTROLLER for r in results + more
    )
    assert reloaded(controller) == before
    assert {n: controller.term.image.topics[n] for n in before} == before
    assert controller.term.stepping_down


def test_a_write_that_commits_its_first_multis_applies_exactly_those(
    controller: Controller, gated: GatedWrites, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ZooKeeper writes a large flush as several multis: the first ones' topics succeed and are
    applied, the failed multi's and the rest fail and change nothing."""
    names = ["a", "b", "c", "d"]
    for name in names:
        controller.admin.create_topic(name, 1, TIERED)
    store_update = gated._update_topics

    def partly(changes: Sequence[TopicChange]) -> Exception:
        store_update(changes[:2])
        return PartialWriteError("the second multi failed", committed=2)

    gated.failure = partly
    gated.gate.set()
    results = controller.admin.alter_topic_configs(
        [TopicAlteration(n, (("retention.ms", SET, "7"),)) for n in names]
    )
    assert [isinstance(r, TopicMetadata) for r in results] == [True, True, False, False]
    stored = reloaded(controller)
    assert [stored[n].configs.get("retention.ms") for n in names] == ["7", "7", None, None]
    assert [controller.term.image.topics[n] == stored[n] for n in names] == [True] * 4


def test_another_write_waits_for_the_group_and_plans_from_it(
    controller: Controller, gated: GatedWrites
) -> None:
    """A CreatePartitions while an alter of the same topic is being written keeps that alter's
    configs: it is planned from the topic as the alter leaves it, written after it."""
    controller.admin.create_topic("t", 1, TIERED)
    first, _ = _in_threads(lambda: _alter(controller, "t", "retention.ms", "9"))
    assert gated.in_flight.wait(10)
    growth, grown = _in_threads(
        lambda: controller.admin.create_partitions([PartitionIncrease("t", 3)])
    )
    gated.gate.set()
    for thread in first + growth:
        thread.join(30)
    assert [isinstance(r, TopicMetadata) for r in grown[0]] == [True]  # type: ignore[attr-defined]
    topic = reloaded(controller)["t"]
    assert (topic.partition_count, topic.configs["retention.ms"]) == (3, "9")
    assert controller.term.image.topics["t"] == topic
