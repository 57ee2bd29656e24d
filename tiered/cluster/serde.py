"""Conversions between the cluster metadata domain (``tiered.cluster.model``) and the metadata
records of ``proto/tiered/v1/metadata.proto``.

The controller writes these records to its log (KRaft mode) and brokers follow them, so both
sides derive their ``MetadataImage`` with the same ``apply_record``. This module must stay free of
controller imports. UUIDs travel as their 16 raw bytes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence

from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    MetadataImage,
    PartitionDeleteProgress,
    TieredState,
    TopicMetadata,
    frozen_configs,
)
from tiered.net import Listener
from tiered.rpc.v1 import metadata_pb2
from tiered.security.acl_serde import acl_record, binding_from_record
from tiered.security.scram import ScramCredential, ScramMechanism

logger = logging.getLogger(__name__)

__all__ = [
    "apply_batch",
    "apply_record",
    "apply_records",
    "broker_endpoints_from_proto",
    "broker_endpoints_to_proto",
    "broker_registration_from_proto",
    "broker_registration_to_proto",
    "controller_epoch_record",
    "delete_job_from_proto",
    "delete_job_state_from_proto",
    "delete_job_state_to_proto",
    "delete_job_to_proto",
    "delete_job_to_record",
    "image_from_snapshot",
    "image_to_batch",
    "image_to_records",
    "partition_records",
    "registration_to_record",
    "remove_scram_credential_record",
    "remove_topic_record",
    "scram_credential_record",
    "tiered_state_from_proto",
    "tiered_state_to_proto",
    "topic_to_records",
    "topic_update_records",
    "uuid_from_bytes",
]

_STATE_TO_PROTO: dict[TieredState, metadata_pb2.TieredState] = {
    TieredState.ENABLED: metadata_pb2.ENABLED,
    TieredState.DISABLING: metadata_pb2.DISABLING,
    TieredState.DISABLED: metadata_pb2.DISABLED,
}
_STATE_FROM_PROTO: dict[int, TieredState] = {int(v): k for k, v in _STATE_TO_PROTO.items()}
_JOB_STATE_TO_PROTO: dict[DeleteJobState, metadata_pb2.DeleteJobState] = {
    DeleteJobState.PENDING: metadata_pb2.PENDING,
    DeleteJobState.RUNNING: metadata_pb2.RUNNING,
    DeleteJobState.DONE: metadata_pb2.DONE,
    DeleteJobState.SCHEDULED: metadata_pb2.SCHEDULED,
    DeleteJobState.CANCELLED: metadata_pb2.CANCELLED,
}
_JOB_STATE_FROM_PROTO: dict[int, DeleteJobState] = {
    int(v): k for k, v in _JOB_STATE_TO_PROTO.items()
}


# --------------------------------------------------------------------------------- values


def uuid_from_bytes(raw: bytes, what: str = "uuid") -> uuid.UUID:
    """The UUID of 16 raw bytes; ``ValueError`` naming ``what`` otherwise."""
    if len(raw) != 16:
        raise ValueError(f"{what} must be 16 bytes, got {len(raw)}")
    # UUID(bytes=...) re-checks what is checked here; loading 100k topics builds 100k of them.
    value = object.__new__(uuid.UUID)
    object.__setattr__(value, "int", int.from_bytes(raw, "big"))
    object.__setattr__(value, "is_safe", uuid.SafeUUID.unknown)
    return value


def tiered_state_to_proto(state: TieredState) -> metadata_pb2.TieredState:
    return _STATE_TO_PROTO[state]


def tiered_state_from_proto(state: int) -> TieredState:
    """``ValueError`` for TIERED_STATE_UNSPECIFIED or a value this version does not know."""
    try:
        return _STATE_FROM_PROTO[int(state)]
    except KeyError:
        raise ValueError(f"tiered state {state} is not ENABLED, DISABLING or DISABLED") from None


def broker_endpoints_to_proto(endpoints: Iterable[Listener]) -> list[metadata_pb2.BrokerEndpoint]:
    return [metadata_pb2.BrokerEndpoint(name=e.name, host=e.host, port=e.port) for e in endpoints]


def broker_endpoints_from_proto(
    endpoints: Iterable[metadata_pb2.BrokerEndpoint],
) -> tuple[Listener, ...]:
    return tuple(Listener(e.name, e.host, e.port) for e in endpoints)


def broker_registration_to_proto(
    registration: BrokerRegistration,
) -> metadata_pb2.RegisterBrokerRecord:
    return metadata_pb2.RegisterBrokerRecord(
        broker_id=registration.broker_id,
        host=registration.host,
        port=registration.port,
        incarnation_id=registration.incarnation_id.bytes,
        kafka_endpoints=broker_endpoints_to_proto(registration.kafka_endpoints),
    )


def broker_registration_from_proto(
    record: metadata_pb2.RegisterBrokerRecord,
) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=record.broker_id,
        host=record.host,
        port=record.port,
        incarnation_id=uuid_from_bytes(record.incarnation_id, "incarnation_id"),
        kafka_endpoints=broker_endpoints_from_proto(record.kafka_endpoints),
    )


def delete_job_state_to_proto(state: DeleteJobState) -> metadata_pb2.DeleteJobState:
    return _JOB_STATE_TO_PROTO[state]


def delete_job_state_from_proto(state: int) -> DeleteJobState:
    """``ValueError`` for DELETE_JOB_STATE_UNSPECIFIED or a value this version does not know."""
    try:
        return _JOB_STATE_FROM_PROTO[int(state)]
    except KeyError:
        raise ValueError(
            f"delete job state {state} is not SCHEDULED, PENDING, RUNNING, DONE or CANCELLED"
        ) from None


def delete_job_to_proto(job: DeleteJob) -> metadata_pb2.DeleteJobRecord:
    return metadata_pb2.DeleteJobRecord(
        topic_id=job.topic_id.bytes,
        topic=job.topic,
        tiered_epoch=job.tiered_epoch,
        partition_count=job.partition_count,
        state=delete_job_state_to_proto(job.state),
        progress=[
            metadata_pb2.PartitionDeleteProgress(
                partition=p.partition,
                objects_total=p.objects_total,
                objects_deleted=p.objects_deleted,
                segments_deleted=p.segments_deleted,
                done=p.done,
            )
            for p in job.progress
        ],
        attempts=job.attempts,
        last_error=job.last_error,
        topic_deleted=job.topic_deleted,
        starts_at_ms=job.starts_at_ms,
    )


def delete_job_from_proto(
    record: metadata_pb2.DeleteJobRecord | metadata_pb2.MetadataRecord,
) -> DeleteJob:
    """The job of a ``DeleteJobRecord`` (or of a ``MetadataRecord`` holding one). ``ValueError``
    for a malformed topic id or an unknown state."""
    if isinstance(record, metadata_pb2.MetadataRecord):
        if record.WhichOneof("record") != "delete_job":
            raise ValueError(f"not a delete job record: {record.WhichOneof('record')}")
        record = record.delete_job
    return DeleteJob(
        topic=record.topic,
        topic_id=uuid_from_bytes(record.topic_id, "DeleteJobRecord.topic_id"),
        tiered_epoch=record.tiered_epoch,
        partition_count=record.partition_count,
        state=delete_job_state_from_proto(record.state),
        progress=tuple(
            PartitionDeleteProgress(
                partition=p.partition,
                objects_total=p.objects_total,
                objects_deleted=p.objects_deleted,
                segments_deleted=p.segments_deleted,
                done=p.done,
            )
            for p in record.progress
        ),
        attempts=record.attempts,
        last_error=record.last_error,
        topic_deleted=record.topic_deleted,
        starts_at_ms=record.starts_at_ms if record.HasField("starts_at_ms") else None,
    )


# --------------------------------------------------------------------------------- records


def registration_to_record(registration: BrokerRegistration) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(register_broker=broker_registration_to_proto(registration))


def delete_job_to_record(job: DeleteJob) -> metadata_pb2.MetadataRecord:
    """A DeleteJobRecord: creates the job, or replaces the one with the same key."""
    return metadata_pb2.MetadataRecord(delete_job=delete_job_to_proto(job))


def _config_record(topic: TopicMetadata) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(
        config=metadata_pb2.ConfigRecord(topic_id=topic.topic_id.bytes, configs=topic.configs)
    )


def _tiered_state_record(topic: TopicMetadata) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(
        tiered_state=metadata_pb2.TieredStateRecord(
            topic_id=topic.topic_id.bytes,
            state=tiered_state_to_proto(topic.tiered_state),
            tiered_epoch=topic.tiered_epoch,
        )
    )


def topic_to_records(topic: TopicMetadata) -> list[metadata_pb2.MetadataRecord]:
    """A whole topic: TopicRecord, ConfigRecord, TieredStateRecord (one atomic batch)."""
    return [
        metadata_pb2.MetadataRecord(
            topic=metadata_pb2.TopicRecord(
                name=topic.name, topic_id=topic.topic_id.bytes, replicas=topic.replicas
            )
        ),
        _config_record(topic),
        _tiered_state_record(topic),
    ]


def partition_records(
    before: TopicMetadata, after: TopicMetadata
) -> list[metadata_pb2.MetadataRecord]:
    """A PartitionRecord for each partition ``after`` has beyond ``before`` (CreatePartitions)."""
    return [
        metadata_pb2.MetadataRecord(
            partition=metadata_pb2.PartitionRecord(
                topic_id=after.topic_id.bytes, partition_id=p, replicas=[after.replicas[p]]
            )
        )
        for p in range(before.partition_count, after.partition_count)
    ]


def topic_update_records(topic: TopicMetadata) -> list[metadata_pb2.MetadataRecord]:
    """A topic's configs and tiered state (not its assignment): ConfigRecord, TieredStateRecord."""
    return [_config_record(topic), _tiered_state_record(topic)]


def remove_topic_record(topic_id: uuid.UUID) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(
        remove_topic=metadata_pb2.RemoveTopicRecord(topic_id=topic_id.bytes)
    )


def scram_credential_record(
    user: str, mechanism: ScramMechanism, credential: ScramCredential
) -> metadata_pb2.MetadataRecord:
    """Creates the credential or replaces the one of the same (user, mechanism)."""
    return metadata_pb2.MetadataRecord(
        user_scram_credential=metadata_pb2.UserScramCredentialRecord(
            name=user,
            mechanism=mechanism.type_id,
            salt=credential.salt,
            stored_key=credential.stored_key,
            server_key=credential.server_key,
            iterations=credential.iterations,
        )
    )


def remove_scram_credential_record(
    user: str, mechanism: ScramMechanism
) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(
        remove_user_scram_credential=metadata_pb2.RemoveUserScramCredentialRecord(
            name=user, mechanism=mechanism.type_id
        )
    )


def controller_epoch_record(
    controller_id: int, controller_epoch: int, endpoint: str
) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(
        controller_epoch=metadata_pb2.ControllerEpochRecord(
            controller_id=controller_id, controller_epoch=controller_epoch, endpoint=endpoint
        )
    )


def image_to_batch(image: MetadataImage, base_offset: int) -> metadata_pb2.MetadataRecordBatch:
    """The whole image as one batch of records (a snapshot, ``base_offset`` = the offset it
    stands at): ``image_from_snapshot`` of it gives an image equal to ``image``. Built in place,
    so that no record is built apart and then copied into the batch."""
    batch = metadata_pb2.MetadataRecordBatch(base_offset=base_offset)
    records = batch.records
    epoch = records.add().controller_epoch
    epoch.controller_id = image.controller_id
    epoch.controller_epoch = image.controller_epoch
    epoch.endpoint = image.controller_endpoint
    for registration in image.brokers.values():
        records.add().register_broker.CopyFrom(broker_registration_to_proto(registration))
    if image.topics:
        _fill_topic_table(records.add().topic_table, image.topics.values())
    for job in image.delete_jobs.values():
        records.add().delete_job.CopyFrom(delete_job_to_proto(job))
    for (user, mechanism), credential in image.scram_credentials.items():
        records.append(scram_credential_record(user, mechanism, credential))
    for acl_id, binding in image.acls.items():
        records.append(acl_record(acl_id, binding))
    return batch


def _fill_topic_table(
    table: metadata_pb2.TopicTableRecord, topics: Iterable[TopicMetadata]
) -> None:
    """``topics`` as one TopicTableRecord, column by column; each distinct config set (the
    same shared copy, ``frozen_configs``) written once."""
    set_index: dict[int, int] = {}
    names: list[str] = []
    ids = bytearray()
    counts: list[int] = []
    replicas: list[int] = []
    indexes: list[int] = []
    states: list[metadata_pb2.TieredState] = []
    epochs: list[int] = []
    for topic in topics:
        names.append(topic.name)
        ids += topic.topic_id.bytes
        counts.append(len(topic.replicas))
        replicas.extend(topic.replicas)
        index = set_index.get(id(topic.configs))
        if index is None:
            index = set_index[id(topic.configs)] = len(table.config_sets)
            config_set = table.config_sets.add()
            config_set.keys.extend(topic.configs.keys())
            config_set.values.extend(topic.configs.values())
        indexes.append(index)
        states.append(_STATE_TO_PROTO[topic.tiered_state])
        epochs.append(topic.tiered_epoch)
    table.names.extend(names)
    table.topic_ids = bytes(ids)
    table.replica_counts.extend(counts)
    table.replicas.extend(replicas)
    table.config_set_index.extend(indexes)
    table.states.extend(states)
    table.tiered_epochs.extend(epochs)


def _apply_topic_table(image: MetadataImage, table: metadata_pb2.TopicTableRecord) -> None:
    """Every topic of a TopicTableRecord, each as its three records would put it. Columns of
    different lengths, an id not 16 bytes or a config set that does not exist are malformed
    (ValueError, before anything is applied)."""
    names = list(table.names)
    count = len(names)
    ids = table.topic_ids
    counts = list(table.replica_counts)
    replicas = list(table.replicas)
    indexes = list(table.config_set_index)
    state_of = {state: tiered_state_from_proto(state) for state in set(table.states)}
    states = [state_of[state] for state in table.states]
    epochs = list(table.tiered_epochs)
    config_sets = [
        frozen_configs(dict(zip(c.keys, c.values, strict=True))) for c in table.config_sets
    ]
    if (
        {len(counts), len(indexes), len(states), len(epochs)} != {count}
        or len(ids) != 16 * count
        or sum(counts) != len(replicas)
        or any(not 0 <= i < len(config_sets) for i in indexes)
    ):
        raise ValueError(
            f"TopicTableRecord of {count} topics is malformed: {len(ids)} id bytes, "
            f"{len(counts)} replica counts for {len(replicas)} replicas, {len(indexes)} config "
            f"set indexes into {len(config_sets)} sets, {len(states)} states, {len(epochs)} "
            "epochs"
        )
    topics: list[TopicMetadata] = []
    start = 0
    for i, name in enumerate(names):
        end = start + counts[i]
        topics.append(
            TopicMetadata(
                name,
                uuid_from_bytes(ids[16 * i : 16 * i + 16]),
                tuple(replicas[start:end]),
                config_sets[indexes[i]],
                states[i],
                epochs[i],
            )
        )
        start = end
    if image.put_new_topics(topics):  # a snapshot's load: an empty image
        return
    for topic in topics:
        existing = image.topic_by_id(topic.topic_id)
        if existing is not None and existing.name != topic.name:
            image.remove_topic(topic.topic_id)
        image.put_topic(topic)


def image_to_records(image: MetadataImage) -> list[metadata_pb2.MetadataRecord]:
    """The whole image as records (for snapshots): applying them in order to an empty image
    gives an image equal to ``image`` (``offset`` aside, which belongs to the batch)."""
    return list(image_to_batch(image, image.offset).records)


# --------------------------------------------------------------------------------- applying


def _known_topic(
    image: MetadataImage, raw_id: bytes, kind: str
) -> tuple[uuid.UUID, TopicMetadata | None]:
    topic_id = uuid_from_bytes(raw_id, f"{kind}.topic_id")
    topic = image.topic_by_id(topic_id)
    if topic is None:
        logger.debug("%s for unknown topic id %s ignored", kind, topic_id)
    return topic_id, topic


def apply_record(image: MetadataImage, record: metadata_pb2.MetadataRecord) -> None:
    """Applies one record to ``image`` (mutating it; ``image.offset`` is the caller's). Records
    are idempotent, so re-applying a batch is harmless. Config, tiered state and remove records
    for a topic id the image does not know are ignored (debug log); a record of a kind this
    version does not know is ignored with a warning. A DeleteJobRecord replaces the job with the
    same (topic id, tiered epoch), known topic or not; a SCRAM credential record replaces the
    credential of its (user, mechanism), and removing one that is not there does nothing; an ACL
    record adds (or removes) the ACL with its id. Malformed ids, states, mechanisms or ACLs raise
    ValueError."""
    kind = record.WhichOneof("record")
    if kind == "topic":
        t = record.topic
        topic_id = uuid_from_bytes(t.topic_id, "TopicRecord.topic_id")
        existing = image.topic_by_id(topic_id)
        if existing is not None and existing.name == t.name:
            # Re-applied: keep configs and state, take the assignment.
            image.put_topic(
                TopicMetadata(
                    name=t.name,
                    topic_id=topic_id,
                    replicas=tuple(t.replicas),
                    configs=existing.configs,
                    tiered_state=existing.tiered_state,
                    tiered_epoch=existing.tiered_epoch,
                )
            )
        else:
            if existing is not None:
                image.remove_topic(topic_id)
            image.put_topic(
                TopicMetadata(name=t.name, topic_id=topic_id, replicas=tuple(t.replicas))
            )
    elif kind == "config":
        _, topic = _known_topic(image, record.config.topic_id, "ConfigRecord")
        if topic is not None:
            image.put_topic(topic.with_configs(dict(record.config.configs)))
    elif kind == "tiered_state":
        ts = record.tiered_state
        _, topic = _known_topic(image, ts.topic_id, "TieredStateRecord")
        if topic is not None:
            image.put_topic(
                topic.with_tiered_state(tiered_state_from_proto(ts.state), ts.tiered_epoch)
            )
    elif kind == "partition":
        _apply_partition(image, record.partition)
    elif kind == "topic_table":
        _apply_topic_table(image, record.topic_table)
    elif kind == "remove_topic":
        topic_id, topic = _known_topic(image, record.remove_topic.topic_id, "RemoveTopicRecord")
        if topic is not None:
            image.remove_topic(topic_id)
    elif kind == "register_broker":
        registration = broker_registration_from_proto(record.register_broker)
        image.brokers[registration.broker_id] = registration
    elif kind == "delete_job":
        # Jobs outlive their topic: applied whether or not the image knows the topic id.
        job = delete_job_from_proto(record.delete_job)
        image.delete_jobs[job.key] = job
    elif kind == "user_scram_credential":
        c = record.user_scram_credential
        image.scram_credentials[(c.name, ScramMechanism.from_type(c.mechanism))] = ScramCredential(
            c.salt, c.stored_key, c.server_key, c.iterations
        )
    elif kind == "remove_user_scram_credential":
        r = record.remove_user_scram_credential
        image.scram_credentials.pop((r.name, ScramMechanism.from_type(r.mechanism)), None)
    elif kind == "access_control_entry":
        image.acls.put(*binding_from_record(record.access_control_entry))
    elif kind == "remove_access_control_entry":
        image.acls.remove(uuid_from_bytes(record.remove_access_control_entry.id, "ACL id"))
    elif kind == "controller_epoch":
        ce = record.controller_epoch
        image.controller_id = ce.controller_id
        image.controller_epoch = ce.controller_epoch
        image.controller_endpoint = ce.endpoint
    else:
        logger.warning("metadata record of unknown kind ignored: %r", record)


def _apply_partition(image: MetadataImage, record: metadata_pb2.PartitionRecord) -> None:
    """A partition added to a known topic: the next one, or one it has (re-applied: its broker
    is taken). A gap, or a partition without exactly one replica, is malformed (ValueError)."""
    _, topic = _known_topic(image, record.topic_id, "PartitionRecord")
    if topic is None:
        return
    if len(record.replicas) != 1:
        raise ValueError(
            f"PartitionRecord of {topic.name} partition {record.partition_id} has "
            f"{len(record.replicas)} replicas; valid: exactly 1"
        )
    if not 0 <= record.partition_id <= topic.partition_count:
        raise ValueError(
            f"PartitionRecord of {topic.name} names partition {record.partition_id}; valid: "
            f"0..{topic.partition_count} (the topic has {topic.partition_count})"
        )
    replicas = list(topic.replicas)
    if record.partition_id == topic.partition_count:
        replicas.append(record.replicas[0])
    else:
        replicas[record.partition_id] = record.replicas[0]
    image.put_topic(topic.with_replicas(tuple(replicas)))


def apply_batch(image: MetadataImage, batch: metadata_pb2.MetadataRecordBatch) -> None:
    """Applies a log batch and advances ``image.offset`` to its last record."""
    apply_records(image, batch.records)
    if batch.records:
        image.offset = batch.base_offset + len(batch.records) - 1


def image_from_snapshot(batch: metadata_pb2.MetadataRecordBatch) -> MetadataImage:
    """The image a snapshot batch describes (``base_offset`` = the offset of the last record the
    snapshot covers): the image stands at that offset."""
    image = MetadataImage()
    apply_records(image, batch.records)
    image.offset = batch.base_offset
    return image


def apply_records(image: MetadataImage, records: Sequence[metadata_pb2.MetadataRecord]) -> None:
    """``apply_record`` for each record in order. A TopicRecord followed by the ConfigRecord and
    TieredStateRecord of the same topic (how topics are created and snapshotted) is applied as
    one step, with the same result: the topic is built and put into the image once rather than
    once per record."""
    i, n = 0, len(records)
    while i < n:
        record = records[i]
        if (
            i + 2 < n
            and record.WhichOneof("record") == "topic"
            and _apply_whole_topic(image, record.topic, records[i + 1], records[i + 2])
        ):
            i += 3
            continue
        apply_record(image, record)
        i += 1


def _apply_whole_topic(
    image: MetadataImage,
    t: metadata_pb2.TopicRecord,
    config: metadata_pb2.MetadataRecord,
    state: metadata_pb2.MetadataRecord,
) -> bool:
    raw_id = t.topic_id
    if (
        config.WhichOneof("record") != "config"
        or state.WhichOneof("record") != "tiered_state"
        or config.config.topic_id != raw_id
        or state.tiered_state.topic_id != raw_id
    ):
        return False
    topic_id = uuid_from_bytes(raw_id, "TopicRecord.topic_id")
    ts = state.tiered_state
    topic = TopicMetadata(
        name=t.name,
        topic_id=topic_id,
        replicas=tuple(t.replicas),
        configs=config.config.configs,
        tiered_state=tiered_state_from_proto(ts.state),
        tiered_epoch=ts.tiered_epoch,
    )
    existing = image.topic_by_id(topic_id)
    if existing is not None and existing.name != t.name:
        image.remove_topic(topic_id)
    image.put_topic(topic)
    return True
