"""What ``AdminClient.describe_cluster`` returns, read from DescribeCluster as the controller writes
it (``controller.admin_proto`` to ``tiered.admin_serde``, through the wire bytes)."""

from __future__ import annotations

from controller.admin_proto import broker_description_to_proto
from controller.reachability import Reach
from tiered.admin_serde import BrokerDescription, cluster_from_proto
from tiered.cluster.model import BrokerRegistration
from tiered.rpc.status import error_to_proto
from tiered.rpc.v1 import controller_pb2 as pb


def described(*brokers: pb.BrokerDescription) -> list[BrokerDescription]:
    response = pb.DescribeClusterResponse(
        controller_id=100,
        controller_epoch=3,
        controller_endpoint="127.0.0.1:9093",
        metadata_mode="kraft",
        brokers=brokers,
        error=error_to_proto(None),
    )
    return cluster_from_proto(
        pb.DescribeClusterResponse.FromString(response.SerializeToString())
    ).brokers


def test_each_broker_carries_when_the_controller_last_reached_it() -> None:
    one, two = BrokerRegistration(1, "h1", 9001), BrokerRegistration(2, "h2", 9002)
    assert described(
        broker_description_to_proto(one, False, Reach(0.4, reachable=True)),
        broker_description_to_proto(two, True, Reach(31.2346, reachable=False)),
    ) == [
        BrokerDescription(1, "h1", 9001, False, last_reached_ms=400, reachable=True),
        BrokerDescription(2, "h2", 9002, True, last_reached_ms=31_235, reachable=False),
    ]


def test_a_broker_reached_just_now_is_told_apart_from_one_the_controller_says_nothing_of() -> None:
    registration = BrokerRegistration(1, "h1", 9001)
    assert described(
        broker_description_to_proto(registration, False, Reach(0.0, reachable=True)),
        broker_description_to_proto(registration, False),  # as DescribeMetadata writes it
    ) == [
        BrokerDescription(1, "h1", 9001, False, last_reached_ms=0, reachable=True),
        BrokerDescription(1, "h1", 9001, False, last_reached_ms=None, reachable=None),
    ]
