"""CreateAcls, DescribeAcls and DeleteAcls, forwarded to the active controller as the client
(which needs Alter on the cluster to change ACLs, Describe to list them).

A creation or filter that is not valid (an unknown code, a binding Kafka refuses) is answered
INVALID_REQUEST on its own and goes no further; a refusal of the whole call (not authorized,
no controller) is every item's error.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.primitive import i8
from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin
from broker.kafka.convert import NO_THROTTLE, KafkaError, kafka_error
from broker.listener.handler import RequestContext
from tiered.errors import TieredError
from tiered.kafka.messages import build, nested, response_type_for
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.security.acl import AclBinding, PatternType, ResourcePattern
from tiered.security.acl_serde import (
    binding_from_proto,
    binding_to_proto,
    filter_from_proto,
    filter_to_proto,
)

__all__ = ["AclsApi"]


def _binding(creation: Any) -> AclBinding | KafkaError:
    try:
        return binding_from_proto(
            pb.AclBinding(
                resource_type=int(creation.resource_type),
                resource_name=creation.resource_name,
                pattern_type=int(getattr(creation, "resource_pattern_type", PatternType.LITERAL)),
                principal=creation.principal,
                host=creation.host,
                operation=int(creation.operation),
                permission_type=int(creation.permission_type),
            )
        )
    except ValueError as e:
        return KafkaErrorCode.invalid_request, str(e)


def _filter(item: Any) -> pb.AclBindingFilter | KafkaError:
    message = pb.AclBindingFilter(
        resource_type=int(item.resource_type_filter),
        pattern_type=int(getattr(item, "pattern_type_filter", PatternType.LITERAL)),
        operation=int(item.operation),
        permission_type=int(item.permission_type),
    )
    for field, value in (
        ("resource_name", item.resource_name_filter),
        ("principal", item.principal_filter),
        ("host", item.host_filter),
    ):
        if value is not None:
            setattr(message, field, value)
    try:
        return filter_to_proto(filter_from_proto(message))
    except ValueError as e:
        return KafkaErrorCode.invalid_request, str(e)


class AclsApi:
    def __init__(self, controller: ControllerAdmin) -> None:
        self._controller = controller

    def _call(self, method: str, request: Any, response_type: type[Any]) -> Any:
        """The controller's answer, or the TieredError of a failed call or of its error."""
        try:
            response = self._controller.call(method, request, response_type)
        except TieredError as e:
            return e
        return error_from_proto(response.error) or response

    def create_acls(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        answers: list[KafkaError | AclBinding] = [_binding(c) for c in request.creations]
        valid = [a for a in answers if isinstance(a, AclBinding)]
        outcome: Any = None
        if valid:
            outcome = self._call(
                "CreateAcls",
                pb.CreateAclsRequest(creations=[binding_to_proto(b) for b in valid]),
                pb.CreateAclsResponse,
            )
        created = iter(
            [] if isinstance(outcome, TieredError) or outcome is None else outcome.results
        )
        results = []
        for answer in answers:
            if isinstance(answer, tuple):
                error: KafkaError = answer
            elif isinstance(outcome, TieredError):
                error = kafka_error(outcome)
            else:
                error = kafka_error(error_from_proto(next(created).error))
            results.append(
                build(
                    nested(response_type, "AclCreationResult"),
                    error_code=error[0],
                    error_message=error[1],
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, results=tuple(results))

    def describe_acls(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        wanted = _filter(request)
        outcome: Any = (
            wanted
            if isinstance(wanted, tuple)
            else self._call(
                "DescribeAcls", pb.DescribeAclsRequest(filter=wanted), pb.DescribeAclsResponse
            )
        )
        error = outcome if isinstance(outcome, tuple) else None
        if isinstance(outcome, TieredError):
            error = kafka_error(outcome)
        resources: tuple[Any, ...] = ()
        if error is None:
            by_pattern: dict[ResourcePattern, list[AclBinding]] = defaultdict(list)
            for message in outcome.acls:
                binding = binding_from_proto(message)
                by_pattern[binding.pattern].append(binding)
            resources = tuple(
                _resource(response_type, pattern, bindings)
                for pattern, bindings in by_pattern.items()
            )
        code, message = error or (KafkaErrorCode.none, None)
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=code,
            error_message=message,
            resources=resources,
        )

    def delete_acls(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        answers = [_filter(f) for f in request.filters]
        valid = [a for a in answers if isinstance(a, pb.AclBindingFilter)]
        outcome: Any = None
        if valid:
            outcome = self._call(
                "DeleteAcls", pb.DeleteAclsRequest(filters=valid), pb.DeleteAclsResponse
            )
        deleted = iter(
            [] if isinstance(outcome, TieredError) or outcome is None else outcome.results
        )
        results = []
        for answer in answers:
            matching: tuple[Any, ...] = ()
            if isinstance(answer, tuple):
                error: KafkaError = answer
            elif isinstance(outcome, TieredError):
                error = kafka_error(outcome)
            else:
                result = next(deleted)
                error = kafka_error(error_from_proto(result.error))
                matching = tuple(
                    _matching(response_type, binding_from_proto(b)) for b in result.deleted
                )
            results.append(
                build(
                    nested(response_type, "DeleteAclsFilterResult"),
                    error_code=error[0],
                    error_message=error[1],
                    matching_acls=matching,
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, filter_results=tuple(results))


def _resource(
    response_type: type[Any], pattern: ResourcePattern, bindings: list[AclBinding]
) -> Any:
    description = nested(response_type, "AclDescription")
    return build(
        nested(response_type, "DescribeAclsResource"),
        resource_type=i8(int(pattern.resource_type)),
        resource_name=pattern.name,
        pattern_type=i8(int(pattern.pattern_type)),
        acls=tuple(
            build(
                description,
                principal=b.entry.principal,
                host=b.entry.host,
                operation=i8(int(b.entry.operation)),
                permission_type=i8(int(b.entry.permission_type)),
            )
            for b in bindings
        ),
    )


def _matching(response_type: type[Any], binding: AclBinding) -> Any:
    pattern, entry = binding.pattern, binding.entry
    return build(
        nested(response_type, "DeleteAclsMatchingAcl"),
        error_code=KafkaErrorCode.none,
        error_message=None,
        resource_type=i8(int(pattern.resource_type)),
        resource_name=pattern.name,
        pattern_type=i8(int(pattern.pattern_type)),
        principal=entry.principal,
        host=entry.host,
        operation=i8(int(entry.operation)),
        permission_type=i8(int(entry.permission_type)),
    )
