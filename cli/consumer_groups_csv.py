"""A reset plan as CSV, as ``kafka-consumer-groups.sh`` writes it (``--reset-offsets --export``)
and reads it back (``--reset-offsets --from-file``): one ``topic,partition,offset`` line a
partition when exactly one ``--group`` is named, else ``group,topic,partition,offset``; no
header. A file of the shorter form is read as the named group's plan only when one group is
named, as Kafka's tool reads it."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping

from cli.common import invalid
from tiered.kafka.consumer_protocol import TopicPartition

__all__ = ["parse_plan", "plan_to_csv"]

_SHORT = "topic,partition,offset"
_LONG = "group,topic,partition,offset"


def plan_to_csv(plans: Mapping[str, Mapping[TopicPartition, int]], *, with_group: bool) -> str:
    """``--export``'s text: each group's partitions in order, one line each."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for group, plan in plans.items():
        for (topic, partition), offset in sorted(plan.items()):
            writer.writerow(
                [group, topic, partition, offset] if with_group else [topic, partition, offset]
            )
    return out.getvalue()


def parse_plan(
    text: str, *, source: str, single_group: str | None
) -> dict[str, dict[TopicPartition, int]]:
    """The plans in ``text`` by group. ``single_group`` is the one ``--group`` named (None for
    several, or ``--all-groups``): a file whose first line has the short form is that group's.
    INVALID_REQUEST naming ``source``, the line and the valid forms for a line that is neither."""
    rows = [
        (number, row)
        for number, row in enumerate(csv.reader(io.StringIO(text)), start=1)
        if any(cell.strip() for cell in row)
    ]
    short = single_group is not None and bool(rows) and _short_row(rows[0][1]) is not None
    plans: dict[str, dict[TopicPartition, int]] = {}
    for number, row in rows:
        if short:
            assert single_group is not None
            parsed = _short_row(row)
            group = single_group
        else:
            parsed = _short_row(row[1:]) if len(row) == 4 and row[0].strip() else None
            group = row[0].strip()
        if parsed is None:
            expected = _SHORT if short else _LONG
            if single_group is not None and not short:
                expected = f"{_SHORT} (for the one --group) or {_LONG}"
            raise invalid(
                f"--from-file {source} line {number}: {','.join(row)!r} is not {expected} "
                "(partitions and offsets are numbers from 0)"
            )
        tp, offset = parsed
        plans.setdefault(group, {})[tp] = offset
    return plans


def _short_row(row: list[str]) -> tuple[TopicPartition, int] | None:
    if len(row) != 3:
        return None
    topic, partition, offset = (cell.strip() for cell in row)
    if not topic or not partition.isdigit() or not offset.isdigit():
        return None
    return (topic, int(partition)), int(offset)
