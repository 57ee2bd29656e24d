"""Admin requests and their errors, counted at the gRPC edge: one server interceptor sees every
AdminService call (from the CLIs, and from brokers forwarding Kafka clients' admin requests) and
its answer, so no servicer method has to remember to count.

Errors travel inside responses (``tiered.rpc.status``): a response's error fields, per topic or
for the whole request, are found once per response type from its descriptor. A call aborted with
a gRPC status counts as INVALID_REQUEST (INVALID_ARGUMENT: a malformed request) or
UNKNOWN_SERVER_ERROR (anything else).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from controller.metrics import ControllerMetrics
from tiered.errors import ErrorCode
from tiered.rpc.v1 import broker_pb2

ADMIN_SERVICE = "/tiered.v1.AdminService/"

if TYPE_CHECKING:  # generic in the type stubs only
    ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    ServerInterceptor = grpc.ServerInterceptor

# A path from a response to its error fields: each step a field, the last one an Error.
ErrorPath = tuple[FieldDescriptor, ...]


def error_paths(descriptor: Descriptor) -> list[ErrorPath]:
    """Every path from a message type to an ``Error`` field (through nested and repeated
    messages; a type met again on the way is not entered twice)."""
    error = broker_pb2.Error.DESCRIPTOR.full_name
    paths: list[ErrorPath] = []

    def walk(message: Descriptor, prefix: ErrorPath, seen: frozenset[str]) -> None:
        for field in message.fields:
            kind = field.message_type
            if kind is None or kind.full_name in seen:
                continue
            if kind.full_name == error:
                paths.append((*prefix, field))
            else:
                walk(kind, (*prefix, field), seen | {kind.full_name})

    walk(descriptor, (), frozenset({descriptor.full_name}))
    return paths


def error_names(response: Message, paths: list[ErrorPath]) -> Counter[str]:
    """How often each error other than NONE appears in ``response``."""
    found: Counter[str] = Counter()

    def visit(message: Message, path: ErrorPath) -> None:
        field, rest = path[0], path[1:]
        if field.is_repeated:
            values = list(getattr(message, field.name))
        elif message.HasField(field.name):
            values = [getattr(message, field.name)]
        else:
            return
        for value in values:
            if rest:
                visit(value, rest)
            elif value.code != 0:
                found[value.name or ErrorCode.UNKNOWN_SERVER_ERROR.name] += 1

    for path in paths:
        visit(response, path)
    return found


class AdminRequestMetrics(ServerInterceptor):
    """Counts every AdminService call by request name and the errors of its answer."""

    def __init__(self, metrics: ControllerMetrics) -> None:
        self._metrics = metrics
        self._counted: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = handler_call_details.method
        handler = continuation(handler_call_details)
        if handler is None or not method.startswith(ADMIN_SERVICE) or handler.unary_unary is None:
            return handler
        counted = self._counted.get(method)
        if counted is None:
            counted = self._counted[method] = self._counting(method, handler)
        return counted

    def _counting(
        self, method: str, handler: grpc.RpcMethodHandler[Any, Any]
    ) -> grpc.RpcMethodHandler[Any, Any]:
        request_name = method.removeprefix(ADMIN_SERVICE)
        behaviour = handler.unary_unary
        assert behaviour is not None
        paths: list[ErrorPath] | None = None
        metrics = self._metrics

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            nonlocal paths
            try:
                response = behaviour(request, context)
            except BaseException:
                status = context.code()  # type: ignore[attr-defined]
                metrics.admin_answered(
                    request_name,
                    {
                        ErrorCode.INVALID_REQUEST.name
                        if status is grpc.StatusCode.INVALID_ARGUMENT
                        else ErrorCode.UNKNOWN_SERVER_ERROR.name: 1
                    },
                )
                raise
            if paths is None:
                paths = error_paths(response.DESCRIPTOR)
            metrics.admin_answered(request_name, error_names(response, paths))
            return response

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
