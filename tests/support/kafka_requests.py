"""Raw Kafka record-API requests (kio classes of one version each) and their answers by
partition, for tests that send what a client would not (two batches in one partition, a
session id, earliest-local offsets, ...)."""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Mapping
from typing import Any

from kio.schema.delete_records.v0 import request as delete_records_v0
from kio.schema.delete_records.v2 import request as delete_records_v2
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v8.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

TopicPartition = tuple[str, int]
INT32_MAX = 2**31 - 1


def _by_topic(items: Mapping[TopicPartition, Any]) -> list[tuple[str, list[tuple[int, Any]]]]:
    ordered = sorted(items.items(), key=lambda item: item[0][0])
    return [
        (topic, [(partition, value) for (_, partition), value in group])
        for topic, group in itertools.groupby(ordered, key=lambda item: item[0][0])
    ]


def produce(
    records: Mapping[TopicPartition, bytes | None],
    acks: int = 1,
    transactional_id: str | None = None,
) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=tuple(
            TopicProduceData(
                name=topic,
                partition_data=tuple(
                    PartitionProduceData(index=p, records=data) for p, data in partitions
                ),
            )
            for topic, partitions in _by_topic(records)
        ),
    )


def fetch(
    offsets: Mapping[TopicPartition, int],
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = INT32_MAX,
    partition_max_bytes: int = 1 << 20,
    session: tuple[int, int] = (0, -1),
    current_leader_epoch: int = -1,
) -> FetchRequest:
    return FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session[0],
        session_epoch=session[1],
        topics=tuple(
            FetchTopic(
                topic=topic,
                partitions=tuple(
                    FetchPartition(
                        partition=p,
                        current_leader_epoch=current_leader_epoch,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for p, offset in partitions
                ),
            )
            for topic, partitions in _by_topic(offsets)
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets(
    timestamps: Mapping[TopicPartition, int] | list[tuple[TopicPartition, int]],
) -> ListOffsetsRequest:
    """ListOffsets v8 (earliest local is -4); a list may name a partition twice."""
    pairs = list(timestamps.items()) if isinstance(timestamps, Mapping) else timestamps
    topics = list(dict.fromkeys(tp[0] for tp, _ in pairs))
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=tuple(
            ListOffsetsTopic(
                name=topic,
                partitions=tuple(
                    ListOffsetsPartition(partition_index=p, timestamp=ts)
                    for (t, p), ts in pairs
                    if t == topic
                ),
            )
            for topic in topics
        ),
    )


def delete_records(offsets: Mapping[TopicPartition, int], version: int = 2) -> Any:
    """DeleteRecords v2 (flexible; the Java AdminClient's) or v0 (librdkafka's first)."""
    schema = {0: delete_records_v0, 2: delete_records_v2}[version]
    return schema.DeleteRecordsRequest(
        topics=tuple(
            schema.DeleteRecordsTopic(
                name=topic,
                partitions=tuple(
                    schema.DeleteRecordsPartition(partition_index=p, offset=offset)
                    for p, offset in partitions
                ),
            )
            for topic, partitions in _by_topic(offsets)
        ),
        timeout=datetime.timedelta(seconds=30),
    )


def init_producer_id(transactional_id: str | None = None) -> InitProducerIdRequest:
    return InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=60),
    )


def by_partition(response: Any) -> dict[TopicPartition, Any]:
    """A Produce, Fetch, ListOffsets or DeleteRecords answer's partitions by (topic,
    partition)."""
    found: dict[TopicPartition, Any] = {}
    for topic in response.responses if hasattr(response, "responses") else response.topics:
        name = topic.name if hasattr(topic, "name") else topic.topic
        partitions = (
            topic.partition_responses if hasattr(topic, "partition_responses") else topic.partitions
        )
        for p in partitions:
            index = p.index if hasattr(p, "index") else p.partition_index
            found[(name, int(index))] = p
    return found
