from tiered.rpc.v1 import records_pb2 as _records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Error(_message.Message):
    __slots__ = ("code", "name", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    name: str
    message: str
    def __init__(self, code: _Optional[int] = ..., name: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("key", "value", "timestamp_ms", "offset")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    timestamp_ms: int
    offset: int
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., timestamp_ms: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("partition", "records")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    partition: _records_pb2.TopicIdPartition
    records: _containers.RepeatedCompositeFieldContainer[Record]
    def __init__(self, partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ..., records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("error", "base_offset", "last_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: Error
    base_offset: int
    last_offset: int
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("partition", "offset", "max_bytes")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    partition: _records_pb2.TopicIdPartition
    offset: int
    max_bytes: int
    def __init__(self, partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ..., offset: _Optional[int] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class PartitionOffsets(_message.Message):
    __slots__ = ("log_start_offset", "local_log_start_offset", "log_end_offset")
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOCAL_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int
    def __init__(self, log_start_offset: _Optional[int] = ..., local_log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error", "records", "offsets", "from_remote")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    FROM_REMOTE_FIELD_NUMBER: _ClassVar[int]
    error: Error
    records: _containers.RepeatedCompositeFieldContainer[Record]
    offsets: PartitionOffsets
    from_remote: bool
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ..., records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., offsets: _Optional[_Union[PartitionOffsets, _Mapping]] = ..., from_remote: _Optional[bool] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("partition",)
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    partition: _records_pb2.TopicIdPartition
    def __init__(self, partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("error", "offsets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    error: Error
    offsets: PartitionOffsets
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ..., offsets: _Optional[_Union[PartitionOffsets, _Mapping]] = ...) -> None: ...

class DescribeLogDirsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PartitionLogDir(_message.Message):
    __slots__ = ("partition", "offsets", "local_size_bytes", "remote_size_bytes", "remote_segment_count", "remote_copy_finished_bytes", "tiered_epoch", "copying", "remote_fetch_enabled", "copy_lag_bytes", "copy_lag_segments", "remote_log_start_offset", "remote_delete_state")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOTE_COPY_FINISHED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COPYING_FIELD_NUMBER: _ClassVar[int]
    REMOTE_FETCH_ENABLED_FIELD_NUMBER: _ClassVar[int]
    COPY_LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    COPY_LAG_SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOTE_DELETE_STATE_FIELD_NUMBER: _ClassVar[int]
    partition: _records_pb2.TopicIdPartition
    offsets: PartitionOffsets
    local_size_bytes: int
    remote_size_bytes: int
    remote_segment_count: int
    remote_copy_finished_bytes: int
    tiered_epoch: int
    copying: bool
    remote_fetch_enabled: bool
    copy_lag_bytes: int
    copy_lag_segments: int
    remote_log_start_offset: int
    remote_delete_state: str
    def __init__(self, partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ..., offsets: _Optional[_Union[PartitionOffsets, _Mapping]] = ..., local_size_bytes: _Optional[int] = ..., remote_size_bytes: _Optional[int] = ..., remote_segment_count: _Optional[int] = ..., remote_copy_finished_bytes: _Optional[int] = ..., tiered_epoch: _Optional[int] = ..., copying: _Optional[bool] = ..., remote_fetch_enabled: _Optional[bool] = ..., copy_lag_bytes: _Optional[int] = ..., copy_lag_segments: _Optional[int] = ..., remote_log_start_offset: _Optional[int] = ..., remote_delete_state: _Optional[str] = ...) -> None: ...

class DescribeLogDirsResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionLogDir]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionLogDir, _Mapping]]] = ...) -> None: ...

class PartitionAssignment(_message.Message):
    __slots__ = ("partition", "configs", "tiered_epoch")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: _records_pb2.TopicIdPartition
    configs: _containers.ScalarMap[str, str]
    tiered_epoch: int
    def __init__(self, partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ..., configs: _Optional[_Mapping[str, str]] = ..., tiered_epoch: _Optional[int] = ...) -> None: ...

class AssignPartitionsRequest(_message.Message):
    __slots__ = ("partitions", "controller_epoch")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionAssignment]
    controller_epoch: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionAssignment, _Mapping]]] = ..., controller_epoch: _Optional[int] = ...) -> None: ...

class AssignPartitionsResponse(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[Error, _Mapping]]] = ...) -> None: ...

class RemovePartitionsRequest(_message.Message):
    __slots__ = ("controller_epoch", "partitions")
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    controller_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[_records_pb2.TopicIdPartition]
    def __init__(self, controller_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_records_pb2.TopicIdPartition, _Mapping]]] = ...) -> None: ...

class RemovePartitionsResponse(_message.Message):
    __slots__ = ("errors",)
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[Error]
    def __init__(self, errors: _Optional[_Iterable[_Union[Error, _Mapping]]] = ...) -> None: ...

class DisableRemoteTopicEntry(_message.Message):
    __slots__ = ("partition", "tiered_epoch", "policy")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    partition: _records_pb2.TopicIdPartition
    tiered_epoch: int
    policy: str
    def __init__(self, partition: _Optional[_Union[_records_pb2.TopicIdPartition, _Mapping]] = ..., tiered_epoch: _Optional[int] = ..., policy: _Optional[str] = ...) -> None: ...

class DisableRemoteTopicRequest(_message.Message):
    __slots__ = ("controller_epoch", "entries")
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    controller_epoch: int
    entries: _containers.RepeatedCompositeFieldContainer[DisableRemoteTopicEntry]
    def __init__(self, controller_epoch: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[DisableRemoteTopicEntry, _Mapping]]] = ...) -> None: ...

class DisableRemoteTopicResponse(_message.Message):
    __slots__ = ("error", "errors")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    error: Error
    errors: _containers.RepeatedCompositeFieldContainer[Error]
    def __init__(self, error: _Optional[_Union[Error, _Mapping]] = ..., errors: _Optional[_Iterable[_Union[Error, _Mapping]]] = ...) -> None: ...
