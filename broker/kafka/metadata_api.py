"""Metadata and DescribeCluster: who is in the cluster and where things live.

Brokers are named by their endpoints on the listener the request came in on (Kafka's rule: a
client on SSL is told SSL addresses); a broker without that listener is left out. Replication
factor 1: a partition's leader is the broker hosting it, its replicas and ISR that broker alone;
a hosting broker that is not live (or has no such listener) leaves the partition
LEADER_NOT_AVAILABLE with the broker offline, and so does a partition its broker does not host
yet (the controller says which). A missing topic named by a request that allows it
is created (``topic_auto_creation``), as Kafka's ``auto.create.topics.enable`` does.
The controller id Kafka clients see is a live broker (``cluster_view.controller_id``): any
broker forwards admin requests to the active controller. When the controller does not answer,
the broker answers from the last view it knows (``cluster_view``: a name it has no placement for
is LEADER_NOT_AVAILABLE); with no view at all, with itself alone and every named topic
LEADER_NOT_AVAILABLE (retriable).
Kafka's internal topics (``__consumer_offsets``) are marked ``is_internal``.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.cluster_view import ClusterView, KafkaCluster, TopicPlacement, controller_id
from broker.kafka.convert import NO_THROTTLE, UNKNOWN_AUTHORIZED_OPERATIONS, kafka_error
from broker.kafka.this_broker import ThisBroker
from broker.kafka.topic_auto_creation import TopicAutoCreator
from broker.listener.handler import RequestContext
from tiered.config import INTERNAL_TOPICS, validate_topic_name
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.messages import build, nested, response_type_for
from tiered.net import Listener
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType

__all__ = ["MetadataApi"]

_BROKERS = 1  # DescribeCluster endpoint_type


class MetadataApi:
    """Topics are told only to whom may Describe them: a listing leaves the others out, a named
    one is TOPIC_AUTHORIZATION_FAILED (whether or not it exists), one named by id is unknown."""

    def __init__(
        self,
        view: ClusterView,
        this: ThisBroker,
        access: AccessControl,
        auto_creator: TopicAutoCreator | None = None,
    ) -> None:
        self._view = view
        self._this = this
        self._access = access
        self._auto_creator = auto_creator

    # ------------------------------------------------------------------------------- Metadata

    def metadata(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        names, ids = _asked(request, context.api_version)
        cluster = self._cluster(names, need_listing=names is None or bool(ids))
        brokers = cluster.brokers(context.listener)
        requester = context.requester

        def denial(name: str) -> TieredError | None:
            return self._access.denial(requester, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

        topics: list[Any] = []
        if names is None:
            listed = [
                t
                for t in cluster.topics.values()
                if isinstance(t, TopicPlacement) and denial(t.name) is None
            ]
            topics += [_topic(response_type, t, brokers) for t in listed]
        else:
            named = {name: denial(name) or _named(cluster, name) for name in names}
            named.update(self._auto_create(request, named, context))
            topics += [_topic(response_type, named[name], brokers, name) for name in names]
        for topic_id in ids:
            found = cluster.by_id(topic_id)
            if found is None or denial(found.name) is not None:
                topics.append(_unknown_id(response_type, topic_id))
            else:
                topics.append(_topic(response_type, found, brokers))
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            brokers=_brokers(nested(response_type, "MetadataResponseBroker"), "node_id", brokers),
            cluster_id=cluster.cluster_id or None,
            controller_id=controller_id(brokers),
            topics=tuple(topics),
            cluster_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
        )

    def _auto_create(
        self,
        request: Any,
        found: Mapping[str, TopicPlacement | TieredError],
        context: RequestContext,
    ) -> dict[str, TieredError]:
        """The answers of the missing topics this request creates (none unless it allows
        creation: ``allow_auto_topic_creation``, true before v4, as in Kafka)."""
        creator = self._auto_creator
        if creator is None or not creator.allowed(
            bool(getattr(request, "allow_auto_topic_creation", True))
        ):
            return {}
        missing = [
            name
            for name, topic in found.items()
            if isinstance(topic, TieredError) and topic.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        ]
        return creator.create(missing, context.requester) if missing else {}

    def _cluster(self, names: list[str] | None, need_listing: bool) -> KafkaCluster:
        try:
            if need_listing or names is None:
                return self._view.everything()
            return self._view.topics([n for n in names if _valid_name(n)])
        except TieredError as e:
            unavailable = TieredError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"the controller cannot be reached: {e}"
            )
            return KafkaCluster(
                "",
                {self._this.node_id: self._this.endpoints},
                dict.fromkeys(names or (), unavailable),
            )

    # ------------------------------------------------------------------------ DescribeCluster

    def describe_cluster(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        code, message = KafkaErrorCode.none, None
        cluster = KafkaCluster("", {}, {})
        if getattr(request, "endpoint_type", _BROKERS) != _BROKERS:
            code = KafkaErrorCode.unsupported_endpoint_type
            message = "a broker describes brokers only (endpoint_type 1)"
        else:
            try:
                cluster = self._view.topics([])
            except TieredError as e:
                code, message = kafka_error(e)
        brokers = cluster.brokers(context.listener)
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            endpoint_type=_BROKERS,
            cluster_id=cluster.cluster_id,
            controller_id=controller_id(brokers),
            brokers=_brokers(nested(response_type, "DescribeClusterBroker"), "broker_id", brokers),
            cluster_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
        )


def _brokers(
    broker_type: type[Any], id_field: str, brokers: Mapping[int, Listener]
) -> tuple[Any, ...]:
    """The live brokers' endpoints on the request's listener, by id."""
    return tuple(
        build(broker_type, **{id_field: broker_id}, host=e.host, port=e.port, rack=None)
        for broker_id, e in sorted(brokers.items())
    )


def _asked(request: Any, version: int) -> tuple[list[str] | None, list[uuid.UUID]]:
    """(names, ids) a Metadata request asks for; names None for every topic (a null array, or
    an empty one in v0)."""
    if request.topics is None or (version == 0 and not request.topics):
        return None, []
    names = [t.name for t in request.topics if t.name is not None]
    ids = [
        t.topic_id
        for t in request.topics
        if t.name is None and getattr(t, "topic_id", None) is not None
    ]
    return list(dict.fromkeys(names)), list(dict.fromkeys(ids))


def _valid_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except TieredError:
        return False
    return True


def _named(cluster: KafkaCluster, name: str) -> TopicPlacement | TieredError:
    try:
        validate_topic_name(name)
    except TieredError as e:
        return e
    found = cluster.topics.get(name)
    return found or TieredError(
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
    )


def _topic(
    response_type: type[Any],
    topic: TopicPlacement | TieredError,
    live: Collection[int],
    name: str | None = None,
) -> Any:
    topic_type = nested(response_type, "MetadataResponseTopic")
    if isinstance(topic, TieredError):
        return build(
            topic_type,
            error_code=kafka_error(topic)[0],
            name=name,
            topic_id=None,
            is_internal=name in INTERNAL_TOPICS,
            partitions=(),
            topic_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
        )
    partition_type = nested(response_type, "MetadataResponsePartition")
    return build(
        topic_type,
        error_code=KafkaErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=tuple(
            _partition(partition_type, p, b, b in live, p not in topic.unhosted)
            for p, b in enumerate(topic.replicas)
        ),
        topic_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )


def _partition(
    partition_type: type[Any], partition: int, broker: int, live: bool, hosted: bool
) -> Any:
    """A partition is led by its broker once that broker is live and hosts it; until then it
    is LEADER_NOT_AVAILABLE with leader -1 (a broker named before it hosts the partition would
    refuse a pipelining producer's first batches and accept the later ones)."""
    led = live and hosted
    return build(
        partition_type,
        error_code=KafkaErrorCode.none if led else KafkaErrorCode.leader_not_available,
        partition_index=partition,
        leader_id=broker if led else -1,
        leader_epoch=0,  # replication factor 1: the leader never changes
        replica_nodes=(broker,),
        isr_nodes=(broker,) if led else (),
        offline_replicas=() if live else (broker,),
    )


def _unknown_id(response_type: type[Any], topic_id: uuid.UUID) -> Any:
    return build(
        nested(response_type, "MetadataResponseTopic"),
        error_code=KafkaErrorCode.unknown_topic_id,
        name=None,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=UNKNOWN_AUTHORIZED_OPERATIONS,
    )
