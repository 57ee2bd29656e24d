"""Controller pieces on their own: the disablement queue, broker liveness, the backoff policy,
and the Controller's admin operations over a real KRaft store (no brokers needed)."""

from __future__ import annotations

import logging
import random
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest import mock

import pytest

from controller.admin_operations import TopicView
from controller.broker_channel import AssignWork, BrokerChannel, DisableWork, RemoveWork, Work
from controller.brokers import BrokerLiveness
from controller.controller import Controller
from controller.disablement import DisableEntry, DisablementQueue
from controller.servicer import ControllerServicer
from controller.store import MetadataStore, TopicChange
from tests.rlmm_support import poll_until
from tests.support.controller import reloaded, running_controller
from tiered.cluster.model import BrokerRegistration, DeleteJob, TieredState, TopicMetadata
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import ErrorCode, TieredError
from tiered.retry import ExponentialBackoff
from tiered.rpc.v1 import controller_pb2 as pb


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


def test_liveness_fences_brokers_whose_heartbeats_lapse() -> None:
    now = [0.0]
    liveness = BrokerLiveness(session_timeout_s=3, clock=lambda: now[0])
    first = BrokerRegistration(1, "h", 1)
    assert liveness.register(first) is True
    assert liveness.register(first) is False  # same incarnation
    now[0] = 2.0
    assert liveness.heartbeat(1, first.incarnation_id)
    now[0] = 4.9
    assert liveness.is_live(1)
    now[0] = 5.1
    assert not liveness.is_live(1) and liveness.fenced() == {1}
    assert not liveness.heartbeat(1, uuid.uuid4())  # another incarnation must register
    assert liveness.register(BrokerRegistration(1, "h", 1)) is True
    assert liveness.is_live(1)


def test_backoff_grows_is_capped_and_jittered() -> None:
    backoff = ExponentialBackoff(initial_s=0.1, max_s=1.0, jitter=0.2)
    rng = random.Random(7)
    delays = [backoff.delay_s(n, rng) for n in range(10)]
    assert 0.08 <= delays[0] <= 0.1
    assert all(0.8 <= d <= 1.0 for d in delays[5:])
    assert len({round(d, 6) for d in delays[5:]}) > 1  # jittered, not lockstep
    with pytest.raises(ValueError):
        ExponentialBackoff(initial_s=2, max_s=1)


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    with running_controller(tmp_path) as controller:
        yield controller


def test_rejected_admin_requests_persist_nothing(controller: Controller) -> None:
    controller.admin.create_topic("t", 2, {"remote.storage.enable": "true"})
    persisted = reloaded(controller)
    cases = [
        (lambda: controller.admin.create_topic("t", 1, {}), ErrorCode.TOPIC_ALREADY_EXISTS),
        (
            lambda: controller.admin.create_topic("bad/name", 1, {}),
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        ),
        (lambda: controller.admin.create_topic("u", 0, {}), ErrorCode.INVALID_PARTITIONS),
        (
            lambda: controller.admin.create_topic("u", 1, {"remote.storage.enable": "yes"}),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            lambda: controller.admin.alter_configs(
                "t", set_={"remote.log.disable.policy": "purge"}
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            lambda: controller.admin.alter_configs("t", set_={"cleanup.policy": "compact"}),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            lambda: controller.admin.alter_configs("t", set_={"no.such.key": "1"}),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            lambda: controller.admin.alter_configs("t", delete=["no.such.key"]),
            ErrorCode.INVALID_CONFIG,
        ),
        (  # the valid half is a disable: it must not start one
            lambda: controller.admin.alter_configs(
                "t", set_={"remote.storage.enable": "false"}, delete=["no.such.key"]
            ),
            ErrorCode.INVALID_CONFIG,
        ),
        (
            lambda: controller.admin.alter_configs("missing", set_={}),
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ),
        (lambda: controller.admin.delete_topic("missing"), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    for call, code in cases:
        with pytest.raises(TieredError) as rejected:
            call()
        assert rejected.value.code is code, rejected.value
    assert reloaded(controller) == persisted


def test_deleting_an_unknown_config_key_names_it_and_a_known_unset_one_is_fine(
    controller: Controller,
) -> None:
    controller.admin.create_topic("t", 1, {"remote.storage.enable": "true"})
    with pytest.raises(TieredError) as rejected:
        controller.admin.alter_configs("t", delete=["retention.ms", "no.such.config"])
    assert rejected.value.code is ErrorCode.INVALID_CONFIG
    assert rejected.value.message.startswith("unknown topic config 'no.such.config'; known: ")
    # Kafka accepts deleting a topic config that is not set: nothing to do, not an error.
    after = controller.admin.alter_configs("t", delete=["retention.ms"])
    assert after.configs == {"remote.storage.enable": "true"}


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


class _UnreachableBroker:
    """A ChannelOwner whose broker never answers: every round fails."""

    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        raise RuntimeError("unreachable")

    def on_disable_response(
        self, broker_id: int, work: DisableWork, errors: Sequence[TieredError | None]
    ) -> None:
        raise AssertionError("no request is sent")

    def on_assign_response(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None:
        raise AssertionError("no request is sent")

    def on_remove_response(
        self, broker_id: int, work: RemoveWork, errors: Sequence[TieredError | None]
    ) -> None:
        raise AssertionError("no request is sent")

    def on_stale_controller_epoch(self, broker_id: int, message: str) -> None:
        raise AssertionError("no request is sent")


def test_a_channel_backs_off_more_each_failure_until_its_broker_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Backoff long enough that only a wake starts the next round.
    channel = BrokerChannel(7, _UnreachableBroker(), ExponentialBackoff(60.0, 600.0), 1.0)
    attempts: list[int] = []

    def attempt() -> int:
        before = len(attempts)
        channel.wake()

        def logged() -> bool:
            attempts[:] = [
                int(found.group(1))
                for r in caplog.records
                if r.name == "controller.broker_channel"
                and (found := re.search(r"request failed \(attempt (\d+)", r.getMessage()))
            ]
            return len(attempts) > before

        poll_until(logged, what="a failed round")
        return attempts[-1]

    try:
        with caplog.at_level(logging.WARNING, logger="controller.broker_channel"):
            assert [attempt(), attempt()] == [1, 2]
            channel.reset_backoff()  # the broker re-registered
            assert attempt() == 1
    finally:
        channel.close()


def test_fetch_metadata_needs_a_store_that_is_a_metadata_log(controller: Controller) -> None:
    store = mock.create_autospec(MetadataStore, instance=True)
    store.mode = "zookeeper"
    servicer = ControllerServicer(
        controller.brokers, controller.term, store, threading.Event(), controller.access
    )
    context = mock.Mock(
        **{"peer.return_value": "ipv4:127.0.0.1:5000", "auth_context.return_value": {}}
    )
    responses = list(servicer.FetchMetadata(pb.FetchMetadataRequest(from_offset=0), context))
    assert [r.error.code for r in responses] == [ErrorCode.INVALID_REQUEST.value]
    assert "needs metadata.store=kraft, not zookeeper" in responses[0].error.message
    # The KRaft store is one: the same call streams its log.
    kraft = ControllerServicer(
        controller.brokers, controller.term, controller.store, threading.Event(), controller.access
    )
    first = next(kraft.FetchMetadata(pb.FetchMetadataRequest(from_offset=0), context))
    assert first.error.code == ErrorCode.NONE.value and first.next_offset > 0


def test_deleting_a_tiered_topic_queues_the_delete_of_every_epoch_in_the_same_write(
    controller: Controller, monkeypatch: pytest.MonkeyPatch
) -> None:
    controller.admin.create_topic("t", 2, {"remote.storage.enable": "true"})
    controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})  # epoch 1
    controller.admin.create_topic("plain", 1, {})  # never tiered: no remote data, no job
    old = controller.term.image.topics["t"]
    writes: list[tuple[str, DeleteJob | None]] = []
    delete_topic = controller.store.delete_topic

    def recording(topic: TopicMetadata, delete_job: DeleteJob | None = None) -> None:
        writes.append((topic.name, delete_job))
        delete_topic(topic, delete_job)

    monkeypatch.setattr(controller.store, "delete_topic", recording)
    controller.admin.delete_topic("t")
    controller.admin.delete_topic("plain")
    job = DeleteJob.of_deleted_topic(old)
    assert writes == [("t", job), ("plain", None)]
    assert job.tiered_epoch == 2 and job.topic_deleted and job.partition_count == 2
    assert controller.store.load().delete_jobs == {job.key: job}
    assert "t" not in controller.disablements.queue  # its DISABLING is owed no more

    # Shown as a deleted topic whose data is being deleted, never as a live one; a topic
    # re-created under the name is another topic id, with no job of its own.
    controller.admin.create_topic("t", 1, {"remote.storage.enable": "true"})
    assert [j.key for j in controller.admin.describe_deleted_topics()] == [job.key]
    assert [j.key for j in controller.admin.describe_deleted_topics(["t"])] == [job.key]
    assert controller.admin.describe_deleted_topics(["plain"]) == []
    [view] = controller.admin.describe_topics(["t"])
    assert isinstance(view, TopicView) and view.topic.topic_id != old.topic_id
    assert view.delete_job is None
    assert {j.key for j in controller.delete_jobs.jobs_with_progress()} == {job.key}

    # The job waits for the brokers to drop the old partitions (broker 1 here, which answers
    # nothing: the test acks for it); a new term owes the removal again while the job is not
    # done, as a broker may have missed it.
    assert controller.brokers.brokers_owing_removal(old.topic_id) == [1]
    epoch = controller.active_epoch
    assert epoch is not None
    removal = RemoveWork(epoch, [("t", old.topic_id, 0), ("t", old.topic_id, 1)])
    controller.brokers.on_remove_response(1, removal, [None, None])
    assert controller.brokers.brokers_owing_removal(old.topic_id) == []
    controller.store.resign()
    controller.store.leadership_lost.set()
    poll_until(
        lambda: controller.active_epoch is not None and controller.active_epoch != epoch,
        what="re-election",
    )
    assert controller.brokers.brokers_owing_removal(old.topic_id) == [1]
