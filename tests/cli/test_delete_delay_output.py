"""What the tools show of a scheduled delete (a delete delay): ``tiered-topics --describe`` in
text and JSON, and ``tiered-configs --wait``, which returns at DISABLED and says when it starts.
The describe's protobuf is read as the tools read it (no cluster needed)."""

from __future__ import annotations

import uuid

from cli.configs import RemoteDeletion, final_state_line
from cli.topics import delete_job_text, topic_json, topic_text
from controller.admin_proto import delete_job_summary_to_proto
from tiered.admin_serde import TopicDescription, _delete_job
from tiered.cluster.model import DeleteJob, DeleteJobState, TieredState, TopicMetadata

STARTS_AT_MS = 1_796_640_000_123  # 2026-12-07T10:40:00.123Z


def described(state: DeleteJobState) -> TopicDescription:
    topic = TopicMetadata("orders", uuid.UUID(int=7), (1,), {}, TieredState.DISABLED, 3)
    job = DeleteJob.scheduled(topic, STARTS_AT_MS)
    if state is not DeleteJobState.SCHEDULED:
        job = job.with_state(state)
    return TopicDescription(
        topic.name,
        topic.topic_id,
        TieredState.DISABLED,
        3,
        {},
        [],
        0,
        1,
        "delete",
        _delete_job(delete_job_summary_to_proto(job)),
    )


def test_a_scheduled_delete_shows_its_epoch_and_iso_start() -> None:
    topic = described(DeleteJobState.SCHEDULED)
    assert topic.delete_job is not None
    text = delete_job_text(topic.delete_job)
    assert text == "RemoteDelete: SCHEDULED below epoch 3, starts 2026-12-07T10:40:00.123Z"
    assert text in topic_text(topic)[0].split("\t")
    job = topic_json(topic)["delete_job"]
    assert (job["state"], job["starts_at_ms"], job["tiered_epoch"]) == (
        "SCHEDULED",
        STARTS_AT_MS,
        3,
    )


def test_starts_at_ms_is_null_in_the_other_states() -> None:
    for state in (DeleteJobState.RUNNING, DeleteJobState.CANCELLED):
        job = topic_json(described(state))["delete_job"]
        assert (job["state"], job["starts_at_ms"]) == (state.value, None)
    cancelled = described(DeleteJobState.CANCELLED).delete_job
    assert cancelled is not None
    assert delete_job_text(cancelled).startswith("RemoteDelete: CANCELLED below epoch 3, ")


def test_wait_returns_at_disabled_when_the_job_is_scheduled_and_says_when_it_starts() -> None:
    waiting = RemoteDeletion()
    assert not waiting.pending(described(DeleteJobState.SCHEDULED))
    assert not waiting.pending(described(DeleteJobState.CANCELLED))
    assert waiting.pending(described(DeleteJobState.RUNNING))
    assert final_state_line(described(DeleteJobState.SCHEDULED)).endswith(
        "; remote delete below epoch 3 SCHEDULED, starts 2026-12-07T10:40:00.123Z"
    )
