"""The client side of tiered/rpc/status.py: a failed RPC's status and an ``Error`` in a response
become TieredErrors."""

from __future__ import annotations

import grpc
import pytest

from tiered.errors import ErrorCode
from tiered.rpc.status import error_from_proto, error_from_rpc
from tiered.rpc.v1 import broker_pb2

WHAT = "Fetch on t-0 at broker 1 (h:9092)"


class FailedCall(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """What a stub raises: an RpcError that is also the Call, with its status."""

    def __init__(self, code: grpc.StatusCode, details: str | None) -> None:
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str | None:
        return self._details

    def initial_metadata(self) -> None:
        return None

    def trailing_metadata(self) -> None:
        return None

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: object) -> bool:
        return False


@pytest.mark.parametrize(
    ("status", "details", "code", "message"),
    [
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST: max_bytes must be positive",
            ErrorCode.INVALID_REQUEST,
            f"{WHAT}: max_bytes must be positive",  # the servicer's prefix is not doubled
        ),
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST:no space",
            ErrorCode.INVALID_REQUEST,
            f"{WHAT}: no space",
        ),
        (
            grpc.StatusCode.UNAVAILABLE,
            "failed to connect",
            ErrorCode.BROKER_NOT_AVAILABLE,
            f"{WHAT}: unavailable: failed to connect",
        ),
        (
            grpc.StatusCode.DEADLINE_EXCEEDED,
            "Deadline Exceeded",
            ErrorCode.REQUEST_TIMED_OUT,
            f"{WHAT}: no answer within 2.5s",
        ),
        (
            grpc.StatusCode.PERMISSION_DENIED,
            "needs ClusterAction",
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{WHAT}: needs ClusterAction",
        ),
        (
            grpc.StatusCode.PERMISSION_DENIED,
            "TOPIC_AUTHORIZATION_FAILED: User:a from h is not authorized to Delete topic 't'",
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "User:a from h is not authorized to Delete topic 't'",
        ),
        (
            grpc.StatusCode.INTERNAL,
            None,
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"{WHAT}: INTERNAL: ",
        ),
    ],
)
def test_error_from_rpc_maps_each_status(
    status: grpc.StatusCode, details: str | None, code: ErrorCode, message: str
) -> None:
    error = error_from_rpc(FailedCall(status, details), WHAT, 2.5)
    assert (error.code, error.message) == (code, message)


def test_an_operators_own_invalid_request_is_told_in_the_servicers_words() -> None:
    failed = FailedCall(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST: name must not be empty")
    error = error_from_rpc(failed, "CreateTopics to h:9093", 30, name_call_if_invalid=False)
    assert str(error) == "INVALID_REQUEST: name must not be empty"
    # Only INVALID_REQUEST leaves the call out.
    unavailable = FailedCall(grpc.StatusCode.UNAVAILABLE, "down")
    error = error_from_rpc(unavailable, "CreateTopics to h:9093", 30, name_call_if_invalid=False)
    assert error.message == "CreateTopics to h:9093: unavailable: down"


def test_error_from_proto() -> None:
    assert error_from_proto(broker_pb2.Error(code=0, name="NONE")) is None
    known = error_from_proto(broker_pb2.Error(code=41, name="NOT_CONTROLLER", message="standby"))
    assert known is not None and (known.code, known.message) == (
        ErrorCode.NOT_CONTROLLER,
        "standby",
    )
    bare = error_from_proto(broker_pb2.Error(code=41, name="NOT_CONTROLLER"))
    assert bare is not None and bare.message == "(no details)"
    unknown = error_from_proto(broker_pb2.Error(code=999, name="NEWER_ERROR", message="hm"))
    assert unknown is not None
    assert (unknown.code, unknown.message) == (
        ErrorCode.UNKNOWN_SERVER_ERROR,
        "NEWER_ERROR (999): hm",
    )
