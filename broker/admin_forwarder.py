"""AdminService on a broker: every call is forwarded to the active controller, so that
``--bootstrap-server`` may name brokers. Without a known controller it answers NOT_CONTROLLER,
which sends the client on to its next address."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from tiered.errors import ErrorCode
from tiered.rpc.v1 import broker_pb2
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc

_METHODS = {
    "CreateTopics": pb.CreateTopicsResponse,
    "DeleteTopics": pb.DeleteTopicsResponse,
    "DescribeTopics": pb.DescribeTopicsResponse,
    "DescribeConfigs": pb.DescribeConfigsResponse,
    "AlterConfigs": pb.AlterConfigsResponse,
    "IncrementalAlterConfigs": pb.AlterConfigsResponse,
    "DescribeCluster": pb.DescribeClusterResponse,
}


def _not_controller(response_type: Any) -> Any:
    error = broker_pb2.Error(
        code=int(ErrorCode.NOT_CONTROLLER),
        name=ErrorCode.NOT_CONTROLLER.name,
        message="this broker does not know the active controller yet",
    )
    if response_type in (pb.CreateTopicsResponse, pb.DeleteTopicsResponse):
        return response_type(results=[pb.TopicResult(error=error)])
    if response_type is pb.DescribeTopicsResponse:
        return response_type(topics=[pb.TopicDescription(error=error)])
    return response_type(error=error)


class AdminForwarder(pb_grpc.AdminServiceServicer):
    def __init__(self, controller_endpoint: Callable[[], str | None], timeout_s: float = 60.0):
        self._controller_endpoint = controller_endpoint
        self._timeout_s = timeout_s
        self._channel: grpc.Channel | None = None
        self._endpoint: str | None = None

    def _forward(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        endpoint = self._controller_endpoint()
        if endpoint is None:
            return _not_controller(_METHODS[method])
        if endpoint != self._endpoint or self._channel is None:
            self._channel = grpc.insecure_channel(endpoint)
            self._endpoint = endpoint
        stub = pb_grpc.AdminServiceStub(self._channel)  # type: ignore[no-untyped-call]
        try:
            return getattr(stub, method)(request, timeout=self._timeout_s)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                return _not_controller(_METHODS[method])
            context.abort(e.code(), e.details() or "")
        raise AssertionError("unreachable")


def _forwarding(method: str) -> Callable[[AdminForwarder, Any, grpc.ServicerContext], Any]:
    def forward(self: AdminForwarder, request: Any, context: grpc.ServicerContext) -> Any:
        return self._forward(method, request, context)

    forward.__name__ = method
    return forward


for _method in _METHODS:
    setattr(AdminForwarder, _method, _forwarding(_method))
