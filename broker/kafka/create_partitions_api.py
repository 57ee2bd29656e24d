"""CreatePartitions, forwarded to the active controller in one call (AdminService
CreatePartitions, the route ``tiered-topics --alter`` takes too), which judges it as the client
(Alter on each topic) and answers each topic on its own. A topic grown through this broker
refreshes its metadata at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import ControllerAdmin, call_per_topic
from broker.cluster_view import ClusterView
from broker.kafka.convert import NO_THROTTLE, KafkaError, duration_ms, kafka_error
from broker.listener.handler import RequestContext
from tiered.kafka.messages import build, nested, response_type_for
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = ["CreatePartitionsApi"]


class CreatePartitionsApi:
    def __init__(self, controller: ControllerAdmin, view: ClusterView) -> None:
        self._controller = controller
        self._view = view

    def create_partitions(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        growths = [_growth(topic) for topic in request.topics]
        validate_only = bool(request.validate_only)
        errors = self._grow(growths, validate_only, max(0, duration_ms(request.timeout)))
        if growths and not validate_only:
            self._view.invalidate()
        result_type = nested(response_type, "CreatePartitionsTopicResult")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            results=tuple(
                build(result_type, name=topic.name, error_code=code, error_message=message)
                for topic, (code, message) in zip(request.topics, errors, strict=True)
            ),
        )

    def _grow(
        self, growths: Sequence[pb.PartitionGrowth], validate_only: bool, timeout_ms: int
    ) -> list[KafkaError]:
        """Kafka's answer comes once the new partitions' leaders host them, or REQUEST_TIMED_OUT
        after ``timeout_ms`` (the partitions are added all the same)."""
        results = call_per_topic(
            self._controller,
            "CreatePartitions",
            pb.CreatePartitionsRequest(
                topics=growths, validate_only=validate_only, timeout_ms=timeout_ms
            ),
            pb.CreatePartitionsResponse,
            len(growths),
            waits_s=timeout_ms / 1000,
        )
        return [kafka_error(error_from_proto(r.error)) for r in results]


def _growth(topic: Any) -> pb.PartitionGrowth:
    growth = pb.PartitionGrowth(
        topic=topic.name, count=topic.count, has_assignments=topic.assignments is not None
    )
    for assignment in topic.assignments or ():
        growth.assignments.add(broker_ids=[int(b) for b in assignment.broker_ids])
    return growth
