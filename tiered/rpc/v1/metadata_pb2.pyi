from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TieredState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIERED_STATE_UNSPECIFIED: _ClassVar[TieredState]
    ENABLED: _ClassVar[TieredState]
    DISABLING: _ClassVar[TieredState]
    DISABLED: _ClassVar[TieredState]

class DeleteJobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DELETE_JOB_STATE_UNSPECIFIED: _ClassVar[DeleteJobState]
    PENDING: _ClassVar[DeleteJobState]
    RUNNING: _ClassVar[DeleteJobState]
    DONE: _ClassVar[DeleteJobState]
    SCHEDULED: _ClassVar[DeleteJobState]
    CANCELLED: _ClassVar[DeleteJobState]
TIERED_STATE_UNSPECIFIED: TieredState
ENABLED: TieredState
DISABLING: TieredState
DISABLED: TieredState
DELETE_JOB_STATE_UNSPECIFIED: DeleteJobState
PENDING: DeleteJobState
RUNNING: DeleteJobState
DONE: DeleteJobState
SCHEDULED: DeleteJobState
CANCELLED: DeleteJobState

class BrokerEndpoint(_message.Message):
    __slots__ = ("name", "host", "port")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class RegisterBrokerRecord(_message.Message):
    __slots__ = ("broker_id", "host", "port", "incarnation_id", "kafka_endpoints")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    KAFKA_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    host: str
    port: int
    incarnation_id: bytes
    kafka_endpoints: _containers.RepeatedCompositeFieldContainer[BrokerEndpoint]
    def __init__(self, broker_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., incarnation_id: _Optional[bytes] = ..., kafka_endpoints: _Optional[_Iterable[_Union[BrokerEndpoint, _Mapping]]] = ...) -> None: ...

class TopicRecord(_message.Message):
    __slots__ = ("name", "topic_id", "replicas")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: bytes
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[bytes] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class ConfigRecord(_message.Message):
    __slots__ = ("topic_id", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    configs: _containers.ScalarMap[str, str]
    def __init__(self, topic_id: _Optional[bytes] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TieredStateRecord(_message.Message):
    __slots__ = ("topic_id", "state", "tiered_epoch")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    state: TieredState
    tiered_epoch: int
    def __init__(self, topic_id: _Optional[bytes] = ..., state: _Optional[_Union[TieredState, str]] = ..., tiered_epoch: _Optional[int] = ...) -> None: ...

class PartitionRecord(_message.Message):
    __slots__ = ("topic_id", "partition_id", "replicas")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    partition_id: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic_id: _Optional[bytes] = ..., partition_id: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class RemoveTopicRecord(_message.Message):
    __slots__ = ("topic_id",)
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    def __init__(self, topic_id: _Optional[bytes] = ...) -> None: ...

class ControllerEpochRecord(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "endpoint")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    endpoint: str
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., endpoint: _Optional[str] = ...) -> None: ...

class PartitionDeleteProgress(_message.Message):
    __slots__ = ("partition", "objects_total", "objects_deleted", "segments_deleted", "done")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    OBJECTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_DELETED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    partition: int
    objects_total: int
    objects_deleted: int
    segments_deleted: int
    done: bool
    def __init__(self, partition: _Optional[int] = ..., objects_total: _Optional[int] = ..., objects_deleted: _Optional[int] = ..., segments_deleted: _Optional[int] = ..., done: _Optional[bool] = ...) -> None: ...

class DeleteJobRecord(_message.Message):
    __slots__ = ("topic_id", "topic", "tiered_epoch", "partition_count", "state", "progress", "attempts", "last_error", "topic_deleted", "starts_at_ms")
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_DELETED_FIELD_NUMBER: _ClassVar[int]
    STARTS_AT_MS_FIELD_NUMBER: _ClassVar[int]
    topic_id: bytes
    topic: str
    tiered_epoch: int
    partition_count: int
    state: DeleteJobState
    progress: _containers.RepeatedCompositeFieldContainer[PartitionDeleteProgress]
    attempts: int
    last_error: str
    topic_deleted: bool
    starts_at_ms: int
    def __init__(self, topic_id: _Optional[bytes] = ..., topic: _Optional[str] = ..., tiered_epoch: _Optional[int] = ..., partition_count: _Optional[int] = ..., state: _Optional[_Union[DeleteJobState, str]] = ..., progress: _Optional[_Iterable[_Union[PartitionDeleteProgress, _Mapping]]] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., topic_deleted: _Optional[bool] = ..., starts_at_ms: _Optional[int] = ...) -> None: ...

class UserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "mechanism", "salt", "stored_key", "server_key", "iterations")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    STORED_KEY_FIELD_NUMBER: _ClassVar[int]
    SERVER_KEY_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ..., salt: _Optional[bytes] = ..., stored_key: _Optional[bytes] = ..., server_key: _Optional[bytes] = ..., iterations: _Optional[int] = ...) -> None: ...

class RemoveUserScramCredentialRecord(_message.Message):
    __slots__ = ("name", "mechanism")
    NAME_FIELD_NUMBER: _ClassVar[int]
    MECHANISM_FIELD_NUMBER: _ClassVar[int]
    name: str
    mechanism: int
    def __init__(self, name: _Optional[str] = ..., mechanism: _Optional[int] = ...) -> None: ...

class AccessControlEntryRecord(_message.Message):
    __slots__ = ("id", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
    def __init__(self, id: _Optional[bytes] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class RemoveAccessControlEntryRecord(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    def __init__(self, id: _Optional[bytes] = ...) -> None: ...

class TopicConfigSet(_message.Message):
    __slots__ = ("keys", "values")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class TopicTableRecord(_message.Message):
    __slots__ = ("names", "topic_ids", "replica_counts", "replicas", "config_sets", "config_set_index", "states", "tiered_epochs")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TOPIC_IDS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_COUNTS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SETS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_SET_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    TIERED_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    topic_ids: bytes
    replica_counts: _containers.RepeatedScalarFieldContainer[int]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    config_sets: _containers.RepeatedCompositeFieldContainer[TopicConfigSet]
    config_set_index: _containers.RepeatedScalarFieldContainer[int]
    states: _containers.RepeatedScalarFieldContainer[TieredState]
    tiered_epochs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, names: _Optional[_Iterable[str]] = ..., topic_ids: _Optional[bytes] = ..., replica_counts: _Optional[_Iterable[int]] = ..., replicas: _Optional[_Iterable[int]] = ..., config_sets: _Optional[_Iterable[_Union[TopicConfigSet, _Mapping]]] = ..., config_set_index: _Optional[_Iterable[int]] = ..., states: _Optional[_Iterable[_Union[TieredState, str]]] = ..., tiered_epochs: _Optional[_Iterable[int]] = ...) -> None: ...

class MetadataRecord(_message.Message):
    __slots__ = ("register_broker", "topic", "config", "tiered_state", "remove_topic", "controller_epoch", "delete_job", "access_control_entry", "remove_access_control_entry", "user_scram_credential", "remove_user_scram_credential", "partition", "topic_table")
    REGISTER_BROKER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    TIERED_STATE_FIELD_NUMBER: _ClassVar[int]
    REMOVE_TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DELETE_JOB_FIELD_NUMBER: _ClassVar[int]
    ACCESS_CONTROL_ENTRY_FIELD_NUMBER: _ClassVar[int]
    REMOVE_ACCESS_CONTROL_ENTRY_FIELD_NUMBER: _ClassVar[int]
    USER_SCRAM_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    REMOVE_USER_SCRAM_CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_TABLE_FIELD_NUMBER: _ClassVar[int]
    register_broker: RegisterBrokerRecord
    topic: TopicRecord
    config: ConfigRecord
    tiered_state: TieredStateRecord
    remove_topic: RemoveTopicRecord
    controller_epoch: ControllerEpochRecord
    delete_job: DeleteJobRecord
    access_control_entry: AccessControlEntryRecord
    remove_access_control_entry: RemoveAccessControlEntryRecord
    user_scram_credential: UserScramCredentialRecord
    remove_user_scram_credential: RemoveUserScramCredentialRecord
    partition: PartitionRecord
    topic_table: TopicTableRecord
    def __init__(self, register_broker: _Optional[_Union[RegisterBrokerRecord, _Mapping]] = ..., topic: _Optional[_Union[TopicRecord, _Mapping]] = ..., config: _Optional[_Union[ConfigRecord, _Mapping]] = ..., tiered_state: _Optional[_Union[TieredStateRecord, _Mapping]] = ..., remove_topic: _Optional[_Union[RemoveTopicRecord, _Mapping]] = ..., controller_epoch: _Optional[_Union[ControllerEpochRecord, _Mapping]] = ..., delete_job: _Optional[_Union[DeleteJobRecord, _Mapping]] = ..., access_control_entry: _Optional[_Union[AccessControlEntryRecord, _Mapping]] = ..., remove_access_control_entry: _Optional[_Union[RemoveAccessControlEntryRecord, _Mapping]] = ..., user_scram_credential: _Optional[_Union[UserScramCredentialRecord, _Mapping]] = ..., remove_user_scram_credential: _Optional[_Union[RemoveUserScramCredentialRecord, _Mapping]] = ..., partition: _Optional[_Union[PartitionRecord, _Mapping]] = ..., topic_table: _Optional[_Union[TopicTableRecord, _Mapping]] = ...) -> None: ...

class MetadataRecordBatch(_message.Message):
    __slots__ = ("base_offset", "records")
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    base_offset: int
    records: _containers.RepeatedCompositeFieldContainer[MetadataRecord]
    def __init__(self, base_offset: _Optional[int] = ..., records: _Optional[_Iterable[_Union[MetadataRecord, _Mapping]]] = ...) -> None: ...
