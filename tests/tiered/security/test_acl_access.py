"""The request paths' side of authorization: denials as errors, the audit line, the forwarded
principal believed only from ClusterAction (Kafka's envelope), and the gRPC edge's
PERMISSION_DENIED."""

from __future__ import annotations

import logging
import uuid
from unittest import mock

import grpc
import pytest

from tiered.errors import ErrorCode, TieredError
from tiered.rpc.status import handle
from tiered.security.access import AUDIT_LOGGER, AccessControl
from tiered.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.forwarding import FORWARDED_PRINCIPAL, forwarded, forwarding_for, judged_as
from tiered.security.principal import ANONYMOUS, KafkaPrincipal, RequestContext

BROKER = RequestContext(KafkaPrincipal("User", "broker"), "10.0.0.5", "GRPC")
ALICE = RequestContext(KafkaPrincipal("User", "alice"), "10.0.0.9", "PLAINTEXT")


def access(*bindings: AclBinding) -> AccessControl:
    index = AclIndex({uuid.uuid4(): b for b in bindings})
    return AccessControl(StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index))


def grant(principal: str, operation: AclOperation, name: str = CLUSTER_NAME) -> AclBinding:
    resource_type = ResourceType.CLUSTER if name == CLUSTER_NAME else ResourceType.TOPIC
    return AclBinding(
        ResourcePattern(resource_type, name),
        AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
    )


def test_denials_name_who_what_and_where_and_are_audited(caplog: pytest.LogCaptureFixture) -> None:
    control = access(grant("User:alice", AclOperation.READ, "t"))
    with caplog.at_level(logging.INFO, logger=AUDIT_LOGGER):
        error = control.denial(ALICE, AclOperation.DELETE, ResourceType.TOPIC, "t", audit=True)
        assert control.denial(ALICE, AclOperation.READ, ResourceType.TOPIC, "t", audit=True) is None
        control.denial(ALICE, AclOperation.READ, ResourceType.TOPIC, "t")  # not audited
    assert error is not None and error.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert error.message == "User:alice from 10.0.0.9 is not authorized to Delete topic 't'"
    cluster = control.denial(ALICE, AclOperation.ALTER, ResourceType.CLUSTER)
    assert cluster is not None and cluster.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [r.getMessage() for r in caplog.records] == [
        "principal=User:alice host=10.0.0.9 operation=Delete resource=Topic:t result=DENIED",
        "principal=User:alice host=10.0.0.9 operation=Read resource=Topic:t result=ALLOWED",
    ]


def test_a_check_runs_the_servers_precondition_first() -> None:
    def standby() -> None:
        raise TieredError(ErrorCode.NOT_CONTROLLER, "not active")

    control = AccessControl(
        StandardAuthorizer(AuthorizerConfig(enabled=True), AclIndex), before_check=standby
    )
    with pytest.raises(TieredError) as failure:
        control.require(ALICE, AclOperation.READ, ResourceType.TOPIC, "t")
    assert failure.value.code is ErrorCode.NOT_CONTROLLER


def test_a_forwarded_principal_is_believed_from_cluster_action_only() -> None:
    control = access(grant("User:broker", AclOperation.CLUSTER_ACTION))
    with forwarding_for(ALICE):
        metadata = forwarded()
    assert forwarded() == ()
    judged = judged_as(BROKER, metadata, control.authorizer)
    assert judged == ALICE
    assert judged_as(BROKER, (), control.authorizer) == BROKER
    with pytest.raises(TieredError) as failure:
        judged_as(ALICE, ((FORWARDED_PRINCIPAL, "User:broker"),), control.authorizer)
    assert failure.value.code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "may not forward" in failure.value.message


def test_without_an_authorizer_forwarding_is_believed() -> None:
    control = AccessControl(StandardAuthorizer(AuthorizerConfig(), AclIndex))
    anonymous = RequestContext(ANONYMOUS, "127.0.0.1", "GRPC")
    judged = judged_as(anonymous, ((FORWARDED_PRINCIPAL, "User:alice"),), control.authorizer)
    assert judged.principal == KafkaPrincipal("User", "alice")


def test_the_grpc_edge_answers_a_denial_permission_denied() -> None:
    context = mock.Mock()
    context.abort.side_effect = grpc.RpcError("aborted")

    def denied() -> None:
        raise TieredError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "no")

    with pytest.raises(grpc.RpcError):
        handle(context, denied, lambda e: None)
    context.abort.assert_called_once_with(
        grpc.StatusCode.PERMISSION_DENIED, "TOPIC_AUTHORIZATION_FAILED: no"
    )
