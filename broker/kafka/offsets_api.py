"""ListOffsets: the offset a consumer starts from, per partition.

Special timestamps as Kafka's: latest (-1) is the log end offset (the high watermark, the
replication factor being 1), earliest (-2) the log start offset (data may be remote), earliest
local (-4, KIP-1005) the first offset the local log serves, max timestamp (-3, KIP-734) the
first record carrying the largest timestamp in the local log (Kafka 3.x looks at local segments
only, and so does this). A timestamp >= 0 finds the first record at or after it across both
tiers; none found answers offset -1. Each answer carries the leader epoch that wrote the offset
(-1 where the epoch cache has none). Unknown partitions and leader epochs error as for Fetch;
a partition listed twice is INVALID_REQUEST, as Kafka answers.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.hosted import HostedPartition
from broker.kafka.convert import NO_THROTTLE, KafkaError
from broker.kafka.partitions import PartitionLookup, guarded, leader_epoch_error
from broker.listener.handler import RequestContext
from broker.log import TimestampOffset
from tiered.kafka.messages import build, nested, response_type_for
from tiered.security.acl import AclOperation

__all__ = [
    "EARLIEST",
    "EARLIEST_LOCAL",
    "LATEST",
    "MAX_TIMESTAMP",
    "ListOffsetsApi",
]

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4


class TimestampSearch(Protocol):
    def offset_for_timestamp(
        self, topic_id: uuid.UUID, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None: ...


@dataclass(frozen=True)
class _Found:
    offset: int
    timestamp: int = -1
    leader_epoch: int | None = None


_NOT_FOUND = _Found(-1)


class ListOffsetsApi:
    def __init__(self, records: TimestampSearch, partitions: PartitionLookup) -> None:
        self._records = records
        self._partitions = partitions

    def list_offsets(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        asked = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
        listed = Counter(asked)
        resolved = self._partitions.resolve(
            (tp for tp, n in listed.items() if n == 1), context.requester, AclOperation.DESCRIBE
        )
        partition_type = nested(response_type, "ListOffsetsPartitionResponse")

        def partition(name: str, asked: Any) -> Any:
            index = int(asked.partition_index)
            hosted = resolved.get((name, index))
            found: _Found | KafkaError
            if hosted is None:
                found = KafkaErrorCode.invalid_request, "the partition is listed twice"
            elif isinstance(hosted, tuple):
                found = hosted
            else:
                epoch_error = leader_epoch_error(int(getattr(asked, "current_leader_epoch", -1)))
                found = epoch_error or self._find(hosted, int(asked.timestamp))
            if isinstance(found, tuple):
                return build(
                    partition_type,
                    partition_index=index,
                    error_code=found[0],
                    old_style_offsets=(),
                    timestamp=-1,
                    offset=-1,
                    leader_epoch=-1,
                )
            return build(
                partition_type,
                partition_index=index,
                error_code=KafkaErrorCode.none,
                old_style_offsets=(),
                timestamp=found.timestamp,
                offset=found.offset,
                leader_epoch=-1 if found.leader_epoch is None else found.leader_epoch,
            )

        response: ResponsePayload = build(
            response_type,
            throttle_time=NO_THROTTLE,
            topics=tuple(
                build(
                    nested(response_type, "ListOffsetsTopicResponse"),
                    name=topic.name,
                    partitions=tuple(partition(topic.name, p) for p in topic.partitions),
                )
                for topic in request.topics
            ),
        )
        return response

    def _find(self, hosted: HostedPartition, timestamp: int) -> _Found | KafkaError:
        log = hosted.log
        epochs = log.leader_epoch_cache
        if timestamp == LATEST:
            return _Found(log.log_end_offset, leader_epoch=epochs.latest_epoch)
        if timestamp == EARLIEST:
            start = log.log_start_offset
            return _Found(start, leader_epoch=epochs.epoch_for_offset(start))
        if timestamp == EARLIEST_LOCAL:
            local = max(log.local_log_start_offset, log.log_start_offset)
            return _Found(local, leader_epoch=epochs.epoch_for_offset(local))
        if timestamp == MAX_TIMESTAMP:
            largest = max((s.max_timestamp_ms for s in log.segments()), default=-1)
            if largest < 0:
                return _NOT_FOUND
            return _from(guarded(lambda: log.offset_for_timestamp(largest)))
        if timestamp < 0:
            return (
                KafkaErrorCode.invalid_request,
                f"timestamp {timestamp}; valid: >= 0, or -1 (latest), -2 (earliest), "
                f"-3 (max timestamp), -4 (earliest local)",
            )
        tp = hosted.topic_id_partition
        return _from(
            guarded(
                lambda: self._records.offset_for_timestamp(tp.topic_id, tp.partition, timestamp)
            )
        )


def _from(result: TimestampOffset | KafkaError | None) -> _Found | KafkaError:
    if result is None:
        return _NOT_FOUND
    if isinstance(result, tuple):
        return result
    return _Found(result.offset, result.timestamp_ms, result.leader_epoch)
