"""``tiered-topics``: create, alter, delete and describe topics, in the shape of kafka-topics.sh.

tiered-topics --bootstrap-server H:P[,H:P] --create --topic T --partitions N [--config K=V]...
tiered-topics --bootstrap-server H:P --alter --topic T --partitions N [--replica-assignment B,B,...]
tiered-topics --bootstrap-server H:P --delete --topic T
tiered-topics --bootstrap-server H:P --describe [--topic T] [--format json]
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from cli.common import (
    add_bootstrap_option,
    add_format_option,
    admin_client,
    invalid,
    iso_utc_ms,
    parse_config_assignment,
    print_json,
    run,
)
from tiered.admin import (
    AdminClient,
    DeletedTopicDescription,
    DeleteJobDescription,
    PartitionDescription,
    TopicDescription,
)
from tiered.cluster.model import TieredState
from tiered.config_def import INT32_MAX

__all__ = ["build_parser", "main", "partition_json", "topic_json"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-topics", description="Create, alter, delete and describe topics."
    )
    add_bootstrap_option(parser)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument(
        "--alter", action="store_true", help="add partitions to a topic (--partitions)"
    )
    action.add_argument("--delete", action="store_true", help="delete a topic")
    action.add_argument("--describe", action="store_true", help="describe one or every topic")
    parser.add_argument("--topic", metavar="T", help="the topic")
    parser.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="partition count (--create), or the new one (--alter)",
    )
    parser.add_argument(
        "--replica-assignment",
        metavar="B,B,...",
        help="with --alter: the broker of each partition, comma separated, as kafka-topics.sh "
        "(the existing partitions' brokers first, or the new partitions' alone)",
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="K=V",
        help="a topic config for --create; repeat for more",
    )
    add_format_option(parser)
    return parser


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if (args.create or args.alter or args.delete) and not args.topic:
        parser.error("--topic is required with --create, --alter and --delete")
    if (args.create or args.alter) and args.partitions is None:
        parser.error("--partitions is required with --create and --alter")
    if not (args.create or args.alter) and args.partitions is not None:
        parser.error("--partitions goes with --create and --alter only")
    if not args.create and args.config:
        parser.error("--config goes with --create only")
    if not args.alter and args.replica_assignment is not None:
        parser.error("--replica-assignment goes with --alter only")
    if args.format != "text" and not args.describe:
        parser.error("--format goes with --describe only")


# --------------------------------------------------------------------------------- output


def partition_json(p: PartitionDescription) -> dict[str, Any]:
    return {
        "partition": p.partition,
        "leader": p.leader,
        "log_start_offset": p.log_start_offset,
        "local_log_start_offset": p.local_log_start_offset,
        "log_end_offset": p.log_end_offset,
        "remote_log_start_offset": p.remote_log_start_offset,
        "remote_log_size_bytes": p.remote_log_size_bytes,
        "remote_segment_count": p.remote_segment_count,
        "remote_delete_state": p.remote_delete_state,
        "delete_objects_deleted": p.delete_objects_deleted,
        "delete_objects_total": p.delete_objects_total,
    }


def topic_json(t: TopicDescription) -> dict[str, Any]:
    """The contract of ``--describe --format json`` (docs/design.md §6), plus the disablement's
    progress and policy."""
    return {
        "topic": t.name,
        "topic_id": str(t.topic_id),
        "tiered_state": t.tiered_state.value,
        "tiered_epoch": t.tiered_epoch,
        "configs": dict(t.configs),
        "partitions": [partition_json(p) for p in t.partitions],
        "disable_acks_owed": t.disable_acks_owed,
        "disable_acks_total": t.disable_acks_total,
        "disable_policy": t.disable_policy,
        "delete_job": None if t.delete_job is None else dataclasses.asdict(t.delete_job),
    }


def _text(value: int | None) -> str:
    return "-" if value is None else str(value)


def delete_job_text(job: DeleteJobDescription) -> str:
    if job.state == "SCHEDULED" and job.starts_at_ms is not None:
        return (
            f"RemoteDelete: SCHEDULED below epoch {job.tiered_epoch}, "
            f"starts {iso_utc_ms(job.starts_at_ms)}"
        )
    return (
        f"RemoteDelete: {job.state} below epoch {job.tiered_epoch}, "
        f"{job.objects_deleted}/{job.objects_total} objects, "
        f"{job.partitions_done}/{job.partition_count} partitions"
        + (f" (last error: {job.last_error})" if job.last_error else "")
    )


def deleted_topic_text(d: DeletedTopicDescription) -> str:
    """A deleted topic whose remote data is still being deleted, as kafka-topics.sh shows a
    topic marked for deletion."""
    return "\t".join(
        [
            f"Topic: {d.name}",
            f"TopicId: {d.topic_id}",
            "MarkedForDeletion: true",
            delete_job_text(d.delete_job),
        ]
    )


def topic_text(t: TopicDescription) -> list[str]:
    configs = ",".join(f"{k}={v}" for k, v in t.configs.items())
    header = [
        f"Topic: {t.name}",
        f"TopicId: {t.topic_id}",
        f"PartitionCount: {len(t.partitions)}",
        f"TieredState: {t.tiered_state.value}",
        f"TieredEpoch: {t.tiered_epoch}",
    ]
    if t.tiered_state is TieredState.DISABLING:
        header.append(f"DisableAcks: {t.disable_acks_done}/{t.disable_acks_total}")
    if t.disable_policy:
        header.append(f"DisablePolicy: {t.disable_policy}")
    job = t.delete_job
    if job is not None:
        header.append(delete_job_text(job))
    header.append(f"Configs: {configs}")
    lines = ["\t".join(header)]
    for p in t.partitions:
        fields = [
            f"Topic: {t.name}",
            f"Partition: {p.partition}",
            f"Leader: {p.leader if p.leader >= 0 else 'none'}",
            f"LogStartOffset: {_text(p.log_start_offset)}",
            f"LocalLogStartOffset: {_text(p.local_log_start_offset)}",
            f"LogEndOffset: {_text(p.log_end_offset)}",
            f"RemoteLogStartOffset: {p.remote_log_start_offset}",
            f"RemoteLogSizeBytes: {p.remote_log_size_bytes}",
            f"RemoteSegmentCount: {p.remote_segment_count}",
            f"RemoteDeleteState: {p.remote_delete_state or '-'}",
        ]
        if job is not None:
            total = "?" if p.delete_objects_total < 0 else str(p.delete_objects_total)
            fields.append(f"RemoteObjectsDeleted: {p.delete_objects_deleted}/{total}")
        lines.append("\t" + "\t".join(fields))
    return lines


# --------------------------------------------------------------------------------- commands


def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    configs: dict[str, str] = {}
    for text in args.config:
        key, value = parse_config_assignment(text)
        if key in configs:
            raise invalid(f"config {key!r} is given more than once")
        configs[key] = value
    _check_partitions(args.partitions)
    admin.create_topic(args.topic, args.partitions, configs, wait_hosted=True)
    print(f"Created topic {args.topic}.")
    return 0


def _check_partitions(partitions: int) -> None:
    if partitions < 1:
        raise invalid(f"--partitions must be at least 1, not {partitions}")
    if partitions > INT32_MAX:  # no request can carry it; the controller's own limit is lower
        raise invalid(f"--partitions must be at most {INT32_MAX}, not {partitions}")


def _replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics.sh's ``--replica-assignment``: partitions separated by ``,``, each one's
    replicas by ``:`` (one replica each here)."""
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise invalid(
            f"--replica-assignment {text!r} is not valid; valid: broker ids separated by ',' "
            "(one per partition), e.g. 1,2,1"
        ) from None


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    """As kafka-topics.sh --alter --partitions: a replica assignment may list every partition
    (the existing ones' are dropped) or the new ones alone."""
    _check_partitions(args.partitions)
    assignments = None
    if args.replica_assignment is not None:
        assignments = _replica_assignment(args.replica_assignment)
        if len(assignments) == args.partitions:
            existing = len(
                admin.describe_topic(args.topic, include_partition_state=False).partitions
            )
            assignments = assignments[existing:]
    admin.create_partitions(args.topic, args.partitions, assignments, wait_hosted=True)
    print(
        "WARNING: If partitions are increased for a topic that has a key, the partition logic "
        "or ordering of the messages will be affected"
    )
    print("Adding partitions succeeded!")
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    admin.delete_topic(args.topic)
    print(f"Deleted topic {args.topic}.")
    return 0


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    names = [args.topic] if args.topic else None
    if args.format == "json":  # the list of live topics of docs/design.md §6, nothing else
        print_json([topic_json(t) for t in admin.describe_topics(names)])
        return 0
    listing = admin.describe_topic_listing(names)
    for t in listing.topics:
        print("\n".join(topic_text(t)))
    for d in listing.deleted_topics:
        print(deleted_topic_text(d))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_usage(parser, args)

    def body() -> int:
        with admin_client(args) as admin:
            if args.create:
                return _create(admin, args)
            if args.alter:
                return _alter(admin, args)
            if args.delete:
                return _delete(admin, args)
            return _describe(admin, args)

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
