"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups and ListGroups on the wire: kio
requests of any served version in, the ``GroupCoordinator``'s answers out in that version.

What versions change, as Kafka's request classes handle it: JoinGroup v0 has no rebalance
timeout (the session timeout is used), v4+ asks new members for a second round with their id
(MEMBER_ID_REQUIRED), v5+ carries ``group.instance.id``, v7+ makes the protocol name nullable
(older versions get ""), v9+ may tell a returning static leader to skip assigning; SyncGroup v5+
must name the protocol type and name; LeaveGroup before v3 names one member and answers with its
error alone; ListGroups v4+ filters by state, v5+ by type (only ``classic`` groups exist here).

Authorization is Kafka's (``KafkaApis``): Read on the group for JoinGroup, SyncGroup, Heartbeat
and LeaveGroup, Describe on it for DescribeGroups; ListGroups lists every group to a principal
with Describe on the cluster and otherwise the groups it may describe. A denial is
GROUP_AUTHORIZATION_FAILED.

JoinGroup and SyncGroup answer with a Future (the member waits for the others or for the
leader's plan without holding a worker thread); the others answer at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from broker.groups.coordinator import GroupCoordinator
from broker.groups.group_messages import (
    DescribedGroup,
    JoinRequest,
    JoinResult,
    LeaveResult,
    LeavingMember,
    Protocol,
    SyncRequest,
    SyncResult,
)
from broker.groups.group_state import GroupState
from broker.kafka.convert import NO_THROTTLE, UNKNOWN_AUTHORIZED_OPERATIONS, duration_ms
from broker.listener.handler import HandlerResult, RequestContext
from tiered.kafka.messages import build, nested, response_type_for
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType

__all__ = ["GroupsApi"]

log = logging.getLogger(__name__)

_CLASSIC = "classic"  # ListGroups' group type (KIP-848 adds "consumer")
_GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE)
_R = TypeVar("_R")


def _then(
    source: Future[_R], answer: Callable[[_R], ResponsePayload]
) -> Future[ResponsePayload | None]:
    """A Future of ``answer(result)`` once ``source`` completes (cancelled with it)."""
    target: Future[ResponsePayload | None] = Future()

    def done(completed: Future[_R]) -> None:
        if completed.cancelled():
            target.cancel()
            return
        try:
            response = answer(completed.result())
        except Exception as e:  # a bug: the connection closes, as for a handler that raised
            log.exception("a group answer could not be built")
            with contextlib.suppress(InvalidStateError):
                target.set_exception(e)
            return
        with contextlib.suppress(InvalidStateError):  # cancelled by a stopping listener
            target.set_result(response)

    source.add_done_callback(done)
    return target


class GroupsApi:
    def __init__(self, coordinator: GroupCoordinator, access: AccessControl) -> None:
        self._coordinator = coordinator
        self._access = access

    def _may(self, context: RequestContext, operation: AclOperation, group_id: str) -> bool:
        return self._access.allowed(context.requester, operation, ResourceType.GROUP, group_id)

    # ------------------------------------------------------------------------- JoinGroup

    def join_group(self, request: Any, context: RequestContext) -> HandlerResult:
        response_type = response_type_for(request)
        version = context.api_version

        def answer(result: JoinResult) -> ResponsePayload:
            member_type = nested(response_type, "JoinGroupResponseMember")
            # Before v7 the name is not nullable; from v7 an unnamed protocol is null.
            protocol_name = result.protocol_name or ("" if version < 7 else None)
            response: ResponsePayload = build(
                response_type,
                throttle_time=NO_THROTTLE,
                error_code=result.error,
                generation_id=result.generation_id,
                protocol_type=result.protocol_type,
                protocol_name=protocol_name,
                leader=result.leader,
                skip_assignment=result.skip_assignment,
                member_id=result.member_id,
                members=tuple(
                    build(
                        member_type,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        metadata=m.metadata,
                    )
                    for m in result.members
                ),
            )
            return response

        group_id = request.group_id
        if not self._may(context, AclOperation.READ, group_id):
            return answer(JoinResult(ErrorCode.group_authorization_failed, request.member_id))
        session_timeout_ms = duration_ms(request.session_timeout)
        rebalance_timeout = getattr(request, "rebalance_timeout", None)
        join = JoinRequest(
            group_id=group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=(
                session_timeout_ms if rebalance_timeout is None else duration_ms(rebalance_timeout)
            ),
            protocol_type=request.protocol_type,
            protocols=tuple(Protocol(p.name, p.metadata) for p in request.protocols),
            client_id=context.client_id or "",
            client_host=f"/{context.client_host}",
            requires_known_member_id=version >= 4,
            supports_skip_assignment=version >= 9,
            reason=getattr(request, "reason", None),
        )
        return _then(self._coordinator.join(join), answer)

    # ------------------------------------------------------------------------- SyncGroup

    def sync_group(self, request: Any, context: RequestContext) -> HandlerResult:
        response_type = response_type_for(request)

        def answer(result: SyncResult) -> ResponsePayload:
            response: ResponsePayload = build(
                response_type,
                throttle_time=NO_THROTTLE,
                error_code=result.error,
                protocol_type=result.protocol_type,
                protocol_name=result.protocol_name,
                assignment=result.assignment,
            )
            return response

        if context.api_version >= 5 and (
            request.protocol_type is None or request.protocol_name is None
        ):
            return answer(SyncResult(ErrorCode.inconsistent_group_protocol))
        if not self._may(context, AclOperation.READ, request.group_id):
            return answer(SyncResult(ErrorCode.group_authorization_failed))
        sync = SyncRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            generation_id=int(request.generation_id),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
        )
        return _then(self._coordinator.sync(sync), answer)

    # ------------------------------------------------------------------------- Heartbeat

    def heartbeat(self, request: Any, context: RequestContext) -> ResponsePayload:
        if not self._may(context, AclOperation.READ, request.group_id):
            error = ErrorCode.group_authorization_failed
        else:
            error = self._coordinator.heartbeat(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                int(request.generation_id),
            )
        response: ResponsePayload = build(
            response_type_for(request), throttle_time=NO_THROTTLE, error_code=error
        )
        return response

    # ------------------------------------------------------------------------ LeaveGroup

    def leave_group(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        batched = context.api_version >= 3
        if batched:
            leaving = [
                LeavingMember(m.member_id, m.group_instance_id, getattr(m, "reason", None))
                for m in request.members
            ]
        else:
            leaving = [LeavingMember(request.member_id)]
        results: list[LeaveResult] = []
        if not self._may(context, AclOperation.READ, request.group_id):
            error = ErrorCode.group_authorization_failed
        else:
            error, results = self._coordinator.leave(request.group_id, leaving)
        if not batched:
            # One member, and its error is the answer's.
            if error is ErrorCode.none and results:
                error = results[0].error
            results = []
        member_type = nested(response_type, "MemberResponse") if batched else None
        response: ResponsePayload = build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            members=tuple(
                build(
                    member_type,
                    member_id=r.member_id,
                    group_instance_id=r.group_instance_id,
                    error_code=r.error,
                )
                for r in results
            )
            if member_type is not None
            else (),
        )
        return response

    # -------------------------------------------------------------------- DescribeGroups

    def describe_groups(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        group_type = nested(response_type, "DescribedGroup")
        member_type = nested(response_type, "DescribedGroupMember")
        with_operations = getattr(request, "include_authorized_operations", False)
        group_ids = list(request.groups)
        allowed = [g for g in group_ids if self._may(context, AclOperation.DESCRIBE, g)]
        found = {d.group_id: d for d in self._coordinator.describe(allowed)}

        def described(group_id: str) -> Any:
            d = found.get(group_id) or DescribedGroup(
                group_id, ErrorCode.group_authorization_failed, ""
            )
            operations = UNKNOWN_AUTHORIZED_OPERATIONS
            if with_operations and d.error is ErrorCode.none:
                operations = self._authorized_operations(context, group_id)
            return build(
                group_type,
                error_code=d.error,
                error_message=None,
                group_id=group_id,
                group_state=d.state,
                protocol_type=d.protocol_type,
                protocol_data=d.protocol_data,
                members=tuple(
                    build(
                        member_type,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in d.members
                ),
                authorized_operations=operations,
            )

        response: ResponsePayload = build(
            response_type,
            throttle_time=NO_THROTTLE,
            groups=tuple(described(g) for g in group_ids),
        )
        return response

    def _authorized_operations(self, context: RequestContext, group_id: str) -> int:
        """Kafka's bit field of the operations the principal may do on the group."""
        return sum(1 << op for op in _GROUP_OPERATIONS if self._may(context, op, group_id))

    # ------------------------------------------------------------------------ ListGroups

    def list_groups(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        listed_type = nested(response_type, "ListedGroup")
        names = getattr(request, "states_filter", ())
        states = [GroupState.parse(name) for name in names]
        types = {t.strip().lower() for t in getattr(request, "types_filter", ())}
        groups = []
        # An unknown state (or only other group types) is asked for: nothing matches it.
        if not (names and all(s is None for s in states)) and (not types or _CLASSIC in types):
            groups = self._coordinator.list_groups([s for s in states if s is not None])
        requester = context.requester
        if not self._access.allowed(requester, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            groups = [g for g in groups if self._may(context, AclOperation.DESCRIBE, g.group_id)]
        response: ResponsePayload = build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            groups=tuple(
                build(
                    listed_type,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=_CLASSIC,
                )
                for g in sorted(groups, key=lambda g: g.group_id)
            ),
        )
        return response
