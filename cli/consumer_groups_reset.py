"""``tiered-consumer-groups --reset-offsets``: the new offset of each partition, by scenario, as
Kafka's ConsumerGroupCommand plans it. An offset named outright (``--to-offset``,
``--shift-by``, ``--from-file``) is kept within the partition's log, with a warning when it is
moved; a time with no record at or after it falls back to the log end, with a warning."""

from __future__ import annotations

import datetime
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from cli.common import invalid
from cli.kafka_client.client import EARLIEST, LATEST, UNKNOWN_OFFSET
from cli.kafka_client.group_admin import GroupAdmin
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.consumer_protocol import TopicPartition

__all__ = [
    "RESET_SCENARIOS",
    "ResetScenario",
    "parse_datetime",
    "parse_duration",
    "parse_topic_partitions",
    "plan_from_file",
    "plan_reset",
]

RESET_SCENARIOS = (
    "to-earliest",
    "to-latest",
    "to-current",
    "to-offset",
    "shift-by",
    "to-datetime",
    "by-duration",
    "from-file",
)
# ISO 8601 durations as Java's Duration.parse takes them: PnDTnHnMn.nS, with an optional sign.
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>[-+]?\d+)D)?"
    r"(?:T(?:(?P<hours>[-+]?\d+)H)?(?:(?P<minutes>[-+]?\d+)M)?(?:(?P<seconds>[-+]?\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ResetScenario:
    flag: str  # one of RESET_SCENARIOS
    value: int | str | None = None


def parse_topic_partitions(topics: Sequence[str]) -> tuple[list[TopicPartition], list[str]]:
    """``--topic`` values: (partitions named as ``topic:0,1``, topics named whole)."""
    named: list[TopicPartition] = []
    whole: list[str] = []
    for text in topics:
        if ":" not in text:
            if not text.strip():
                raise invalid("--topic: empty topic name")
            whole.append(text.strip())
            continue
        parts = text.split(":")
        if len(parts) != 2 or not parts[0].strip():
            raise invalid(
                f"--topic: invalid topic arg '{text}', expected topic name and partitions"
            )
        topic, partitions = parts[0].strip(), parts[1]
        for raw in partitions.split(","):
            if not raw.strip().isdigit():
                raise invalid(
                    f"--topic: invalid partition '{raw}' specified in topic arg '{text}' "
                    "(partitions are numbers from 0: topic:0,1,2)"
                )
            named.append((topic, int(raw)))
    return named, whole


def parse_datetime(text: str) -> int:
    """``--to-datetime``: milliseconds since the epoch; local time unless the text has a zone."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise invalid(
            f"--to-datetime {text!r} is not a date and time; valid: YYYY-MM-DDTHH:mm:SS.sss, "
            "optionally with a zone (Z, +01:00)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local zone, as Kafka's tool reads a bare time
    return int(moment.timestamp() * 1000)


def parse_duration(text: str) -> datetime.timedelta:
    """``--by-duration``: an ISO 8601 duration (``PnDTnHnMnS``, Java's Duration.parse)."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match[k] for k in ("days", "hours", "minutes", "seconds")):
        raise invalid(f"--by-duration {text!r} is not a duration; valid: PnDTnHnMnS (e.g. PT1H30M)")
    duration = datetime.timedelta(
        days=int(match["days"] or 0),
        hours=int(match["hours"] or 0),
        minutes=int(match["minutes"] or 0),
        seconds=float(match["seconds"] or 0),
    )
    return -duration if match["sign"] == "-" else duration


def plan_reset(
    admin: GroupAdmin, group: str, partitions: Sequence[TopicPartition], scenario: ResetScenario
) -> dict[TopicPartition, int]:
    """The new offset of each of ``partitions`` for ``group``."""
    client = admin.client
    flag, value = scenario.flag, scenario.value
    if flag in ("to-earliest", "to-latest"):
        edge = "starting" if flag == "to-earliest" else "ending"
        found = client.list_offsets(partitions, EARLIEST if flag == "to-earliest" else LATEST)
        return {tp: _offset(found.get(tp), f"Error getting {edge} offset", tp) for tp in partitions}
    if flag == "to-offset":
        assert isinstance(value, int)
        return _within_log(admin, dict.fromkeys(partitions, value))
    if flag == "shift-by":
        assert isinstance(value, int)
        committed = admin.committed_offsets(group, partitions)
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            tp = missing[0]
            raise invalid(
                f"--shift-by: cannot shift offset for partition {tp[0]}-{tp[1]} since there is "
                "no current committed offset"
            )
        return _within_log(admin, {tp: committed[tp] + value for tp in partitions})
    if flag == "to-current":
        committed = admin.committed_offsets(group, partitions)
        rest = [tp for tp in partitions if tp not in committed]
        ends = client.list_offsets(rest, LATEST) if rest else {}
        return {
            tp: committed[tp]
            if tp in committed
            else _offset(ends.get(tp), "Error getting ending offset", tp)
            for tp in partitions
        }
    if flag in ("to-datetime", "by-duration"):
        assert isinstance(value, str)
        if flag == "to-datetime":
            timestamp = parse_datetime(value)
        else:
            now = datetime.datetime.now(datetime.UTC)
            timestamp = int((now - parse_duration(value)).timestamp() * 1000)
        return _at_time(admin, partitions, timestamp)
    raise invalid(f"unknown reset scenario --{flag}; valid: {', '.join(RESET_SCENARIOS)}")


def plan_from_file(
    admin: GroupAdmin, group: str, plans: dict[str, dict[TopicPartition, int]]
) -> dict[TopicPartition, int]:
    """``--from-file``: the file's offsets for ``group``, kept within each partition's log; a
    group the file has no plan for gets none (with Kafka's error line), and nothing is reset."""
    wanted = plans.get(group)
    if wanted is None:
        print(f"\nError: No reset plan for group {group} found", file=sys.stderr)
        return {}
    return _within_log(admin, wanted)


def _offset(found: int | TieredError | None, what: str, tp: TopicPartition) -> int:
    if isinstance(found, int):
        return found
    why = f" ({found.message})" if found is not None else ""
    code = found.code if found is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    raise TieredError(code, f"{what} of topic partition: {tp[0]}-{tp[1]}{why}")


def _at_time(
    admin: GroupAdmin, partitions: Sequence[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    found = admin.client.list_offsets(partitions, timestamp)
    plan = {}
    empty = []
    for tp in partitions:
        offset = _offset(found.get(tp), "Error getting offset by timestamp", tp)
        if offset == UNKNOWN_OFFSET:
            print(
                f"\nWarn: Partition {tp[1]} from topic {tp[0]} is empty. Falling back to latest "
                "known offset.",
                file=sys.stderr,
            )
            empty.append(tp)
        else:
            plan[tp] = offset
    if empty:
        ends = admin.client.list_offsets(empty, LATEST)
        plan |= {tp: _offset(ends.get(tp), "Error getting ending offset", tp) for tp in empty}
    return {tp: plan[tp] for tp in partitions}


def _within_log(admin: GroupAdmin, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """Kafka's checkOffsetsRange: an offset past the log end becomes the end, one before the
    log start the start, each with a warning."""
    starts = admin.client.list_offsets(wanted, EARLIEST)
    ends = admin.client.list_offsets(wanted, LATEST)
    plan = {}
    for tp, asked in wanted.items():
        offset = asked
        end, start = ends.get(tp), starts.get(tp)
        name = f"{tp[0]}-{tp[1]}"
        if isinstance(end, int) and offset > end:
            print(
                f"WARN: New offset ({offset}) is higher than latest offset for topic partition "
                f"{name}. Value will be set to {end}",
                file=sys.stderr,
            )
            offset = end
        elif isinstance(start, int) and offset < start:
            print(
                f"WARN: New offset ({offset}) is lower than earliest offset for topic partition "
                f"{name}. Value will be set to {start}",
                file=sys.stderr,
            )
            offset = start
        elif not isinstance(end, int):
            _offset(end, "Error getting ending offset", tp)
        plan[tp] = offset
    return plan
