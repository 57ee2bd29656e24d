"""The disablement queue (``controller.disablement``) and what the controller persists and resends
for DISABLING topics, over a real KRaft store (no brokers needed)."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from controller.broker_channel import DisableWork
from controller.controller import Controller
from controller.disablement import DisableEntry, DisablementQueue
from controller.store import TopicChange
from tests.support.controller import reloaded
from tests.support.polling import poll_until
from tiered.cluster.model import TieredState, TopicMetadata
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import ErrorCode, TieredError


def disabling(name: str, replicas: tuple[int, ...], epoch: int = 1) -> TopicMetadata:
    return TopicMetadata(
        name,
        uuid.uuid4(),
        replicas,
        {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"},
        TieredState.DISABLING,
        epoch,
    )


def test_queue_owes_each_partition_to_its_broker_until_acked() -> None:
    queue = DisablementQueue()
    a, b = disabling("a", (1, 2, 1)), disabling("b", (2,), epoch=3)
    queue.enqueue(a)
    queue.enqueue(b)
    assert queue.progress("a") == (3, 3)
    owed_by_2 = queue.owed_by(2, limit=10)
    assert [(e.topic, e.partition, e.tiered_epoch) for e in owed_by_2] == [("a", 1, 1), ("b", 0, 3)]
    assert all(e.policy is RemoteLogDisablePolicy.DELETE for e in owed_by_2)
    assert len(queue.owed_by(1, limit=1)) == 1  # batches are capped
    # An ack for another epoch or from the wrong broker counts for nothing.
    stale = DisableEntry("a", a.topic_id, 0, 0, RemoteLogDisablePolicy.DELETE)
    assert queue.ack(1, stale) is None and queue.progress("a") == (3, 3)
    assert queue.ack(2, queue.owed_by(1, 10)[0]) is None and queue.progress("a") == (3, 3)
    for entry in queue.owed_by(1, 10):
        assert queue.ack(1, entry) is None
    assert queue.progress("a") == (1, 3) and queue.brokers_owing() == {2}
    done = [queue.ack(2, e) for e in queue.owed_by(2, 10)]
    assert [t.name for t in done if t is not None] == ["a", "b"]
    assert len(queue) == 0 and queue.brokers_owing() == set()


def test_queue_replaces_an_older_epoch_and_refuses_other_states() -> None:
    queue = DisablementQueue()
    first = disabling("a", (1,), epoch=1)
    queue.enqueue(first)
    second = TopicMetadata("a", first.topic_id, (1,), first.configs, TieredState.DISABLING, 2)
    queue.enqueue(second)
    assert [e.tiered_epoch for e in queue.owed_by(1, 10)] == [2]
    with pytest.raises(ValueError, match="not DISABLING"):
        queue.enqueue(TopicMetadata("c", uuid.uuid4(), (1,)))


def test_disable_persists_state_and_epoch_with_the_config_before_any_ack(
    controller: Controller,
) -> None:
    controller.admin.create_topic("t", 2, {"remote.storage.enable": "true"})
    after = controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})
    assert after.tiered_state is TieredState.DISABLING and after.tiered_epoch == 1
    stored = reloaded(controller)["t"]
    assert stored.tiered_state is TieredState.DISABLING and stored.tiered_epoch == 1
    assert stored.configs["remote.storage.enable"] == "false"
    assert controller.disablements.queue.progress("t") == (
        2,
        2,
    )  # broker 1 is not reachable: still owed
    with pytest.raises(TieredError) as in_progress:
        controller.admin.alter_configs("t", set_={"remote.storage.enable": "true"})
    assert in_progress.value.code is ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS
    # validate_only changes nothing.
    controller.admin.alter_configs("t", set_={"retention.ms": "1000"}, validate_only=True)
    assert "retention.ms" not in reloaded(controller)["t"].configs


def test_a_new_controller_logs_when_the_requeued_disablements_are_resent_and_done(
    controller: Controller, caplog: pytest.LogCaptureFixture
) -> None:
    for name, partitions in (("t", 3), ("u", 2)):
        controller.admin.create_topic(name, partitions, {"remote.storage.enable": "true"})
        controller.admin.alter_configs(name, set_={"remote.storage.enable": "false"})
    epoch = controller.active_epoch
    with caplog.at_level(logging.INFO, logger="controller"):
        controller.store.resign()
        controller.store.leadership_lost.set()
        poll_until(
            lambda: controller.active_epoch is not None and controller.active_epoch != epoch,
            what="re-election",
        )
        new_epoch = controller.active_epoch
        assert new_epoch is not None
        entries = controller.disablements.queue.owed_by(1, 100)
        assert [(e.topic, e.partition) for e in entries] == [
            ("t", 0),
            ("t", 1),
            ("t", 2),
            ("u", 0),
            ("u", 1),
        ]
        failed = TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, "disk full")
        controller.brokers.on_disable_response(
            1, DisableWork(new_epoch, entries[:2]), [failed, None]
        )
        assert "Re-sent" not in caplog.text
        controller.brokers.on_disable_response(1, DisableWork(new_epoch, entries[2:]), [None] * 3)
        # An entry the broker answered with an error was re-sent all the same.
        assert "Re-sent 5 outstanding disablements (every partition of the 2 topics" in caplog.text
        assert controller.term.image.topics["u"].tiered_state is TieredState.DISABLED
        assert "All 2 topics" not in caplog.text  # t-0 is still owed
        controller.brokers.on_disable_response(1, DisableWork(new_epoch, entries[:1]), [None])
        assert "All 2 topics DISABLING at activation are DISABLED" in caplog.text


def test_one_response_completing_many_disablements_is_one_store_write(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [f"t{i}" for i in range(20)]
    for name in names:
        controller.admin.create_topic(name, 2, {"remote.storage.enable": "true"})
        policy = "delete" if name == "t3" else "retain"
        controller.admin.alter_configs(
            name,
            set_={"remote.storage.enable": "false", "remote.log.disable.policy": policy},
        )
    epoch = controller.active_epoch
    assert epoch is not None
    writes: list[int] = []
    update_topics = controller.store.update_topics

    def counting(changes: list[TopicChange]) -> None:
        writes.append(len(changes))
        update_topics(changes)

    monkeypatch.setattr(controller.store, "update_topics", counting)
    entries = controller.disablements.queue.owed_by(1, 100)
    assert len(entries) == 40
    controller.brokers.on_disable_response(1, DisableWork(epoch, entries), [None] * 40)
    assert writes == [20]
    persisted = reloaded(controller)
    assert {persisted[n].tiered_state for n in names} == {TieredState.DISABLED}
    assert list(controller.store.load().delete_jobs) == [(persisted["t3"].topic_id, 1)]
    assert len(controller.disablements.queue) == 0


def test_a_new_controller_rebuilds_the_queue_from_disabling_topics(
    controller: Controller, tmp_path: Path
) -> None:
    controller.admin.create_topic("t", 3, {"remote.storage.enable": "true"})
    controller.admin.create_topic("quiet", 1, {})
    controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})
    epoch = controller.active_epoch
    controller.store.resign()
    controller.store.leadership_lost.set()
    poll_until(
        lambda: controller.active_epoch is not None and controller.active_epoch != epoch,
        what="re-election",
    )
    assert controller.disablements.queue.progress("t") == (3, 3)
    assert "quiet" not in controller.disablements.queue
