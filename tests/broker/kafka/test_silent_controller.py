"""A broker whose active controller does not answer (cut off from it, say) goes on answering its
Kafka clients from the last view of the cluster it knows, within the cluster view's deadline
(broker/cluster_view.py): Metadata, FindCoordinator; names it never saw are LEADER_NOT_AVAILABLE
and nothing is created on them; the view is fresh again once the controller answers; callers
that need the present answer wait for it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.static.primitive import i8

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView, TopicPlacement
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.placement import OFFSETS_TOPIC, OffsetsTopic, partition_for
from broker.kafka.find_coordinator_api import FindCoordinatorApi
from broker.kafka.handler import ALLOW_ALL
from broker.kafka.metadata_api import MetadataApi
from broker.kafka.this_broker import ThisBroker
from tests.broker.kafka.test_cluster_view import FakeController
from tests.broker.kafka.test_metadata_listeners import ONE, TWO, answer, brokers
from tests.support.polling import poll_until
from tiered.errors import ErrorCode, TieredError
from tiered.net import PLAINTEXT
from tiered.rpc.v1 import controller_pb2 as pb

DEADLINE_S = 1.0
# What a request that does not wait for the controller may take on a loaded machine.
PROMPT_S = DEADLINE_S / 2


class SilenceableController(FakeController):
    """``FakeController`` with brokers 1 (``ONE``) and 2 (``TWO``); ``silence()`` makes every
    call hang until ``speak()``, ``failing`` makes every call fail at once. Records the methods
    called (DescribeMetadata alone: nothing is created)."""

    def __init__(self) -> None:
        super().__init__({1: ONE, 2: TWO})
        self.calls: list[str] = []
        self.failing = False
        self._speaking = threading.Event()
        self._speaking.set()

    def silence(self) -> None:
        self._speaking.clear()

    def speak(self) -> None:
        self._speaking.set()

    def call(
        self, method: str, request: Any, response_type: Any, waits_s: float = 0.0
    ) -> pb.DescribeMetadataResponse:
        self.calls.append(method)
        assert self._speaking.wait(60), "a silent controller was never released"
        if self.failing:
            raise TieredError(ErrorCode.REQUEST_TIMED_OUT, "DescribeMetadata timed out")
        return super().call(method, request, response_type, waits_s)


@pytest.fixture
def controller() -> Iterator[SilenceableController]:
    controller = SilenceableController()
    controller.create("orders", 2, 1)
    yield controller
    controller.speak()  # the view's hung calls end with the test


def view_of(controller: SilenceableController) -> ClusterView:
    # max_age_s 0: every request asks the controller, as one past the view's age does
    return ClusterView(
        cast(ControllerAdmin, controller), max_age_s=0.0, answer_deadline_s=DEADLINE_S
    )


def metadata_api(view: ClusterView) -> MetadataApi:
    return MetadataApi(view, ThisBroker(1, ONE, cast(Any, None)), ALLOW_ALL)


def named(*names: str) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=n) for n in names),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )


EVERY_TOPIC = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def timed(api: Any, request: Any) -> tuple[Any, float]:
    started = time.monotonic()
    response = answer(api, request, PLAINTEXT)
    return response, time.monotonic() - started


def leaders(response: Any) -> dict[str, tuple[int, list[int]]]:
    """Each topic: (error code, leader of each partition)."""
    return {
        t.name: (int(t.error_code), [int(p.leader_id) for p in t.partitions])
        for t in response.topics
    }


def test_metadata_is_answered_from_the_last_view_within_the_deadline_while_the_controller_hangs(
    controller: SilenceableController, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="broker.cluster_view")
    api = metadata_api(view_of(controller))
    fresh, _ = timed(api.metadata, named("orders"))
    assert leaders(fresh) == {"orders": (0, [2, 1])}

    controller.silence()
    first, took = timed(api.metadata, named("orders"))
    assert took < DEADLINE_S + PROMPT_S, took  # waited the deadline, not the controller
    assert leaders(first) == {"orders": (0, [2, 1])}
    assert brokers(first) == {1: ("plain-1", 9092), 2: ("plain-2", 9092)}
    asked = len(controller.calls)
    for _ in range(20):  # a silent controller is not waited for again
        again, took = timed(api.metadata, named("orders"))
        assert took < PROMPT_S, took
        assert leaders(again) == {"orders": (0, [2, 1])}
    listing, took = timed(api.metadata, EVERY_TOPIC)
    assert took < PROMPT_S and leaders(listing) == {"orders": (0, [2, 1])}
    # Never seen here: retriable, and not auto-created (CreateTopics would hang as well).
    unseen, took = timed(api.metadata, named("unseen"))
    assert took < PROMPT_S, took
    assert leaders(unseen) == {"unseen": (int(KafkaErrorCode.leader_not_available), [])}
    # The controller is asked again in the background, a few calls at most.
    assert len(controller.calls) - asked <= 4, controller.calls
    assert set(controller.calls) == {"DescribeMetadata"}

    controller.create("later", 1)
    controller.speak()

    def fresh_again() -> bool:
        found = leaders(answer(api.metadata, named("later"), PLAINTEXT))
        return found == {"later": (0, [1])}

    poll_until(fresh_again, timeout=10, what="the view to be fresh once the controller answers")
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    stale = [m for level, m in said if level == "WARNING" and "last view known" in m]
    again_fresh = [m for level, m in said if level == "INFO" and "again" in m]
    assert len(stale) == 1 and len(again_fresh) == 1, said


def test_a_failing_controller_is_answered_for_from_the_last_view(
    controller: SilenceableController,
) -> None:
    api = metadata_api(view_of(controller))
    answer(api.metadata, EVERY_TOPIC, PLAINTEXT)
    controller.failing = True
    response, took = timed(api.metadata, named("orders", "unseen"))
    assert took < PROMPT_S, took
    assert leaders(response) == {
        "orders": (0, [2, 1]),
        "unseen": (int(KafkaErrorCode.leader_not_available), []),
    }


def test_without_any_view_a_silent_controller_is_waited_for_only_the_deadline(
    controller: SilenceableController,
) -> None:
    api = metadata_api(view_of(controller))
    controller.silence()
    response, took = timed(api.metadata, named("orders"))
    assert took < DEADLINE_S + PROMPT_S, took
    assert leaders(response) == {"orders": (int(KafkaErrorCode.leader_not_available), [])}
    assert brokers(response) == {1: ("plain-1", 9092)}  # itself alone, as when unreachable


def test_find_coordinator_is_answered_from_the_last_view(
    controller: SilenceableController,
) -> None:
    view = view_of(controller)
    offsets = OffsetsTopic(
        view,
        cast(ControllerAdmin, controller),
        OffsetsConfig(),
        1,
        lambda index: KafkaErrorCode.none,
    )
    find = FindCoordinatorApi(offsets, view, ALLOW_ALL).find_coordinator
    on_two = "g0"
    request = FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(on_two,))

    controller.silence()  # the offsets topic never seen: not created, not available
    response, took = timed(find, request)
    assert took < DEADLINE_S + PROMPT_S, took
    (unknown,) = response.coordinators
    assert unknown.error_code == KafkaErrorCode.coordinator_not_available
    controller.speak()

    controller.create(OFFSETS_TOPIC, 1, 2)
    assert partition_for(on_two, 2) == 1
    poll_until(
        lambda: answer(find, request, PLAINTEXT).coordinators[0].node_id == 2,
        timeout=10,
        what="the coordinator once the controller answers",
    )
    controller.silence()
    response, took = timed(find, request)
    assert took < DEADLINE_S + PROMPT_S, took
    (coordinator,) = response.coordinators
    assert coordinator.error_code == KafkaErrorCode.none
    assert (coordinator.node_id, coordinator.host, coordinator.port) == (2, "plain-2", 9092)
    assert set(controller.calls) == {"DescribeMetadata"}


def test_a_caller_that_needs_the_present_answer_waits_for_the_controller(
    controller: SilenceableController,
) -> None:
    view = view_of(controller)
    view.everything()
    controller.silence()
    assert set(view.everything().topics) == {"orders"}  # from the last view
    controller.create("later", 1)
    listed: list[set[str]] = []
    waiting = threading.Thread(
        target=lambda: listed.append(set(view.everything(stale_ok=False).topics))
    )
    waiting.start()
    waiting.join(DEADLINE_S * 3)
    assert waiting.is_alive() and not listed  # still waiting for the controller
    controller.speak()
    waiting.join(10)
    assert listed == [{"orders", "later"}]
    assert view.topics(["later"]).topics["later"] == TopicPlacement(
        "later", controller.ids["later"], (1,)
    )


def test_the_last_view_is_the_newest_of_the_listing_and_the_lookups_by_name(
    controller: SilenceableController,
) -> None:
    view = view_of(controller)
    view.topics(["orders"])
    del controller.topics["orders"]  # deleted through another broker
    view.everything()  # a listing without it, newer than the lookup
    controller.create("later", 1)
    view.topics(["later"])  # a lookup newer than the listing
    controller.failing = True
    assert set(view.everything().topics) == {"later"}
    last = view.topics(["orders", "later"]).topics
    assert last["later"] == TopicPlacement("later", controller.ids["later"], (1,))
    gone = last["orders"]
    assert isinstance(gone, TieredError) and gone.code is ErrorCode.LEADER_NOT_AVAILABLE


def test_current_lookups_are_shared_and_fall_back_to_the_last_view_within_the_deadline(
    controller: SilenceableController,
) -> None:
    """Callers arriving while a lookup is under way share the next one (a burst of commits
    costs the controller two calls, not one each); a silent controller is waited for the
    deadline once, then not at all, and the last view known answers."""
    view = view_of(controller)
    assert view.current(["orders"]).topic_ids() == {"orders": controller.ids["orders"]}
    asked = len(controller.calls)

    controller.silence()
    first, took = timed_current(view, ["orders"])
    assert DEADLINE_S <= took < DEADLINE_S + PROMPT_S, took
    assert first.topic_ids() == {"orders": controller.ids["orders"]}
    for _ in range(20):
        again, took = timed_current(view, ["orders", "unseen"])
        assert took < PROMPT_S, took
        assert again.topic_ids() == {"orders": controller.ids["orders"]}
        unseen = again.topics["unseen"]
        assert isinstance(unseen, TieredError) and unseen.code is ErrorCode.LEADER_NOT_AVAILABLE
    assert len(controller.calls) - asked == 1  # the one lookup, still unanswered

    controller.create("orders", 2, 1)  # deleted and created again meanwhile
    controller.speak()  # the hung lookup is answered; the next one gathers the names asked since
    poll_until(
        lambda: view.current(["orders"]).topic_ids() == {"orders": controller.ids["orders"]},
        timeout=30,
        what="the controller's answer",
    )
    burst_start = len(controller.calls)
    arrived: list[int] = []
    results: list[dict[str, Any]] = []

    def commit() -> None:
        arrived.append(1)
        results.append(view.current(["orders"]).topic_ids())

    threads = [threading.Thread(target=commit) for _ in range(16)]
    controller.silence()
    for thread in threads:
        thread.start()
    poll_until(
        lambda: len(arrived) == len(threads) and len(controller.calls) > burst_start,
        timeout=30,
        what="every caller to arrive and a lookup to be sent",
    )
    controller.speak()
    for thread in threads:
        thread.join(30)
    assert results == [{"orders": controller.ids["orders"]}] * 16
    assert len(controller.calls) - burst_start <= 2, controller.calls


def timed_current(view: ClusterView, names: list[str]) -> tuple[Any, float]:
    started = time.monotonic()
    found = view.current(names)
    return found, time.monotonic() - started
