"""The controller's admin operations (``controller.admin_operations``) over a real KRaft store: refusals
persist nothing, config deletes, FetchMetadata's store, a tiered topic's deletion queued."""

from __future__ import annotations

import threading
from unittest import mock

import pytest

from controller.admin_operations import TopicView
from controller.broker_channel import RemoveWork
from controller.broker_servicer import ControllerServicer
from controller.controller import Controller
from controller.store import MetadataStore
from tests.support.controller import reloaded
from tests.support.polling import poll_until
from tiered.cluster.model import DeleteJob, TopicMetadata
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import controller_pb2 as pb


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
    delete_topic = controller.store.writes.delete_topic

    def recording(topic: TopicMetadata, delete_job: DeleteJob | None = None) -> None:
        writes.append((topic.name, delete_job))
        delete_topic(topic, delete_job)

    monkeypatch.setattr(controller.store.writes, "delete_topic", recording)
    controller.admin.delete_topic("t")
    controller.admin.delete_topic("plain")
    job = DeleteJob.of_deleted_topic(old)
    assert writes == [("t", job), ("plain", None)]
    assert job.tiered_epoch == 2 and job.topic_deleted and job.partition_count == 2
    assert controller.store.load().delete_jobs == {job.key: job}
    assert "t" not in controller.disablements  # its DISABLING is owed no more

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
    assert controller.broker_work.brokers_owing_removal(old.topic_id) == [1]
    epoch = controller.active_epoch
    assert epoch is not None
    removal = RemoveWork(epoch, [("t", old.topic_id, 0), ("t", old.topic_id, 1)])
    controller.broker_work.on_remove_response(1, removal, [None, None])
    assert controller.broker_work.brokers_owing_removal(old.topic_id) == []
    controller.store.resign()
    controller.store.leadership_lost.set()
    poll_until(
        lambda: controller.active_epoch is not None and controller.active_epoch != epoch,
        what="re-election",
    )
    assert controller.broker_work.brokers_owing_removal(old.topic_id) == [1]
