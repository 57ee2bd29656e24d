"""The delete delay's rules (controller/delete_schedule.py) and the delete job's state table
(tiered/cluster/model.py): what brokers stop with, the job a disablement queues, what cancels a
scheduled job, which state changes are valid, and the schedule as both stores record it."""

from __future__ import annotations

import uuid

import pytest

from controller.delete_schedule import broker_stop_policy, cancelled_by, job_at_disabled
from controller.store.zookeeper.znodes import decode_delete_job, encode_delete_job
from tiered.cluster import serde, zk_paths
from tiered.cluster.model import (
    DeleteJob,
    DeleteJobState,
    InvalidDeleteJobTransition,
    TieredState,
    TopicMetadata,
)
from tiered.config import RemoteLogDisablePolicy
from tiered.rpc.v1 import metadata_pb2

DELETE = {"remote.log.disable.policy": "delete"}
DELAYED = {**DELETE, "remote.log.delete.delay.ms": "60000"}
NOW_MS = 1_800_000_000_000


def disabled(configs: dict[str, str], tiered_epoch: int = 2) -> TopicMetadata:
    return TopicMetadata(
        "orders", uuid.UUID(int=7), (1, 2), configs, TieredState.DISABLED, tiered_epoch
    )


def scheduled() -> DeleteJob:
    job = job_at_disabled(disabled(DELAYED), RemoteLogDisablePolicy.RETAIN, NOW_MS)
    assert job is not None
    return job


# ----------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("configs", "policy"),
    [
        ({}, RemoteLogDisablePolicy.RETAIN),
        ({"remote.log.delete.delay.ms": "60000"}, RemoteLogDisablePolicy.RETAIN),
        (DELETE, RemoteLogDisablePolicy.DELETE),
        ({"remote.log.delete.on.disable": "true"}, RemoteLogDisablePolicy.DELETE),
        (DELAYED, RemoteLogDisablePolicy.RETAIN),
    ],
)
def test_brokers_stop_as_under_retain_while_a_delete_is_delayed(
    configs: dict[str, str], policy: RemoteLogDisablePolicy
) -> None:
    assert broker_stop_policy(configs) is policy


def test_a_delayed_delete_is_scheduled_at_an_absolute_wall_clock_start() -> None:
    job = scheduled()
    assert job.state is DeleteJobState.SCHEDULED
    assert job.starts_at_ms == NOW_MS + 60000
    assert (job.tiered_epoch, job.partition_count, job.delayed) == (2, 2, True)


def test_a_delete_at_once_is_pending_and_retain_queues_nothing() -> None:
    job = job_at_disabled(disabled(DELETE), RemoteLogDisablePolicy.DELETE, NOW_MS)
    assert job is not None and job.state is DeleteJobState.PENDING and job.starts_at_ms is None
    assert job_at_disabled(disabled({}), RemoteLogDisablePolicy.RETAIN, NOW_MS) is None


def test_a_delay_cleared_during_the_disablement_still_starts_with_the_delete_stop() -> None:
    # The brokers stopped as under retain: the job must still have them stop as under delete.
    job = job_at_disabled(disabled(DELETE), RemoteLogDisablePolicy.RETAIN, NOW_MS)
    assert job is not None
    assert (job.state, job.starts_at_ms) == (DeleteJobState.SCHEDULED, NOW_MS)


def test_a_reenable_or_the_retain_policy_cancels_a_scheduled_job() -> None:
    job = scheduled()
    reenabled = disabled(DELAYED).with_tiered_state(TieredState.ENABLED, 3)
    cancelled = cancelled_by(job, reenabled)
    assert cancelled is not None and cancelled.state is DeleteJobState.CANCELLED
    assert cancelled.state.finished and cancelled.starts_at_ms == job.starts_at_ms
    retain = disabled({**DELAYED, "remote.log.disable.policy": "retain"})
    assert cancelled_by(job, retain) is not None
    # Any other change (a retention, the delay itself: read once) leaves it scheduled.
    assert cancelled_by(job, disabled({**DELAYED, "retention.ms": "1000"})) is None
    assert cancelled_by(job, disabled({**DELETE, "remote.log.delete.delay.ms": "0"})) is None


def test_only_a_scheduled_job_is_cancelled() -> None:
    reenabled = disabled(DELAYED).with_tiered_state(TieredState.ENABLED, 3)
    running = scheduled().with_state(DeleteJobState.RUNNING, attempts=1)
    assert cancelled_by(running, reenabled) is None
    assert cancelled_by(None, reenabled) is None


# ----------------------------------------------------------------------------- the state table

VALID = {
    (DeleteJobState.SCHEDULED, DeleteJobState.RUNNING),
    (DeleteJobState.SCHEDULED, DeleteJobState.CANCELLED),
    (DeleteJobState.PENDING, DeleteJobState.RUNNING),
    (DeleteJobState.RUNNING, DeleteJobState.RUNNING),
    (DeleteJobState.RUNNING, DeleteJobState.DONE),
}


@pytest.mark.parametrize("source", list(DeleteJobState))
@pytest.mark.parametrize("target", list(DeleteJobState))
def test_every_state_change_is_checked_against_the_one_table(
    source: DeleteJobState, target: DeleteJobState
) -> None:
    job = DeleteJob("orders", uuid.UUID(int=7), 2, 2, state=source)
    if source is target or (source, target) in VALID:
        assert job.with_state(target).state is target
        return
    with pytest.raises(InvalidDeleteJobTransition) as caught:
        job.with_state(target)
    assert f"{source.value} cannot become {target.value}" in str(caught.value)


def test_done_and_cancelled_are_the_finished_states() -> None:
    assert {s for s in DeleteJobState if s.finished} == {
        DeleteJobState.DONE,
        DeleteJobState.CANCELLED,
    }


# ----------------------------------------------------------------------------- durability


def test_the_schedule_survives_both_stores_encodings() -> None:
    job = scheduled()
    record = serde.delete_job_to_proto(job)
    assert serde.delete_job_from_proto(record) == job  # the KRaft log's record
    name = zk_paths.delete_job(job.topic_id, job.tiered_epoch).rsplit("/", 1)[1]
    assert decode_delete_job(name, encode_delete_job(job)) == job  # the ZooKeeper znode
    cancelled = job.with_state(DeleteJobState.CANCELLED)
    assert serde.delete_job_from_proto(serde.delete_job_to_proto(cancelled)) == cancelled


def test_a_record_written_before_delays_reads_as_a_job_that_starts_at_once() -> None:
    old = metadata_pb2.DeleteJobRecord(
        topic_id=uuid.UUID(int=7).bytes,
        topic="orders",
        tiered_epoch=2,
        partition_count=2,
        state=metadata_pb2.RUNNING,
    )
    job = serde.delete_job_from_proto(
        metadata_pb2.DeleteJobRecord.FromString(old.SerializeToString())
    )
    assert job.starts_at_ms is None and not job.delayed and job.state is DeleteJobState.RUNNING
