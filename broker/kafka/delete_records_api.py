"""DeleteRecords: each partition's log start offset (its low watermark) rises to the offset asked
for, on the partition's leader (``DataPlane.delete_records``), as Kafka's
``KafkaApis.handleDeleteRecordsRequest`` and ``Partition.deleteRecordsOnLeader``.

Per partition, in Kafka's order: a topic the requester may not Delete is
TOPIC_AUTHORIZATION_FAILED, one that does not exist UNKNOWN_TOPIC_OR_PARTITION, a partition led by
another broker NOT_LEADER_OR_FOLLOWER (``partitions``); then -1 is the high watermark, a negative
offset or one past the high watermark OFFSET_OUT_OF_RANGE, a topic without
``cleanup.policy=delete`` POLICY_VIOLATION. Each answer carries the low watermark after the
deletion (-1 with an error). With one replica the new log start is reached when the leader's is
persisted, so nothing waits for the request's timeout.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.hosted import HostedPartition
from broker.kafka.convert import NO_THROTTLE, KafkaError
from broker.kafka.partitions import PartitionLookup, guarded
from broker.listener.handler import RequestContext
from tiered.kafka.messages import build, nested, response_type_for
from tiered.security.acl import AclOperation

__all__ = ["DeleteRecordsApi", "RecordDeleter"]

INVALID_LOW_WATERMARK = -1


class RecordDeleter(Protocol):
    def delete_records(self, topic_id: uuid.UUID, partition: int, offset: int) -> int: ...


class DeleteRecordsApi:
    def __init__(self, records: RecordDeleter, partitions: PartitionLookup) -> None:
        self._records = records
        self._partitions = partitions

    def delete_records(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        wanted = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
        resolved = self._partitions.resolve(wanted, context.requester, AclOperation.DELETE)
        partition_type = nested(response_type, "DeleteRecordsPartitionResult")

        def partition(name: str, asked: Any) -> Any:
            index = int(asked.partition_index)
            found = resolved[(name, index)]
            result = found if isinstance(found, tuple) else self._delete(found, int(asked.offset))
            if isinstance(result, tuple):
                code, low_watermark = result[0], INVALID_LOW_WATERMARK
            else:
                code, low_watermark = KafkaErrorCode.none, result
            return build(
                partition_type,
                partition_index=index,
                low_watermark=low_watermark,
                error_code=code,
            )

        response: ResponsePayload = build(
            response_type,
            throttle_time=NO_THROTTLE,
            topics=tuple(
                build(
                    nested(response_type, "DeleteRecordsTopicResult"),
                    name=topic.name,
                    partitions=tuple(partition(topic.name, p) for p in topic.partitions),
                )
                for topic in request.topics
            ),
        )
        return response

    def _delete(self, hosted: HostedPartition, offset: int) -> int | KafkaError:
        tp = hosted.topic_id_partition
        return guarded(lambda: self._records.delete_records(tp.topic_id, tp.partition, offset))
