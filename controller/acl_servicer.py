"""AdminService's ACL methods (CreateAcls, DescribeAcls, DeleteAcls) and the authorization that
every AdminService method shares: ``Requester`` is one call's principal with the controller's
``AccessControl``. Changing ACLs needs Alter on the cluster, listing them Describe, as in Kafka;
each ACL change is audited."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from controller.acl_operations import AclOperations
from tiered.errors import TieredError
from tiered.rpc.status import error_to_proto, handle
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.security.access import AccessControl
from tiered.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from tiered.security.acl_serde import binding_from_proto, binding_to_proto, filter_from_proto
from tiered.security.principal import RequestContext

__all__ = ["AclMethods", "Requester"]

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER


@dataclass(frozen=True)
class Requester:
    """Who one call is judged as, and the checks its paths make (``AlterationAuthorizer`` for
    config changes)."""

    access: AccessControl
    context: RequestContext

    def denial(
        self, operation: AclOperation, resource_type: ResourceType, name: str, audit: bool = False
    ) -> TieredError | None:
        return self.access.denial(self.context, operation, resource_type, name, audit=audit)

    def may(self, operation: AclOperation, name: str) -> bool:
        """May this requester do ``operation`` on topic ``name``."""
        return self.denial(operation, TOPIC, name) is None

    def require_cluster(self, operation: AclOperation, audit: bool = False) -> None:
        self.access.require(self.context, operation, CLUSTER, CLUSTER_NAME, audit=audit)

    def may_alter_configs(self, topic: str) -> TieredError | None:
        return self.denial(AclOperation.ALTER_CONFIGS, TOPIC, topic, audit=True)

    def may_delete_remote_data(self, topic: str) -> TieredError | None:
        return self.denial(AclOperation.DELETE, TOPIC, topic, audit=True)

    def may_create(self, topic: str) -> TieredError | None:
        """Create on the cluster, or on the topic (Kafka's CreateTopics)."""
        if self.denial(AclOperation.CREATE, CLUSTER, CLUSTER_NAME) is None:
            return self.denial(AclOperation.CREATE, CLUSTER, CLUSTER_NAME, audit=True)
        return self.denial(AclOperation.CREATE, TOPIC, topic, audit=True)


class AclMethods:
    """Mixed into AdminServicer, which sets ``_access`` and ``_acls``."""

    _access: AccessControl
    _acls: AclOperations

    def requester(self, context: grpc.ServicerContext) -> Requester:
        return Requester(self._access, self._access.context_of(context))

    def CreateAcls(
        self, request: pb.CreateAclsRequest, context: grpc.ServicerContext
    ) -> pb.CreateAclsResponse:
        def call() -> pb.CreateAclsResponse:
            self.requester(context).require_cluster(AclOperation.ALTER, audit=True)
            bindings = [binding_from_proto(b) for b in request.creations]
            results = self._acls.create_acls(bindings)
            return pb.CreateAclsResponse(
                error=error_to_proto(None),
                results=[pb.AclResult(error=error_to_proto(e)) for e in results],
            )

        return handle(context, call, lambda e: pb.CreateAclsResponse(error=error_to_proto(e)))

    def DescribeAcls(
        self, request: pb.DescribeAclsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeAclsResponse:
        def call() -> pb.DescribeAclsResponse:
            self.requester(context).require_cluster(AclOperation.DESCRIBE)
            found = self._acls.describe_acls(filter_from_proto(request.filter))
            return pb.DescribeAclsResponse(
                error=error_to_proto(None), acls=[binding_to_proto(b) for b in found]
            )

        return handle(context, call, lambda e: pb.DescribeAclsResponse(error=error_to_proto(e)))

    def DeleteAcls(
        self, request: pb.DeleteAclsRequest, context: grpc.ServicerContext
    ) -> pb.DeleteAclsResponse:
        def call() -> pb.DeleteAclsResponse:
            self.requester(context).require_cluster(AclOperation.ALTER, audit=True)
            filters = [filter_from_proto(f) for f in request.filters]
            deleted = self._acls.delete_acls(filters)
            return pb.DeleteAclsResponse(
                error=error_to_proto(None),
                results=[
                    pb.DeleteAclsFilterResult(
                        error=error_to_proto(None), deleted=[binding_to_proto(b) for b in mine]
                    )
                    for mine in deleted
                ],
            )

        return handle(context, call, lambda e: pb.DeleteAclsResponse(error=error_to_proto(e)))
