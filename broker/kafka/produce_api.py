"""Produce: each partition's record batch appended to its log as it arrived (``DataPlane.produce``:
the batch header and CRC are checked, offsets assigned in place; no record is decoded here).

Kafka's rules, per partition: exactly one v2 batch (Produce v3+), unknown topics
UNKNOWN_TOPIC_OR_PARTITION, partitions led elsewhere NOT_LEADER_OR_FOLLOWER, the log's own
refusals (CORRUPT_MESSAGE, INVALID_RECORD, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH)
with their message. The replication factor is 1, so acks=-1 is answered as acks=1: once the
batch is durable in the leader's log. acks=0 gets no answer at all, unless a partition failed:
then the connection is closed, as Kafka does. A retried idempotent batch
already in the log is answered NONE with the offsets it was first written at.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.hosted import HostedPartition
from broker.kafka.convert import NO_THROTTLE, KafkaError
from broker.kafka.partitions import PartitionLookup, guarded
from broker.listener.handler import CloseConnectionError, RequestContext
from broker.log import AppendInfo
from tiered.config import INTERNAL_TOPICS
from tiered.kafka.messages import build, nested, response_type_for
from tiered.kafka.record_batch import RecordBatchError, parse_batch_header
from tiered.security.acl import AclOperation

__all__ = ["ProduceApi"]

_VALID_ACKS = (-1, 0, 1)
_NOT_TRANSACTIONAL = (
    "transactions are not served by this cluster (produce without transactional.id)"
)


class Appender(Protocol):
    def produce(
        self, topic_id: uuid.UUID, partition: int, records: bytes, leader_epoch: int = 0
    ) -> AppendInfo: ...


class ProduceApi:
    def __init__(self, records: Appender, partitions: PartitionLookup) -> None:
        self._records = records
        self._partitions = partitions

    def produce(self, request: Any, context: RequestContext) -> ResponsePayload | None:
        acks = int(request.acks)
        refused = _request_error(request, acks)
        wanted = [(t.name, int(p.index)) for t in request.topic_data for p in t.partition_data]
        resolved = (
            {}
            if refused
            else self._partitions.resolve(wanted, context.requester, AclOperation.WRITE)
        )
        results: dict[tuple[str, int], AppendInfo | KafkaError] = {}
        for topic in request.topic_data:
            for data in topic.partition_data:
                key = (topic.name, int(data.index))
                if refused is not None:
                    results[key] = refused
                    continue
                found = resolved[key]
                results[key] = found if isinstance(found, tuple) else self._append(found, data)
        if acks == 0:
            failed = {key: r for key, r in results.items() if isinstance(r, tuple)}
            if failed:
                # As Kafka's KafkaApis: an acks=0 producer learns of an error only by the close
                # (it then refreshes its metadata and goes on).
                raise CloseConnectionError(_describe_failures(failed))
            return None  # the client waits for nothing
        return _response(response_type_for(request), request, results)

    def _append(self, hosted: HostedPartition, data: Any) -> AppendInfo | KafkaError:
        if hosted.topic_id_partition.topic in INTERNAL_TOPICS:
            # Kafka's rule: only the group coordinator writes its topic (the offsets in memory
            # follow its log).
            return (
                KafkaErrorCode.invalid_topic_exception,
                f"Cannot append to internal topic {hosted.topic_id_partition.topic}",
            )
        records = data.records
        problem = _batch_error(records)
        if problem is not None:
            return problem
        tp = hosted.topic_id_partition
        return guarded(lambda: self._records.produce(tp.topic_id, tp.partition, records))


def _describe_failures(failed: dict[tuple[str, int], KafkaError]) -> str:
    shown = sorted(failed.items())[:3]
    described = "; ".join(
        f"{topic}-{index}: {code.name.upper()}: {message or code.name}"
        for (topic, index), (code, message) in shown
    )
    more = f" (and {len(failed) - len(shown)} more)" if len(failed) > len(shown) else ""
    return f"acks=0 produce failed for {described}{more}"


def _request_error(request: Any, acks: int) -> KafkaError | None:
    if acks not in _VALID_ACKS:
        return KafkaErrorCode.invalid_required_acks, f"acks={acks}; valid values: -1, 0, 1"
    if request.transactional_id is not None:
        return KafkaErrorCode.invalid_request, _NOT_TRANSACTIONAL
    return None


def _batch_error(records: bytes | None) -> KafkaError | None:
    """Kafka's v3+ framing rule, checked by header alone (the log checks the rest, CRC
    included): exactly one record batch per partition."""
    if not records:
        return KafkaErrorCode.invalid_record, "a produce request needs one record batch"
    try:
        header = parse_batch_header(records, 0)
    except RecordBatchError as e:
        return e.error_code, str(e)
    if header.end != len(records):
        return (
            KafkaErrorCode.invalid_record,
            "produce requests (v3+) must hold exactly one record batch per partition",
        )
    return None


def _response(
    response_type: type[Any],
    request: Any,
    results: dict[tuple[str, int], AppendInfo | KafkaError],
) -> ResponsePayload:
    partition_type = nested(response_type, "PartitionProduceResponse")

    def partition(name: str, index: int) -> Any:
        result = results[(name, index)]
        if isinstance(result, tuple):
            code, message = result
            return build(
                partition_type,
                index=index,
                error_code=code,
                base_offset=-1,
                log_append_time=None,
                log_start_offset=-1,
                record_errors=(),
                error_message=message,
            )
        return build(
            partition_type,
            index=index,
            error_code=KafkaErrorCode.none,
            base_offset=result.first_offset,
            log_append_time=None,  # -1: CreateTime, the only timestamp type served
            log_start_offset=result.log_start_offset,
            record_errors=(),
            error_message=None,
        )

    response: ResponsePayload = build(
        response_type,
        throttle_time=NO_THROTTLE,
        responses=tuple(
            build(
                nested(response_type, "TopicProduceResponse"),
                name=topic.name,
                partition_responses=tuple(
                    partition(topic.name, int(data.index)) for data in topic.partition_data
                ),
            )
            for topic in request.topic_data
        ),
    )
    return response
