"""What ``bench/kafka_protocol.py`` measures consumer groups by (issue 24's goals, reported and
never asserted): a 4-member group against the same 4 consumers with assigned partitions (at least
0.9x their MB/s), and the handover of a leaving member's partitions (at most 1 s).

*Group against assigned*: the workload's record batches, split in four contiguous quarters, one a
partition of a 4-partition topic (gRPC Produce, untimed). Four confluent-kafka consumers, each in
a process of its own with the same settings (``SETTINGS``), read it all in each mode, the modes
alternating for ``rounds`` rounds:

- *assigned*: each ``assign()``s one partition at offset 0;
- *group*: each ``subscribe()``s under a new group id. The group forms first, untimed (its join
  time, with the broker's ``group.initial.rebalance.delay.ms``, is in the JSON as ``join_s``):
  each member's first ``on_assign`` waits for the start, which comes once the four members hold
  the four partitions. A member that loses partitions commits its position first (``on_revoke``),
  as applications do, so that a rebalance neither repeats nor skips a record.

Timed from the start (every process ready: consumers built, group formed) to the last record any
member sees; members stop once the four together have seen every record. MB/s = 10^6 bytes of
record values per second; ratio = group / assigned (higher is better). Each mode's figure is its
median round.

*Handover*: two members of a new group on a small 4-partition topic, with nothing to read on the
survivor's two partitions but the moved ones whole; the leaver holds its two paused, committed at
0 (as a member that has committed), and ``close()``s (a LeaveGroup). Timed from just before that
close to the survivor's first record of each moved partition (``first_record_s``: the first of
them; ``all_moved_s``: the last), and to its ``on_assign`` with them (``assigned_s``: the
rebalance alone). A record is only seen once a fetch of the partition is answered, so this bounds
the first fetch from above. The baseline: the same handover with librdkafka's default heartbeat
and fetch wait (``DEFAULT_TIMING``). Client settings that matter (the broker has no say):

- the survivor learns of the rebalance at its next heartbeat (``heartbeat.interval.ms``, 3 s by
  default; the bench sets ``HEARTBEAT_MS``);
- a consumer has one fetch in flight per broker: on idle partitions the broker holds it up to
  ``fetch.wait.max.ms`` (500 ms by default; the bench sets ``FETCH_WAIT_MS``), and the moved
  partitions join only the next one. A moved partition without a committed offset needs a
  ListOffsets first, sent on the same connection and so answered after that fetch (a Kafka
  broker, as this one, answers a connection's requests in order);
- ``session.timeout.ms`` does not matter (a LeaveGroup ends the session at once; it only bounds
  how long a crashed member holds its partitions); the eager ``range`` assignor revokes the
  survivor's own partitions too and gives them back in the same rebalance.

Verified: every record seen exactly once in each round (per partition, the offsets seen tile the
partition with no gap or overlap, and the CRC32C of the values of each run of offsets equals the
produced values'), no consumer error, and after each handover the survivor's first offset of a
moved partition is where the leaver stopped.

This module has no ``__main__``: ``bench/kafka_protocol.py`` runs it in its own run.
"""

from __future__ import annotations

import contextlib
import queue as queues
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from crc32c import crc32c

from bench.common import summary_row
from bench.kafka_clients import CONSUMER, QUIET, fresh_processes, own_cpu_seconds
from bench.kafka_floor import (
    MB,
    RECORD_BYTES,
    STALL_S,
    Partition,
    Workload,
    build_workload,
    grpc_append,
    value,
)
from tests.support.polling import poll_until
from tiered.kafka.record_batch import iter_batches
from tiered.rpc.v1 import broker_pb2 as pb

__all__ = ["GOAL_HANDOVER_S", "GOAL_SHARE", "MEMBERS", "SETTINGS", "measure", "summary_rows"]

GOAL_SHARE = 0.9  # the group's MB/s / the assigned consumers'
GOAL_HANDOVER_S = 1.0
MEMBERS = 4
HEARTBEAT_MS = 100
FETCH_WAIT_MS = 100
HANDOVER_RECORDS = 1000  # per partition of the handover topic
SETTINGS: dict[str, Any] = {
    **CONSUMER,
    "auto.offset.reset": "earliest",  # a new group reads from the start, as assign() at 0
    "partition.assignment.strategy": "range",
    "session.timeout.ms": 45_000,  # librdkafka's default, written down
    # The survivor learns of the rebalance at its next heartbeat.
    "heartbeat.interval.ms": HEARTBEAT_MS,
    # A consumer has one fetch in flight per broker; while its own partitions have nothing new
    # the broker holds it this long, and a moved partition joins the next one.
    "fetch.wait.max.ms": FETCH_WAIT_MS,
}
DEFAULT_TIMING = {**SETTINGS, "heartbeat.interval.ms": 3000, "fetch.wait.max.ms": 500}
FORM_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Layout:
    """Where the records are: partition p holds the values of indices ``starts[p]`` to
    ``starts[p] + counts[p] - 1`` at offsets from 0."""

    starts: tuple[int, ...]
    counts: tuple[int, ...]

    @property
    def records(self) -> int:
        return sum(self.counts)

    def crc(self, partition: int, first: int, last: int) -> int:
        checksum = 0
        for i in range(self.starts[partition] + first, self.starts[partition] + last + 1):
            checksum = crc32c(value(i), checksum)
        return checksum


# ----------------------------------------------------------------------------- a member


def _member(
    mode: str,
    name: str,
    bootstrap: str,
    topic: str,
    group: str,
    partition: int,
    counts: Sequence[int],
    events: Any,
    start: Any,
    leave: Any,
    total: Any,
    settings: dict[str, Any],
) -> None:
    """One consumer process. ``mode``: assigned (``partition``), group (subscribe), or the
    handover's survivor or leaver. Reports ("ready"|"assigned"|"first"|"done"|"left", name,
    data) on ``events``; ``total`` counts the records every member has seen."""
    consumer = Consumer({**settings, **QUIET, "bootstrap.servers": bootstrap, "group.id": group})
    assignments = 0
    first_seen: set[int] = set()
    caught_up = False

    def on_assign(_consumer: Any, partitions: list[TopicPartition]) -> None:
        nonlocal assignments
        assignments += 1
        now = time.perf_counter()
        first_seen.clear()
        events.put(("assigned", name, ([p.partition for p in partitions], now)))
        if assignments == 1 and mode == "group":
            start.wait(FORM_TIMEOUT_S)
        if mode == "leaver":  # it holds its partitions, committed at 0, and reads none of them
            consumer.assign(partitions)
            consumer.pause(partitions)
            at_start = [TopicPartition(topic, p.partition, 0) for p in partitions]
            consumer.commit(offsets=at_start, asynchronous=False)

    def on_revoke(_consumer: Any, partitions: list[TopicPartition]) -> None:
        positions = [p for p in consumer.position(partitions) if p.offset >= 0]
        if positions:
            consumer.commit(offsets=positions, asynchronous=False)
        events.put(("revoked", name, [(p.partition, p.offset) for p in positions]))

    if mode == "assigned":
        events.put(("ready", name, None))
        start.wait(FORM_TIMEOUT_S)
        consumer.assign([TopicPartition(topic, partition, 0)])
    else:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        events.put(("ready", name, None))
    runs: dict[int, list[list[int]]] = {}  # partition: [first offset, last offset, CRC32C]
    errors: list[str] = []
    first_at = last_at = 0.0
    cpu_before = own_cpu_seconds()
    progress = time.perf_counter()
    while time.perf_counter() - progress < STALL_S:
        if mode == "leaver" and assignments and leave.is_set():
            break
        if mode in ("assigned", "group") and total.value >= sum(counts):
            break
        if mode == "survivor" and leave.is_set() and total.value >= sum(counts):
            break
        # No more than what is left of its partitions: consume() waits out its timeout for a
        # count not yet fetched.
        assignment = consumer.assignment()
        left = sum(counts[p.partition] - _seen(runs, p.partition) for p in assignment)
        if mode == "survivor" and assignment and not left and not caught_up:
            caught_up = True  # of its own partitions: it waits for records, idle
            events.put(("caught up", name, None))
        wanted = max(1, min(10_000, left))
        messages = consumer.consume(num_messages=wanted, timeout=0.1)
        now = time.perf_counter()
        for message in messages:
            if message.error() is not None:
                errors.append(str(message.error()))
                continue
            part, offset = message.partition(), message.offset()
            if part not in first_seen:
                first_seen.add(part)
                events.put(("first", name, (part, offset, now)))
            part_runs = runs.setdefault(part, [])
            if part_runs and part_runs[-1][1] == offset - 1:
                part_runs[-1][1] = offset
                part_runs[-1][2] = crc32c(message.value(), part_runs[-1][2])
            else:
                part_runs.append([offset, offset, crc32c(message.value())])
        if messages:
            first_at = first_at or now
            last_at = now
            progress = now
            with total.get_lock():
                total.value += len(messages)
        if mode == "leaver" and assignments and not leave.is_set():
            events.put(("leaver ready", name, None))
            leave.wait(FORM_TIMEOUT_S)
    report = {"runs": runs, "errors": errors, "first_at": first_at, "last_at": last_at}
    report["cpu_s"] = own_cpu_seconds() - cpu_before
    if mode == "leaver":
        report["close_at"] = time.perf_counter()
    consumer.close()  # a member's LeaveGroup
    events.put(("done", name, report))


def _seen(runs: dict[int, list[list[int]]], partition: int) -> int:
    return sum(last - first + 1 for first, last, _ in runs.get(partition, ()))


class Members:
    """Member processes and what they report."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, layout: Layout, settings: dict[str, Any]
    ) -> None:
        self.context = fresh_processes()
        self.events = self.context.Queue()
        self.start, self.leave = self.context.Event(), self.context.Event()
        self.total = self.context.Value("q", 0)
        self.signals = (self.start, self.leave, self.total, settings)
        self.args = (bootstrap, topic, group)
        self.counts = layout.counts
        self.processes: list[Any] = []
        self.assigned: dict[str, tuple[list[int], float]] = {}
        self.assignments: dict[str, int] = {}
        self.firsts: dict[str, list[tuple[int, int, float]]] = {}
        self.revoked: dict[str, list[tuple[int, int]]] = {}
        self.done: dict[str, dict[str, Any]] = {}
        self.ready: set[str] = set()

    def spawn(self, mode: str, name: str, partition: int = -1) -> None:
        process = self.context.Process(
            target=_member,
            args=(mode, name, *self.args, partition, self.counts, self.events, *self.signals),
            daemon=True,
        )
        process.start()
        self.processes.append(process)

    def wait(self, what: str, condition: Any, timeout: float = FORM_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{what}: not within {timeout:.0f} s (assigned {self.assigned}, first "
                    f"records {self.firsts}, revoked {self.revoked}, ready {self.ready})"
                )
            try:
                kind, name, data = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queues.Empty:
                continue
            if kind == "assigned":
                self.assigned[name] = data
                self.assignments[name] = self.assignments.get(name, 0) + 1
            elif kind == "first":
                self.firsts.setdefault(name, []).append(data)
            elif kind == "revoked":
                self.revoked[name] = data
            elif kind == "done":
                self.done[name] = data
            else:
                self.ready.add(name if kind == "ready" else f"{name}:{kind}")

    def close(self) -> None:
        self.start.set()
        self.leave.set()
        for process in self.processes:
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()


# ----------------------------------------------------------------------------- the phases


def _one_pass(mode: str, bootstrap: str, topic: str, layout: Layout) -> dict[str, Any]:
    members = Members(bootstrap, topic, f"bench-group-{uuid.uuid4().hex[:8]}", layout, SETTINGS)
    names = [f"m{i}" for i in range(MEMBERS)]
    try:
        for i, name in enumerate(names):
            members.spawn(mode, name, i)
        members.wait("every member ready", lambda: len(members.ready) == MEMBERS)
        ready_at = time.perf_counter()
        join_s = None
        if mode == "group":

            def formed() -> bool:
                held = [p for parts, _ in members.assigned.values() for p in parts]
                return len(members.assigned) == MEMBERS and sorted(held) == list(range(MEMBERS))

            # A late member: the rebalance it causes is counted below.
            with contextlib.suppress(TimeoutError):
                members.wait("the group to form", formed)
            join_s = time.perf_counter() - ready_at
        go = time.perf_counter()
        members.start.set()
        members.wait("every record", lambda: len(members.done) == MEMBERS, STALL_S * 2)
    finally:
        members.close()
    reports = list(members.done.values())
    seconds = max(r["last_at"] for r in reports) - go
    result: dict[str, Any] = {
        "seconds": seconds,
        "mb_per_s": layout.records * RECORD_BYTES / seconds / MB,
        "first_record_s": statistics.median(r["first_at"] - go for r in reports),
        "member_cpu_s": round(sum(r["cpu_s"] for r in reports), 3),
        "problems": _check_once(mode, reports, layout),
    }
    if join_s is not None:
        result["join_s"] = join_s
        result["rebalances"] = max(members.assignments.values()) - 1
    return result


def _check_once(mode: str, reports: Sequence[dict[str, Any]], layout: Layout) -> list[str]:
    """Each partition's runs of offsets tile it exactly, each run's CRC32C the produced one's."""
    problems = [f"{mode}: consumer error {e}" for r in reports for e in r["errors"][:1]]
    for partition, count in enumerate(layout.counts):
        runs = sorted(tuple(run) for r in reports for run in r["runs"].get(partition, ()))
        expected = 0
        for first, last, checksum in runs:
            if first != expected:
                what = "repeated" if first < expected else "skipped"
                problems.append(f"{mode}: partition {partition} offsets {what} at {first}")
            elif checksum != layout.crc(partition, first, last):
                problems.append(f"{mode}: partition {partition} values {first}-{last} differ")
            expected = max(expected, last + 1)
        if expected != count:
            problems.append(f"{mode}: partition {partition} read to {expected}, not {count}")
    return problems


def _handover(
    bootstrap: str, topic: str, layout: Layout, settings: dict[str, Any]
) -> dict[str, Any]:
    group = f"bench-handover-{uuid.uuid4().hex[:8]}"
    members = Members(bootstrap, topic, group, layout, settings)
    try:
        members.spawn("survivor", "survivor")
        members.spawn("leaver", "leaver")

        def split() -> bool:
            held = [p for parts, _ in members.assigned.values() for p in parts]
            return len(members.assigned) == 2 and sorted(held) == list(range(MEMBERS))

        members.wait("the two members to split the partitions", split)
        moved, _ = members.assigned["leaver"]
        members.wait("the leaver's assignment", lambda: "leaver:leaver ready" in members.ready)
        # the survivor has read its own partitions: it is idle, as a member waiting for records
        members.wait("the survivor to catch up", lambda: "survivor:caught up" in members.ready)
        members.leave.set()
        members.wait("the leaver to leave", lambda: "leaver" in members.done)
        closed_at = members.done["leaver"]["close_at"]

        def all_moved_seen() -> bool:
            seen = {p for p, _, at in members.firsts.get("survivor", ()) if at > closed_at}
            return set(moved) <= seen

        members.wait("the survivor's first records of the moved partitions", all_moved_seen)
    finally:
        members.close()
    firsts = {p: (o, at) for p, o, at in members.firsts.get("survivor", ()) if at > closed_at}
    stopped = dict(members.revoked.get("leaver", ()))
    problems = [
        f"handover: the survivor began partition {p} at {firsts[p][0]}, the leaver stopped at "
        f"{stopped.get(p)}"
        for p in moved
        if firsts[p][0] != stopped.get(p, 0)
    ]
    assigned = [at for parts, at in [members.assigned["survivor"]] if set(moved) <= set(parts)]
    return {
        "moved_partitions": moved,
        "assigned_s": assigned[0] - closed_at if assigned else None,
        "first_record_s": min(at for _, at in firsts.values()) - closed_at,
        "all_moved_s": max(at for _, at in firsts.values()) - closed_at,
        "problems": problems,
    }


def produce_layout(stub: Any, name: str, topic_id: uuid.UUID, workload: Workload) -> Layout:
    """The workload's batches in contiguous quarters, one per partition (gRPC, untimed)."""
    n = len(workload.batches)
    if n < MEMBERS:
        raise ValueError(f"{n} record batches cannot fill {MEMBERS} partitions")
    starts, counts = [], []
    for p in range(MEMBERS):
        batches = workload.batches[p * n // MEMBERS : (p + 1) * n // MEMBERS]
        problems = grpc_append(stub, Partition(name, topic_id, p), batches, 0)
        if problems:
            raise RuntimeError(problems[0])
        starts.append(sum(counts))
        counts.append(sum(h.records_count for b in batches for h in iter_batches(b)))
    return Layout(tuple(starts), tuple(counts))


def make_topics(cluster: Any, stub: Any, workload: Workload) -> dict[str, Layout]:
    """The two topics :func:`measure` reads, created and filled (untimed)."""
    small = build_workload(MEMBERS * HANDOVER_RECORDS * RECORD_BYTES)
    topics = {}
    for name, records in (("group-4", workload), ("handover-4", small)):
        topic_id = cluster.admin.create_topic(name, MEMBERS, {})
        hosted(stub, topic_id)
        topics[name] = produce_layout(stub, name, topic_id, records)
    return topics


def hosted(stub: Any, topic_id: uuid.UUID) -> None:
    """Waits until the broker hosts each of the topic's ``MEMBERS`` partitions."""

    def every_partition() -> bool:
        response = stub.DescribeLogDirs(pb.DescribeLogDirsRequest(), timeout=10)
        hosting = [d for d in response.partitions if d.partition.topic_id == topic_id.bytes]
        return len(hosting) >= MEMBERS

    poll_until(every_partition, timeout=60, what="every partition to be hosted")


def measure(
    bootstrap: str, topics: dict[str, Layout], rounds: int, handovers: int, log: Any
) -> dict[str, Any]:
    """``topics``: two 4-partition topics, produced with :func:`produce_layout`: the first holds
    the workload (the group against assigned), the second ``HANDOVER_RECORDS`` a partition."""
    (topic, layout), (small_topic, small) = topics.items()
    runs: dict[str, list[dict[str, Any]]] = {"assigned": [], "group": []}
    for r in range(rounds):
        for mode in ("assigned", "group"):
            result = _one_pass(mode, bootstrap, topic, layout)
            runs[mode].append(result)
            log(f"  consumer {mode} round {r + 1}: {result['mb_per_s']:,.1f} MB/s {result}")
    samples = []
    for _ in range(handovers):
        samples.append(_handover(bootstrap, small_topic, small, SETTINGS))
        log(f"  handover: {samples[-1]}")
    with_defaults = []  # librdkafka's heartbeat and fetch wait: what an untuned client sees
    for _ in range(handovers):
        with_defaults.append(_handover(bootstrap, small_topic, small, DEFAULT_TIMING))
        log(f"  handover, librdkafka's defaults: {with_defaults[-1]}")
    assigned, group = _median(runs["assigned"]), _median(runs["group"])
    problems = [p for mode in runs.values() for run in mode for p in run["problems"]]
    problems += [p for s in samples + with_defaults for p in s["problems"]]

    def median_of(key: str, runs: list[dict[str, Any]] = samples) -> float | None:
        found = [s[key] for s in runs if s[key] is not None]
        return statistics.median(found) if found else None

    return {
        "assigned": assigned,
        "group": group,
        "share": group["mb_per_s"] / assigned["mb_per_s"],
        "share_goal": f">= {GOAL_SHARE}",
        "handovers": samples,
        "handover_first_record_s": median_of("first_record_s"),
        "handover_all_moved_s": median_of("all_moved_s"),
        "handover_assigned_s": median_of("assigned_s"),
        "handover_goal": f"<= {GOAL_HANDOVER_S} s",
        "handovers_librdkafka_defaults": with_defaults,
        "handover_librdkafka_defaults_first_record_s": median_of("first_record_s", with_defaults),
        "librdkafka_defaults": DEFAULT_TIMING,
        "settings": SETTINGS,
        "problems": problems,
    }


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ranked = sorted(runs, key=lambda r: float(r["mb_per_s"]))
    median = dict(ranked[(len(ranked) - 1) // 2])
    median["rounds_mb_per_s"] = [r["mb_per_s"] for r in runs]
    return median


def summary_rows(result: dict[str, Any] | None, scenario: str) -> list[dict[str, Any]]:
    if not result or "group" not in result:
        return []
    rows = [
        summary_row(
            scenario,
            f"{MEMBERS}-member group consuming, MB/s (ratio: share of the baseline's MB/s, "
            f"goal >= {GOAL_SHARE:.2f})",
            result["group"]["mb_per_s"],
            "MB/s",
            f"the same {MEMBERS} consumers with assigned partitions",
            result["assigned"]["mb_per_s"],
        )
    ]
    defaults = result.get("handover_librdkafka_defaults_first_record_s")
    if result["handover_first_record_s"] and defaults:
        rows.append(
            summary_row(
                scenario,
                "a member's LeaveGroup to the survivor's first record of the moved partitions, "
                f"median (goal <= {GOAL_HANDOVER_S:g} s; heartbeat.interval.ms {HEARTBEAT_MS}, "
                f"fetch.wait.max.ms {FETCH_WAIT_MS})",
                result["handover_first_record_s"],
                "s",
                "the same with librdkafka's defaults (heartbeat.interval.ms 3000, "
                "fetch.wait.max.ms 500)",
                defaults,
            )
        )
    return rows
