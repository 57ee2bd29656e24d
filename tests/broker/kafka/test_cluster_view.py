"""The Kafka APIs' view of the cluster (broker/cluster_view.py): a listing of every topic
shared for ``max_age_s``, and named topics that the listing does not have asked for by name."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from broker.cluster_view import ClusterView, TopicPlacement
from tiered.errors import ErrorCode, TieredError
from tiered.net import Listener
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import metadata_pb2


def add_brokers(
    response: pb.DescribeMetadataResponse, endpoints: Mapping[int, Sequence[Listener]]
) -> None:
    """The live brokers of a DescribeMetadata answer, each with its Kafka endpoints."""
    for broker_id, listeners in endpoints.items():
        response.brokers.add(
            broker_id=broker_id,
            kafka_endpoints=[
                metadata_pb2.BrokerEndpoint(name=e.name, host=e.host, port=e.port)
                for e in listeners
            ],
        )


class FakeController:
    """DescribeMetadata over a dict of topics (name -> replicas) that a test changes, as another
    broker creating a topic would, and the live brokers ``endpoints``; records each request."""

    def __init__(self, endpoints: Mapping[int, Sequence[Listener]] | None = None) -> None:
        self.topics: dict[str, tuple[int, ...]] = {}
        self.ids: dict[str, uuid.UUID] = {}
        self.requests: list[pb.DescribeMetadataRequest] = []
        self.endpoints = dict(endpoints or {})

    def create(self, name: str, *replicas: int) -> None:
        self.topics[name] = replicas
        self.ids[name] = uuid.uuid4()

    def call(
        self, method: str, request: Any, response_type: Any, waits_s: float = 0.0
    ) -> pb.DescribeMetadataResponse:
        assert method == "DescribeMetadata"
        self.requests.append(request)
        names = sorted(self.topics) if request.all_topics else list(request.topics)
        answer = pb.DescribeMetadataResponse(cluster_id="c")
        for name in names:
            placement = answer.topics.add(name=name)
            if name in self.topics:
                placement.topic_id = self.ids[name].bytes
                placement.replicas.extend(self.topics[name])
            else:
                placement.error.code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value
                placement.error.message = f"topic {name!r} does not exist"
        add_brokers(answer, self.endpoints)
        return answer


def test_a_topic_created_elsewhere_is_known_by_name_while_the_listing_is_fresh() -> None:
    controller = FakeController()
    controller.create("old", 1)
    now = [100.0]
    view = ClusterView(controller, max_age_s=1.0, clock=lambda: now[0])  # type: ignore[arg-type]
    assert set(view.everything().topics) == {"old"}
    controller.create("new", 2, 1)  # through another broker: this one's listing is not dropped
    now[0] += 0.5

    assert view.topics(["old"]).topics["old"] == TopicPlacement("old", controller.ids["old"], (1,))
    assert len(controller.requests) == 1  # the listing answered

    found = view.topics(["old", "new"]).topics
    assert found["new"] == TopicPlacement("new", controller.ids["new"], (2, 1))
    assert found["old"] == TopicPlacement("old", controller.ids["old"], (1,))
    assert list(controller.requests[-1].topics) == ["old", "new"]

    missing = view.topics(["gone"]).topics["gone"]
    assert isinstance(missing, TieredError)
    assert missing.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(controller.requests) == 3
    assert set(view.everything().topics) == {"old"}  # the listing itself is still shared
    assert len(controller.requests) == 3


def test_a_missing_name_is_asked_for_once_per_unknown_max_age() -> None:
    controller = FakeController()
    now = [100.0]
    view = ClusterView(  # type: ignore[arg-type]
        controller, max_age_s=1.0, clock=lambda: now[0], unknown_max_age_s=0.25
    )
    view.everything()
    for _ in range(50):  # a client retrying a topic that does not exist
        missing = view.topics(["gone"]).topics["gone"]
        assert isinstance(missing, TieredError)
        assert missing.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(controller.requests) == 2  # the listing, then one lookup by name

    controller.create("gone", 1)  # created through another broker
    now[0] += 0.3
    assert view.topics(["gone"]).topics["gone"] == TopicPlacement(
        "gone", controller.ids["gone"], (1,)
    )
    assert len(controller.requests) == 3

    view.topics(["typo"])
    view.invalidate()  # a create or delete through this broker forgets what was missing
    view.everything()
    view.topics(["typo"])
    assert list(controller.requests[-1].topics) == ["typo"]


def test_a_named_topic_is_asked_for_once_per_max_age_and_a_deletion_here_is_seen_at_once() -> None:
    controller = FakeController()
    controller.create("orders", 1)
    now = [100.0]
    view = ClusterView(controller, max_age_s=1.0, clock=lambda: now[0])  # type: ignore[arg-type]
    for _ in range(50):  # a consumer committing offsets names its topic every time
        found = view.topics(["orders"])
        assert found.topics["orders"] == TopicPlacement("orders", controller.ids["orders"], (1,))
        assert found.cluster_id == "c"
        now[0] += 0.01
    assert len(controller.requests) == 1

    del controller.topics["orders"]  # deleted through another broker: seen within max_age_s
    assert isinstance(view.topics(["orders"]).topics["orders"], TopicPlacement)
    now[0] += 1.0
    gone = view.topics(["orders"]).topics["orders"]
    assert isinstance(gone, TieredError) and gone.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert len(controller.requests) == 2

    controller.create("orders", 2)  # re-created through this broker: known again at once
    view.invalidate()
    again = view.topics(["orders"]).topics["orders"]
    assert again == TopicPlacement("orders", controller.ids["orders"], (2,))
    assert len(controller.requests) == 3


def test_an_answer_with_unhosted_partitions_is_never_kept() -> None:
    """A client waiting for a new partition's leader must learn it as soon as it hosts the
    partition: such an answer is asked for again each time, the hosted one is then kept."""
    controller = FakeController()
    controller.create("new", 1, 2)
    unhosted = {"new": [1]}
    answer = controller.call

    def call(method: str, request: Any, response_type: Any, waits_s: float = 0.0) -> Any:
        response = answer(method, request, response_type)
        for placement in response.topics:
            placement.unhosted_partitions.extend(unhosted.get(placement.name, []))
        return response

    controller.call = call  # type: ignore[method-assign]
    view = ClusterView(controller, max_age_s=1.0, clock=lambda: 100.0)  # type: ignore[arg-type]
    first = view.topics(["new"]).topics["new"]
    assert isinstance(first, TopicPlacement) and first.unhosted == frozenset({1})
    view.everything()
    assert view.topics(["new"]).topics["new"] == first
    assert len(controller.requests) == 3  # neither the answer by name nor the listing served

    unhosted.clear()  # the leader now hosts it
    hosted = view.topics(["new"]).topics["new"]
    assert hosted == TopicPlacement("new", controller.ids["new"], (1, 2))
    assert view.topics(["new"]).topics["new"] == hosted
    assert len(controller.requests) == 4


def test_current_asks_the_controller_after_the_call_began_even_while_the_view_is_fresh() -> None:
    """A topic deleted and created again through another broker: ``topics`` answers the kept
    id for ``max_age_s``, ``current`` the new one (and keeps it)."""
    controller = FakeController()
    controller.create("orders", 1)
    view = ClusterView(controller, max_age_s=1.0, clock=lambda: 100.0)  # type: ignore[arg-type]
    old = controller.ids["orders"]
    assert view.topics(["orders"]).topic_ids() == {"orders": old}
    controller.create("orders", 1)  # deleted and created again elsewhere
    assert view.topics(["orders"]).topic_ids() == {"orders": old}

    found = view.current(["orders"])
    assert found.topics == {"orders": TopicPlacement("orders", controller.ids["orders"], (1,))}
    assert found.cluster_id == "c"
    assert view.topics(["orders"]).topic_ids() == {"orders": controller.ids["orders"]}
    assert len(controller.requests) == 2
