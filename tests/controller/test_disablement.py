"""Disablements (``controller.disablements``): what each broker owes for DISABLING topics, which
acks count, and what the controller persists and resends, over a real KRaft store (no brokers
needed)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from controller.broker_channel import DisableWork
from controller.controller import Controller
from controller.delete_jobs import DeleteJobSupervisor
from controller.disablements import DisableEntry, Disablements
from controller.leadership import Term
from controller.store import TopicChange
from controller.store.kraft import KRaftMetadataStore
from tests.support.controller import reloaded
from tests.support.polling import poll_until
from tiered.cluster.model import (
    DeleteJobState,
    InvalidDeleteJobTransition,
    MetadataImage,
    TieredState,
    TopicMetadata,
)
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


EPOCH = 7  # the controller epoch of the unit tests' term


def standalone(tmp_path: Path, clock: Callable[[], float] = time.monotonic) -> Disablements:
    """Disablements of an active term over a KRaft store, no controller around it: DISABLED
    writes are submitted to the term's group commit and never flushed."""
    store = KRaftMetadataStore.from_config({"metadata.log.dir": str(tmp_path / "meta")})
    term = Term(1, store)
    term.begin(EPOCH, MetadataImage())
    return Disablements(term, DeleteJobSupervisor(term, store, None), clock)


def fail_over(controller: Controller) -> int:
    """A new term of the same controller, which reloads the store; its epoch."""
    epoch = controller.active_epoch
    controller.store.resign()
    controller.store.leadership_lost.set()
    poll_until(
        lambda: controller.active_epoch is not None and controller.active_epoch != epoch,
        what="re-election",
    )
    new_epoch = controller.active_epoch
    assert new_epoch is not None
    return new_epoch


def ack(disablements: Disablements, broker: int, *entries: DisableEntry, epoch: int = EPOCH) -> int:
    """Acks the entries; returns how many topics that completed."""
    done = disablements.broker_acked(broker, epoch, entries, [None] * len(entries))
    return 0 if done is None else len(done.changes)


def test_each_partition_is_owed_to_its_broker_until_an_ack_that_counts(tmp_path: Path) -> None:
    disablements = standalone(tmp_path)
    a, b = disabling("a", (1, 2, 1)), disabling("b", (2,), epoch=3)
    disablements.disabling_persisted(a)
    disablements.disabling_persisted(b)
    assert disablements.progress(a)[:2] == (3, 3)
    owed_by_2 = disablements.owed_by(2, limit=10)
    assert [(e.topic, e.partition, e.tiered_epoch) for e in owed_by_2] == [("a", 1, 1), ("b", 0, 3)]
    assert all(e.policy is RemoteLogDisablePolicy.DELETE for e in owed_by_2)
    assert len(disablements.owed_by(1, limit=1)) == 1  # batches are capped
    # Acks that do not count: another tiered epoch, another broker, another term, and a topic
    # of the same name with another id (deleted and created again).
    stale = DisableEntry("a", a.topic_id, 0, 0, RemoteLogDisablePolicy.DELETE)
    assert ack(disablements, 1, stale) == 0
    assert ack(disablements, 2, disablements.owed_by(1, 10)[0]) == 0
    assert ack(disablements, 1, *disablements.owed_by(1, 10), epoch=EPOCH - 1) == 0
    other = DisableEntry("a", uuid.uuid4(), 0, 1, RemoteLogDisablePolicy.DELETE)
    assert ack(disablements, 1, other) == 0
    assert disablements.progress(a)[:2] == (3, 3)
    assert ack(disablements, 1, *disablements.owed_by(1, 10)) == 0
    assert disablements.progress(a) == (1, 3, frozenset({1}))
    assert set(disablements.backlogs()) == {2}
    assert ack(disablements, 2, *disablements.owed_by(2, 10)) == 2  # a and b, in one write
    assert len(disablements) == 0 and disablements.backlogs() == {}
    # Until the DISABLED write is durable the image still says DISABLING: all acked, not 0/0.
    assert disablements.progress(a) == (0, 3, frozenset())
    assert disablements.progress(
        disabling("c", (1,)).with_tiered_state(TieredState.ENABLED, 1)
    ) == (
        0,
        0,
        frozenset(),
    )


def test_a_new_epoch_replaces_what_was_owed_and_other_states_are_refused(tmp_path: Path) -> None:
    disablements = standalone(tmp_path)
    first = disabling("a", (1,), epoch=1)
    disablements.disabling_persisted(first)
    second = TopicMetadata("a", first.topic_id, (1,), first.configs, TieredState.DISABLING, 2)
    disablements.disabling_persisted(second)
    assert [e.tiered_epoch for e in disablements.owed_by(1, 10)] == [2]
    with pytest.raises(ValueError, match="not DISABLING"):
        disablements.disabling_persisted(TopicMetadata("c", uuid.uuid4(), (1,)))


def test_each_brokers_backlog_and_its_oldest_entry(tmp_path: Path) -> None:
    now = [100.0]
    disablements = standalone(tmp_path, clock=lambda: now[0])
    first = disabling("first", (1, 2, 1))
    disablements.disabling_persisted(first)
    now[0] = 103.0
    disablements.disabling_persisted(disabling("second", (1,)))
    now[0] = 110.0
    backlogs = disablements.backlogs()
    assert {b: (x.entries, x.oldest_age_s) for b, x in backlogs.items()} == {
        1: (3, 10.0),
        2: (1, 10.0),
    }
    for entry in disablements.owed_by(1, 10):
        if entry.topic == "first":
            ack(disablements, 1, entry)
            ack(disablements, 1, entry)  # a repeated ack counts once
    assert {b: (x.entries, x.oldest_age_s) for b, x in disablements.backlogs().items()} == {
        1: (1, 7.0),  # the second topic is broker 1's oldest now
        2: (1, 10.0),
    }
    disablements.disabling_persisted(first.with_tiered_state(TieredState.DISABLING, 2))
    disablements.topic_deleted("second")
    assert {b: (x.entries, x.oldest_age_s) for b, x in disablements.backlogs().items()} == {
        1: (2, 0.0),
        2: (1, 0.0),
    }
    for broker in (1, 2):
        ack(disablements, broker, *disablements.owed_by(broker, 10))
    assert disablements.backlogs() == {} and len(disablements) == 0


def test_disable_persists_state_and_epoch_with_the_config_before_any_ack(
    controller: Controller,
) -> None:
    controller.admin.create_topic("t", 2, {"remote.storage.enable": "true"})
    after = controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})
    assert after.tiered_state is TieredState.DISABLING and after.tiered_epoch == 1
    stored = reloaded(controller)["t"]
    assert stored.tiered_state is TieredState.DISABLING and stored.tiered_epoch == 1
    assert stored.configs["remote.storage.enable"] == "false"
    assert controller.disablements.progress(controller.term.image.topics["t"])[:2] == (
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
    with caplog.at_level(logging.INFO, logger="controller"):
        new_epoch = fail_over(controller)
        entries = controller.disablements.owed_by(1, 100)
        assert [(e.topic, e.partition) for e in entries] == [
            ("t", 0),
            ("t", 1),
            ("t", 2),
            ("u", 0),
            ("u", 1),
        ]
        failed = TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, "disk full")
        controller.broker_work.on_disable_response(
            1, DisableWork(new_epoch, entries[:2]), [failed, None]
        )
        assert "Re-sent" not in caplog.text
        controller.broker_work.on_disable_response(
            1, DisableWork(new_epoch, entries[2:]), [None] * 3
        )
        # An entry the broker answered with an error was re-sent all the same.
        assert "Re-sent 5 outstanding disablements (every partition of the 2 topics" in caplog.text
        assert controller.term.image.topics["u"].tiered_state is TieredState.DISABLED
        assert "All 2 topics" not in caplog.text  # t-0 is still owed
        controller.broker_work.on_disable_response(1, DisableWork(new_epoch, entries[:1]), [None])
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
    update_topics = controller.store.writes.update_topics

    def counting(changes: list[TopicChange]) -> None:
        writes.append(len(changes))
        update_topics(changes)

    monkeypatch.setattr(controller.store.writes, "update_topics", counting)
    entries = controller.disablements.owed_by(1, 100)
    assert len(entries) == 40
    controller.broker_work.on_disable_response(1, DisableWork(epoch, entries), [None] * 40)
    assert writes == [20]
    persisted = reloaded(controller)
    assert {persisted[n].tiered_state for n in names} == {TieredState.DISABLED}
    assert list(controller.store.load().delete_jobs) == [(persisted["t3"].topic_id, 1)]
    assert len(controller.disablements) == 0


def test_a_new_controller_rebuilds_the_queue_from_disabling_topics(
    controller: Controller, tmp_path: Path
) -> None:
    controller.admin.create_topic("t", 3, {"remote.storage.enable": "true"})
    controller.admin.create_topic("quiet", 1, {})
    controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})
    fail_over(controller)
    assert controller.disablements.progress(controller.term.image.topics["t"])[:2] == (3, 3)
    assert "quiet" not in controller.disablements


DELAYED_DELETE = {
    "remote.storage.enable": "false",
    "remote.log.disable.policy": "delete",
    "remote.log.delete.delay.ms": "3600000",
}


def disable_with_a_delay(controller: Controller, partitions: int) -> list[DisableEntry]:
    """Creates tiered topic "t" and disables it with the delete policy, delayed an hour: what
    broker 1 is owed."""
    controller.admin.create_topic("t", partitions, {"remote.storage.enable": "true"})
    controller.admin.alter_configs("t", set_=DELAYED_DELETE)
    return controller.disablements.owed_by(1, 100)


def test_a_delayed_delete_stops_brokers_as_retain_and_schedules_its_job_durably(
    controller: Controller,
) -> None:
    before_ms = int(time.time() * 1000)
    entries = disable_with_a_delay(controller, 2)
    epoch = controller.active_epoch
    assert epoch is not None
    assert {e.policy for e in entries} == {RemoteLogDisablePolicy.RETAIN}
    controller.broker_work.on_disable_response(1, DisableWork(epoch, entries), [None] * 2)
    topic = controller.term.image.topics["t"]
    assert topic.tiered_state is TieredState.DISABLED
    (job,) = controller.store.load().delete_jobs.values()
    assert job.state is DeleteJobState.SCHEDULED and job.starts_at_ms is not None
    assert before_ms + 3600000 <= job.starts_at_ms <= int(time.time() * 1000) + 3600000
    assert [j.state for j in controller.delete_jobs.unfinished.jobs()] == [DeleteJobState.SCHEDULED]

    # A new term reads the same schedule: its start is absolute, not restarted.
    new_epoch = fail_over(controller)
    assert controller.delete_jobs.latest()[topic.topic_id] == job

    # Its start owes every broker the delete-policy stop, until acked.
    assert controller.broker_work.delete_stops_owed(job) == [1]
    work = controller.broker_work.next_work(1)
    assert work is not None and isinstance(work[1], DisableWork)
    stops = work[1].entries
    assert {(e.partition, e.tiered_epoch, e.policy) for e in stops} == {
        (0, 1, RemoteLogDisablePolicy.DELETE),
        (1, 1, RemoteLogDisablePolicy.DELETE),
    }
    controller.broker_work.on_disable_response(1, DisableWork(new_epoch, stops), [None, None])
    assert controller.broker_work.delete_stops_owed(job) == []


def test_a_reenable_before_the_start_cancels_the_scheduled_job_for_good(
    controller: Controller,
) -> None:
    entries = disable_with_a_delay(controller, 1)
    epoch = controller.active_epoch
    assert epoch is not None
    controller.broker_work.on_disable_response(1, DisableWork(epoch, entries), [None])
    after = controller.admin.alter_configs("t", set_={"remote.storage.enable": "true"})
    assert (after.tiered_state, after.tiered_epoch) == (TieredState.ENABLED, 1)
    (job,) = controller.store.load().delete_jobs.values()
    assert job.state is DeleteJobState.CANCELLED and job.tiered_epoch == 1
    assert controller.delete_jobs.unfinished.jobs() == []
    # A save of the job's start after the cancellation is refused by the state table.
    with pytest.raises(InvalidDeleteJobTransition):
        controller.delete_jobs._persist(replace(job, state=DeleteJobState.RUNNING, attempts=1))
    # A failover never resumes it.
    fail_over(controller)
    assert controller.delete_jobs.unfinished.jobs() == []
    assert controller.store.load().delete_jobs[job.key].state is DeleteJobState.CANCELLED


def test_the_retain_policy_before_the_start_cancels_the_scheduled_job(
    controller: Controller,
) -> None:
    entries = disable_with_a_delay(controller, 1)
    epoch = controller.active_epoch
    assert epoch is not None
    controller.broker_work.on_disable_response(1, DisableWork(epoch, entries), [None])
    # Another change leaves it scheduled; the delay itself is read once, at DISABLED.
    controller.admin.alter_configs("t", set_={"remote.log.delete.delay.ms": "0"})
    (job,) = controller.store.load().delete_jobs.values()
    assert job.state is DeleteJobState.SCHEDULED
    after = controller.admin.alter_configs("t", set_={"remote.log.disable.policy": "retain"})
    assert (after.tiered_state, after.tiered_epoch) == (TieredState.DISABLED, 1)
    assert controller.store.load().delete_jobs[job.key].state is DeleteJobState.CANCELLED
    assert controller.delete_jobs.unfinished.jobs() == []
