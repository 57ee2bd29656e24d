from tiered.rpc.v1 import records_pb2 as _records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PartitionStateRecord(_message.Message):
    __slots__ = ("topic_id_partition", "delete_state", "delete_event_timestamp_ms", "delete_broker_id", "size_bytes", "segment_count", "copy_finished_size_bytes", "copy_finished_segment_count", "deleting_below_tiered_epoch", "copy_finished_by_tiered_epoch")
    TOPIC_ID_PARTITION_FIELD_NUMBER: _ClassVar[int]
    DELETE_STATE_FIELD_NUMBER: _ClassVar[int]
    DELETE_EVENT_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    DELETE_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    COPY_FINISHED_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    COPY_FINISHED_SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    DELETING_BELOW_TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COPY_FINISHED_BY_TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic_id_partition: _records_pb2.TopicIdPartition
    delete_state: _records_pb2.RemotePartitionDeleteState
    delete_event_timestamp_ms: int
    delete_broker_id: int
    size_bytes: int
    segment_count: int
    copy_finished_size_bytes: int
    copy_finished_segment_count: int
    deleting_below_tiered_epoch: int
    copy_finished_by_tiered_epoch: _containers.RepeatedCompositeFieldContainer[TieredEpochAggregates]
    def __init__(self, topic_id_partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ..., delete_state: _Optional[_Union[_records_pb2.RemotePartitionDeleteState, str]] = ..., delete_event_timestamp_ms: _Optional[int] = ..., delete_broker_id: _Optional[int] = ..., size_bytes: _Optional[int] = ..., segment_count: _Optional[int] = ..., copy_finished_size_bytes: _Optional[int] = ..., copy_finished_segment_count: _Optional[int] = ..., deleting_below_tiered_epoch: _Optional[int] = ..., copy_finished_by_tiered_epoch: _Optional[_Iterable[_Union[TieredEpochAggregates, _Mapping]]] = ...) -> None: ...

class TieredEpochAggregates(_message.Message):
    __slots__ = ("tiered_epoch", "size_bytes", "segment_count")
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    tiered_epoch: int
    size_bytes: int
    segment_count: int
    def __init__(self, tiered_epoch: _Optional[int] = ..., size_bytes: _Optional[int] = ..., segment_count: _Optional[int] = ...) -> None: ...

class LeaderEpochStateRecord(_message.Message):
    __slots__ = ("highest_log_offset", "size_bytes", "segment_count", "copy_finished_size_bytes", "copy_finished_segment_count")
    HIGHEST_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    COPY_FINISHED_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    COPY_FINISHED_SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    highest_log_offset: int
    size_bytes: int
    segment_count: int
    copy_finished_size_bytes: int
    copy_finished_segment_count: int
    def __init__(self, highest_log_offset: _Optional[int] = ..., size_bytes: _Optional[int] = ..., segment_count: _Optional[int] = ..., copy_finished_size_bytes: _Optional[int] = ..., copy_finished_segment_count: _Optional[int] = ...) -> None: ...

class OffsetIndexChunkRecord(_message.Message):
    __slots__ = ("start_offsets", "segment_ids")
    START_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_IDS_FIELD_NUMBER: _ClassVar[int]
    start_offsets: _containers.RepeatedScalarFieldContainer[int]
    segment_ids: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, start_offsets: _Optional[_Iterable[int]] = ..., segment_ids: _Optional[_Iterable[bytes]] = ...) -> None: ...

class LeaderClaimRecord(_message.Message):
    __slots__ = ("claim", "broker_id")
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    claim: int
    broker_id: int
    def __init__(self, claim: _Optional[int] = ..., broker_id: _Optional[int] = ...) -> None: ...
