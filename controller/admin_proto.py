"""AdminService's protobuf conversions: domain values (``TopicView``, ``DeleteJob``,
``TopicMetadata``, broker registrations) to the answers' messages, and the requests' messages to
``PartitionIncrease`` and ``TopicAlteration``. The servicer calls these at its edge; nothing
else sees generated code."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from controller.admin_operations import DryRun, TopicAlteration, TopicView
from controller.partition_growth import PartitionIncrease
from controller.reachability import Reach
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    DeletionEstimate,
    RemoteStorageScrub,
    RemoteStorageVerification,
    TieredState,
    TopicMetadata,
)
from tiered.cluster.serde import broker_endpoints_to_proto, tiered_state_to_proto
from tiered.config import ConfigOperation
from tiered.errors import TieredError
from tiered.rpc.status import error_to_proto
from tiered.rpc.v1 import broker_pb2 as broker_pb
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = [
    "alter_response_to_proto",
    "alter_result_to_proto",
    "alteration_from_proto",
    "broker_description_to_proto",
    "delete_job_summary_to_proto",
    "deleted_topic_to_proto",
    "increase_from_proto",
    "placement_to_proto",
    "topic_description_to_proto",
]


# A job in these states has marked and deleted nothing: the partitions show the RLMM's state.
_NOT_STARTED = frozenset({DeleteJobState.SCHEDULED, DeleteJobState.CANCELLED})


def topic_description_to_proto(view: TopicView) -> pb.TopicDescription:
    topic = view.topic
    partitions = []
    for p, broker in enumerate(topic.replicas):
        state = view.partition_states.get(p)
        description = pb.PartitionDescription(
            partition=p,
            leader=broker,
            leader_available=state is not None,
            remote_log_start_offset=-1,
            disable_acked=topic.tiered_state is TieredState.DISABLING
            and p not in view.owed_partitions,
        )
        if state is not None:
            description.offsets.CopyFrom(
                broker_pb.PartitionOffsets(
                    log_start_offset=state.log_start_offset,
                    local_log_start_offset=state.local_log_start_offset,
                    log_end_offset=state.log_end_offset,
                )
            )
            description.remote_log_size_bytes = state.remote_size_bytes
            description.remote_segment_count = state.remote_segment_count
            description.remote_log_start_offset = state.remote_log_start_offset
            description.remote_delete_state = state.remote_delete_state
        partitions.append(description)
    job = view.delete_job
    if job is not None:
        done = {d.partition: d for d in job.progress}
        for description in partitions:
            progress = done.get(description.partition)
            description.delete_objects_total = -1 if progress is None else progress.objects_total
            description.delete_objects_deleted = 0 if progress is None else progress.objects_deleted
            description.delete_done = progress is not None and progress.done
            if job.tiered_epoch == topic.tiered_epoch and job.state not in _NOT_STARTED:
                description.remote_delete_state = (
                    "DELETE_PARTITION_FINISHED"
                    if description.delete_done
                    else "DELETE_PARTITION_STARTED"
                    if job.state is DeleteJobState.RUNNING
                    else description.remote_delete_state or "DELETE_PARTITION_MARKED"
                )
    return pb.TopicDescription(
        delete_job=None if job is None else delete_job_summary_to_proto(job),
        name=topic.name,
        topic_id=topic.topic_id.bytes,
        tiered_state=tiered_state_to_proto(topic.tiered_state),
        tiered_epoch=topic.tiered_epoch,
        configs=dict(topic.configs),
        partitions=partitions,
        disable_acks_owed=view.acks_owed,
        disable_acks_total=view.acks_total,
        disable_policy=view.disable_policy,
        error=error_to_proto(None),
    )


def delete_job_summary_to_proto(job: DeleteJob) -> pb.DeleteJobDescription:
    """The job as a describe shows it: totals over its partitions, not the durable record
    (``tiered.cluster.serde.delete_job_to_proto``)."""
    return pb.DeleteJobDescription(
        state=job.state.value,
        tiered_epoch=job.tiered_epoch,
        attempts=job.attempts,
        last_error=job.last_error,
        objects_total=job.objects_total,
        objects_deleted=job.objects_deleted,
        partitions_done=job.partitions_done,
        partition_count=job.partition_count,
        starts_at_ms=job.starts_at_ms,
    )


def deleted_topic_to_proto(job: DeleteJob) -> pb.DeletedTopicDescription:
    return pb.DeletedTopicDescription(
        name=job.topic, topic_id=job.topic_id.bytes, delete_job=delete_job_summary_to_proto(job)
    )


def alter_response_to_proto(topic: TopicMetadata) -> pb.AlterConfigsResponse:
    return pb.AlterConfigsResponse(
        error=error_to_proto(None),
        tiered_state=tiered_state_to_proto(topic.tiered_state),
        tiered_epoch=topic.tiered_epoch,
    )


def broker_description_to_proto(
    registration: BrokerRegistration, fenced: bool, reach: Reach | None = None
) -> pb.BrokerDescription:
    """``reach``: DescribeCluster's (DescribeMetadata leaves it unset)."""
    description = pb.BrokerDescription(
        broker_id=registration.broker_id,
        host=registration.host,
        port=registration.port,
        fenced=fenced,
        kafka_endpoints=broker_endpoints_to_proto(registration.kafka_endpoints),
    )
    if reach is not None:
        description.last_reached_ms = round(reach.since_reached_s * 1000)
        description.reachable = reach.reachable
    return description


def placement_to_proto(
    name: str | None,
    topic: TopicMetadata | TieredError,
    unhosted: Mapping[uuid.UUID, frozenset[int]],
) -> pb.TopicPlacement:
    if isinstance(topic, TieredError):
        return pb.TopicPlacement(name=name or "", error=error_to_proto(topic))
    return pb.TopicPlacement(
        name=topic.name,
        topic_id=topic.topic_id.bytes,
        replicas=topic.replicas,
        error=error_to_proto(None),
        unhosted_partitions=sorted(unhosted.get(topic.topic_id, ())),
    )


def increase_from_proto(growth: pb.PartitionGrowth) -> PartitionIncrease:
    return PartitionIncrease(
        growth.topic,
        growth.count,
        tuple(tuple(a.broker_ids) for a in growth.assignments) if growth.has_assignments else None,
    )


def alteration_from_proto(alteration: pb.TopicConfigAlteration) -> TopicAlteration:
    """ValueError (INVALID_ARGUMENT) for an operation this controller does not know."""
    return TopicAlteration(
        alteration.topic,
        tuple((c.name, ConfigOperation(c.operation), c.value) for c in alteration.configs),
        alteration.replace,
    )


def alter_result_to_proto(
    name: str, result: TopicMetadata | DryRun | TieredError
) -> pb.AlterTopicConfigsResult:
    if isinstance(result, TieredError):
        return pb.AlterTopicConfigsResult(topic=name, error=error_to_proto(result))
    topic = result.topic if isinstance(result, DryRun) else result
    message = pb.AlterTopicConfigsResult(
        topic=name,
        error=error_to_proto(None),
        tiered_state=tiered_state_to_proto(topic.tiered_state),
        tiered_epoch=topic.tiered_epoch,
    )
    if isinstance(result, DryRun) and result.would_delete is not None:
        message.would_delete.CopyFrom(deletion_estimate_to_proto(result.would_delete))
    return message


def deletion_estimate_to_proto(estimate: DeletionEstimate) -> pb.DeletionEstimate:
    return pb.DeletionEstimate(
        partitions=[
            pb.PartitionDeletionEstimate(
                partition=p.partition, objects=p.objects, bytes=p.bytes, segments=p.segments
            )
            for p in estimate.partitions
        ]
    )


def verify_report_to_proto(report: RemoteStorageVerification) -> pb.VerifyRemoteStorageResponse:
    return pb.VerifyRemoteStorageResponse(
        error=error_to_proto(None),
        segments_checked=report.segments_checked,
        missing=[
            pb.MissingRemoteSegment(
                topic=m.topic,
                partition=m.partition,
                segment_id=m.segment_id.bytes,
                tiered_epoch=m.tiered_epoch,
                start_offset=m.start_offset,
                end_offset=m.end_offset,
                objects=list(m.objects),
            )
            for m in report.missing
        ],
    )


def scrub_report_to_proto(report: RemoteStorageScrub) -> pb.ScrubRemoteStorageResponse:
    return pb.ScrubRemoteStorageResponse(
        error=error_to_proto(None),
        scanned_objects=report.scanned_objects,
        orphan_objects=report.orphan_objects,
        orphan_bytes=report.orphan_bytes,
        by_reason={reason.value: count for reason, count in report.by_reason.items()},
        examples=list(report.examples),
        deleted=report.deleted,
    )
