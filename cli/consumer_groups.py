"""``tiered-consumer-groups``: Kafka's ``kafka-consumer-groups.sh`` for this cluster, with its flags
and its output, over the Kafka protocol (``--bootstrap-server`` takes the brokers' Kafka
listeners: cluster.json's ``kafka_bootstrap_servers``).

    tiered-consumer-groups --bootstrap-server H:P --list [--state [S,...]]
    tiered-consumer-groups --bootstrap-server H:P --describe --group G
        [--members [--verbose] | --offsets | --state]
    tiered-consumer-groups --bootstrap-server H:P --delete --group G [--group G2 ...]
    tiered-consumer-groups --bootstrap-server H:P --delete-offsets --group G --topic T[:P,...]
    tiered-consumer-groups --bootstrap-server H:P --reset-offsets --group G (--topic T[:P,...] | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-datetime ISO | --to-current
         | --by-duration PnDTnHnMnS) [--dry-run | --execute] [--export]
    tiered-consumer-groups --bootstrap-server H:P --reset-offsets --group G --from-file PLAN.csv
        [--dry-run | --execute] [--export]

``--describe`` lists each partition with a committed offset or an owner: its offset, its log end
and the lag between them. ``--reset-offsets`` only shows its plan unless ``--execute`` is given,
and refuses a group with active members; ``--export`` prints the plan as CSV, which
``--from-file`` takes back (``consumer_groups_csv``). ``--command-config`` takes Kafka's client properties
(``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; ``sasl.mechanism`` and
``sasl.jaas.config`` for SCRAM; the ``ssl.*`` keys), or librdkafka's. ``--format json`` prints
what the text tables show as JSON. Errors print ``NAME: message`` on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cli import consumer_groups_output as output
from cli.common import add_format_option, invalid, kafka_command_config, run
from cli.consumer_groups_csv import parse_plan, plan_to_csv
from cli.consumer_groups_output import PartitionRow
from cli.consumer_groups_reset import (
    RESET_SCENARIOS,
    ResetScenario,
    parse_topic_partitions,
    plan_from_file,
    plan_reset,
)
from cli.kafka_client.client import LATEST, KafkaClient
from cli.kafka_client.group_admin import (
    GROUP_STATES,
    GroupAdmin,
    GroupDescription,
    MemberDescription,
)
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.consumer_protocol import TopicPartition

__all__ = ["build_parser", "main"]

_ACTIONS = ("list", "describe", "delete", "reset_offsets", "delete_offsets")
_INACTIVE = ("Empty", "Dead")
_NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major "
    "release, the default behavior of this command will be to prompt the user before executing "
    "the reset rather than doing a dry run. You should add the --dry-run option explicitly if "
    "you are scripting this command and want to keep the current default behavior without "
    "prompting."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-consumer-groups",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="the brokers' Kafka listeners (cluster.json's kafka_bootstrap_servers)",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties, as Kafka's tools take them: security.protocol (PLAINTEXT, SSL, "
        "SASL_PLAINTEXT, SASL_SSL), sasl.mechanism (SCRAM-SHA-256, SCRAM-SHA-512), "
        "sasl.jaas.config, ssl.truststore.location, ssl.keystore.location, ...",
    )
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all consumer groups")
    action.add_argument(
        "--describe", action="store_true", help="describe a group: offsets and lag by default"
    )
    action.add_argument("--delete", action="store_true", help="delete groups (--group, ...)")
    action.add_argument(
        "--reset-offsets", action="store_true", help="reset a group's offsets (inactive groups)"
    )
    action.add_argument(
        "--delete-offsets", action="store_true", help="delete a group's offsets of --topic"
    )
    parser.add_argument("--group", action="append", default=[], help="a group; repeatable")
    parser.add_argument("--all-groups", action="store_true", help="every consumer group")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (topic1:0,1,2); repeatable",
    )
    parser.add_argument(
        "--all-topics", action="store_true", help="--reset-offsets: every topic of the group"
    )
    parser.add_argument("--members", action="store_true", help="--describe: the members")
    parser.add_argument(
        "--verbose", action="store_true", help="--describe --members: with their partitions"
    )
    parser.add_argument(
        "--offsets", action="store_true", help="--describe: offsets and lag (the default)"
    )
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATE[,STATE]",
        help=f"--describe: the group's state; --list: each group's state, or only groups in "
        f"these states ({', '.join(GROUP_STATES)})",
    )
    scenarios = parser.add_mutually_exclusive_group()
    scenarios.add_argument("--to-earliest", action="store_true", help="to the log start")
    scenarios.add_argument("--to-latest", action="store_true", help="to the log end")
    scenarios.add_argument("--to-current", action="store_true", help="to the committed offset")
    scenarios.add_argument("--to-offset", type=int, metavar="N", help="to offset N")
    scenarios.add_argument(
        "--shift-by", type=int, metavar="N", help="by N (negative: back) from the committed one"
    )
    scenarios.add_argument(
        "--to-datetime",
        metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="to the first offset at or after this time (local time unless it has a zone)",
    )
    scenarios.add_argument(
        "--by-duration", metavar="PnDTnHnMnS", help="to the first offset this long ago"
    )
    scenarios.add_argument(
        "--from-file", metavar="FILE", help="to the offsets of a CSV file, as --export prints them"
    )
    run_mode = parser.add_mutually_exclusive_group()
    run_mode.add_argument(
        "--dry-run", action="store_true", help="--reset-offsets: show the plan (the default)"
    )
    run_mode.add_argument("--execute", action="store_true", help="--reset-offsets: do it")
    parser.add_argument(
        "--export",
        action="store_true",
        help="--reset-offsets: print the plan as CSV (topic,partition,offset; with the group "
        "first unless one --group is named), for --from-file",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=5000,
        metavar="MS",
        help="how long a request and its retries may take, in ms (default 5000)",
    )
    add_format_option(parser)
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Kafka's ConsumerGroupCommandOptions.checkArgs: which flags go together."""
    if args.group and args.all_groups:
        parser.error("--group and --all-groups exclude each other")
    if (args.group or args.all_groups) and args.list:
        parser.error("--group and --all-groups go with --describe, --delete, --reset-offsets "
                     "and --delete-offsets")  # fmt: skip
    if (args.describe or args.delete or args.reset_offsets) and not (args.group or args.all_groups):
        parser.error(f"--{_action(args)} takes one of these options: --group, --all-groups")
    describe_only = [f for f in ("members", "verbose", "offsets") if getattr(args, f)]
    if describe_only and not args.describe:
        parser.error(f"--{describe_only[0]} goes with --describe only")
    if args.describe:
        chosen = [f for f in ("members", "offsets") if getattr(args, f)]
        chosen += ["state"] if args.state is not None else []
        if len(chosen) > 1:
            parser.error("--describe takes at most one of these options: --members, --offsets, "
                         "--state")  # fmt: skip
        if args.state:
            parser.error("--describe does not take a value for --state")
        if args.verbose and not args.members:
            parser.error("--verbose goes with --describe --members")
    if args.state is not None and not (args.list or args.describe):
        parser.error("--state goes with --list and --describe only")
    if args.topic and not (args.delete_offsets or args.reset_offsets):
        parser.error("--topic goes with --reset-offsets and --delete-offsets only")
    if args.delete_offsets and (len(args.group) != 1 or not args.topic):
        parser.error("--delete-offsets takes the following options: --group (one), --topic")
    scenario = _scenario(args)
    if args.reset_offsets:
        if scenario is None:
            parser.error("--reset-offsets requires one of the following scenarios: "
                         + ", ".join(f"--{s}" for s in RESET_SCENARIOS))  # fmt: skip
        if scenario is not None and scenario.flag == "from-file":
            if args.topic or args.all_topics:
                parser.error("--from-file takes its partitions from the file; it does not go "
                             "with --topic or --all-topics")  # fmt: skip
        elif bool(args.topic) == bool(args.all_topics):
            parser.error("--reset-offsets takes one of these scopes: --topic, --all-topics")
        if args.export and args.format != "text":
            parser.error("--export prints CSV; it does not go with --format json")
    else:
        used = [f for f in ("all_topics", "dry_run", "execute", "export") if getattr(args, f)]
        if scenario is not None or used:
            flag = f"--{scenario.flag}" if scenario else f"--{used[0].replace('_', '-')}"
            parser.error(f"{flag} goes with --reset-offsets only")


def _action(args: argparse.Namespace) -> str:
    return next(a for a in _ACTIONS if getattr(args, a)).replace("_", "-")


def _scenario(args: argparse.Namespace) -> ResetScenario | None:
    for flag in RESET_SCENARIOS:
        value = getattr(args, flag.replace("-", "_"))
        if value not in (None, False):
            return ResetScenario(flag, None if value is True else value)
    return None


def _states(text: str) -> list[str]:
    """``--state stable,empty`` as Kafka spells the states; INVALID_REQUEST naming the valid
    ones otherwise."""
    by_lower = {s.lower(): s for s in GROUP_STATES}
    states = []
    for raw in text.split(","):
        state = by_lower.get(raw.strip().lower())
        if state is None:
            raise invalid(
                f"--state: invalid state list {text!r}; valid states are: {', '.join(GROUP_STATES)}"
            )
        states.append(state)
    return states


# --------------------------------------------------------------------------------- actions


def _groups(admin: GroupAdmin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_groups()]
    return list(dict.fromkeys(args.group))


def _list(admin: GroupAdmin, args: argparse.Namespace) -> int:
    states = _states(args.state) if args.state else []
    output.listed(admin.list_groups(states), with_state=args.state is not None, fmt=args.format)
    return 0


def _describe(admin: GroupAdmin, args: argparse.Namespace) -> int:
    described: list[GroupDescription] = []
    missing: list[str] = []
    for group in _groups(admin, args):
        description = admin.describe_group(group)
        if description.state == "Dead":
            missing.append(group)
        else:
            described.append(description)
    if args.members:
        output.members(described, verbose=args.verbose, fmt=args.format)
    elif args.state is not None:
        output.states(described, fmt=args.format)
    else:
        output.offsets([(d, _partition_rows(admin, d)) for d in described], fmt=args.format)
    if missing:
        names = ", ".join(f"'{g}'" for g in missing)
        raise TieredError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {names} does not exist.")
    return 0


def _partition_rows(admin: GroupAdmin, group: GroupDescription) -> list[PartitionRow]:
    """Kafka's rows: each member's partitions (members with the most first), then the
    partitions with a committed offset and no owner; lag against each partition's log end."""
    committed = admin.committed_offsets(group.group_id)
    owned = [m for m in group.members if m.assignment]
    owned.sort(key=lambda m: -len(m.assignment))
    owners: list[tuple[TopicPartition, MemberDescription | None]] = [
        (tp, m) for m in owned for tp in sorted(m.assignment, key=lambda tp: (tp[1], tp[0]))
    ]
    assigned = {tp for tp, _ in owners}
    owners += [(tp, None) for tp in sorted(committed) if tp not in assigned]
    ends = admin.client.list_offsets([tp for tp, _ in owners], LATEST) if owners else {}
    return [
        PartitionRow(
            topic=tp[0],
            partition=tp[1],
            current_offset=committed.get(tp),
            log_end_offset=end if isinstance(end := ends.get(tp), int) else None,
            consumer_id=m.member_id if m else None,
            host=m.host if m else None,
            client_id=m.client_id if m else None,
        )
        for tp, m in owners
    ]


def _delete(admin: GroupAdmin, args: argparse.Namespace) -> int:
    results = admin.delete_groups(_groups(admin, args))
    output.deleted(results, fmt=args.format)
    failed = [(g, e) for g, e in results.items() if e is not None]
    if failed:
        raise TieredError(
            failed[0][1].code if failed[0][1] else ErrorCode.UNKNOWN_SERVER_ERROR,
            "Deletion of some consumer groups failed: " + ", ".join(f"'{g}'" for g, _ in failed),
        )
    return 0


def _partitions_of(admin: GroupAdmin, topics: Sequence[str]) -> list[TopicPartition]:
    named, whole = parse_topic_partitions(topics)
    if whole:
        for topic, found in admin.client.partitions(whole).items():
            if isinstance(found, TieredError):
                raise found
            named += [(topic, p) for p in found]
    return sorted(set(named))


def _delete_offsets(admin: GroupAdmin, args: argparse.Namespace) -> int:
    (group,) = args.group
    partitions = _partitions_of(admin, args.topic)
    error, results = admin.delete_offsets(group, partitions)
    output.offsets_deleted(group, args.topic, error, results, fmt=args.format)
    failed = error or next((e for e in results.values() if e is not None), None)
    if failed is not None:
        raise TieredError(failed.code, output.offset_delete_failure(group, failed))
    return 0


def _reset_offsets(admin: GroupAdmin, args: argparse.Namespace) -> int:
    execute = args.execute
    if not execute and not args.dry_run:
        print(_NO_EXECUTE_WARNING, file=sys.stderr)
    scenario = _scenario(args)
    assert scenario is not None  # _check made sure
    from_file = _read_plan(args) if scenario.flag == "from-file" else None
    plans: dict[str, dict[TopicPartition, int]] = {}
    for group in _groups(admin, args):
        state = admin.describe_group(group).state
        if state not in _INACTIVE:
            raise TieredError(
                ErrorCode.NON_EMPTY_GROUP,
                f"Assignments can only be reset if the group '{group}' is inactive, but the "
                f"current state is {state}.",
            )
        if from_file is not None:
            plans[group] = plan_from_file(admin, group, from_file)
            continue
        if args.all_topics:
            partitions = sorted(admin.committed_offsets(group))
        else:
            partitions = _partitions_of(admin, args.topic)
        plans[group] = plan_reset(admin, group, partitions, scenario)
    if execute:
        for group, plan in plans.items():
            if not plan:
                continue
            results = admin.commit_offsets(group, plan)
            failed = next((e for e in results.values() if e is not None), None)
            if failed is not None:
                raise failed
    if args.export:
        print(plan_to_csv(plans, with_group=len(args.group) != 1))
    else:
        output.reset_plan(plans, executed=execute, fmt=args.format)
    return 0


def _read_plan(args: argparse.Namespace) -> dict[str, dict[TopicPartition, int]]:
    """``--from-file``'s plans, read before anything is asked of the cluster."""
    path = args.from_file
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as e:
        raise invalid(f"--from-file {path}: cannot read the reset plan: {e}") from None
    single = args.group[0] if len(args.group) == 1 else None
    return parse_plan(text, source=path, single_group=single)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check(parser, args)

    def body() -> int:
        if args.timeout <= 0:
            raise invalid(f"--timeout must be a positive number of ms, not {args.timeout}")
        security = kafka_command_config(args.command_config)
        timeout_s = args.timeout / 1000
        with KafkaClient(args.bootstrap_server, security, timeout_s=timeout_s) as client:
            admin = GroupAdmin(client)
            if args.list:
                return _list(admin, args)
            if args.describe:
                return _describe(admin, args)
            if args.delete:
                return _delete(admin, args)
            if args.delete_offsets:
                return _delete_offsets(admin, args)
            return _reset_offsets(admin, args)

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
