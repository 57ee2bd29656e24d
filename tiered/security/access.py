"""Authorization as a server's request paths use it: the check, the error a denial is, and the
audit line (logger ``tiered.audit``) of every audited check, allowed or denied.

A denial names the principal, the host, the operation and the resource:
``TOPIC_AUTHORIZATION_FAILED`` for a topic, ``GROUP_AUTHORIZATION_FAILED`` for a group,
``CLUSTER_AUTHORIZATION_FAILED`` for the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import grpc

from tiered.errors import ErrorCode, TieredError
from tiered.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from tiered.security.authorizer import StandardAuthorizer
from tiered.security.forwarding import judged_as
from tiered.security.grpc_context import grpc_request_context
from tiered.security.principal import RequestContext

__all__ = ["AUDIT_LOGGER", "AccessControl"]

AUDIT_LOGGER = "tiered.audit"
audit_log = logging.getLogger(AUDIT_LOGGER)


class AccessControl:
    """``authorizer``'s checks for one server. ``before_check`` runs first on every check (the
    controller's: NOT_CONTROLLER on a standby, whose image may lack ACLs, so that clients move
    on to the active controller rather than read a denial)."""

    def __init__(
        self, authorizer: StandardAuthorizer, before_check: Callable[[], object] = lambda: None
    ) -> None:
        self.authorizer = authorizer
        self._before_check = before_check

    def context_of(self, context: grpc.ServicerContext) -> RequestContext:
        """Who a gRPC call is judged as (a forwarded client's principal, from a caller that may
        forward: ``tiered.security.forwarding``); raises CLUSTER_AUTHORIZATION_FAILED."""
        return judged_as(
            grpc_request_context(context), context.invocation_metadata() or (), self.authorizer
        )

    def denial(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
        *,
        audit: bool = False,
    ) -> TieredError | None:
        """None when allowed, else the error to answer."""
        self._before_check()
        allowed = self.authorizer.authorize(context, operation, resource_type, name)
        if audit:
            audit_log.info(
                "principal=%s host=%s operation=%s resource=%s:%s result=%s",
                context.principal,
                context.client_host,
                operation.kafka_name,
                resource_type.kafka_name,
                name,
                "ALLOWED" if allowed else "DENIED",
            )
        if allowed:
            return None
        code, what = {
            ResourceType.CLUSTER: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "the cluster"),
            ResourceType.GROUP: (ErrorCode.GROUP_AUTHORIZATION_FAILED, f"group {name!r}"),
        }.get(resource_type, (ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"topic {name!r}"))
        return TieredError(
            code,
            f"{context.principal} from {context.client_host} is not authorized to "
            f"{operation.kafka_name} {what}",
        )

    def allowed(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
    ) -> bool:
        return self.denial(context, operation, resource_type, name) is None

    def allowed_on_some(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether ``operation`` is allowed on some resource of ``resource_type``
        (``StandardAuthorizer.authorize_by_resource_type``)."""
        self._before_check()
        return self.authorizer.authorize_by_resource_type(context, operation, resource_type)

    def require(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
        *,
        audit: bool = False,
    ) -> None:
        """Raises the denial's ``TieredError``."""
        error = self.denial(context, operation, resource_type, name, audit=audit)
        if error is not None:
            raise error
