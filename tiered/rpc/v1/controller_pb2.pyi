from tiered.rpc.v1 import broker_pb2 as _broker_pb2
from tiered.rpc.v1 import metadata_pb2 as _metadata_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ConfigOperation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFIG_OPERATION_SET: _ClassVar[ConfigOperation]
    CONFIG_OPERATION_DELETE: _ClassVar[ConfigOperation]
    CONFIG_OPERATION_APPEND: _ClassVar[ConfigOperation]
    CONFIG_OPERATION_SUBTRACT: _ClassVar[ConfigOperation]
CONFIG_OPERATION_SET: ConfigOperation
CONFIG_OPERATION_DELETE: ConfigOperation
CONFIG_OPERATION_APPEND: ConfigOperation
CONFIG_OPERATION_SUBTRACT: ConfigOperation

class NewTopic(_message.Message):
    __slots__ = ("name", "partitions", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: int
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only", "timeout_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[NewTopic]
    validate_only: bool
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[NewTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class TopicResult(_message.Message):
    __slots__ = ("name", "error", "topic_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _broker_pb2.Error
    topic_id: bytes
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., topic_id: _Optional[bytes] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, results: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class PartitionReplicas(_message.Message):
    __slots__ = ("broker_ids",)
    BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    broker_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class PartitionGrowth(_message.Message):
    __slots__ = ("topic", "count", "assignments", "has_assignments")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    HAS_ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    count: int
    assignments: _containers.RepeatedCompositeFieldContainer[PartitionReplicas]
    has_assignments: bool
    def __init__(self, topic: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[PartitionReplicas, _Mapping]]] = ..., has_assignments: _Optional[bool] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "validate_only", "timeout_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[PartitionGrowth]
    validate_only: bool
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[PartitionGrowth, _Mapping]]] = ..., validate_only: _Optional[bool] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, results: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TopicResult]
    def __init__(self, results: _Optional[_Iterable[_Union[TopicResult, _Mapping]]] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "include_partition_state")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PARTITION_STATE_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    include_partition_state: bool
    def __init__(self, names: _Optional[_Iterable[str]] = ..., include_partition_state: _Optional[bool] = ...) -> None: ...

class PartitionDescription(_message.Message):
    __slots__ = ("partition", "leader", "leader_available", "offsets", "remote_log_start_offset", "remote_log_size_bytes", "remote_segment_count", "remote_delete_state", "disable_acked", "delete_objects_total", "delete_objects_deleted", "delete_done")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REMOTE_LOG_SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    REMOTE_SEGMENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOTE_DELETE_STATE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_ACKED_FIELD_NUMBER: _ClassVar[int]
    DELETE_OBJECTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DELETE_OBJECTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    DELETE_DONE_FIELD_NUMBER: _ClassVar[int]
    partition: int
    leader: int
    leader_available: bool
    offsets: _broker_pb2.PartitionOffsets
    remote_log_start_offset: int
    remote_log_size_bytes: int
    remote_segment_count: int
    remote_delete_state: str
    disable_acked: bool
    delete_objects_total: int
    delete_objects_deleted: int
    delete_done: bool
    def __init__(self, partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_available: _Optional[bool] = ..., offsets: _Optional[_Union[_broker_pb2.PartitionOffsets, _Mapping]] = ..., remote_log_start_offset: _Optional[int] = ..., remote_log_size_bytes: _Optional[int] = ..., remote_segment_count: _Optional[int] = ..., remote_delete_state: _Optional[str] = ..., disable_acked: _Optional[bool] = ..., delete_objects_total: _Optional[int] = ..., delete_objects_deleted: _Optional[int] = ..., delete_done: _Optional[bool] = ...) -> None: ...

class DeleteJobDescription(_message.Message):
    __slots__ = ("state", "tiered_epoch", "attempts", "last_error", "objects_total", "objects_deleted", "partitions_done", "partition_count", "starts_at_ms")
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_DONE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    STARTS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    state: str
    tiered_epoch: int
    attempts: int
    last_error: str
    objects_total: int
    objects_deleted: int
    partitions_done: int
    partition_count: int
    starts_at_ms: int
    def __init__(self, state: _Optional[str] = ..., tiered_epoch: _Optional[int] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., objects_total: _Optional[int] = ..., objects_deleted: _Optional[int] = ..., partitions_done: _Optional[int] = ..., partition_count: _Optional[int] = ..., starts_at_ms: _Optional[int] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "tiered_state", "tiered_epoch", "configs", "partitions", "disable_acks_owed", "disable_acks_total", "disable_policy", "error", "delete_job")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    TIERED_STATE_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    DISABLE_ACKS_OWED_FIELD_NUMBER: _ClassVar[int]
    DISABLE_ACKS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DISABLE_POLICY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DELETE_JOB_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    tiered_state: _metadata_pb2.TieredState
    tiered_epoch: int
    configs: _containers.ScalarMap[str, str]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDescription]
    disable_acks_owed: int
    disable_acks_total: int
    disable_policy: str
    error: _broker_pb2.Error
    delete_job: DeleteJobDescription
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., tiered_state: _Optional[_Union[_metadata_pb2.TieredState, str]] = ..., tiered_epoch: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ..., partitions: _Optional[_Iterable[_Union[PartitionDescription, _Mapping]]] = ..., disable_acks_owed: _Optional[int] = ..., disable_acks_total: _Optional[int] = ..., disable_policy: _Optional[str] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., delete_job: _Optional[_Union[DeleteJobDescription, _Mapping]] = ...) -> None: ...

class DeletedTopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "delete_job")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    DELETE_JOB_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    delete_job: DeleteJobDescription
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., delete_job: _Optional[_Union[DeleteJobDescription, _Mapping]] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("topics", "deleted_topics")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    DELETED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    deleted_topics: _containers.RepeatedCompositeFieldContainer[DeletedTopicDescription]
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ..., deleted_topics: _Optional[_Iterable[_Union[DeletedTopicDescription, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "is_default")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    is_default: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., is_default: _Optional[bool] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("error", "entries", "tiered_state", "tiered_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TIERED_STATE_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    entries: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    tiered_state: _metadata_pb2.TieredState
    tiered_epoch: int
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ..., tiered_state: _Optional[_Union[_metadata_pb2.TieredState, str]] = ..., tiered_epoch: _Optional[int] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("topic", "configs", "validate_only")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    configs: _containers.ScalarMap[str, str]
    validate_only: bool
    def __init__(self, topic: _Optional[str] = ..., configs: _Optional[_Mapping[str, str]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("topic", "set", "delete", "validate_only")
    class SetEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topic: str
    set: _containers.ScalarMap[str, str]
    delete: _containers.RepeatedScalarFieldContainer[str]
    validate_only: bool
    def __init__(self, topic: _Optional[str] = ..., set: _Optional[_Mapping[str, str]] = ..., delete: _Optional[_Iterable[str]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("error", "tiered_state", "tiered_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TIERED_STATE_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    tiered_state: _metadata_pb2.TieredState
    tiered_epoch: int
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., tiered_state: _Optional[_Union[_metadata_pb2.TieredState, str]] = ..., tiered_epoch: _Optional[int] = ...) -> None: ...

class ConfigAlteration(_message.Message):
    __slots__ = ("name", "operation", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    operation: ConfigOperation
    value: str
    def __init__(self, name: _Optional[str] = ..., operation: _Optional[_Union[ConfigOperation, str]] = ..., value: _Optional[str] = ...) -> None: ...

class TopicConfigAlteration(_message.Message):
    __slots__ = ("topic", "replace", "configs")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    replace: bool
    configs: _containers.RepeatedCompositeFieldContainer[ConfigAlteration]
    def __init__(self, topic: _Optional[str] = ..., replace: _Optional[bool] = ..., configs: _Optional[_Iterable[_Union[ConfigAlteration, _Mapping]]] = ...) -> None: ...

class AlterTopicConfigsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicConfigAlteration]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicConfigAlteration, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterTopicConfigsResult(_message.Message):
    __slots__ = ("topic", "error", "tiered_state", "tiered_epoch", "would_delete")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TIERED_STATE_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    WOULD_DELETE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    error: _broker_pb2.Error
    tiered_state: _metadata_pb2.TieredState
    tiered_epoch: int
    would_delete: DeletionEstimate
    def __init__(self, topic: _Optional[str] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., tiered_state: _Optional[_Union[_metadata_pb2.TieredState, str]] = ..., tiered_epoch: _Optional[int] = ..., would_delete: _Optional[_Union[DeletionEstimate, _Mapping]] = ...) -> None: ...

class PartitionDeletionEstimate(_message.Message):
    __slots__ = ("partition", "objects", "bytes", "segments")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    objects: int
    bytes: int
    segments: int
    def __init__(self, partition: _Optional[int] = ..., objects: _Optional[int] = ..., bytes: _Optional[int] = ..., segments: _Optional[int] = ...) -> None: ...

class DeletionEstimate(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDeletionEstimate]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionDeletionEstimate, _Mapping]]] = ...) -> None: ...

class AlterTopicConfigsResponse(_message.Message):
    __slots__ = ("results", "error")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AlterTopicConfigsResult]
    error: _broker_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[AlterTopicConfigsResult, _Mapping]]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerDescription(_message.Message):
    __slots__ = ("broker_id", "host", "port", "fenced", "kafka_endpoints", "last_reached_ms", "reachable")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    KAFKA_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    LAST_REACHED_MS_FIELD_NUMBER: _ClassVar[int]
    REACHABLE_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    fenced: bool
    kafka_endpoints: _containers.RepeatedCompositeFieldContainer[_metadata_pb2.BrokerEndpoint]
    last_reached_ms: int
    reachable: bool
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., fenced: _Optional[bool] = ..., kafka_endpoints: _Optional[_Iterable[_Union[_metadata_pb2.BrokerEndpoint, _Mapping]]] = ..., last_reached_ms: _Optional[int] = ..., reachable: _Optional[bool] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "controller_endpoint", "metadata_mode", "brokers", "error")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    METADATA_MODE_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    controller_endpoint: str
    metadata_mode: str
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerDescription]
    error: _broker_pb2.Error
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., controller_endpoint: _Optional[str] = ..., metadata_mode: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[BrokerDescription, _Mapping]]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class DescribeMetadataRequest(_message.Message):
    __slots__ = ("topics", "all_topics")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    all_topics: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., all_topics: _Optional[bool] = ...) -> None: ...

class TopicPlacement(_message.Message):
    __slots__ = ("name", "topic_id", "replicas", "error", "unhosted_partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    UNHOSTED_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    replicas: _containers.RepeatedScalarFieldContainer[int]
    error: _broker_pb2.Error
    unhosted_partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., replicas: _Optional[_Iterable[int]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., unhosted_partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeMetadataResponse(_message.Message):
    __slots__ = ("error", "cluster_id", "brokers", "topics")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    cluster_id: str
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerDescription]
    topics: _containers.RepeatedCompositeFieldContainer[TopicPlacement]
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., cluster_id: _Optional[str] = ..., brokers: _Optional[_Iterable[_Union[BrokerDescription, _Mapping]]] = ..., topics: _Optional[_Iterable[_Union[TopicPlacement, _Mapping]]] = ...) -> None: ...

class ScramCredentialUpsertion(_message.Message):
    __slots__ = ("name", "mechanism", "iterations", "salt", "salted_password")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    SALTED_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ..., iterations: _Optional[int] = ..., salt: _Optional[bytes] = ..., salted_password: _Optional[bytes] = ...) -> None: ...

class ScramCredentialDeletion(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ...) -> None: ...

class AlterUserScramCredentialsRequest(_message.Message):
    __slots__ = ("deletions", "upsertions")
    DELETIONS_FIELD_NUMBER: _ClassVar[int]
    UPSERTIONS_FIELD_NUMBER: _ClassVar[int]
    deletions: _containers.RepeatedCompositeFieldContainer[ScramCredentialDeletion]
    upsertions: _containers.RepeatedCompositeFieldContainer[ScramCredentialUpsertion]
    def __init__(self, deletions: _Optional[_Iterable[_Union[ScramCredentialDeletion, _Mapping]]] = ..., upsertions: _Optional[_Iterable[_Union[ScramCredentialUpsertion, _Mapping]]] = ...) -> None: ...

class UserResult(_message.Message):
    __slots__ = ("user", "error")
    USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    user: str
    error: _broker_pb2.Error
    def __init__(self, user: _Optional[str] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class AlterUserScramCredentialsResponse(_message.Message):
    __slots__ = ("results", "error")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[UserResult]
    error: _broker_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[UserResult, _Mapping]]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class DescribeUserScramCredentialsRequest(_message.Message):
    __slots__ = ("users",)
    USERS_FIELD_NUMBER: _ClassVar[int]
    users: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, users: _Optional[_Iterable[str]] = ...) -> None: ...

class ScramCredentialInfo(_message.Message):
    __slots__ = ("mechanism", "iterations")
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    mechanism: int
    iterations: int
    def __init__(self, mechanism: _Optional[int] = ..., iterations: _Optional[int] = ...) -> None: ...

class UserScramCredentials(_message.Message):
    __slots__ = ("user", "error", "credentials")
    USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    user: str
    error: _broker_pb2.Error
    credentials: _containers.RepeatedCompositeFieldContainer[ScramCredentialInfo]
    def __init__(self, user: _Optional[str] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., credentials: _Optional[_Iterable[_Union[ScramCredentialInfo, _Mapping]]] = ...) -> None: ...

class DescribeUserScramCredentialsResponse(_message.Message):
    __slots__ = ("results", "error")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[UserScramCredentials]
    error: _broker_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[UserScramCredentials, _Mapping]]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class AclBinding(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class AclBindingFilter(_message.Message):
    __slots__ = ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations",)
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, creations: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class AclResult(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("results", "error")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AclResult]
    error: _broker_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[AclResult, _Mapping]]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: AclBindingFilter
    def __init__(self, filter: _Optional[_Union[AclBindingFilter, _Mapping]] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("error", "acls")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    acls: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., acls: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters",)
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBindingFilter]
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBindingFilter, _Mapping]]] = ...) -> None: ...

class DeleteAclsFilterResult(_message.Message):
    __slots__ = ("error", "deleted")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    deleted: _containers.RepeatedCompositeFieldContainer[AclBinding]
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., deleted: _Optional[_Iterable[_Union[AclBinding, _Mapping]]] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("results", "error")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeleteAclsFilterResult]
    error: _broker_pb2.Error
    def __init__(self, results: _Optional[_Iterable[_Union[DeleteAclsFilterResult, _Mapping]]] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...

class VerifyRemoteStorageRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class MissingRemoteSegment(_message.Message):
    __slots__ = ("topic", "partition", "segment_id", "tiered_epoch", "start_offset", "end_offset", "objects")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_ID_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    segment_id: bytes
    tiered_epoch: int
    start_offset: int
    end_offset: int
    objects: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., segment_id: _Optional[bytes] = ..., tiered_epoch: _Optional[int] = ..., start_offset: _Optional[int] = ..., end_offset: _Optional[int] = ..., objects: _Optional[_Iterable[str]] = ...) -> None: ...

class VerifyRemoteStorageResponse(_message.Message):
    __slots__ = ("error", "segments_checked", "missing")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_CHECKED_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    segments_checked: int
    missing: _containers.RepeatedCompositeFieldContainer[MissingRemoteSegment]
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., segments_checked: _Optional[int] = ..., missing: _Optional[_Iterable[_Union[MissingRemoteSegment, _Mapping]]] = ...) -> None: ...

class ScrubRemoteStorageRequest(_message.Message):
    __slots__ = ("min_age_ms", "execute")
    MIN_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_FIELD_NUMBER: _ClassVar[int]
    min_age_ms: int
    execute: bool
    def __init__(self, min_age_ms: _Optional[int] = ..., execute: _Optional[bool] = ...) -> None: ...

class ScrubRemoteStorageResponse(_message.Message):
    __slots__ = ("error", "scanned_objects", "orphan_objects", "orphan_bytes", "by_reason", "examples", "deleted")
    class ByReasonEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SCANNED_OBJECTS_FIELD_NUMBER: _ClassVar[int]
    ORPHAN_OBJECTS_FIELD_NUMBER: _ClassVar[int]
    ORPHAN_BYTES_FIELD_NUMBER: _ClassVar[int]
    BY_REASON_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    scanned_objects: int
    orphan_objects: int
    orphan_bytes: int
    by_reason: _containers.ScalarMap[str, int]
    examples: _containers.RepeatedScalarFieldContainer[str]
    deleted: int
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., scanned_objects: _Optional[int] = ..., orphan_objects: _Optional[int] = ..., orphan_bytes: _Optional[int] = ..., by_reason: _Optional[_Mapping[str, int]] = ..., examples: _Optional[_Iterable[str]] = ..., deleted: _Optional[int] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("registration",)
    REGISTRATION_FIELD_NUMBER: _ClassVar[int]
    registration: _metadata_pb2.RegisterBrokerRecord
    def __init__(self, registration: _Optional[_Union[_metadata_pb2.RegisterBrokerRecord, _Mapping]] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("error", "controller_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    controller_epoch: int
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., controller_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "incarnation_id")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation_id: bytes
    def __init__(self, broker_id: _Optional[int] = ..., incarnation_id: _Optional[bytes] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error", "fenced", "controller_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _broker_pb2.Error
    fenced: bool
    controller_epoch: int
    def __init__(self, error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ..., fenced: _Optional[bool] = ..., controller_epoch: _Optional[int] = ...) -> None: ...

class FetchMetadataRequest(_message.Message):
    __slots__ = ("broker_id", "from_offset")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    from_offset: int
    def __init__(self, broker_id: _Optional[int] = ..., from_offset: _Optional[int] = ...) -> None: ...

class FetchMetadataResponse(_message.Message):
    __slots__ = ("batch", "is_snapshot", "next_offset", "error")
    BATCH_FIELD_NUMBER: _ClassVar[int]
    IS_SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    batch: _metadata_pb2.MetadataRecordBatch
    is_snapshot: bool
    next_offset: int
    error: _broker_pb2.Error
    def __init__(self, batch: _Optional[_Union[_metadata_pb2.MetadataRecordBatch, _Mapping]] = ..., is_snapshot: _Optional[bool] = ..., next_offset: _Optional[int] = ..., error: _Optional[_Union[_broker_pb2.Error, _Mapping]] = ...) -> None: ...
