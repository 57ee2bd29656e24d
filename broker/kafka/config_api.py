"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs, forwarded to the active controller.

Each resource of a request is answered on its own. A resource rejected here (a type other than
TOPIC, a null value, an unknown operation, a read-only key) goes no further; the others of an alter
go to the controller in one AlterTopicConfigs call, which validates each on its own and persists
every accepted change in one durable write (``validate_only``: none), and returns once they are
persisted: a disable answers with the topic DISABLING, not DISABLED. Semantics and error codes are
docs/design.md §4 and docs/kafka-compatibility.md; errors name the key and the valid values.

Broker configs are static (the broker's properties file): DescribeConfigs lists this broker's
(a request for another broker's is INVALID_REQUEST: clients send those to that broker), and
altering them is INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin
from broker.kafka.config_entries import (
    READ_ONLY_TOPIC_KEYS,
    ConfigDescription,
    broker_entries,
    topic_entries,
)
from broker.kafka.convert import NO_THROTTLE, KafkaError, ResourceType, kafka_error
from broker.kafka.this_broker import ThisBroker
from broker.listener.handler import RequestContext
from tiered.cluster.serde import tiered_state_from_proto
from tiered.config import ConfigOperation
from tiered.errors import TieredError
from tiered.kafka.messages import build, nested, response_type_for
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = ["ConfigApi"]

_VALID_TYPES = "valid: 2 (TOPIC), or 4 (BROKER) to describe"


def _invalid(message: str) -> KafkaError:
    return KafkaErrorCode.invalid_request, message


class ConfigApi:
    def __init__(self, controller: ControllerAdmin, this: ThisBroker) -> None:
        self._controller = controller
        self._this = this

    # ------------------------------------------------------------------------ DescribeConfigs

    def describe_configs(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        results = []
        for resource in request.resources:
            error, entries = self._describe(int(resource.resource_type), resource.resource_name)
            wanted = resource.configuration_keys
            if wanted is not None:
                entries = [e for e in entries if e.name in set(wanted)]
            results.append(
                build(
                    nested(response_type, "DescribeConfigsResult"),
                    error_code=error[0],
                    error_message=error[1],
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                    configs=tuple(
                        _entry(response_type, e, getattr(request, "include_synonyms", False))
                        for e in entries
                    ),
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, results=tuple(results))

    def _describe(
        self, resource_type: int, name: str
    ) -> tuple[KafkaError, list[ConfigDescription]]:
        if resource_type == ResourceType.BROKER:
            if name == "":  # the cluster-wide dynamic defaults: there are none
                return kafka_error(None), []
            if name != str(self._this.node_id):
                return _invalid(
                    f"broker {name!r}: this is broker {self._this.node_id}; ask a broker for its "
                    f"own configs"
                ), []
            return kafka_error(None), broker_entries(self._this.properties)
        if resource_type != ResourceType.TOPIC:
            return _invalid(f"resource type {resource_type} is not supported; {_VALID_TYPES}"), []
        try:
            response = self._controller.call(
                "DescribeConfigs", pb.DescribeConfigsRequest(topic=name), pb.DescribeConfigsResponse
            )
        except TieredError as e:
            return kafka_error(e), []
        error = error_from_proto(response.error)
        if error is not None:
            return kafka_error(error), []
        entries = ((e.name, e.value, e.is_default) for e in response.entries)
        state = tiered_state_from_proto(response.tiered_state)
        return kafka_error(None), topic_entries(entries, state, response.tiered_epoch)

    # ----------------------------------------------------------- AlterConfigs (both of them)

    def alter_configs(self, request: Any, context: RequestContext) -> ResponsePayload:
        """Legacy AlterConfigs: each topic's configs become the given set."""
        return self._alter(request, incremental=False)

    def incremental_alter_configs(self, request: Any, context: RequestContext) -> ResponsePayload:
        return self._alter(request, incremental=True)

    def _alter(self, request: Any, incremental: bool) -> ResponsePayload:
        response_type = response_type_for(request)
        answers: list[KafkaError | None] = []  # None: the controller answers
        alterations = []
        for resource in request.resources:
            alteration = _alteration(resource, incremental)
            if isinstance(alteration, tuple):
                answers.append(alteration)
            else:
                answers.append(None)
                alterations.append(alteration)
        decided = iter(self._send(alterations, bool(request.validate_only)))
        responses = []
        for resource, answer in zip(request.resources, answers, strict=True):
            code, message = answer or next(decided)
            responses.append(
                build(
                    nested(response_type, "AlterConfigsResourceResponse"),
                    error_code=code,
                    error_message=message,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, responses=tuple(responses))

    def _send(
        self, alterations: Sequence[pb.TopicConfigAlteration], validate_only: bool
    ) -> list[KafkaError]:
        if not alterations:
            return []
        try:
            response = self._controller.call(
                "AlterTopicConfigs",
                pb.AlterTopicConfigsRequest(topics=alterations, validate_only=validate_only),
                pb.AlterTopicConfigsResponse,
            )
        except TieredError as e:
            return [kafka_error(e)] * len(alterations)
        error = error_from_proto(response.error)
        if error is not None or len(response.results) != len(alterations):
            return [kafka_error(error)] * len(alterations)
        return [kafka_error(error_from_proto(r.error)) for r in response.results]


def _alteration(resource: Any, incremental: bool) -> pb.TopicConfigAlteration | KafkaError:
    """The controller's request for one resource, or the error that rejects it here."""
    resource_type = int(resource.resource_type)
    if resource_type == ResourceType.BROKER:
        return _invalid(
            "broker configs are static (the broker's properties file) and cannot be altered"
        )
    if resource_type != ResourceType.TOPIC:
        return _invalid(f"resource type {resource_type} cannot be altered; valid: 2 (TOPIC)")
    configs = []
    for config in resource.configs:
        operation = int(config.config_operation) if incremental else ConfigOperation.SET.value
        if operation not in {o.value for o in ConfigOperation}:
            return _invalid(
                f"config operation {operation} for {config.name} is not valid; valid: 0 (SET), "
                f"1 (DELETE), 2 (APPEND), 3 (SUBTRACT)"
            )
        if config.name in READ_ONLY_TOPIC_KEYS:
            return KafkaErrorCode.invalid_config, (
                f"{config.name} is read-only: it follows remote.storage.enable; valid: the topic "
                f"configs DescribeConfigs lists as not read-only"
            )
        if config.value is None and operation != ConfigOperation.DELETE.value:
            return _invalid(f"{config.name} has a null value; valid: a string value")
        configs.append(
            pb.ConfigAlteration(
                name=config.name,
                operation=f"CONFIG_OPERATION_{ConfigOperation(operation).name}",
                value=config.value or "",
            )
        )
    return pb.TopicConfigAlteration(
        topic=resource.resource_name, replace=not incremental, configs=configs
    )


def _entry(response_type: type[Any], entry: ConfigDescription, include_synonyms: bool) -> Any:
    synonyms: tuple[Any, ...] = ()
    if include_synonyms:
        synonyms = (
            build(
                nested(response_type, "DescribeConfigsSynonym"),
                name=entry.name,
                value=entry.value,
                source=int(entry.source),
            ),
        )
    return build(
        nested(response_type, "DescribeConfigsResourceResult"),
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        is_default=entry.is_default,
        config_source=int(entry.source),
        is_sensitive=entry.is_sensitive,
        synonyms=synonyms,
        config_type=int(entry.config_type),
        documentation=None,
    )
