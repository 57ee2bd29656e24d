"""The one place where exceptions become gRPC responses or status codes, for every servicer.

Domain errors (``TieredError``) come back inside the response as an ``Error`` with Kafka's code
and name; a malformed request (ValueError, TypeError) is INVALID_ARGUMENT; anything unexpected is
logged and INTERNAL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import grpc

from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import broker_pb2 as pb

log = logging.getLogger(__name__)

R = TypeVar("R")


def error_to_proto(error: TieredError | None) -> pb.Error:
    if error is None:
        return pb.Error(code=0, name="NONE")
    return pb.Error(code=int(error.code), name=error.code.name, message=error.message)


def error_from_proto(error: pb.Error) -> TieredError | None:
    if error.code == 0:
        return None
    try:
        code = ErrorCode(error.code)
    except ValueError:
        code = ErrorCode.UNKNOWN_SERVER_ERROR
    return TieredError(code, error.message)


def handle(
    context: grpc.ServicerContext, call: Callable[[], R], on_error: Callable[[TieredError], R]
) -> R:
    try:
        return call()
    except TieredError as e:
        return on_error(e)
    except (ValueError, TypeError) as e:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"INVALID_REQUEST: {e}")
    except Exception as e:
        log.exception("request failed")
        context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")
    raise AssertionError("unreachable: abort raises")
