"""The one place where errors cross the gRPC edge, both ways.

Servicers (``handle``): domain errors (``TieredError``) come back inside the response as an
``Error`` with Kafka's code and name, except the authorizer's denials, which are the status
PERMISSION_DENIED (details ``TOPIC_AUTHORIZATION_FAILED: ...`` or
``CLUSTER_AUTHORIZATION_FAILED: ...``); a malformed request (ValueError, TypeError) is
INVALID_ARGUMENT; anything unexpected is logged and INTERNAL.

Clients: an ``Error`` in a response becomes a ``TieredError`` again (``error_from_proto``), and so
does a failed RPC's status (``error_from_rpc``).

Every error a response carries is made here, so a server interceptor counts them while a call is
answered (``counting_errors``): O(1) per error, nothing per success, however large the response.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TypeVar, cast

import grpc

from tiered.errors import AUTHORIZATION_FAILURES, ErrorCode, TieredError
from tiered.rpc.v1 import broker_pb2 as pb

log = logging.getLogger(__name__)

R = TypeVar("R")

# The errors put into responses by the call this thread is answering, while one counts them.
_counted_errors: ContextVar[Counter[str] | None] = ContextVar("counted_errors", default=None)


@contextlib.contextmanager
def counting_errors() -> Iterator[Counter[str]]:
    """Counts, by name, the errors ``error_to_proto`` makes in this thread until the block ends
    (a gRPC servicer answers a call on one thread)."""
    counted: Counter[str] = Counter()
    token = _counted_errors.set(counted)
    try:
        yield counted
    finally:
        _counted_errors.reset(token)


def error_to_proto(error: TieredError | None) -> pb.Error:
    if error is None:
        return pb.Error(code=0, name="NONE")
    counted = _counted_errors.get()
    if counted is not None:
        counted[error.code.name] += 1
    return pb.Error(code=int(error.code), name=error.code.name, message=error.message)


def error_from_proto(error: pb.Error) -> TieredError | None:
    """None for NONE; a code this client does not know is UNKNOWN_SERVER_ERROR naming it."""
    if error.code == 0:
        return None
    try:
        code = ErrorCode(error.code)
    except ValueError:
        label = error.name or "UNKNOWN"
        return TieredError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"{label} ({error.code}): {error.message}"
        )
    return TieredError(code, error.message or "(no details)")


# Any other status is UNKNOWN_SERVER_ERROR naming it.
_CLIENT_CODES = {
    grpc.StatusCode.PERMISSION_DENIED: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    grpc.StatusCode.INVALID_ARGUMENT: ErrorCode.INVALID_REQUEST,
    grpc.StatusCode.UNAVAILABLE: ErrorCode.BROKER_NOT_AVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: ErrorCode.REQUEST_TIMED_OUT,
}


def error_from_rpc(
    e: grpc.RpcError, what: str, timeout_s: float, *, name_call_if_invalid: bool = True
) -> TieredError:
    """The ``TieredError`` a client raises for an RPC that failed with a gRPC status (returned,
    not raised). ``what`` names the call (``"Produce on t-0 at broker 1 (h:9092)"``) and starts
    the message: INVALID_ARGUMENT is INVALID_REQUEST in the servicer's words (without the
    ``INVALID_REQUEST:`` that ``handle`` put in front; ``name_call_if_invalid=False`` leaves out
    ``what`` too, for a request that is the operator's own), PERMISSION_DENIED is the denial its
    details name (CLUSTER_AUTHORIZATION_FAILED when they name none), UNAVAILABLE is BROKER_NOT_AVAILABLE,
    DEADLINE_EXCEEDED is REQUEST_TIMED_OUT after ``timeout_s``, and any other status is
    UNKNOWN_SERVER_ERROR naming it."""
    call = cast(grpc.Call, e)
    status = call.code()
    details = call.details() or ""
    code = _CLIENT_CODES.get(status, ErrorCode.UNKNOWN_SERVER_ERROR)
    if code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        named, sep, told = details.partition(":")
        denial = next((c for c in AUTHORIZATION_FAILURES if c.name == named.strip()), None)
        if denial is not None and sep:
            return TieredError(denial, told.strip())
        return TieredError(code, f"{what}: {details}")
    if code is ErrorCode.INVALID_REQUEST:
        told = details.removeprefix(f"{code.name}:").strip()
        return TieredError(code, f"{what}: {told}" if name_call_if_invalid else told)
    if code is ErrorCode.BROKER_NOT_AVAILABLE:
        return TieredError(code, f"{what}: unavailable: {details}")
    if code is ErrorCode.REQUEST_TIMED_OUT:
        return TieredError(code, f"{what}: no answer within {timeout_s:g}s")
    name = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
    return TieredError(code, f"{what}: {name}: {details}")


def handle(
    context: grpc.ServicerContext, call: Callable[[], R], on_error: Callable[[TieredError], R]
) -> R:
    try:
        return call()
    except TieredError as e:
        if e.code in AUTHORIZATION_FAILURES:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{e.code.name}: {e.message}")
        return on_error(e)
    except (ValueError, TypeError) as e:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"INVALID_REQUEST: {e}")
    except Exception as e:
        log.exception("request failed")
        context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
    raise AssertionError("unreachable: abort raises")
