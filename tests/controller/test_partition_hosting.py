"""Which partitions a leader hosts, as the controller tracks it: a partition placed in this term
is unhosted until its leader acks the assignment carrying it; Metadata names no leader for it
meanwhile, and CreateTopics/CreatePartitions wait for it (``BrokerWork.wait_hosted``)."""

from __future__ import annotations

import threading
import time

from controller.admin_operations import TopicAlteration
from controller.broker_channel import AssignWork
from controller.controller import Controller
from controller.partition_growth import PartitionIncrease
from tiered.cluster.model import TopicMetadata
from tiered.config import ConfigOperation
from tiered.errors import ErrorCode, TieredError


def _assignment(controller: Controller) -> AssignWork:
    found = controller.broker_work.next_work(1)
    assert found is not None
    _, work = found
    assert isinstance(work, AssignWork)
    return work


def _unhosted(controller: Controller, name: str) -> frozenset[int]:
    view = controller.admin.describe_metadata([name])
    (topic,) = view.topics
    assert not isinstance(topic, TieredError)
    return view.unhosted.get(topic.topic_id, frozenset())


def test_a_new_topic_is_unhosted_until_its_leader_acks_each_partition(
    controller: Controller,
) -> None:
    topic = controller.admin.create_topic("t", 3, {})
    assert _unhosted(controller, "t") == {0, 1, 2}
    assert controller.broker_work.wait_hosted([topic.topic_id], 0.01) == {topic.topic_id}

    work = _assignment(controller)
    refused = TieredError(ErrorCode.INVALID_CONFIG, "bad config")
    controller.broker_work.on_assign_response(1, work, [None, refused, None])
    assert _unhosted(controller, "t") == {1}  # a refused partition is not hosted

    waited: list[set[object]] = []
    waiter = threading.Thread(
        target=lambda: waited.append(set(controller.broker_work.wait_hosted([topic.topic_id], 30)))
    )
    waiter.start()
    controller.broker_work.topic_changed(topic, placed=range(1, 2))  # placed again
    started = time.monotonic()
    controller.broker_work.on_assign_response(1, _assignment(controller), [None, None, None])
    waiter.join(30)
    assert waited == [set()]
    assert time.monotonic() - started < 30  # woken by the ack, not by the timeout
    assert _unhosted(controller, "t") == frozenset()


def test_an_ack_of_another_term_counts_for_nothing(controller: Controller) -> None:
    controller.admin.create_topic("t", 1, {})
    work = _assignment(controller)
    stale = AssignWork(work.controller_epoch - 1, work.topics, work.broker_id)
    controller.broker_work.on_assign_response(1, stale, [None])
    assert _unhosted(controller, "t") == {0}


def test_only_the_partitions_a_growth_adds_are_unhosted(controller: Controller) -> None:
    controller.admin.create_topic("t", 2, {})
    controller.broker_work.on_assign_response(1, _assignment(controller), [None, None])
    (grown,) = controller.admin.create_partitions([PartitionIncrease("t", 4)])
    assert not isinstance(grown, TieredError)
    assert _unhosted(controller, "t") == {2, 3}


def test_a_deleted_topic_is_waited_for_no_more(controller: Controller) -> None:
    topic = controller.admin.create_topic("t", 2, {})
    controller.admin.delete_topic("t")
    assert controller.broker_work.wait_hosted([topic.topic_id], 0.01) == set()


def test_a_reconfiguration_reaches_log_following_brokers_through_the_log_alone(
    controller: Controller,
) -> None:
    """KRaft brokers apply a topic's new configs from the metadata log: pushing them too would
    make each broker reconfigure every partition twice (a 1,000-topic disable included)."""
    controller.admin.create_topic("t", 2, {"remote.storage.enable": "true"})
    controller.broker_work.on_assign_response(1, _assignment(controller), [None, None])
    assert controller.broker_work.next_work(1) is None

    (altered,) = controller.admin.alter_topic_configs(
        [TopicAlteration("t", (("retention.ms", ConfigOperation.SET, "60000"),))]
    )
    assert isinstance(altered, TopicMetadata)
    assert controller.broker_work.next_work(1) is None
    (grown,) = controller.admin.create_partitions([PartitionIncrease("t", 3)])
    assert not isinstance(grown, TieredError)
    assert [topic.name for topic, _ in _assignment(controller).topics] == ["t"]
