"""Who a forwarded request is from (Kafka's envelope, KIP-590): a broker that forwards a client's
admin request to the controller names the client's principal and host in the call's gRPC
metadata, and the controller judges the request as that client, but believes the metadata only
from a caller that holds ClusterAction on the cluster (a broker). Anybody else naming a principal
is refused: CLUSTER_AUTHORIZATION_FAILED."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

from tiered.errors import ErrorCode, TieredError
from tiered.security.acl import AclOperation, ResourceType
from tiered.security.authorizer import StandardAuthorizer
from tiered.security.principal import KafkaPrincipal, RequestContext

__all__ = [
    "FORWARDED_HOST",
    "FORWARDED_LISTENER",
    "FORWARDED_PRINCIPAL",
    "forwarded",
    "forwarding_for",
    "judged_as",
]

FORWARDED_PRINCIPAL = "x-tiered-forwarded-principal"
FORWARDED_HOST = "x-tiered-forwarded-host"
FORWARDED_LISTENER = "x-tiered-forwarded-listener"


# The client whose request this thread is forwarding (a broker's Kafka or AdminService handler
# sets it around the handling; the controller client reads it for each call it makes).
_forwarding: ContextVar[RequestContext | None] = ContextVar("forwarding", default=None)


@contextlib.contextmanager
def forwarding_for(client: RequestContext) -> Iterator[None]:
    """Calls to the controller made in this block (this thread) carry ``client``."""
    token = _forwarding.set(client)
    try:
        yield
    finally:
        _forwarding.reset(token)


def forwarded() -> tuple[tuple[str, str], ...]:
    """The gRPC metadata naming the client being forwarded for (none for the broker's own
    requests, such as its metadata listing)."""
    client = _forwarding.get()
    if client is None:
        return ()
    return (
        (FORWARDED_PRINCIPAL, str(client.principal)),
        (FORWARDED_HOST, client.client_host),
        (FORWARDED_LISTENER, client.listener),
    )


def judged_as(
    caller: RequestContext,
    metadata: Iterable[tuple[str, str | bytes]],
    authorizer: StandardAuthorizer,
) -> RequestContext:
    """The context a call is judged as: the client it forwards when its caller may forward, else
    the caller itself. ``TieredError`` (CLUSTER_AUTHORIZATION_FAILED) for a caller without
    ClusterAction that names a principal, or for a principal that is not ``Type:Name``."""
    values = {key: str(value) for key, value in metadata}
    principal = values.get(FORWARDED_PRINCIPAL)
    if principal is None:
        return caller
    if not authorizer.authorize(caller, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
        raise TieredError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{caller.principal} from {caller.client_host} may not forward requests of other "
            "principals (it needs ClusterAction on the cluster)",
        )
    try:
        client = KafkaPrincipal.parse(principal)
    except ValueError as e:
        raise TieredError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, f"forwarded {e}") from None
    return RequestContext(
        client,
        values.get(FORWARDED_HOST, caller.client_host),
        values.get(FORWARDED_LISTENER, caller.listener),
    )
