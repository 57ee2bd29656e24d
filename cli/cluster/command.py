"""The ``tiered-cluster`` command line: up, down and status of a cluster of local processes."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from pathlib import Path

from cli.cluster import layout as layouts
from cli.cluster import secure
from cli.cluster.layout import ClusterRequest
from cli.cluster.local import LocalCluster
from cli.cluster.status import all_alive, all_reachable, cluster_status, status_table
from cli.common import print_json, run
from tiered.errors import ErrorCode, TieredError

DESCRIPTION = "Start, stop and inspect a local cluster: every process a daemon under one directory."

EPILOG = """\
up starts a controller, a standby controller and the brokers (and what they stand on), waits
until they serve and prints the bootstrap address last. On a directory whose cluster is partly
running it starts only what is missing, on the same ports and with the same data. Each process
has its config in DIR/config, its output in DIR/logs and its pid in DIR/pids; DIR/cluster.json
lists the addresses (kafka_bootstrap_servers for Kafka clients, the metrics ports, zookeeper,
s3_endpoint, spark_master). Every controller and broker serves Prometheus metrics. With --secure
the Kafka listeners are SASL_SSL (SCRAM-SHA-512) and the CLIs need
--command-config DIR/config/admin.properties. With --loopback-hosts every process binds and
advertises its own loopback address (127.0.0.11, 127.0.0.12 and on, in the order of status).

profiles:
  local        (default) the processes share the host's shortcuts: remote storage in DIR/remote,
               a sqlite RLMM, an embedded KRaft log (or ZooKeeper with --metadata zookeeper)
  distributed  no file shared between processes: a three-server ZooKeeper ensemble (metadata and
               RLMM), an S3 endpoint for remote storage, a Spark master and 2 workers for the
               bulk delete; the same configs split across hosts

examples:
  tiered-cluster up --data-dir /tmp/tiered
  tiered-cluster up --data-dir /tmp/tiered --profile distributed
  tiered-cluster up --data-dir /tmp/tiered --metadata zookeeper --brokers 2
  tiered-cluster up --data-dir /tmp/tiered --spark-workers 2
  tiered-cluster up --data-dir /tmp/tiered --secure
  tiered-cluster up --data-dir /tmp/tiered --loopback-hosts
  tiered-cluster up --data-dir /tmp/tiered --controller-config bulk.delete.fast.path.max.objects=0
  tiered-cluster status --data-dir /tmp/tiered --format json
  tiered-cluster down --data-dir /tmp/tiered
"""


def _data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        required=True,
        type=Path,
        metavar="DIR",
        help="the cluster's directory: configs, logs, pids, data and cluster.json",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-cluster",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{up,down,status}")
    up = commands.add_parser(
        "up",
        help="start what is not running and wait until the cluster serves",
        description="Start what is not running and wait until the cluster serves; print the "
        "bootstrap address last.",
    )
    _data_dir(up)
    up.add_argument(
        "--profile",
        choices=layouts.PROFILES,
        help="local (the default) or distributed: see profiles below; chosen on the first up",
    )
    up.add_argument(
        "--brokers", type=int, default=3, metavar="N", help="number of brokers (default: 3)"
    )
    up.add_argument(
        "--metadata",
        choices=("kraft", "zookeeper"),
        help="where the controllers keep the cluster's metadata: an embedded log (kraft, the "
        "local default) or ZooKeeper (the distributed profile's only choice)",
    )
    up.add_argument(
        "--zookeeper",
        metavar="HOST:PORT[/chroot]",
        help="an external ZooKeeper to use with --metadata zookeeper (without it a local "
        "ZooKeeper is started and stopped with the cluster)",
    )
    up.add_argument(
        "--spark-workers",
        type=int,
        metavar="N",
        help="also start a Spark standalone master and N workers (one core each) and run the "
        "bulk delete there (default: none in the local profile, the bulk delete runs in the "
        "controller's local Spark; 2 in the distributed profile)",
    )
    up.add_argument(
        "--secure",
        action="store_const",
        const=True,
        help="TLS, authenticated principals, the authorizer and ZooKeeper ACLs: a CA and "
        "certificates, the admin's DIR/config/admin.properties (for --command-config) and "
        "admin-sasl.properties (SCRAM, for Kafka clients); chosen on the first up",
    )
    up.add_argument(
        "--loopback-hosts",
        action="store_const",
        const=True,
        help="every process binds and advertises its own loopback address (127.0.0.11, "
        "127.0.0.12 and on, in the order of status; not with --zookeeper); chosen on the first up",
    )
    for role in ("controller", "broker"):
        up.add_argument(
            f"--{role}-config",
            action="append",
            metavar="KEY=VALUE",
            help=f"a setting added to every {role}'s properties (repeatable; chosen on the first "
            "up; not a key the cluster sets itself)",
        )
    down = commands.add_parser(
        "down",
        help="stop every process of the cluster gracefully",
        description="Stop every process: brokers, controllers, Spark, S3, then ZooKeeper.",
    )
    _data_dir(down)
    status = commands.add_parser(
        "status",
        help="show every process, whether it is alive, its ports and the active controller",
        description="Show every process with its role, pid, whether it is alive and its ports, "
        "the active controller, and each broker it has not reached within its "
        "controller.request.timeout.ms. Exit status 0 when every process is alive and no broker "
        "is unreachable, 1 otherwise.",
    )
    _data_dir(status)
    status.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default: text)"
    )
    parser.epilog = _flags_of(commands) + EPILOG
    return parser


def _flags_of(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> str:
    """Each command's flags with their help, for the top-level ``--help``: an operator sees
    every flag without asking each command."""
    lines = []
    for name, command in commands.choices.items():
        lines.append(f"{name} flags:")
        for action in command._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            if action.option_strings == ["-h", "--help"]:
                continue
            flag = action.option_strings[-1]
            if action.metavar is not None:
                flag += f" {action.metavar}"
            elif action.choices is not None:
                flag += " {" + ",".join(str(c) for c in action.choices) + "}"
            lines.append(
                textwrap.fill(f"  {flag:<32} {action.help}", width=100, subsequent_indent=" " * 35)
            )
        lines.append("")
    return "\n".join(lines)


def _settings(flag: str, given: list[str] | None) -> dict[str, str] | None:
    """``KEY=VALUE`` arguments of a repeatable flag as a mapping (None when not given)."""
    if given is None:
        return None
    settings = {}
    for item in given:
        key, equals, value = item.partition("=")
        if not equals or not key.strip() or any(ch.isspace() for ch in key.strip()):
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"{flag} {item!r}: expected KEY=VALUE, e.g. {flag} "
                "bulk.delete.fast.path.max.objects=0",
            )
        settings[key.strip()] = value.strip()
    return settings


def _request(args: argparse.Namespace) -> ClusterRequest:
    return ClusterRequest(
        brokers=args.brokers,
        profile=args.profile,
        metadata=args.metadata,
        zookeeper=args.zookeeper,
        spark_workers=args.spark_workers,
        controller_config=_settings("--controller-config", args.controller_config),
        broker_config=_settings("--broker-config", args.broker_config),
        secure=args.secure,
        loopback_hosts=args.loopback_hosts,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        cluster = LocalCluster(args.data_dir)
        if args.command == "up":
            bootstrap = cluster.up(_request(args))
            print(bootstrap, flush=True)
            return 0
        if args.command == "status":
            return _status(cluster, args.format)
        stopped = cluster.down()
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
        return 0

    return run(command)


def _status(cluster: LocalCluster, output_format: str) -> int:
    layout = layouts.load(cluster.layout_file)
    if layout is None:
        raise TieredError(
            ErrorCode.INVALID_REQUEST,
            f"no cluster in {cluster.dir}: {cluster.layout_file} does not exist (run up first)",
        )
    status = cluster_status(
        cluster.files, cluster.profile(layout), secure.admin_credentials(cluster.files, layout)
    )
    if output_format == "json":
        print_json(status)
    else:
        print(status_table(status))
    return 0 if all_alive(status) and all_reachable(status) else 1
