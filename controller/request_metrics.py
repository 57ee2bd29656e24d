"""Admin requests and their errors, counted at the gRPC edge: one server interceptor sees every
AdminService call (from the CLIs, and from brokers forwarding Kafka clients' admin requests) and
how it was answered, so no servicer method has to remember to count.

Errors travel inside responses, each made by ``tiered.rpc.status.error_to_proto``, which tells
the interceptor (``counting_errors``) while the call is answered. A call aborted with a gRPC
status counts as INVALID_REQUEST (INVALID_ARGUMENT: a malformed request) or UNKNOWN_SERVER_ERROR
(anything else).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from controller.metrics import ControllerMetrics
from tiered.errors import ErrorCode
from tiered.rpc.status import counting_errors

ADMIN_SERVICE = "/tiered.v1.AdminService/"

if TYPE_CHECKING:  # generic in the type stubs only
    ServerInterceptor = grpc.ServerInterceptor[Any, Any]
else:
    ServerInterceptor = grpc.ServerInterceptor


def aborted_as(status: grpc.StatusCode | None) -> str:
    """The error name a call aborted with ``status`` counts as."""
    if status is grpc.StatusCode.INVALID_ARGUMENT:
        return ErrorCode.INVALID_REQUEST.name
    return ErrorCode.UNKNOWN_SERVER_ERROR.name


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
        metrics = self._metrics

        def call(request: Any, context: grpc.ServicerContext) -> Any:
            with counting_errors() as errors:
                try:
                    return behaviour(request, context)
                except BaseException:
                    errors[aborted_as(context.code())] += 1  # type: ignore[attr-defined]
                    raise
                finally:
                    metrics.admin_answered(request_name, errors)

        return grpc.unary_unary_rpc_method_handler(
            call,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
