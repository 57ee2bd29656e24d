"""``tiered-configs``: describe and alter topic configs and SCRAM users, in the shape of
kafka-configs.sh.

    tiered-configs --bootstrap-server H:P --alter --entity-type topics --entity-name T
                   --add-config 'K=V,K=V' [--delete-config K[,K]] [--wait] [--timeout SECONDS]
    tiered-configs --bootstrap-server H:P --describe --entity-type topics --entity-name T
                   [--format json]
    tiered-configs --bootstrap-server H:P --alter --entity-type users --entity-name NAME
                   --add-config 'SCRAM-SHA-512=[password=PW]' | --delete-config SCRAM-SHA-512
    tiered-configs --bootstrap-server H:P --describe --entity-type users [--entity-name NAME]

``--wait`` polls the topic after the alter until its disablement is over (tiered_state is no longer
DISABLING), showing progress on stderr, then prints the final state on stdout.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tiered.admin import AdminClient, TopicDescription
from tiered.cli.common import (
    ProgressLine,
    add_bootstrap_option,
    add_format_option,
    command_config_credentials,
    explaining_refusals,
    parse_config_list,
    parse_key_list,
    print_json,
    run,
)
from tiered.cli.scram_users import alter_users, describe_users
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError

__all__ = [
    "DEFAULT_WAIT_CONDITIONS",
    "POLL_INTERVAL_S",
    "DisablementAcks",
    "WaitCondition",
    "build_parser",
    "main",
    "wait_for_topic",
]

POLL_INTERVAL_S = 0.5
DEFAULT_TIMEOUT_S = 600.0
MAX_CALL_TIMEOUT_S = 30.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-configs", description="Describe and alter topic configs and SCRAM users."
    )
    add_bootstrap_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", action="store_true", help="set and delete topic configs")
    action.add_argument("--describe", action="store_true", help="show a topic's configs")
    parser.add_argument("--entity-type", required=True, choices=("topics", "users"))
    parser.add_argument(
        "--entity-name",
        metavar="NAME",
        help="the topic, or the user (every user when describing users without it)",
    )
    parser.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="'K=V,K=V'",
        help="configs to set; a list value goes in square brackets: k=[a,b]",
    )
    parser.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K]",
        help="configs to remove (back to their defaults)",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="after --alter, wait until the topic is no longer DISABLING, showing progress",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long --wait waits (default: {DEFAULT_TIMEOUT_S:g})",
    )
    add_format_option(parser)
    return parser


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.entity_name is None and (args.entity_type == "topics" or args.alter):
        parser.error("--entity-name is required, but with --describe --entity-type users")
    if args.entity_type == "users" and args.wait:
        parser.error("--wait goes with --entity-type topics only")
    if args.alter and not (args.add_config or args.delete_config):
        parser.error("--alter needs --add-config or --delete-config")
    if args.describe and (args.add_config or args.delete_config or args.wait):
        parser.error("--add-config, --delete-config and --wait go with --alter only")
    if args.format != "text" and not args.describe:
        parser.error("--format goes with --describe only")
    if not args.timeout > 0:
        parser.error("--timeout must be positive")


# --------------------------------------------------------------------------------- waiting


class WaitCondition(Protocol):
    """One thing ``--wait`` waits for. The loop polls the topic until no condition is pending;
    each pending condition contributes a part of the progress line."""

    def pending(self, topic: TopicDescription) -> bool: ...

    def progress(self, topic: TopicDescription) -> str: ...


class DisablementAcks:
    """The disablement itself: DISABLING until every hosting broker acked the new epoch."""

    def pending(self, topic: TopicDescription) -> bool:
        return topic.tiered_state is TieredState.DISABLING

    def progress(self, topic: TopicDescription) -> str:
        return (
            f"DISABLING epoch {topic.tiered_epoch}: brokers acked "
            f"{topic.disable_acks_done}/{topic.disable_acks_total} partitions"
        )


def progress_bar(done: int, total: int, width: int = 20) -> str:
    fraction = 0.0 if total <= 0 else min(1.0, done / total)
    filled = round(fraction * width)
    return f"[{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%}"


class RemoteDeletion:
    """After a disablement with the delete policy: the bulk delete of the older epochs' remote
    data, until its job is DONE."""

    def pending(self, topic: TopicDescription) -> bool:
        job = topic.delete_job
        return (
            topic.tiered_state is not TieredState.DISABLING
            and job is not None
            and job.tiered_epoch == topic.tiered_epoch
            and job.state != "DONE"
        )

    def progress(self, topic: TopicDescription) -> str:
        job = topic.delete_job
        assert job is not None
        total = job.objects_total
        line = (
            f"deleting remote data below epoch {job.tiered_epoch} ({job.state.lower()}): "
            f"{progress_bar(job.objects_deleted, total)} {job.objects_deleted}/{total} objects, "
            f"{job.partitions_done}/{job.partition_count} partitions"
        )
        if job.last_error:
            line += f"; attempt {job.attempts} failed: {job.last_error} (retrying)"
        return line


DEFAULT_WAIT_CONDITIONS: tuple[WaitCondition, ...] = (DisablementAcks(), RemoteDeletion())


def wait_for_topic(
    admin: AdminClient,
    topic: str,
    *,
    timeout_s: float,
    progress: ProgressLine,
    conditions: Sequence[WaitCondition] = DEFAULT_WAIT_CONDITIONS,
    poll_interval_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> TopicDescription:
    """Poll ``topic`` (with partition state) until no condition is pending and return its last
    description. REQUEST_TIMED_OUT after ``timeout_s``; the topic disappearing or a failed
    describe raises that error."""
    interval = POLL_INTERVAL_S if poll_interval_s is None else poll_interval_s
    deadline = clock() + timeout_s
    try:
        while True:
            described = admin.describe_topic(topic, include_partition_state=True)
            waiting = [c for c in conditions if c.pending(described)]
            if not waiting:
                return described
            line = "; ".join(c.progress(described) for c in waiting)
            progress.update(line)
            remaining = deadline - clock()
            if remaining <= 0:
                raise TieredError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"topic {topic!r} is still {described.tiered_state.value} after "
                    f"{timeout_s:g}s ({line})",
                )
            sleep(min(interval, remaining))
    finally:
        progress.finish()


def final_state_line(t: TopicDescription) -> str:
    return (
        f"Topic {t.name}: tiered_state={t.tiered_state.value} "
        f"tiered_epoch={t.tiered_epoch} policy={t.disable_policy or 'none'}"
    )


# --------------------------------------------------------------------------------- commands


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    to_set: dict[str, str] = {}
    for text in args.add_config:
        for key, value in parse_config_list(text).items():
            if key in to_set:
                raise TieredError(
                    ErrorCode.INVALID_REQUEST, f"config {key!r} is given more than once"
                )
            to_set[key] = value
    to_delete = parse_key_list(args.delete_config)
    both = sorted(set(to_set) & set(to_delete))
    if both:
        raise TieredError(
            ErrorCode.INVALID_REQUEST,
            f"config {both[0]!r} is both in --add-config and in --delete-config",
        )
    topic = args.entity_name
    admin.incremental_alter_configs(topic, to_set, to_delete)
    print(f"Completed updating config for topic {topic}.", flush=True)
    if args.wait:
        final = wait_for_topic(admin, topic, timeout_s=args.timeout, progress=ProgressLine())
        print(final_state_line(final))
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    topic = args.entity_name
    entries = admin.describe_configs(topic)
    configs = {e.name: e.value for e in sorted(entries, key=lambda e: e.name) if not e.is_default}
    defaults = {e.name: e.value for e in sorted(entries, key=lambda e: e.name) if e.is_default}
    if args.format == "json":
        print_json({"topic": topic, "configs": configs, "defaults": defaults})
    else:
        print(f"Dynamic configs for topic {topic} are:")
        for key, value in configs.items():
            print(f"  {key}={value}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_usage(parser, args)

    def body() -> int:
        call_timeout = min(MAX_CALL_TIMEOUT_S, args.timeout)
        with (
            explaining_refusals(args.command_config, args.bootstrap_server),
            AdminClient(
                args.bootstrap_server,
                timeout_s=call_timeout,
                credentials=command_config_credentials(args.command_config),
            ) as admin,
        ):
            if args.entity_type == "users" and args.alter:
                return alter_users(admin, args.entity_name, args.add_config, args.delete_config)
            if args.entity_type == "users":
                return describe_users(admin, args.entity_name, args.format)
            if args.alter:
                return _alter(admin, args)
            return _describe(admin, args)

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
