"""``tiered-configs``: describe and alter topic configs and SCRAM users, in the shape of
kafka-configs.sh.

    tiered-configs --bootstrap-server H:P --alter --entity-type topics --entity-name T
                   --add-config 'K=V,K=V' [--delete-config K[,K]] [--wait] [--timeout SECONDS]
                   [--dry-run [--format json]]
    tiered-configs --bootstrap-server H:P --describe --entity-type topics --entity-name T
                   [--format json]
    tiered-configs --bootstrap-server H:P --alter --entity-type users --entity-name NAME
                   --add-config 'SCRAM-SHA-512=[password=PW]' | --delete-config SCRAM-SHA-512
    tiered-configs --bootstrap-server H:P --describe --entity-type users [--entity-name NAME]

``--entity-name`` may be repeated with ``--alter --entity-type topics``: every topic is altered
in one request (one durable write for all that are accepted); a topic that fails is named on
stderr and the exit status is 1. ``--wait`` then follows every altered topic through the
controller's watch (polling when it refuses to watch) until its disablement is over and any bulk
delete it started is done, showing progress on stderr, then prints each final state on stdout.
``--dry-run`` sends the alter with Kafka's ``validate_only``: the controller validates it as it
would the real one (an invalid change exits 1 with the same error) and changes nothing; for a
delete-policy disable it answers what the bulk delete would remove, per partition and in total,
from the RLMM's aggregates (:mod:`cli.configs_dry_run` prints it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from cli.common import (
    EXIT_ERROR,
    ProgressLine,
    add_bootstrap_option,
    add_format_option,
    admin_client,
    iso_utc_ms,
    parse_config_list,
    parse_key_list,
    print_error,
    print_json,
    run,
)
from cli.configs_dry_run import print_dry_runs
from cli.scram_users import alter_users, describe_users
from tiered.admin import AdminClient, AlterResult, TopicDescription, WatchRefusedError
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError

__all__ = [
    "DEFAULT_WAIT_CONDITIONS",
    "POLL_INTERVAL_S",
    "DisablementAcks",
    "WaitCondition",
    "build_parser",
    "main",
    "wait_for_topics",
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
        action="append",
        metavar="NAME",
        help="the topic, or the user (every user when describing users without it); "
        "--alter of topics takes several, in one request",
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
        "--dry-run",
        action="store_true",
        help="with --alter of topics: validate the change and say what a delete-policy disable "
        "would delete, changing nothing",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"how long --wait waits (default: {DEFAULT_TIMEOUT_S:g})",
    )
    add_format_option(parser, of="--describe and --dry-run")
    return parser


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.entity_name is None and (args.entity_type == "topics" or args.alter):
        parser.error("--entity-name is required, but with --describe --entity-type users")
    if (
        args.entity_name is not None
        and len(args.entity_name) > 1
        and not (args.alter and args.entity_type == "topics")
    ):
        parser.error("--entity-name is given once, but with --alter --entity-type topics")
    if args.entity_type == "users" and args.wait:
        parser.error("--wait goes with --entity-type topics only")
    if args.alter and not (args.add_config or args.delete_config):
        parser.error("--alter needs --add-config or --delete-config")
    if args.describe and (args.add_config or args.delete_config or args.wait):
        parser.error("--add-config, --delete-config and --wait go with --alter only")
    if args.dry_run and not (args.alter and args.entity_type == "topics"):
        parser.error("--dry-run goes with --alter --entity-type topics only")
    if args.dry_run and args.wait:
        parser.error("--dry-run changes nothing: there is nothing to --wait for")
    if args.format != "text" and not (args.describe or args.dry_run):
        parser.error("--format goes with --describe and --dry-run only")
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


# A finished job, and a scheduled one: ``--wait`` returns at DISABLED and says when it starts.
_NOT_WAITED_FOR = frozenset({"DONE", "CANCELLED", "SCHEDULED"})


class RemoteDeletion:
    """After a disablement with the delete policy: the bulk delete of the older epochs' remote
    data, until its job is DONE (not a SCHEDULED one: that may wait for days)."""

    def pending(self, topic: TopicDescription) -> bool:
        job = topic.delete_job
        return (
            topic.tiered_state is not TieredState.DISABLING
            and job is not None
            and job.tiered_epoch == topic.tiered_epoch
            and job.state not in _NOT_WAITED_FOR
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


def wait_for_topics(
    admin: AdminClient,
    names: Sequence[str],
    *,
    timeout_s: float,
    progress: ProgressLine,
    conditions: Sequence[WaitCondition] = DEFAULT_WAIT_CONDITIONS,
    poll_interval_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[TopicDescription]:
    """Follows the topics until no condition is pending for any of them and returns their last
    descriptions: through the controller's watch (an answer per change), or, when it refuses to
    watch, by polling every ``poll_interval_s``. REQUEST_TIMED_OUT after ``timeout_s``; a topic
    disappearing or a failed describe raises that error."""
    deadline = clock() + timeout_s
    line = ""

    def settled(described: list[TopicDescription]) -> bool:
        nonlocal line
        waiting = [(t, [c for c in conditions if c.pending(t)]) for t in described]
        waiting = [(t, pending) for t, pending in waiting if pending]
        if not waiting:
            return True
        first, pending = waiting[0]
        line = "; ".join(c.progress(first) for c in pending)
        if len(described) > 1:
            line = f"{len(waiting)}/{len(described)} topics waiting; {first.name}: {line}"
        progress.update(line)
        return False

    def timed_out(described: list[TopicDescription]) -> TieredError:
        states = ", ".join(sorted({t.tiered_state.value for t in described}))
        what = f"topic {names[0]!r} is still" if len(names) == 1 else "topics are still"
        return TieredError(
            ErrorCode.REQUEST_TIMED_OUT, f"{what} {states} after {timeout_s:g}s ({line})"
        )

    described: list[TopicDescription] = []
    try:
        try:
            for described in admin.watch_topics(names, timeout_s):
                if settled(described):
                    return described
        except WatchRefusedError:
            pass
        except TieredError as e:
            if e.code is ErrorCode.REQUEST_TIMED_OUT and described:
                raise timed_out(described) from e
            raise
        interval = POLL_INTERVAL_S if poll_interval_s is None else poll_interval_s
        while True:
            described = admin.describe_topics(names, include_partition_state=False)
            if settled(described):
                return described
            remaining = deadline - clock()
            if remaining <= 0:
                raise timed_out(described)
            sleep(min(interval, remaining))
    finally:
        progress.finish()


def final_state_line(t: TopicDescription) -> str:
    line = (
        f"Topic {t.name}: tiered_state={t.tiered_state.value} "
        f"tiered_epoch={t.tiered_epoch} policy={t.disable_policy or 'none'}"
    )
    job = t.delete_job
    if job is not None and job.state == "SCHEDULED" and job.starts_at_ms is not None:
        line += (
            f"; remote delete below epoch {job.tiered_epoch} SCHEDULED, "
            f"starts {iso_utc_ms(job.starts_at_ms)}"
        )
    return line


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
    names = list(dict.fromkeys(args.entity_name))
    results = admin.incremental_alter_topics(names, to_set, to_delete, validate_only=args.dry_run)
    if len(names) == 1 and isinstance(results[0], TieredError):
        raise results[0]
    altered = []
    valid: list[tuple[str, AlterResult]] = []
    for name, result in zip(names, results, strict=True):
        if isinstance(result, TieredError):
            print_error(TieredError(result.code, f"topic {name!r}: {result.message}"))
        elif args.dry_run:
            valid.append((name, result))
        else:
            altered.append(name)
            print(f"Completed updating config for topic {name}.", flush=True)
    if args.dry_run:
        print_dry_runs(valid, args.format)
        return EXIT_ERROR if len(valid) < len(names) else 0
    if args.wait and altered:
        final = wait_for_topics(admin, altered, timeout_s=args.timeout, progress=ProgressLine())
        for topic in final:
            print(final_state_line(topic))
    return EXIT_ERROR if len(altered) < len(names) else 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    topic = args.entity_name[0]
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
        with admin_client(args, call_timeout) as admin:
            name = args.entity_name[0] if args.entity_name else None
            if args.entity_type == "users" and args.alter:
                assert name is not None  # checked by _check_usage
                return alter_users(admin, name, args.add_config, args.delete_config)
            if args.entity_type == "users":
                return describe_users(admin, name, args.format)
            if args.alter:
                return _alter(admin, args)
            return _describe(admin, args)

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
