"""Produce, Fetch, ListOffsets and InitProducerId until the broker's log holds Kafka record
batches (issue 14's other half): each partition, or the request, is answered
UNKNOWN_SERVER_ERROR with a message saying so. They stay advertised, so that clients negotiate
the record-batch features they need (librdkafka enables v2 batches from Fetch v4, lz4 from
FindCoordinator) and the admin APIs work for producers and consumers alike; replace this
module's methods with the real ones."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.kafka.convert import NO_THROTTLE
from tiered.kafka.handler import RequestContext, response_type_for
from tiered.kafka.messages import build, nested

__all__ = ["NOT_SERVED_MESSAGE", "NotServedYet"]

NOT_SERVED_MESSAGE = "this broker does not serve Kafka produce and fetch yet"
_ERROR = KafkaErrorCode.unknown_server_error


class NotServedYet:
    def produce(self, request: Any, context: RequestContext) -> ResponsePayload | None:
        response_type = response_type_for(request)
        partition_type = nested(response_type, "PartitionProduceResponse")
        topics = tuple(
            build(
                nested(response_type, "TopicProduceResponse"),
                name=topic.name,
                partition_responses=tuple(
                    build(
                        partition_type,
                        index=data.index,
                        error_code=_ERROR,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=NOT_SERVED_MESSAGE,
                    )
                    for data in topic.partition_data
                ),
            )
            for topic in request.topic_data
        )
        if request.acks == 0:
            return None
        return build(response_type, responses=topics, throttle_time=NO_THROTTLE)

    def fetch(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        partition_type = nested(response_type, "PartitionData")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=KafkaErrorCode.none,
            session_id=0,
            responses=tuple(
                build(
                    nested(response_type, "FetchableTopicResponse"),
                    topic=topic.topic,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=p.partition,
                            error_code=_ERROR,
                            high_watermark=-1,
                            last_stable_offset=-1,
                            log_start_offset=-1,
                            aborted_transactions=None,
                            preferred_read_replica=-1,
                            records=None,
                        )
                        for p in topic.partitions
                    ),
                )
                for topic in request.topics
            ),
        )

    def list_offsets(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        partition_type = nested(response_type, "ListOffsetsPartitionResponse")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            topics=tuple(
                build(
                    nested(response_type, "ListOffsetsTopicResponse"),
                    name=topic.name,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=p.partition_index,
                            error_code=_ERROR,
                            old_style_offsets=(),
                            timestamp=-1,
                            offset=-1,
                            leader_epoch=-1,
                        )
                        for p in topic.partitions
                    ),
                )
                for topic in request.topics
            ),
        )

    def init_producer_id(self, request: Any, context: RequestContext) -> ResponsePayload:
        return build(
            response_type_for(request),
            throttle_time=NO_THROTTLE,
            error_code=_ERROR,
            producer_id=-1,
            producer_epoch=-1,
        )
