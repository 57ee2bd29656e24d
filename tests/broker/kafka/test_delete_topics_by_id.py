"""DeleteTopics by topic id (v6+) deletes the topic of that id, never a topic created since under
the name the deleted one had, whatever the broker's cluster view keeps."""

from __future__ import annotations

from typing import Any, cast

from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i32

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView
from broker.kafka.topics_api import TopicsApi
from broker.listener.handler import RequestContext
from tests.broker.kafka.test_cluster_view import FakeController
from tiered.rpc.v1 import controller_pb2 as pb


class DeletingController(FakeController):
    """``FakeController`` that also deletes topics by name, recording the names."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def call(self, method: str, request: Any, response_type: Any, waits_s: float = 0.0) -> Any:
        if method != "DeleteTopics":
            return super().call(method, request, response_type, waits_s)
        answer = pb.DeleteTopicsResponse()
        for name in request.names:
            self.deleted.append(name)
            del self.topics[name]
            answer.results.add(name=name)
        return answer


def test_an_id_of_a_topic_deleted_and_created_again_elsewhere_deletes_nothing() -> None:
    controller = DeletingController()
    controller.create("orders", 1)
    old = controller.ids["orders"]
    view = ClusterView(cast(ControllerAdmin, controller), max_age_s=1.0, clock=lambda: 100.0)
    assert view.everything().topic_ids() == {"orders": old}  # kept by the view
    controller.create("orders", 1)  # deleted and created again through another broker
    api = TopicsApi(cast(ControllerAdmin, controller), view)

    request = delete_v6.DeleteTopicsRequest(
        topics=(delete_v6.DeleteTopicState(name=None, topic_id=old),), timeout=i32(30_000)
    )
    [result] = api.delete_topics(request, cast(RequestContext, None)).responses
    assert result.error_code is KafkaErrorCode.unknown_topic_id
    assert controller.deleted == [] and "orders" in controller.topics

    new = controller.ids["orders"]
    request = delete_v6.DeleteTopicsRequest(
        topics=(delete_v6.DeleteTopicState(name=None, topic_id=new),), timeout=i32(30_000)
    )
    [result] = api.delete_topics(request, cast(RequestContext, None)).responses
    assert (result.error_code, result.name) == (KafkaErrorCode.none, "orders")
    assert controller.deleted == ["orders"]
