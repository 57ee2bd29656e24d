"""The request context of a gRPC call, for the servicers' authorization checks."""

from __future__ import annotations

import grpc

from tiered.security.principal import ANONYMOUS, RequestContext

__all__ = ["GRPC_LISTENER", "grpc_request_context", "peer_host"]

GRPC_LISTENER = "GRPC"


def peer_host(peer: str) -> str:
    """The host of grpc's ``context.peer()`` (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    _, _, address = peer.partition(":")
    host, _, _ = address.rpartition(":")
    return host.strip("[]") or address


def grpc_request_context(context: grpc.ServicerContext) -> RequestContext:
    """Who made this call: on a channel without TLS client certificates, nobody in particular."""
    return RequestContext(ANONYMOUS, peer_host(context.peer()), GRPC_LISTENER)
