"""AdminService calls from a broker to the active controller, as this broker knows it (KRaft:
the controller it registered with; ZooKeeper: the one ``/controller`` names).

``ControllerAdmin`` is the client: ``forward`` makes one attempt and answers NOT_CONTROLLER
itself when no controller is known or reachable; ``call`` retries that until a deadline, for the
broker's own requests (the Kafka listener's admin APIs). ``AdminForwarder`` is AdminService on a
broker: every call is forwarded once, so that ``--bootstrap-server`` may name brokers; a
NOT_CONTROLLER answer sends the CLI's client on to its next address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from tiered.errors import ErrorCode, TieredError
from tiered.retry import RetryPolicy
from tiered.retry_policies import CONTROLLER_FORWARD_RETRY
from tiered.rpc.channels import ChannelCache
from tiered.rpc.status import error_from_rpc, error_to_proto
from tiered.rpc.v1 import broker_pb2
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.forwarding import forwarded, forwarding_for
from tiered.security.grpc_context import grpc_request_context

__all__ = ["AdminForwarder", "ControllerAdmin", "call_per_topic"]

R = TypeVar("R", bound=Message)
# The responses that answer topic by topic, each a TopicResult.
PerTopic = TypeVar(
    "PerTopic", pb.CreateTopicsResponse, pb.DeleteTopicsResponse, pb.CreatePartitionsResponse
)

_METHODS = {
    "CreateTopics": pb.CreateTopicsResponse,
    "DeleteTopics": pb.DeleteTopicsResponse,
    "CreatePartitions": pb.CreatePartitionsResponse,
    "DescribeTopics": pb.DescribeTopicsResponse,
    "DescribeConfigs": pb.DescribeConfigsResponse,
    "AlterConfigs": pb.AlterConfigsResponse,
    "IncrementalAlterConfigs": pb.AlterConfigsResponse,
    "DescribeCluster": pb.DescribeClusterResponse,
    "DescribeMetadata": pb.DescribeMetadataResponse,
    "AlterTopicConfigs": pb.AlterTopicConfigsResponse,
    "AlterUserScramCredentials": pb.AlterUserScramCredentialsResponse,
    "DescribeUserScramCredentials": pb.DescribeUserScramCredentialsResponse,
    "CreateAcls": pb.CreateAclsResponse,
    "DescribeAcls": pb.DescribeAclsResponse,
    "DeleteAcls": pb.DeleteAclsResponse,
    "VerifyRemoteStorage": pb.VerifyRemoteStorageResponse,
    "ScrubRemoteStorage": pb.ScrubRemoteStorageResponse,
}
# Calls that take longer than an admin call: a verify reads every finished segment's objects, a
# scrub lists the whole root.
_FORWARD_TIMEOUTS_S = {"VerifyRemoteStorage": 3600.0, "ScrubRemoteStorage": 3600.0}
# A DescribeMetadata answer for 100k topics is several MB: above gRPC's 4 MiB default.
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 256 * 1024 * 1024)]


def _not_controller(response_type: Any, message: str) -> Any:
    error = broker_pb2.Error(
        code=int(ErrorCode.NOT_CONTROLLER), name=ErrorCode.NOT_CONTROLLER.name, message=message
    )
    if response_type in (
        pb.CreateTopicsResponse,
        pb.DeleteTopicsResponse,
        pb.CreatePartitionsResponse,
    ):
        return response_type(results=[pb.TopicResult(error=error)])
    if response_type is pb.DescribeTopicsResponse:
        return response_type(topics=[pb.TopicDescription(error=error)])
    return response_type(error=error)


def _is_not_controller(response: Any) -> bool:
    if isinstance(getattr(response, "error", None), broker_pb2.Error):
        return bool(response.error.code == ErrorCode.NOT_CONTROLLER)
    items = [*getattr(response, "results", ()), *getattr(response, "topics", ())]
    return any(item.error.code == ErrorCode.NOT_CONTROLLER for item in items)


class _ControllerUnknownError(Exception):
    def __init__(self, response: Any) -> None:
        super().__init__("no active controller")
        self.response = response


class ControllerAdmin:
    """AdminService calls to the active controller. Thread-safe; ``close()`` when done."""

    def __init__(
        self,
        controller_endpoint: Callable[[], str | None],
        timeout_s: float = 60.0,
        retry: RetryPolicy = CONTROLLER_FORWARD_RETRY,
        credentials: grpc.ChannelCredentials | None = None,  # TLS to the controllers
    ) -> None:
        self._controller_endpoint = controller_endpoint
        self._timeout_s = timeout_s
        self._retry = retry
        self._stubs = ChannelCache(
            pb_grpc.AdminServiceStub, options=_CHANNEL_OPTIONS, credentials=credentials
        )

    def forward(self, method: str, request: Message, timeout_s: float | None = None) -> Any:
        """One attempt: the controller's response, or a NOT_CONTROLLER response when this
        broker knows no controller or it is unavailable. Raises ``grpc.RpcError`` for any other
        failed RPC. Inside ``forwarding_for(client)``, the call names that client, whom the
        controller then judges it as."""
        endpoint = self._controller_endpoint()
        if endpoint is None:
            return _not_controller(
                _METHODS[method], "this broker does not know the active controller yet"
            )
        try:
            return getattr(self._stubs.get(endpoint), method)(
                request, timeout=timeout_s or self._timeout_s, metadata=forwarded()
            )
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            self._stubs.forget(endpoint)
            return _not_controller(
                _METHODS[method], f"the controller at {endpoint} is unavailable: {e.details()}"
            )

    def call(
        self, method: str, request: Message, response_type: type[R], waits_s: float = 0.0
    ) -> R:
        """``forward``, retried while the answer is NOT_CONTROLLER (an election, or a broker
        that has not learnt the controller yet) until the retry policy gives up; then that
        answer is returned. ``waits_s``: how long the controller may hold the call on purpose
        (a create's wait for hosting), added to the RPC's deadline. Raises ``TieredError`` for
        a failed RPC."""
        timeout_s = self._timeout_s + waits_s

        def attempt() -> R:
            try:
                response = self.forward(method, request, timeout_s)
            except grpc.RpcError as e:
                raise error_from_rpc(e, f"{method} to the controller", timeout_s) from e
            if _is_not_controller(response):
                raise _ControllerUnknownError(response)
            if not isinstance(response, response_type):
                raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{method}: bad response type")
            return response

        try:
            return self._retry(attempt, retry_on=_ControllerUnknownError)
        except _ControllerUnknownError as e:
            answer: R = e.response
            return answer

    def close(self) -> None:
        self._stubs.close()


def call_per_topic(
    controller: ControllerAdmin,
    method: str,
    request: Message,
    response_type: type[PerTopic],
    topics: int,
    waits_s: float = 0.0,
) -> list[pb.TopicResult]:
    """``controller.call`` of a method answered topic by topic (CreateTopics, DeleteTopics,
    CreatePartitions): the ``topics`` results in request order. A failed call, or a refusal
    answered once for all of them (NOT_CONTROLLER), is every topic's result."""
    if not topics:
        return []
    try:
        response = controller.call(method, request, response_type, waits_s)
    except TieredError as e:
        return [pb.TopicResult(error=error_to_proto(e))] * topics
    results = list(response.results)
    if len(results) != topics:
        return [results[0] if results else pb.TopicResult(error=error_to_proto(None))] * topics
    return results


class AdminForwarder(pb_grpc.AdminServiceServicer):
    def __init__(self, controller: ControllerAdmin) -> None:
        self._controller = controller

    def _forward(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        """Forwarded as the caller: the controller judges the CLI, not this broker."""
        try:
            with forwarding_for(grpc_request_context(context)):
                return self._controller.forward(method, request, _FORWARD_TIMEOUTS_S.get(method))
        except grpc.RpcError as e:
            context.abort(e.code(), e.details() or "")
        raise AssertionError("unreachable")


def _forwarding(method: str) -> Callable[[AdminForwarder, Any, grpc.ServicerContext], Any]:
    def forward(self: AdminForwarder, request: Any, context: grpc.ServicerContext) -> Any:
        return self._forward(method, request, context)

    forward.__name__ = method
    return forward


for _method in _METHODS:
    setattr(AdminForwarder, _method, _forwarding(_method))
