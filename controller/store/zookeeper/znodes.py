"""The data of the znodes only the controller writes: a topic's (assignment, tiered state and
epoch, configs) in Kafka's formats, and delete jobs as protobuf ``DeleteJobRecord`` bytes (the
codec of ``tiered.cluster.serde``, which the KRaft log uses too).

Decoders raise ``MetadataStoreError`` naming the znode: bad data in ZooKeeper is a store failure.
"""

from __future__ import annotations

import base64
import functools
import json
import uuid
from collections.abc import Mapping

from google.protobuf import json_format
from google.protobuf.message import Error as ProtobufError

from controller.store.base import MetadataStoreError
from tiered.cluster import zk_paths
from tiered.cluster.model import DeleteJob, TieredState, TopicMetadata, frozen_configs
from tiered.cluster.serde import delete_job_from_proto, delete_job_to_proto
from tiered.rpc.v1 import metadata_pb2

__all__ = [
    "CONFIG_ZNODE_VERSION",
    "TOPIC_ZNODE_VERSION",
    "ZnodeOp",
    "check_topic_name",
    "decode_delete_job",
    "decode_topic",
    "encode_delete_job",
    "parse_int",
    "topic_assignment_op",
    "topic_create_ops",
    "topic_delete_ops",
    "topic_update_ops",
]

TOPIC_ZNODE_VERSION = 3
CONFIG_ZNODE_VERSION = 1

# ("create" | "create_sequential" | "set" | "delete", path under the chroot, data)
ZnodeOp = tuple[str, str, bytes]

_BAD_DATA = (ValueError, TypeError, KeyError, AttributeError, ProtobufError)
_STATES = {state.value.encode(): state for state in TieredState}


def _json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def check_topic_name(name: str) -> None:
    if not name or name in {".", ".."} or "/" in name:
        raise ValueError(f"topic name {name!r} cannot be a znode name")


def parse_int(path: str, data: bytes) -> int:
    """The decimal number a znode holds (``/controller_epoch``, a tiered epoch)."""
    try:
        return int(data.decode().strip())
    except ValueError as e:
        raise MetadataStoreError(f"{path}: not a decimal number: {data[:50]!r}") from e


# ------------------------------------------------------------------------------------ topics


def _config_json(topic: TopicMetadata) -> bytes:
    return _json({"version": CONFIG_ZNODE_VERSION, "config": dict(topic.configs)})


def _assignment_json(topic: TopicMetadata) -> bytes:
    return _json(
        {
            "version": TOPIC_ZNODE_VERSION,
            "topic_id": str(topic.topic_id),
            "partitions": {str(p): [b] for p, b in enumerate(topic.replicas)},
        }
    )


def topic_assignment_op(topic: TopicMetadata) -> ZnodeOp:
    """The set of a topic's assignment znode to its (grown) partitions (``add_partitions``, as
    Kafka's ``AdminZkClient.addPartitions`` rewrites ``/brokers/topics/{topic}``)."""
    check_topic_name(topic.name)
    return ("set", zk_paths.topic(topic.name), _assignment_json(topic))


def topic_create_ops(topic: TopicMetadata) -> list[ZnodeOp]:
    """The znodes of a new topic (assignment, tiered storage state and epoch, configs), as the
    store's ``writes.create_topic`` commits them in one multi; paths are relative to the chroot.
    Bulk loaders (``bench/seed_metadata.py``) write the same ops, many topics a transaction."""
    check_topic_name(topic.name)
    return [
        ("create", zk_paths.topic(topic.name), _assignment_json(topic)),
        ("create", zk_paths.tiered_storage(topic.name), b""),
        ("create", zk_paths.tiered_epoch(topic.name), str(topic.tiered_epoch).encode()),
        ("create", zk_paths.tiered_state(topic.name), topic.tiered_state.value.encode()),
        ("create", zk_paths.topic_config(topic.name), _config_json(topic)),
    ]


def topic_update_ops(topic: TopicMetadata) -> list[ZnodeOp]:
    """The sets of a topic's configs, tiered state and tiered epoch (``update_topics``)."""
    check_topic_name(topic.name)
    return [
        ("set", zk_paths.topic_config(topic.name), _config_json(topic)),
        ("set", zk_paths.tiered_state(topic.name), topic.tiered_state.value.encode()),
        ("set", zk_paths.tiered_epoch(topic.name), str(topic.tiered_epoch).encode()),
    ]


def topic_delete_ops(name: str) -> list[ZnodeOp]:
    """The deletes of a topic's znodes, children first (``delete_topic``)."""
    check_topic_name(name)
    return [
        ("delete", zk_paths.tiered_state(name), b""),
        ("delete", zk_paths.tiered_epoch(name), b""),
        ("delete", zk_paths.tiered_storage(name), b""),
        ("delete", zk_paths.topic(name), b""),
        ("delete", zk_paths.topic_config(name), b""),
    ]


@functools.lru_cache(maxsize=4096)
def _configs_of_znode(data: bytes) -> Mapping[str, str]:
    """The configs of a ``/config/topics/{topic}`` znode, parsed once per distinct content (most
    topics share their configs, and with them one read-only mapping)."""
    return frozen_configs({str(k): str(v) for k, v in json.loads(data)["config"].items()})


def decode_topic(
    name: str,
    topic_value: bytes,
    epoch_value: bytes | None,
    state_value: bytes | None,
    config_value: bytes | None,
) -> TopicMetadata:
    """The topic of its four znodes (a missing epoch, state or config znode reads as 0, DISABLED,
    no configs)."""
    try:
        assignment = json.loads(topic_value)
        partitions = {int(p): list(b) for p, b in assignment["partitions"].items()}
        replicas = tuple(
            int(partitions[p][0]) if partitions.get(p) else -1 for p in range(len(partitions))
        )
        topic_id = uuid.UUID(str(assignment["topic_id"]))
        configs = _configs_of_znode(config_value) if config_value is not None else {}
        state = (
            _STATES.get(state_value) or TieredState(state_value.decode().strip())
            if state_value is not None
            else TieredState.DISABLED
        )
    except _BAD_DATA as e:
        raise MetadataStoreError(
            f"topic {name!r} at {zk_paths.topic(name)}: bad znode data: {e!r}"
        ) from e
    tiered_epoch = 0 if epoch_value is None else parse_int(zk_paths.tiered_epoch(name), epoch_value)
    return TopicMetadata(
        name=name,
        topic_id=topic_id,
        replicas=replicas,
        configs=configs,
        tiered_state=state,
        tiered_epoch=tiered_epoch,
    )


# ------------------------------------------------------------------------------- delete jobs


def encode_delete_job(job: DeleteJob) -> bytes:
    return delete_job_to_proto(job).SerializeToString()


def decode_delete_job(job_name: str, data: bytes) -> DeleteJob:
    """The job of ``/tiered/delete_jobs/{job_name}``, which must be named after its key."""
    relative = f"{zk_paths.DELETE_JOBS}/{job_name}"
    try:
        job = delete_job_from_proto(_record_of(data))
    except _BAD_DATA as e:
        raise MetadataStoreError(f"delete job at {relative}: bad znode data: {e!r}") from e
    if zk_paths.delete_job(job.topic_id, job.tiered_epoch) != relative:
        raise MetadataStoreError(
            f"delete job at {relative} is keyed ({job.topic_id}, {job.tiered_epoch}), which is "
            "not its znode name"
        )
    return job


def _record_of(data: bytes) -> metadata_pb2.DeleteJobRecord:
    # No record starts with "{": that byte would be the tag of a field 15 of wire type group.
    if data[:1] != b"{":
        return metadata_pb2.DeleteJobRecord.FromString(data)
    # Written by earlier versions as JSON: the record's fields by name, the topic id as a UUID
    # string, and a "version" beside them.
    value = json.loads(data)
    value["topic_id"] = base64.b64encode(uuid.UUID(str(value["topic_id"])).bytes).decode()
    return json_format.ParseDict(value, metadata_pb2.DeleteJobRecord(), ignore_unknown_fields=True)
