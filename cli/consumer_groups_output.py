"""What ``tiered-consumer-groups`` prints: kafka-consumer-groups.sh's tables (their columns,
widths and messages), or the same facts as JSON (``--format json``). Notes about a group (no
active members, rebalancing) and warnings go to stderr, so stdout holds only the tables or the
JSON."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cli.common import print_json
from cli.kafka_client.group_admin import GroupDescription, GroupListing
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.consumer_protocol import TopicPartition

__all__ = [
    "PartitionRow",
    "deleted",
    "listed",
    "members",
    "offset_delete_failure",
    "offsets",
    "offsets_deleted",
    "reset_plan",
    "states",
]

MISSING = "-"
_REBALANCING = ("PreparingRebalance", "CompletingRebalance")


@dataclass(frozen=True)
class PartitionRow:
    """One line of ``--describe``: a partition the group owns or has an offset of."""

    topic: str | None
    partition: int | None
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


_OFFSETS_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)
_MEMBERS_HEADER = ("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
_INSTANCE_COLUMN = 2  # shown only when a member has a group.instance.id
_STATES_HEADER = ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")


def _line(cells: Sequence[str], widths: Sequence[int | None]) -> str:
    """Cells left-aligned in their widths (None: as long as it is), one space apart, as
    Java's ``%-Ns`` formats lay them out."""
    return " ".join(
        cell if width is None else f"{cell:<{width}}"
        for cell, width in zip(cells, widths, strict=True)
    )


def _text(value: object) -> str:
    return MISSING if value is None else str(value)


def _note_state(group: GroupDescription) -> None:
    """Kafka's remark on a group that is not Stable (stderr)."""
    if group.state == "Empty":
        print(f"\nConsumer group '{group.group_id}' has no active members.", file=sys.stderr)
    elif group.state in _REBALANCING:
        print(f"\nWarning: Consumer group '{group.group_id}' is rebalancing.", file=sys.stderr)


# --------------------------------------------------------------------------------- --list


def listed(groups: Sequence[GroupListing], *, with_state: bool, fmt: str) -> None:
    if fmt == "json":
        print_json([{"group": g.group_id, "state": g.state} for g in groups])
        return
    if not with_state:
        for group in groups:
            print(group.group_id)
        return
    width = max([15, *(len(g.group_id) for g in groups)]) + 10
    print(f"{'GROUP':<{width}} {'STATE':<20}")
    for group in groups:
        print(f"{group.group_id:<{width}} {group.state or 'Unknown':<20}")


# --------------------------------------------------------------------------------- --describe


def offsets(groups: Sequence[tuple[GroupDescription, Sequence[PartitionRow]]], *, fmt: str) -> None:
    if fmt == "json":
        print_json(
            [
                {
                    "group": group.group_id,
                    "state": group.state,
                    "offsets": [
                        {
                            "topic": r.topic,
                            "partition": r.partition,
                            "current_offset": r.current_offset,
                            "log_end_offset": r.log_end_offset,
                            "lag": r.lag,
                            "consumer_id": r.consumer_id,
                            "host": r.host,
                            "client_id": r.client_id,
                        }
                        for r in rows
                    ],
                }
                for group, rows in groups
            ]
        )
        return
    for group, rows in groups:
        _note_state(group)
        if not rows:
            continue
        widths = [
            max([15, len(group.group_id)]),
            max([15, *(len(_text(r.topic)) for r in rows)]),
            10,
            15,
            15,
            15,
            max([15, *(len(_text(r.consumer_id)) for r in rows)]),
            max([15, *(len(_text(r.host)) for r in rows)]),
            None,
        ]
        print()
        print(_line(_OFFSETS_HEADER, widths))
        for r in rows:
            cells: tuple[object, ...] = (group.group_id, r.topic, r.partition, r.current_offset)
            cells += (r.log_end_offset, r.lag, r.consumer_id, r.host, r.client_id)
            print(_line([_text(c) for c in cells], widths))
        print()


def _assignment_text(partitions: Sequence[TopicPartition]) -> str:
    """``topic(0,1), other(2)``, or ``-`` for none."""
    if not partitions:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return ", ".join(
        f"{topic}({','.join(str(i) for i in sorted(indexes))})"
        for topic, indexes in sorted(by_topic.items())
    )


def members(groups: Sequence[GroupDescription], *, verbose: bool, fmt: str) -> None:
    if fmt == "json":
        print_json(
            [
                {
                    "group": group.group_id,
                    "state": group.state,
                    "members": [
                        {
                            "consumer_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "host": m.host,
                            "client_id": m.client_id,
                            "partitions": [{"topic": t, "partition": p} for t, p in m.assignment],
                        }
                        for m in group.members
                    ],
                }
                for group in groups
            ]
        )
        return
    for group in groups:
        _note_state(group)
        listed_members = group.members
        with_instance = any(m.group_instance_id for m in listed_members)
        widths: list[int | None] = [
            max([15, len(group.group_id)]),
            max([15, *(len(m.member_id) for m in listed_members)]),
            max([17, *(len(m.group_instance_id or "") for m in listed_members)]),
            max([15, *(len(m.host) for m in listed_members)]),
            max([15, *(len(m.client_id) for m in listed_members)]),
            15,
        ]
        columns = [i for i in range(len(widths)) if with_instance or i != _INSTANCE_COLUMN]
        rows = [list(_MEMBERS_HEADER)]
        rows += [
            [group.group_id, m.member_id, m.group_instance_id or "", m.host, m.client_id, count]
            for m in listed_members
            for count in [str(len(m.assignment))]
        ]
        tails = ["ASSIGNMENT"] + [_assignment_text(m.assignment) for m in listed_members]
        print()
        for row, tail in zip(rows, tails, strict=True):
            # Kafka's member lines end in a space after #PARTITIONS, assignment or not.
            text = _line([row[i] for i in columns], [widths[i] for i in columns]) + " "
            print(text + (tail if verbose else ""))


def states(groups: Sequence[GroupDescription], *, fmt: str) -> None:
    if fmt == "json":
        print_json(
            [
                {
                    "group": g.group_id,
                    "coordinator": {
                        "id": g.coordinator.node_id,
                        "host": g.coordinator.host,
                        "port": g.coordinator.port,
                    },
                    "assignment_strategy": g.assignor,
                    "state": g.state,
                    "members": len(g.members),
                }
                for g in groups
            ]
        )
        return
    for group in groups:
        _note_state(group)
        coordinator = f"{group.coordinator}  ({group.coordinator.node_id})"
        widths = [max(25, len(coordinator)), 25, 20, 15, None]
        cells = [group.group_id, coordinator, group.assignor, group.state, str(len(group.members))]
        print()
        print(_line(_STATES_HEADER, widths))
        print(_line(cells, widths))
        print()


# --------------------------------------------------------------------------------- changes


def deleted(results: Mapping[str, TieredError | None], *, fmt: str) -> None:
    if fmt == "json":
        print_json([{"group": g, "error": _error(e)} for g, e in results.items()])
        return
    done = [g for g, e in results.items() if e is None]
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        print(f"Deletion of requested consumer groups ('{', '.join(done)}') was successful.")
        return
    for group, error in failed.items():
        print(f"* Group '{group}' could not be deleted due to: {_error(error)}")
    if done:
        print(f"\nThese consumer groups were deleted successfully: '{', '.join(done)}'")


def offset_delete_failure(group: str, error: TieredError) -> str:
    """Kafka's message for an OffsetDelete error of the group (or of a partition)."""
    messages = {
        ErrorCode.INVALID_GROUP_ID: f"'{group}' is not valid.",
        ErrorCode.GROUP_ID_NOT_FOUND: f"'{group}' does not exist.",
        ErrorCode.GROUP_AUTHORIZATION_FAILED: f"Access to '{group}' is not authorized.",
        ErrorCode.NON_EMPTY_GROUP: f"Deleting offsets of a consumer group '{group}' is "
        "forbidden if the group is not empty.",
    }
    return messages.get(error.code, "Encounter some partition level error, see the details above.")


def offsets_deleted(
    group: str,
    topics: Sequence[str],
    error: TieredError | None,
    results: Mapping[TopicPartition, TieredError | None],
    *,
    fmt: str,
) -> None:
    if fmt == "json":
        print_json(
            {
                "group": group,
                "error": _error(error),
                "partitions": [
                    {"topic": t, "partition": p, "error": _error(e)}
                    for (t, p), e in sorted(results.items())
                ],
            }
        )
        return
    if error is None and all(e is None for e in results.values()):
        print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    print()
    print(f"{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}")
    for (topic, partition), failure in sorted(results.items()):
        status = "Successful" if failure is None else f"Error: {_error(failure)}"
        print(f"{topic:<30} {partition:<15} {status:<15}")


def reset_plan(
    plans: Mapping[str, Mapping[TopicPartition, int]], *, executed: bool, fmt: str
) -> None:
    if fmt == "json":
        print_json(
            [
                {
                    "group": group,
                    "executed": executed,
                    "offsets": [
                        {"topic": t, "partition": p, "new_offset": o}
                        for (t, p), o in sorted(plan.items())
                    ],
                }
                for group, plan in plans.items()
            ]
        )
        return
    if plans:
        print()
        print(f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}")
    for group, plan in plans.items():
        for (topic, partition), offset in sorted(plan.items()):
            print(f"{group:<30} {topic:<30} {partition:<10} {offset:<15}")
    print()


def _error(error: TieredError | None) -> Any:
    return None if error is None else f"{error.code.name}: {error.message}"
