"""The ``tiered-cluster`` command line: up, down and status of a local cluster."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Sequence
from pathlib import Path

from tiered.cli.cluster import layout as layouts
from tiered.cli.cluster.local import LocalCluster
from tiered.cli.cluster.status import all_alive, cluster_status, status_table
from tiered.cli.common import print_json, run
from tiered.errors import ErrorCode, TieredError

DESCRIPTION = "Start, stop and inspect a local cluster: every process a daemon under one directory."

EPILOG = """\
up starts a controller, a standby controller and the brokers (and, when asked, a ZooKeeper and a
Spark standalone master with its workers), waits until they serve and prints the bootstrap
address last. On a directory whose cluster is partly running it starts only what is missing, on
the same ports and with the same data. Each process has its config in DIR/config, its output in
DIR/logs and its pid in DIR/pids; DIR/cluster.json lists the addresses (kafka_bootstrap_servers
for Kafka clients, spark_master for Spark). Remote storage is the directory DIR/remote.

examples:
  tiered-cluster up --data-dir /tmp/tiered
  tiered-cluster up --data-dir /tmp/tiered --metadata zookeeper --brokers 2
  tiered-cluster up --data-dir /tmp/tiered --spark-workers 2
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
        "--brokers", type=int, default=3, metavar="N", help="number of brokers (default: 3)"
    )
    up.add_argument(
        "--metadata",
        choices=("kraft", "zookeeper"),
        default="kraft",
        help="where the controllers keep the cluster's metadata: an embedded log (kraft, the "
        "default) or ZooKeeper",
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
        "bulk delete there (default: none, the bulk delete runs in the controller's local Spark)",
    )
    down = commands.add_parser(
        "down",
        help="stop every process of the cluster gracefully",
        description="Stop every process: brokers, controllers, Spark, then ZooKeeper.",
    )
    _data_dir(down)
    status = commands.add_parser(
        "status",
        help="show every process, whether it is alive, its ports and the active controller",
        description="Show every process with its role, pid, whether it is alive and its ports, "
        "and the active controller. Exit status 0 when every process is alive, 1 otherwise.",
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


def _check_up(args: argparse.Namespace) -> None:
    if args.brokers < 1:
        raise TieredError(ErrorCode.INVALID_REQUEST, "--brokers must be at least 1")
    if args.spark_workers is not None and args.spark_workers < 0:
        raise TieredError(
            ErrorCode.INVALID_REQUEST, "--spark-workers must be 0 or more (0: no Spark cluster)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def command() -> int:
        cluster = LocalCluster(args.data_dir)
        if args.command == "up":
            _check_up(args)
            bootstrap = cluster.up(args.brokers, args.metadata, args.zookeeper, args.spark_workers)
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
    status = cluster_status(cluster.files, cluster.profile(layout))
    if output_format == "json":
        print_json(status)
    else:
        print(status_table(status))
    return 0 if all_alive(status) else 1
