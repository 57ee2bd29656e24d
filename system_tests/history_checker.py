"""The checker of a randomized run: pure functions over its history (``system_tests.history``)
and the cluster's final state (``FinalState``, read after the last heal), which name every
violation of the run's guarantees:

- ``acked-record-missing`` / ``acked-record-doubled`` / ``acked-record-out-of-order``: a record a
  produce was acknowledged for is not read back, is read at more than one offset (or its offset
  was acknowledged twice), or is read at another offset than the acknowledged one; in whichever
  tier holds that offset. Records legitimately go with their topic (a ``delete`` of its id) and
  below the log start of a topic whose delete-policy job finished; the run keeps retention
  infinite, so nothing else removes them;
- ``committed-offset-lost``: a group's committed offset is not the last one acknowledged (nor
  one of those attempted after it), while its topic still exists;
- ``disable-never-completed``: a topic whose last disable was acknowledged or may have happened
  is still DISABLING after the last heal, or any topic's delete job is unfinished then;
- ``object-below-delete-epoch``: an object below the epoch of a finished delete job remains;
- ``object-at-or-above-delete-epoch-missing``: a segment the RLMM lists as finished, at or
  above that epoch (any epoch without a job), lacks one of its objects;
- ``two-controllers-one-epoch``: two controllers became active in the same controller epoch
  (their logs say so), or, in ZooKeeper mode, ZooKeeper's transaction log shows a controller-store
  write from a session that did not hold ``/controller`` then;
- ``unreadable-final-state``: a partition the final state could not be read from (its leader
  did not answer): named rather than guessed at.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from system_tests.history import FAIL, INFO, INVOKE, OK, Event
from tiered.rsm import layout

__all__ = [
    "Activation",
    "DeleteJob",
    "FinalState",
    "FinishedSegment",
    "PartitionState",
    "TopicState",
    "Violation",
    "check",
]

# Objects every finished segment has (docs/design.md §3.3); the data object is uploaded last.
REQUIRED_SUFFIXES = ("log", "index", "timeindex")


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}"


@dataclass(frozen=True)
class PartitionState:
    """One partition as its leader serves it at the end: offsets, and every record from the log
    start to the log end (offset -> value), read across both tiers."""

    log_start: int
    local_log_start: int
    log_end: int
    records: dict[int, str]


@dataclass(frozen=True)
class DeleteJob:
    tiered_epoch: int
    state: str  # PENDING | RUNNING | DONE


@dataclass(frozen=True)
class FinishedSegment:
    """A segment the RLMM lists as COPY_SEGMENT_FINISHED: its key prefix and tiered epoch."""

    prefix: str
    tiered_epoch: int


@dataclass(frozen=True)
class TopicState:
    name: str
    topic_id: str
    tiered_state: str  # ENABLED | DISABLING | DISABLED
    delete_job: DeleteJob | None
    partitions: dict[int, PartitionState]
    objects: frozenset[str]  # every remote object key of the topic (relative to the root)
    finished_segments: tuple[FinishedSegment, ...]


@dataclass(frozen=True)
class Activation:
    """A controller saying it became active, with its controller epoch (its log's line)."""

    controller_id: int
    controller_epoch: int


@dataclass(frozen=True)
class FinalState:
    taken_at: float  # on the history's clock
    topics: dict[str, TopicState]  # by topic id
    committed: dict[str, dict[tuple[str, int], int]]  # group -> (topic, partition) -> offset
    activations: tuple[Activation, ...]
    # ZooKeeper mode: controller-store writes ZooKeeper's transaction log shows from a session
    # that did not hold /controller then (a second controller acting in the holder's epoch).
    writes_outside_leadership: tuple[str, ...] = field(default=())
    # Where reading failed (a partition whose leader did not answer): named, never guessed.
    unreadable: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class _Done:
    """An operation with its completion."""

    invoked: Event
    completed: Event

    @property
    def kind(self) -> str:
        return self.completed.type


def check(events: Sequence[Event], final: FinalState) -> list[Violation]:
    """Every violation the history and the final state show; [] for a run that kept every
    guarantee."""
    done = _pair(events)
    violations = [Violation("unreadable-final-state", u) for u in final.unreadable]
    violations += check_records(done, final)
    violations += check_committed_offsets(done, final)
    violations += check_disables(events, done, final)
    violations += check_objects(final)
    violations += check_controller_epochs(final)
    return violations


def _pair(events: Iterable[Event]) -> list[_Done]:
    """Completed operations in completion order; an operation never completed (the run died)
    counts as ``info``."""
    invoked: dict[int, Event] = {}
    done = []
    for event in events:
        if event.type == INVOKE:
            invoked[event.id] = event
        elif event.id in invoked:
            done.append(_Done(invoked.pop(event.id), event))
    for event in invoked.values():
        done.append(_Done(event, Event(event.id, INFO, event.process, event.op, event.time,
                                       event.args, {}, "never completed")))  # fmt: skip
    return done


def _happened(operation: _Done) -> bool:
    """Whether the operation did or may have taken effect."""
    return operation.kind in (OK, INFO)


def _deleted_ids(done: Sequence[_Done]) -> set[str]:
    return {d.invoked.args["topic_id"] for d in done if d.invoked.op == "delete" and _happened(d)}


def check_records(done: Sequence[_Done], final: FinalState) -> list[Violation]:
    acked = [d for d in done if d.invoked.op == "produce" and d.kind == OK]
    deleted = _deleted_ids(done)
    delete_policy = {
        d.invoked.args["topic_id"]
        for d in done
        if d.invoked.op == "disable" and d.invoked.args["policy"] == "delete" and _happened(d)
    }
    violations = []
    by_offset: dict[tuple[str, int, int], list[str]] = defaultdict(list)
    for d in acked:
        args = d.invoked.args
        by_offset[(args["topic_id"], args["partition"], d.completed.result["offset"])].append(
            args["value"]
        )
    for (topic_id, partition, offset), values in sorted(by_offset.items()):
        if len(values) > 1:
            violations.append(Violation(
                "acked-record-doubled",
                f"topic id {topic_id} partition {partition}: offset {offset} acknowledged for "
                f"{len(values)} records {values[:3]}",
            ))  # fmt: skip
    violations += _acked_out_of_order(acked)
    positions: dict[tuple[str, int], dict[str, list[int]]] = {}
    for (topic_id, partition, offset), values in sorted(by_offset.items()):
        topic = final.topics.get(topic_id)
        where = f"{topic.name if topic else '?'} (id {topic_id}) partition {partition}"
        if topic is None:
            if topic_id not in deleted:
                violations.append(Violation(
                    "acked-record-missing",
                    f"{where}: the topic is gone without a delete, with offset {offset}",
                ))  # fmt: skip
            continue
        state = topic.partitions.get(partition)
        if state is None:
            continue  # unreadable: named by FinalState.unreadable
        if (topic_id, partition) not in positions:
            positions[(topic_id, partition)] = _positions(state)
        found = positions[(topic_id, partition)]
        tier = "remote" if offset < state.local_log_start else "local"
        value = values[0]
        at = found.get(value, [])
        if len(at) > 1:
            violations.append(Violation(
                "acked-record-doubled",
                f"{where}: acknowledged at {offset}, read at offsets {at} ({tier} tier)",
            ))  # fmt: skip
        elif at == [offset]:
            continue
        elif at:
            violations.append(Violation(
                "acked-record-out-of-order",
                f"{where}: acknowledged at offset {offset}, read at {at[0]} ({tier} tier)",
            ))  # fmt: skip
        elif offset < state.log_start and _may_lose(topic, topic_id in delete_policy):
            continue
        else:
            violations.append(Violation(
                "acked-record-missing",
                f"{where}: offset {offset} ({tier} tier) not read back (log start "
                f"{state.log_start}, end {state.log_end})",
            ))  # fmt: skip
    return violations


def _acked_out_of_order(acked: Sequence[_Done]) -> list[Violation]:
    """The run produces one record at a time, so a partition's acknowledged offsets grow in the
    order the acknowledgements came."""
    last: dict[tuple[str, int], _Done] = {}
    violations = []
    for d in sorted(acked, key=lambda d: d.completed.time):
        key = (d.invoked.args["topic_id"], d.invoked.args["partition"])
        before = last.get(key)
        offset = d.completed.result["offset"]
        if before is not None and offset < before.completed.result["offset"]:
            violations.append(Violation(
                "acked-record-out-of-order",
                f"{d.invoked.args['topic']} (id {key[0]}) partition {key[1]}: "
                f"{d.invoked.args['value']} acknowledged at {offset} after "
                f"{before.invoked.args['value']} at {before.completed.result['offset']}",
            ))  # fmt: skip
        last[key] = d
    return violations


def _positions(state: PartitionState) -> dict[str, list[int]]:
    found: dict[str, list[int]] = defaultdict(list)
    for offset, value in sorted(state.records.items()):
        found[value].append(offset)
    return found


def _may_lose(topic: TopicState, disabled_with_delete: bool) -> bool:
    """Records below the log start go only with a finished delete-policy job."""
    return (
        disabled_with_delete and topic.delete_job is not None and topic.delete_job.state == "DONE"
    )


def check_committed_offsets(done: Sequence[_Done], final: FinalState) -> list[Violation]:
    deleted_names = {d.invoked.args["topic"]: d.invoked.time for d in done
                     if d.invoked.op == "delete" and _happened(d)}  # fmt: skip
    commits: dict[tuple[str, str, int], list[_Done]] = defaultdict(list)
    for d in done:
        if d.invoked.op == "commit":
            args = d.invoked.args
            commits[(args["group"], args["topic"], args["partition"])].append(d)
    violations = []
    for (group, topic, partition), attempts in sorted(commits.items()):
        acked = [d for d in attempts if d.kind == OK]
        if not acked:
            continue
        last = max(acked, key=lambda d: d.completed.time)
        if deleted_names.get(topic, -1.0) > last.invoked.time:
            continue  # the topic (and its offsets) went after the commit
        allowed = {last.invoked.args["offset"]} | {
            d.invoked.args["offset"]
            for d in attempts
            if d.kind != FAIL and d.invoked.time > last.invoked.time
        }
        found = final.committed.get(group, {}).get((topic, partition))
        if found not in allowed:
            violations.append(Violation(
                "committed-offset-lost",
                f"group {group} {topic}-{partition}: committed {found}, expected one of "
                f"{sorted(allowed)} (acknowledged at {last.completed.time:.1f} s)",
            ))  # fmt: skip
    return violations


def check_disables(
    events: Sequence[Event], done: Sequence[_Done], final: FinalState
) -> list[Violation]:
    heals = [e.time for e in events if e.op == "heal" and e.type == OK]
    last_heal = max(heals, default=0.0)
    last_change: dict[str, _Done] = {}
    for d in sorted(done, key=lambda d: d.invoked.time):
        if d.invoked.op in ("disable", "enable") and _happened(d):
            last_change[d.invoked.args["topic_id"]] = d
    since_heal = final.taken_at - last_heal
    violations = []
    for topic_id, topic in sorted(final.topics.items()):
        d = last_change.get(topic_id)
        job = topic.delete_job
        job_state = "no delete job" if job is None else f"delete job {job.state}"
        if (
            d is not None
            and d.invoked.op == "disable"
            and (
                topic.tiered_state == "DISABLING"
                or (d.kind == OK and topic.tiered_state != "DISABLED")
            )
        ):
            violations.append(Violation(
                "disable-never-completed",
                f"{topic.name} (id {topic_id}): disable ({d.invoked.args['policy']}, {d.kind}) "
                f"invoked at {d.invoked.time:.1f} s is {topic.tiered_state}, {job_state}, "
                f"{since_heal:.1f} s after the last heal",
            ))  # fmt: skip
        elif job is not None and job.state != "DONE":
            # A delete-policy disable finishes with its job, even if the topic was re-enabled.
            violations.append(Violation(
                "disable-never-completed",
                f"{topic.name} (id {topic_id}): the delete job below epoch {job.tiered_epoch} is "
                f"{job.state} ({topic.tiered_state}), {since_heal:.1f} s after the last heal",
            ))  # fmt: skip
    return violations


def check_objects(final: FinalState) -> list[Violation]:
    violations = []
    for topic_id, topic in sorted(final.topics.items()):
        job = topic.delete_job
        floor = job.tiered_epoch if job is not None and job.state == "DONE" else 0
        below = sorted(key for key in topic.objects if _epoch_of(key) < floor)
        if below:
            violations.append(Violation(
                "object-below-delete-epoch",
                f"{topic.name} (id {topic_id}): {len(below)} objects below the finished delete "
                f"epoch {floor}: {below[:3]}",
            ))  # fmt: skip
        for segment in topic.finished_segments:
            if segment.tiered_epoch < floor:
                continue
            absent = [
                s
                for s in REQUIRED_SUFFIXES
                if layout.object_key(segment.prefix, s) not in topic.objects
            ]
            if absent:
                violations.append(Violation(
                    "object-at-or-above-delete-epoch-missing",
                    f"{topic.name} (id {topic_id}): segment {segment.prefix} (epoch "
                    f"{segment.tiered_epoch}, delete epoch {floor}) finished without {absent}",
                ))  # fmt: skip
    return violations


def _epoch_of(key: str) -> int:
    """The tiered epoch of an object key (``.../te=N/...``)."""
    parts = key.split("/")
    epochs = [e for e in (layout.parse_tiered_epoch_dir(p) for p in parts[:-1]) if e is not None]
    if not epochs:
        raise ValueError(f"object key {key!r} has no te=N directory")
    return epochs[-1]


def check_controller_epochs(final: FinalState) -> list[Violation]:
    by_epoch: dict[int, set[int]] = defaultdict(set)
    for activation in final.activations:
        by_epoch[activation.controller_epoch].add(activation.controller_id)
    violations = [
        Violation(
            "two-controllers-one-epoch",
            f"controllers {sorted(ids)} were both active in controller epoch {epoch}",
        )
        for epoch, ids in sorted(by_epoch.items())
        if len(ids) > 1
    ]
    violations += [
        Violation("two-controllers-one-epoch", f"ZooKeeper's transaction log: {write}")
        for write in final.writes_outside_leadership
    ]
    return violations
