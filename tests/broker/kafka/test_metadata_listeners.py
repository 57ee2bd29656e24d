"""Metadata, DescribeCluster and FindCoordinator answer with the endpoints of the listener the
request came in on (Kafka's rule): a broker without that listener is left out (a coordinator
without it is COORDINATOR_NOT_AVAILABLE), and a broker that cannot reach the controller names
itself by that listener."""

from __future__ import annotations

import uuid
from typing import Any, cast

from kio.schema.describe_cluster.v1.request import DescribeClusterRequest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i8, i16, i32
from kio.static.protocol import RequestPayload

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.placement import OFFSETS_TOPIC, OffsetsTopic, partition_for
from broker.kafka.find_coordinator_api import FindCoordinatorApi
from broker.kafka.handler import ALLOW_ALL
from broker.kafka.metadata_api import MetadataApi
from broker.kafka.this_broker import ThisBroker
from broker.listener.handler import RequestContext
from tests.broker.kafka.test_cluster_view import add_brokers
from tiered.errors import ErrorCode, TieredError
from tiered.net import PLAINTEXT, SSL, Listener
from tiered.rpc.v1 import controller_pb2 as pb

ONE = (Listener(PLAINTEXT, "plain-1", 9092), Listener(SSL, "ssl-1", 9093))
TWO = (Listener(PLAINTEXT, "plain-2", 9092),)  # broker 2 has no SSL listener


class TwoBrokers:
    """DescribeMetadata: brokers 1 and 2 with their endpoints, no topics; or unreachable."""

    reachable = True

    def call(
        self, method: str, request: Any, response_type: type[Any], waits_s: float = 0.0
    ) -> Any:
        if not self.reachable:
            raise TieredError(ErrorCode.BROKER_NOT_AVAILABLE, "no controller")
        response = pb.DescribeMetadataResponse(cluster_id="c")
        if OFFSETS_TOPIC in request.topics:  # partition 0 on broker 1, 1 on broker 2
            response.topics.add(name=OFFSETS_TOPIC, topic_id=uuid.uuid4().bytes, replicas=[1, 2])
        add_brokers(response, {1: ONE, 2: TWO})
        return response


def answer(api: Any, request: RequestPayload, listener: str) -> Any:
    header = RequestHeader(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(1),
        client_id="t",
    )
    return api(request, RequestContext(header, "127.0.0.1:1", listener=listener))


def brokers(response: Any) -> dict[int, tuple[str, int]]:
    return {
        getattr(b, "node_id", getattr(b, "broker_id", None)): (b.host, b.port)
        for b in response.brokers
    }


METADATA = MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def find_coordinator(controller: TwoBrokers) -> Any:
    view = ClusterView(cast(ControllerAdmin, controller), max_age_s=0.0)
    offsets_topic = OffsetsTopic(
        view,
        cast(ControllerAdmin, controller),
        OffsetsConfig(),
        1,
        lambda index: KafkaErrorCode.none,
    )
    return FindCoordinatorApi(offsets_topic, view, ALLOW_ALL).find_coordinator


def api(controller: TwoBrokers) -> MetadataApi:
    view = ClusterView(cast(ControllerAdmin, controller), max_age_s=0.0)
    return MetadataApi(view, ThisBroker(1, ONE, cast(Any, None)), ALLOW_ALL)


def test_each_listener_is_told_its_own_endpoints() -> None:
    metadata = api(TwoBrokers())
    on_plaintext = answer(metadata.metadata, METADATA, PLAINTEXT)
    assert brokers(on_plaintext) == {1: ("plain-1", 9092), 2: ("plain-2", 9092)}
    on_ssl = answer(metadata.metadata, METADATA, SSL)
    assert brokers(on_ssl) == {1: ("ssl-1", 9093)}
    assert on_ssl.controller_id == 1

    cluster = DescribeClusterRequest(include_cluster_authorized_operations=False)
    assert brokers(answer(metadata.describe_cluster, cluster, SSL)) == {1: ("ssl-1", 9093)}
    assert len(answer(metadata.describe_cluster, cluster, PLAINTEXT).brokers) == 2

    on_one, on_two = ["g1", "g0"]  # their __consumer_offsets partitions: 0 and 1
    assert (partition_for(on_one, 2), partition_for(on_two, 2)) == (0, 1)
    find = FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(on_one, on_two))
    coordinators = find_coordinator(TwoBrokers())
    one, two = answer(coordinators, find, SSL).coordinators
    assert (one.node_id, one.host, one.port) == (1, "ssl-1", 9093)
    assert (two.error_code, two.node_id) == (KafkaErrorCode.coordinator_not_available, -1)
    one, two = answer(coordinators, find, PLAINTEXT).coordinators
    assert (one.host, one.port, two.host, two.port) == ("plain-1", 9092, "plain-2", 9092)


def test_without_the_controller_the_broker_names_itself_by_the_request_listener() -> None:
    controller = TwoBrokers()
    controller.reachable = False
    metadata = api(controller)
    assert brokers(answer(metadata.metadata, METADATA, SSL)) == {1: ("ssl-1", 9093)}
    assert brokers(answer(metadata.metadata, METADATA, PLAINTEXT)) == {1: ("plain-1", 9092)}
