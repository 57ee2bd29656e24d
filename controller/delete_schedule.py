"""The delete delay (``remote.log.delete.delay.ms``), its rules in one place: how brokers stop
a disabling topic, the job a completed disablement queues, and what cancels a scheduled job.

A delete-policy disablement with a delay stops the brokers as the retain policy does (remote
data stays readable, the log start stays), and its job is SCHEDULED at an absolute wall-clock
``starts_at_ms`` (a failover keeps its clock). When it starts, the brokers are first told to
stop as under the delete policy (remote fetches refused, the log start raised, the partitions
marked: ``DeleteJobSupervisor`` holds the job until they acked), then the job runs as an
immediate one does. A re-enable or the retain policy before the start cancels it."""

from __future__ import annotations

from collections.abc import Mapping

from tiered.cluster.model import DeleteJob, DeleteJobState, TieredState, TopicMetadata
from tiered.config import RemoteLogDisablePolicy, delete_delay_ms, disable_policy


def broker_stop_policy(configs: Mapping[str, str]) -> RemoteLogDisablePolicy:
    """The policy brokers stop a disabling topic with: delete only for a delete at once; a
    delayed delete stops as retain until its job starts."""
    policy = disable_policy(configs)
    if policy is RemoteLogDisablePolicy.DELETE and delete_delay_ms(configs) > 0:
        return RemoteLogDisablePolicy.RETAIN
    return policy


def job_at_disabled(
    topic: TopicMetadata, stopped_with: RemoteLogDisablePolicy, now_ms: int
) -> DeleteJob | None:
    """The bulk delete job ``topic`` (now DISABLED) queues, or None under the retain policy.
    The delay is read here, once: a job is SCHEDULED ``remote.log.delete.delay.ms`` from now
    when that is positive, or when the brokers stopped as under retain (the delay was set
    during the disablement and cleared before its end: its start must still stop them as
    under delete); PENDING otherwise."""
    if disable_policy(topic.configs) is not RemoteLogDisablePolicy.DELETE:
        return None
    delay = delete_delay_ms(topic.configs)
    if delay > 0 or stopped_with is RemoteLogDisablePolicy.RETAIN:
        return DeleteJob.scheduled(topic, now_ms + delay)
    return DeleteJob(topic.name, topic.topic_id, topic.tiered_epoch, topic.partition_count)


def cancelled_by(job: DeleteJob | None, after: TopicMetadata) -> DeleteJob | None:
    """``job`` CANCELLED when it is the SCHEDULED job of ``after``'s topic and the change to
    ``after`` re-enables tiering or sets the retain policy; None when the change leaves it."""
    if job is None or job.state is not DeleteJobState.SCHEDULED or job.topic_id != after.topic_id:
        return None
    if after.tiered_state is not TieredState.DISABLED or after.tiered_epoch != job.tiered_epoch:
        return job.with_state(DeleteJobState.CANCELLED)
    if disable_policy(after.configs) is RemoteLogDisablePolicy.RETAIN:
        return job.with_state(DeleteJobState.CANCELLED)
    return None
