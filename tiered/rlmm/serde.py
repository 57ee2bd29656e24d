"""Conversions between tiered.api value types and their protobuf records (the edge; nothing else
imports generated code)."""

from __future__ import annotations

import uuid
from typing import cast

from tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tiered.rpc.v1 import records_pb2 as pb

# Protobuf enums reserve 0 for "unspecified"; Kafka's ids start at 0, hence the +1.
_SEGMENT_STATE_OFFSET = 1
_DELETE_STATE_OFFSET = 1


def segment_state_to_proto(state: RemoteLogSegmentState) -> pb.RemoteLogSegmentState:
    return cast(pb.RemoteLogSegmentState, state.value + _SEGMENT_STATE_OFFSET)


def segment_state_from_proto(value: int) -> RemoteLogSegmentState:
    if value == pb.REMOTE_LOG_SEGMENT_STATE_UNSPECIFIED:
        raise ValueError("remote log segment record without a state")
    return RemoteLogSegmentState(value - _SEGMENT_STATE_OFFSET)


def delete_state_to_proto(state: RemotePartitionDeleteState) -> pb.RemotePartitionDeleteState:
    return cast(pb.RemotePartitionDeleteState, state.value + _DELETE_STATE_OFFSET)


def delete_state_from_proto(value: int) -> RemotePartitionDeleteState:
    if value == pb.REMOTE_PARTITION_DELETE_STATE_UNSPECIFIED:
        raise ValueError("remote partition delete record without a state")
    return RemotePartitionDeleteState(value - _DELETE_STATE_OFFSET)


def topic_id_partition_to_proto(tp: TopicIdPartition) -> pb.TopicIdPartition:
    return pb.TopicIdPartition(topic_id=tp.topic_id.bytes, topic=tp.topic, partition=tp.partition)


def topic_id_partition_from_proto(record: pb.TopicIdPartition) -> TopicIdPartition:
    return TopicIdPartition(
        topic_id=uuid.UUID(bytes=record.topic_id), topic=record.topic, partition=record.partition
    )


def segment_id_to_proto(segment_id: RemoteLogSegmentId) -> pb.RemoteLogSegmentId:
    return pb.RemoteLogSegmentId(
        topic_id_partition=topic_id_partition_to_proto(segment_id.topic_id_partition),
        id=segment_id.id.bytes,
    )


def segment_id_from_proto(record: pb.RemoteLogSegmentId) -> RemoteLogSegmentId:
    return RemoteLogSegmentId(
        topic_id_partition=topic_id_partition_from_proto(record.topic_id_partition),
        id=uuid.UUID(bytes=record.id),
    )


def segment_metadata_to_proto(m: RemoteLogSegmentMetadata) -> pb.RemoteLogSegmentMetadataRecord:
    record = pb.RemoteLogSegmentMetadataRecord(
        remote_log_segment_id=segment_id_to_proto(m.remote_log_segment_id),
        start_offset=m.start_offset,
        end_offset=m.end_offset,
        max_timestamp_ms=m.max_timestamp_ms,
        broker_id=m.broker_id,
        event_timestamp_ms=m.event_timestamp_ms,
        segment_size_in_bytes=m.segment_size_in_bytes,
        segment_leader_epochs=[
            pb.SegmentLeaderEpoch(leader_epoch=e, start_offset=o)
            for e, o in m.segment_leader_epochs.items()
        ],
        state=segment_state_to_proto(m.state),
        tiered_epoch=m.tiered_epoch,
    )
    if m.custom_metadata is not None:
        record.custom_metadata = m.custom_metadata.value
    return record


def segment_metadata_from_proto(
    record: pb.RemoteLogSegmentMetadataRecord,
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=segment_id_from_proto(record.remote_log_segment_id),
        start_offset=record.start_offset,
        end_offset=record.end_offset,
        max_timestamp_ms=record.max_timestamp_ms,
        broker_id=record.broker_id,
        event_timestamp_ms=record.event_timestamp_ms,
        segment_size_in_bytes=record.segment_size_in_bytes,
        segment_leader_epochs={
            e.leader_epoch: e.start_offset for e in record.segment_leader_epochs
        },
        state=segment_state_from_proto(record.state),
        custom_metadata=(
            CustomMetadata(record.custom_metadata) if record.HasField("custom_metadata") else None
        ),
        tiered_epoch=record.tiered_epoch,
    )


def encode_segment_metadata(m: RemoteLogSegmentMetadata) -> bytes:
    return segment_metadata_to_proto(m).SerializeToString(deterministic=True)


def decode_segment_metadata(data: bytes) -> RemoteLogSegmentMetadata:
    return segment_metadata_from_proto(pb.RemoteLogSegmentMetadataRecord.FromString(data))
