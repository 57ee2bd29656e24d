"""What the AdminClient returns (plain frozen dataclasses) and how it is read from the
AdminService's protobuf responses (``proto/tiered/v1/controller.proto``).

A response that does not make sense (an unknown tiered state, a malformed topic id) raises
UNKNOWN_SERVER_ERROR; an ``Error`` in it raises ``TieredError`` with its code
(``raise_if_error``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from tiered.cluster.model import (
    DeletionEstimate,
    MissingRemoteSegment,
    OrphanReason,
    PartitionDeletionEstimate,
    RemoteStorageScrub,
    RemoteStorageVerification,
    TieredState,
)
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import broker_pb2, metadata_pb2
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = [
    "AlterResult",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "DeleteJobDescription",
    "DeletedTopicDescription",
    "PartitionDescription",
    "TopicDescription",
    "TopicListing",
    "alter_result_from_proto",
    "cluster_from_proto",
    "deleted_topic_from_proto",
    "not_controller_error",
    "raise_if_error",
    "topic_from_proto",
    "topic_id_from_bytes",
    "verification_from_proto",
]

# --------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_available: bool
    # None when the controller did not report offsets (no partition state asked for, or the
    # leader did not answer).
    log_start_offset: int | None
    local_log_start_offset: int | None
    log_end_offset: int | None
    remote_log_start_offset: int  # -1: nothing in remote storage
    remote_log_size_bytes: int
    remote_segment_count: int
    remote_delete_state: str
    disable_acked: bool
    # The topic's latest delete job (delete policy): objects listed (-1: not yet) and deleted.
    delete_objects_total: int = -1
    delete_objects_deleted: int = 0
    delete_done: bool = False


@dataclass(frozen=True)
class DeleteJobDescription:
    """A bulk delete of remote data below ``tiered_epoch`` and how far it got."""

    state: str  # SCHEDULED | PENDING | RUNNING | DONE | CANCELLED
    tiered_epoch: int
    attempts: int
    last_error: str
    objects_total: int
    objects_deleted: int
    partitions_done: int
    partition_count: int
    starts_at_ms: int | None = None  # a SCHEDULED job's start (wall-clock ms); None otherwise


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    tiered_state: TieredState
    tiered_epoch: int
    configs: dict[str, str]  # keys set on the topic only
    partitions: list[PartitionDescription]
    disable_acks_owed: int  # DISABLING: partitions whose broker has not acked yet
    disable_acks_total: int
    disable_policy: str  # of the current or last disablement; "" if none
    delete_job: DeleteJobDescription | None = None

    @property
    def disable_acks_done(self) -> int:
        return self.disable_acks_total - self.disable_acks_owed


@dataclass(frozen=True)
class DeletedTopicDescription:
    """A deleted topic whose remote data (every tiered epoch of it) is still being deleted."""

    name: str
    topic_id: uuid.UUID
    delete_job: DeleteJobDescription


@dataclass(frozen=True)
class TopicListing:
    """The live topics, and the deleted ones whose remote data is still being deleted."""

    topics: list[TopicDescription]
    deleted_topics: list[DeletedTopicDescription]


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool


@dataclass(frozen=True)
class AlterResult:
    tiered_state: TieredState  # after the change
    tiered_epoch: int
    # a dry run (validate_only) of a delete-policy disable: what its bulk delete would remove
    would_delete: DeletionEstimate | None = None


@dataclass(frozen=True)
class BrokerDescription:
    """A broker as the active controller describes it. ``last_reached_ms``: milliseconds since
    the controller last reached it (a call answered, or its heartbeat or ZooKeeper session heard:
    ``controller.reachability``); ``reachable``: whether that is within the controller's
    ``controller.request.timeout.ms``. Both None from a controller that does not say."""

    broker_id: int
    host: str
    port: int
    fenced: bool
    last_reached_ms: int | None = None
    reachable: bool | None = None


@dataclass(frozen=True)
class ClusterDescription:
    controller_id: int
    controller_epoch: int
    controller_endpoint: str
    metadata_mode: str  # kraft | zookeeper
    brokers: list[BrokerDescription] = field(default_factory=list)


# --------------------------------------------------------------------------------- conversions

_STATES: dict[int, TieredState] = {
    metadata_pb2.ENABLED: TieredState.ENABLED,
    metadata_pb2.DISABLING: TieredState.DISABLING,
    metadata_pb2.DISABLED: TieredState.DISABLED,
    # Unset: a topic that was never tiered (docs/design.md §2: DISABLED, epoch 0).
    metadata_pb2.TIERED_STATE_UNSPECIFIED: TieredState.DISABLED,
}


def _state(value: int) -> TieredState:
    try:
        return _STATES[value]
    except KeyError:
        raise TieredError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"unknown tiered state {value} in the response"
        ) from None


def raise_if_error(error: broker_pb2.Error) -> None:
    exc = error_from_proto(error)
    if exc is not None:
        raise exc


def topic_id_from_bytes(raw: bytes) -> uuid.UUID:
    try:
        return uuid.UUID(bytes=raw)
    except ValueError:
        raise TieredError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"malformed topic id {raw.hex()!r} in the response"
        ) from None


def _partition(message: pb.PartitionDescription) -> PartitionDescription:
    has_offsets = message.HasField("offsets")
    offsets = message.offsets
    return PartitionDescription(
        partition=message.partition,
        leader=message.leader,
        leader_available=message.leader_available,
        log_start_offset=offsets.log_start_offset if has_offsets else None,
        local_log_start_offset=offsets.local_log_start_offset if has_offsets else None,
        log_end_offset=offsets.log_end_offset if has_offsets else None,
        remote_log_start_offset=message.remote_log_start_offset,
        remote_log_size_bytes=message.remote_log_size_bytes,
        remote_segment_count=message.remote_segment_count,
        remote_delete_state=message.remote_delete_state,
        disable_acked=message.disable_acked,
        delete_objects_total=message.delete_objects_total,
        delete_objects_deleted=message.delete_objects_deleted,
        delete_done=message.delete_done,
    )


def _delete_job(message: pb.DeleteJobDescription) -> DeleteJobDescription:
    return DeleteJobDescription(
        state=message.state,
        tiered_epoch=message.tiered_epoch,
        attempts=message.attempts,
        last_error=message.last_error,
        objects_total=message.objects_total,
        objects_deleted=message.objects_deleted,
        partitions_done=message.partitions_done,
        partition_count=message.partition_count,
        starts_at_ms=message.starts_at_ms
        if message.state == "SCHEDULED" and message.HasField("starts_at_ms")
        else None,
    )


def topic_from_proto(message: pb.TopicDescription) -> TopicDescription:
    """The description of a topic answered without an error (check ``message.error`` first)."""
    return TopicDescription(
        name=message.name,
        topic_id=topic_id_from_bytes(message.topic_id),
        tiered_state=_state(message.tiered_state),
        tiered_epoch=message.tiered_epoch,
        configs=dict(sorted(message.configs.items())),
        partitions=sorted((_partition(p) for p in message.partitions), key=lambda p: p.partition),
        disable_acks_owed=message.disable_acks_owed,
        disable_acks_total=message.disable_acks_total,
        disable_policy=message.disable_policy,
        delete_job=_delete_job(message.delete_job) if message.HasField("delete_job") else None,
    )


def deleted_topic_from_proto(message: pb.DeletedTopicDescription) -> DeletedTopicDescription:
    return DeletedTopicDescription(
        name=message.name,
        topic_id=topic_id_from_bytes(message.topic_id),
        delete_job=_delete_job(message.delete_job),
    )


def alter_result_from_proto(response: pb.AlterConfigsResponse) -> AlterResult:
    raise_if_error(response.error)
    return AlterResult(_state(response.tiered_state), response.tiered_epoch)


def alter_topic_result_from_proto(result: pb.AlterTopicConfigsResult) -> AlterResult | TieredError:
    """One topic's answer of a many-topic alter: its result or its error."""
    return error_from_proto(result.error) or AlterResult(
        _state(result.tiered_state),
        result.tiered_epoch,
        _estimate(result.tiered_epoch, result.would_delete)
        if result.HasField("would_delete")
        else None,
    )


def _estimate(tiered_epoch: int, message: pb.DeletionEstimate) -> DeletionEstimate:
    return DeletionEstimate(
        tiered_epoch,
        tuple(
            PartitionDeletionEstimate(p.partition, p.objects, p.bytes, p.segments)
            for p in message.partitions
        ),
    )


def cluster_from_proto(response: pb.DescribeClusterResponse) -> ClusterDescription:
    raise_if_error(response.error)
    return ClusterDescription(
        controller_id=response.controller_id,
        controller_epoch=response.controller_epoch,
        controller_endpoint=response.controller_endpoint,
        metadata_mode=response.metadata_mode,
        brokers=[_broker_from_proto(b) for b in response.brokers],
    )


def _broker_from_proto(broker: pb.BrokerDescription) -> BrokerDescription:
    return BrokerDescription(
        broker.broker_id,
        broker.host,
        broker.port,
        broker.fenced,
        broker.last_reached_ms if broker.HasField("last_reached_ms") else None,
        broker.reachable if broker.HasField("reachable") else None,
    )


def not_controller_error(response: Any) -> broker_pb2.Error | None:
    """The NOT_CONTROLLER error of a standby's answer, if it is one: in the response's ``error``
    or, for the responses without one (CreateTopics, DeleteTopics, DescribeTopics), in any of
    its per-topic results."""
    errors: list[broker_pb2.Error] = []
    if isinstance(getattr(response, "error", None), broker_pb2.Error):
        errors.append(response.error)
    for item in [*getattr(response, "results", ()), *getattr(response, "topics", ())]:
        errors.append(item.error)
    for error in errors:
        if error.code == ErrorCode.NOT_CONTROLLER:
            return error
    return None


def verification_from_proto(response: pb.VerifyRemoteStorageResponse) -> RemoteStorageVerification:
    """VerifyRemoteStorage's answer, or its error raised."""
    raise_if_error(response.error)
    return RemoteStorageVerification(
        response.segments_checked,
        tuple(
            MissingRemoteSegment(
                m.topic,
                m.partition,
                topic_id_from_bytes(m.segment_id),
                m.tiered_epoch,
                m.start_offset,
                m.end_offset,
                tuple(m.objects),
            )
            for m in response.missing
        ),
    )


def scrub_from_proto(response: pb.ScrubRemoteStorageResponse) -> RemoteStorageScrub:
    """ScrubRemoteStorage's answer, or its error raised."""
    raise_if_error(response.error)
    return RemoteStorageScrub(
        scanned_objects=response.scanned_objects,
        orphan_objects=response.orphan_objects,
        orphan_bytes=response.orphan_bytes,
        by_reason={r: response.by_reason.get(r.value, 0) for r in OrphanReason},
        examples=tuple(response.examples),
        deleted=response.deleted,
    )
