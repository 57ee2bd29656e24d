"""The randomized run's checker (``system_tests.history_checker``), fed hand-made histories and
final states: a clean run passes, and each guarantee broken once is named."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from system_tests.history import Event, History, read_history
from system_tests.history_checker import (
    Activation,
    DeleteJob,
    FinalState,
    FinishedSegment,
    PartitionState,
    TopicState,
    Violation,
    check,
)

TOPIC_ID = "7f8e3c1a-0000-4000-8000-000000000001"
GROUP = "g"
SEGMENT_0 = f"orders-{TOPIC_ID}/0/te=0/00000000000000000000-aaaa"
SEGMENT_2 = f"orders-{TOPIC_ID}/0/te=2/00000000000000000002-bbbb"


def _objects(*prefixes: str) -> frozenset[str]:
    return frozenset(f"{p}.{s}" for p in prefixes for s in ("log", "index", "timeindex"))


def _run(path: Path, *, delete_policy: bool = False, re_enabled: bool = False) -> list[Event]:
    """A clean run: three records acked at 0, 1, 2 of orders-0, a commit of offset 2, a
    disable (``retain`` or ``delete``) acked (and a re-enable), a cut healed, a topic created
    then deleted."""
    history = History(path)
    history.invoke("client", "create", topic="orders", partitions=1).ok(topic_id=TOPIC_ID)
    for offset in range(3):
        produce = history.invoke("client", "produce", topic="orders", topic_id=TOPIC_ID,
                                 partition=0, value=f"v{offset}")  # fmt: skip
        produce.ok(offset=offset)
    history.invoke("client", "produce", topic="orders", topic_id=TOPIC_ID, partition=0,
                   value="unknown").info("timed out")  # fmt: skip
    history.invoke("client", "commit", group=GROUP, topic="orders", topic_id=TOPIC_ID,
                   partition=0, offset=2).ok()  # fmt: skip
    history.invoke("nemesis", "cut", sender="controller-0", receiver="broker-1",
                   both_ways=True).ok()  # fmt: skip
    history.invoke("client", "disable", topic="orders", topic_id=TOPIC_ID,
                   policy="delete" if delete_policy else "retain").ok()  # fmt: skip
    if re_enabled:
        history.invoke("client", "enable", topic="orders", topic_id=TOPIC_ID).ok()
    history.invoke("nemesis", "heal").ok()
    history.invoke("client", "create", topic="gone", partitions=1).ok(topic_id="gone-id")
    history.invoke("client", "produce", topic="gone", topic_id="gone-id", partition=0,
                   value="g0").ok(offset=0)  # fmt: skip
    history.invoke("client", "delete", topic="gone", topic_id="gone-id").ok()
    history.close()
    return read_history(path)


def _final(
    *,
    records: dict[int, str] | None = None,
    log_start: int = 0,
    state: str = "DISABLED",
    job: DeleteJob | None = None,
    objects: frozenset[str] = _objects(SEGMENT_0, SEGMENT_2),
    committed: int = 2,
    activations: tuple[Activation, ...] = (Activation(100, 1), Activation(101, 2)),
) -> FinalState:
    found = {0: "v0", 1: "v1", 2: "v2"} if records is None else records
    partition = PartitionState(log_start, 1, 3, {o: v for o, v in found.items() if o >= log_start})
    topic = TopicState(
        name="orders",
        topic_id=TOPIC_ID,
        tiered_state=state,
        delete_job=job,
        partitions={0: partition},
        objects=objects,
        finished_segments=(FinishedSegment(SEGMENT_0, 0), FinishedSegment(SEGMENT_2, 2)),
    )
    return FinalState(
        taken_at=100.0,
        topics={TOPIC_ID: topic},
        committed={GROUP: {("orders", 0): committed}},
        activations=activations,
    )


def _named(violations: list[Violation]) -> list[str]:
    return [v.invariant for v in violations]


def test_a_clean_run_passes(tmp_path: Path) -> None:
    assert check(_run(tmp_path / "h.jsonl"), _final()) == []


def test_a_finished_delete_job_removes_records_and_objects_below_its_epoch(tmp_path: Path) -> None:
    events = _run(tmp_path / "h.jsonl", delete_policy=True)
    final = _final(log_start=2, job=DeleteJob(2, "DONE"), objects=_objects(SEGMENT_2))
    assert check(events, final) == []


def test_an_acknowledged_record_missing_is_named(tmp_path: Path) -> None:
    violations = check(_run(tmp_path / "h.jsonl"), _final(records={0: "v0", 2: "v2"}))
    assert _named(violations) == ["acked-record-missing"]
    assert "offset 1 (local tier)" in violations[0].detail


def test_records_below_the_log_start_without_a_finished_delete_job_are_missing(
    tmp_path: Path,
) -> None:
    violations = check(_run(tmp_path / "h.jsonl"), _final(log_start=1))
    assert _named(violations) == ["acked-record-missing"]
    assert "offset 0 (remote tier)" in violations[0].detail


def test_an_acknowledged_record_read_twice_is_named(tmp_path: Path) -> None:
    records = {0: "v0", 1: "v1", 2: "v2", 3: "v1"}
    violations = check(_run(tmp_path / "h.jsonl"), _final(records=records))
    assert _named(violations) == ["acked-record-doubled"]


def test_an_acknowledged_record_at_another_offset_is_named(tmp_path: Path) -> None:
    records = {0: "v0", 1: "v2", 2: "v1"}
    violations = check(_run(tmp_path / "h.jsonl"), _final(records=records))
    assert _named(violations) == ["acked-record-out-of-order"] * 2


def test_a_committed_offset_lost_is_named(tmp_path: Path) -> None:
    violations = check(_run(tmp_path / "h.jsonl"), _final(committed=0))
    assert _named(violations) == ["committed-offset-lost"]


def test_a_disable_never_completed_is_named(tmp_path: Path) -> None:
    violations = check(_run(tmp_path / "h.jsonl"), _final(state="DISABLING"))
    assert _named(violations) == ["disable-never-completed"]
    assert "after the last heal" in violations[0].detail


def test_a_delete_job_never_finished_is_a_disable_never_completed(tmp_path: Path) -> None:
    events = _run(tmp_path / "h.jsonl", delete_policy=True)
    violations = check(events, _final(job=DeleteJob(2, "RUNNING")))
    assert _named(violations) == ["disable-never-completed"]


def test_a_delete_job_unfinished_after_a_re_enable_is_a_disable_never_completed(
    tmp_path: Path,
) -> None:
    events = _run(tmp_path / "h.jsonl", delete_policy=True, re_enabled=True)
    done = _final(state="ENABLED", job=DeleteJob(2, "DONE"), objects=_objects(SEGMENT_2))
    assert check(events, done) == []
    final = _final(state="ENABLED", job=DeleteJob(2, "RUNNING"))
    violations = check(events, final)
    assert _named(violations) == ["disable-never-completed"]
    assert "the delete job below epoch 2 is RUNNING (ENABLED)" in violations[0].detail


def test_an_object_below_a_finished_delete_epoch_is_named(tmp_path: Path) -> None:
    events = _run(tmp_path / "h.jsonl", delete_policy=True)
    violations = check(events, _final(job=DeleteJob(2, "DONE")))
    assert _named(violations) == ["object-below-delete-epoch"]
    assert SEGMENT_0 in violations[0].detail


def test_an_object_at_or_above_the_delete_epoch_missing_is_named(tmp_path: Path) -> None:
    events = _run(tmp_path / "h.jsonl", delete_policy=True)
    objects = _objects(SEGMENT_2) - {f"{SEGMENT_2}.index"}
    violations = check(events, _final(job=DeleteJob(2, "DONE"), objects=objects))
    assert _named(violations) == ["object-at-or-above-delete-epoch-missing"]
    assert "['index']" in violations[0].detail


def test_two_controllers_active_in_one_epoch_are_named(tmp_path: Path) -> None:
    activations = (Activation(100, 1), Activation(101, 2), Activation(100, 2))
    violations = check(_run(tmp_path / "h.jsonl"), _final(activations=activations))
    assert _named(violations) == ["two-controllers-one-epoch"]
    assert "[100, 101]" in violations[0].detail


def test_a_controller_store_write_without_the_leadership_is_named(tmp_path: Path) -> None:
    write = "zxid 0x41: session 0x2 wrote /brokers/topics/orders while /controller was 0x1's"
    final = dataclasses.replace(_final(), writes_outside_leadership=(write,))
    violations = check(_run(tmp_path / "h.jsonl"), final)
    assert _named(violations) == ["two-controllers-one-epoch"]
    assert write in violations[0].detail


def test_a_topic_gone_without_a_delete_loses_its_records(tmp_path: Path) -> None:
    events = [e for e in _run(tmp_path / "h.jsonl") if e.op != "delete"]
    assert _named(check(events, _final())) == ["acked-record-missing"]


def test_an_operation_is_completed_once(tmp_path: Path) -> None:
    history = History(tmp_path / "h.jsonl")
    operation = history.invoke("client", "delete", topic="t", topic_id="x")
    operation.ok()
    with pytest.raises(RuntimeError, match="completed twice"):
        operation.fail("late")


def test_a_line_that_is_not_an_event_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match=r"h\.jsonl:1: not a history event"):
        read_history(path)
