"""CreateTopics and DeleteTopics, forwarded to the active controller in one call each.

Each topic is answered on its own. Checked here, before the controller: a topic named twice in
one request (INVALID_REQUEST), a replication factor other than 1 or -1 (the default, 1:
INVALID_REPLICATION_FACTOR), manual replica assignments (INVALID_REQUEST: the controller places
partitions), a null config value (INVALID_CONFIG). ``num_partitions`` -1 is Kafka's default, 1.
Names, counts and configs are the controller's to validate, with the gRPC path's messages.
A topic created or deleted through this broker refreshes its metadata at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin, call_per_topic
from broker.cluster_view import ClusterView
from broker.kafka.config_entries import new_topic_entries
from broker.kafka.convert import NO_THROTTLE, KafkaError, duration_ms, kafka_error
from broker.listener.handler import RequestContext
from tiered.cluster.serde import uuid_from_bytes
from tiered.config import validate_topic_configs
from tiered.errors import TieredError
from tiered.kafka.messages import build, has_field, nested, response_type_for
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = ["TopicsApi", "forward_create_topics"]

DEFAULT_PARTITIONS = 1  # Kafka's num.partitions default
_DEFAULT = -1  # num_partitions / replication_factor: the broker's default


class TopicsApi:
    def __init__(self, controller: ControllerAdmin, view: ClusterView) -> None:
        self._controller = controller
        self._view = view

    # ------------------------------------------------------------------------------ CreateTopics

    def create_topics(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        validate_only = bool(getattr(request, "validate_only", False))
        names = [t.name for t in request.topics]
        rejected: list[KafkaError | None] = []
        new_topics = []
        for topic in request.topics:
            error = _check_new_topic(topic, names)
            rejected.append(error)
            if error is None:
                new_topics.append(
                    pb.NewTopic(
                        name=topic.name,
                        partitions=DEFAULT_PARTITIONS
                        if topic.num_partitions == _DEFAULT
                        else topic.num_partitions,
                        configs={c.name: c.value for c in topic.configs},
                    )
                )
        created = iter(
            forward_create_topics(
                self._controller, new_topics, validate_only, max(0, duration_ms(request.timeout))
            )
        )
        if new_topics and not validate_only:
            self._view.invalidate()
        results = []
        new_ones = iter(new_topics)
        for topic, error in zip(request.topics, rejected, strict=True):
            if error is not None:
                results.append(_created(response_type, topic.name, error))
                continue
            (code, message), topic_id = next(created)
            new = next(new_ones)
            results.append(
                _created(response_type, topic.name, (code, message), topic_id, new)
                if code is KafkaErrorCode.none
                else _created(response_type, topic.name, (code, message))
            )
        return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(results))

    # ------------------------------------------------------------------------------ DeleteTopics

    def delete_topics(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        if hasattr(request, "topic_names"):  # v0 to v5
            asked: list[tuple[str | None, uuid.UUID | None]] = [
                (n, None) for n in request.topic_names
            ]
        else:
            asked = [(t.name, t.topic_id) for t in request.topics]
        resolved = self._resolve(asked)
        names = [name for name, _ in resolved if name is not None]
        deleted = iter(self._delete(names))
        if names:
            self._view.invalidate()
        results = []
        for (name, topic_id), (known_name, _) in zip(asked, resolved, strict=True):
            error = (
                next(deleted)
                if known_name is not None
                else (KafkaErrorCode.unknown_topic_id, f"topic id {topic_id} does not exist")
            )
            results.append(
                build(
                    nested(response_type, "DeletableTopicResult"),
                    name=known_name or name,
                    topic_id=topic_id,
                    error_code=error[0],
                    error_message=error[1],
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, responses=tuple(results))

    def _resolve(
        self, asked: list[tuple[str | None, uuid.UUID | None]]
    ) -> list[tuple[str | None, uuid.UUID | None]]:
        """(name, id) of each topic asked for; a name None for an id that names no topic now.
        Ids are resolved by a listing asked for now, not the kept one: the topics are deleted by
        name, and a kept listing could give the deleted topic's id the name of the topic
        created again since."""
        if all(name is not None for name, _ in asked):
            return asked
        self._view.invalidate()  # a kept listing is not answered, even a fresh one
        try:
            cluster = self._view.everything(stale_ok=False)
        except TieredError:
            return [(name, topic_id) for name, topic_id in asked]
        resolved = []
        for name, topic_id in asked:
            found = cluster.by_id(topic_id) if name is None and topic_id is not None else None
            resolved.append((name if found is None else found.name, topic_id))
        return resolved

    def _delete(self, names: Sequence[str]) -> list[KafkaError]:
        results = call_per_topic(
            self._controller,
            "DeleteTopics",
            pb.DeleteTopicsRequest(names=names),
            pb.DeleteTopicsResponse,
            len(names),
        )
        return [kafka_error(error_from_proto(r.error)) for r in results]


def forward_create_topics(
    controller: ControllerAdmin,
    topics: Sequence[pb.NewTopic],
    validate_only: bool = False,
    timeout_ms: int = 0,
) -> list[tuple[KafkaError, uuid.UUID | None]]:
    """AdminService CreateTopics at the active controller (as the client the caller forwards
    for): each topic's (error, id), in order. ``timeout_ms``: Kafka's, how long to wait for
    the new partitions' leaders to host them (0: answer once the topics are persisted)."""
    results = call_per_topic(
        controller,
        "CreateTopics",
        pb.CreateTopicsRequest(topics=topics, validate_only=validate_only, timeout_ms=timeout_ms),
        pb.CreateTopicsResponse,
        len(topics),
        waits_s=timeout_ms / 1000,
    )
    return [
        (
            kafka_error(error_from_proto(r.error)),
            uuid_from_bytes(r.topic_id) if len(r.topic_id) == 16 else None,
        )
        for r in results
    ]


def _check_new_topic(topic: Any, names: Sequence[str]) -> KafkaError | None:
    if names.count(topic.name) > 1:
        return KafkaErrorCode.invalid_request, (
            f"topic {topic.name!r} appears more than once in the request; valid: each topic once"
        )
    if topic.replication_factor not in (1, _DEFAULT):
        return KafkaErrorCode.invalid_replication_factor, (
            f"replication factor {topic.replication_factor} is not valid; valid values: 1, or -1 "
            f"for the default (1): each partition has one replica, on the broker that leads it"
        )
    if topic.assignments:
        return KafkaErrorCode.invalid_request, (
            "manual replica assignments are not supported; valid: none (the controller places "
            "the partitions)"
        )
    configs = [c.name for c in topic.configs]
    for config in topic.configs:
        if configs.count(config.name) > 1:
            return KafkaErrorCode.invalid_request, (
                f"config {config.name} is given more than once; valid: each config once"
            )
        if config.value is None:
            return KafkaErrorCode.invalid_config, (
                f"config {config.name} has a null value; valid: a string value"
            )
    return None


def _created(
    response_type: type[Any],
    name: str,
    error: KafkaError,
    topic_id: uuid.UUID | None = None,
    new: pb.NewTopic | None = None,
) -> Any:
    result_type = nested(response_type, "CreatableTopicResult")
    configs = None
    if new is not None and has_field(result_type, "configs"):  # v5+
        config_type = nested(response_type, "CreatableTopicConfigs")
        try:
            set_on_topic = validate_topic_configs(dict(new.configs))
        except TieredError:  # the controller accepted it: not expected
            set_on_topic = dict(new.configs)
        configs = tuple(
            build(
                config_type,
                name=e.name,
                value=e.value,
                read_only=e.read_only,
                config_source=int(e.source),
                is_sensitive=e.is_sensitive,
            )
            for e in new_topic_entries(set_on_topic)
        )
    return build(
        result_type,
        name=name,
        topic_id=topic_id,
        error_code=error[0],
        error_message=error[1],
        topic_config_error_code=0,
        num_partitions=-1 if new is None else new.partitions,
        replication_factor=-1 if new is None else 1,
        configs=configs,
    )
