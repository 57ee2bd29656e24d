"""FindCoordinator: the broker leading a group's partition of ``__consumer_offsets``.

Key type 0 (groups; one key before v4, a batch of keys from v4): Describe on the group, else
GROUP_AUTHORIZATION_FAILED. The internal topic is created through the controller on the first
request that needs it (as Kafka's broker does), and the answer then names the new partition's
leader; a leader that is not live (or has no endpoint on the request's listener) is
COORDINATOR_NOT_AVAILABLE, as is a controller that cannot be reached: clients retry. Key type 1
(transactions) is not served: COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from broker.cluster_view import ClusterView
from broker.groups.placement import OffsetsTopic, partition_for
from broker.kafka.convert import NO_THROTTLE
from broker.listener.handler import RequestContext
from tiered.errors import TieredError
from tiered.kafka.messages import build, nested, response_type_for
from tiered.net import Listener
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType

__all__ = ["FindCoordinatorApi"]

_GROUP, _TRANSACTION = 0, 1  # key types

Answer = tuple[ErrorCode, str | None, int, Listener | None]


class FindCoordinatorApi:
    def __init__(
        self, offsets_topic: OffsetsTopic, view: ClusterView, access: AccessControl
    ) -> None:
        self._topic = offsets_topic
        self._view = view
        self._access = access

    def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        response_type = response_type_for(request)
        key_type = int(getattr(request, "key_type", _GROUP))
        keys = (
            list(request.coordinator_keys)
            if hasattr(request, "coordinator_keys")
            else [request.key]
        )
        answers = self._answers(key_type, keys, context)
        if not hasattr(request, "coordinator_keys"):  # v0 to v3: one key
            return build(response_type, throttle_time=NO_THROTTLE, **_fields(answers[0]))
        coordinator_type = nested(response_type, "Coordinator")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                build(coordinator_type, key=key, **_fields(answer))
                for key, answer in zip(keys, answers, strict=True)
            ),
        )

    def _answers(self, key_type: int, keys: list[str], context: RequestContext) -> list[Answer]:
        if key_type == _TRANSACTION:
            unserved: Answer = (
                ErrorCode.coordinator_not_available,
                "transactions are not served",
                -1,
                None,
            )
            return [unserved] * len(keys)
        if key_type != _GROUP:
            return [
                (ErrorCode.invalid_request, f"key type {key_type}: valid: 0, 1", -1, None)
            ] * len(keys)
        allowed = [
            self._access.allowed(context.requester, AclOperation.DESCRIBE, ResourceType.GROUP, k)
            for k in keys
        ]
        denied: Answer = (ErrorCode.group_authorization_failed, None, -1, None)
        if not any(allowed):
            return [denied] * len(keys)
        placement = self._topic.placement(create=True)
        if isinstance(placement, TieredError):
            unavailable: Answer = (
                ErrorCode.coordinator_not_available,
                f"the group coordinators are not known: {placement.message}",
                -1,
                None,
            )
            return [unavailable if ok else denied for ok in allowed]
        try:
            live = self._view.topics([]).brokers(context.listener)
        except TieredError as e:
            live = {}
            reason = e.message
        else:
            reason = "its broker is not live"
        answers: list[Answer] = []
        for key, ok in zip(keys, allowed, strict=True):
            if not ok:
                answers.append(denied)
                continue
            index = partition_for(key, placement.partitions)
            leader = placement.leader(index)
            endpoint = live.get(leader)
            answers.append(
                (ErrorCode.none, None, leader, endpoint)
                if endpoint is not None
                else (
                    ErrorCode.coordinator_not_available,
                    f"__consumer_offsets partition {index} is not available: {reason}",
                    -1,
                    None,
                )
            )
        return answers


def _fields(answer: Answer) -> dict[str, Any]:
    code, message, node_id, endpoint = answer
    return {
        "error_code": code,
        "error_message": message,
        "node_id": node_id if endpoint is not None else -1,
        "host": endpoint.host if endpoint is not None else "",
        "port": endpoint.port if endpoint is not None else -1,
    }
