"""Recovery from a network partition against recovery from a process kill, on a
``tiered-cluster up --loopback-hosts`` cluster (two controllers, two brokers) cut with nftables in
a network namespace of the benchmark's own (``tests.support.network``; the script re-runs itself
under ``unshare --net`` with loopback up, as root).

Scenario **controller-broker** (KRaft, the local profile): each round creates ``--topics`` tiered
topics of two partitions and disables them while broker-2 cannot take the active controller's
calls, so that the disables wait on it; after ``--hold`` seconds (long enough for the
controller's retry backoff to reach its cap) broker-2 comes back and the figure is the time to
every disable completed, from the controller's log (its last "...; DISABLED" line of the round):

- *cut* (the figure): the active controller is cut from broker-2 both ways; heal at t0;
- *kill* (the baseline): broker-2 is killed -9 before the disables; restarted at t0 (``up``,
  which starts it again and returns once it serves).

Scenario **controller-zookeeper** (ZooKeeper mode, the local profile's ZooKeeper): each round
ends the active controller's hold on ZooKeeper at t0 and the figure is the time to the standby's
"elected with epoch" line; the old controller then comes back as the standby:

- *cut* (the figure): the active controller is cut from ZooKeeper both ways at t0; healed once
  the standby is active;
- *kill* (the baseline): the active controller is killed -9 at t0; restarted once the standby is
  active.

Goal (issue 31): recovery after a heal is no slower than the larger of 2x recovery after a kill
and the retry backoff's cap plus 1 s: the controller's ``controller.retry.backoff.max.ms``
(BROKER_REQUEST_BACKOFF) for controller-broker, the ZooKeeper election backoff's cap
(ZOOKEEPER_ELECTION_BACKOFF) for controller-zookeeper. The medians of ``--rounds`` rounds are
compared; the goal's outcome is recorded, never asserted (the exit status is 1 only when a round
failed to recover at all).

Usage: ``python bench/partitions.py [--quick] [--rounds 3] [--hold 20] [--topics 5]
[--scenarios controller-broker,controller-zookeeper] [--out PATH]`` (results default to
``bench/results/partitions.json``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    format_seconds,
    format_table,
    machine_info,
    summary_row,
    utc_now,
    write_json,
)
from bench.controller_scale import exit_on_sigterm
from cli.cluster import LocalCluster
from system_tests.partitions import (
    client_address,
    cluster_status,
    log_matches,
    partitioned_cluster,
)
from tests.cli.test_cluster_cli import cluster_cli
from tests.support.network import Network, in_test_namespace, namespace_command, namespace_env
from tests.support.polling import poll_until
from tiered.admin import AdminClient
from tiered.retry_policies import BROKER_REQUEST_BACKOFF, ZOOKEEPER_ELECTION_BACKOFF

DEFAULT_OUT = RESULTS_DIR / "partitions.json"
SCENARIOS = ("controller-broker", "controller-zookeeper")
VICTIM = "broker-2"
PARTITIONS = 2
REQUEST_TIMEOUT_MS = 3000
RECOVERY_TIMEOUT_S = 120.0
DISABLED_LINE = r"Topic (\S+): every broker acked tiered epoch \d+; DISABLED"
ELECTED_LINE = r"controller \d+ elected with epoch (\d+)"
CAPS_S = {
    "controller-broker": BROKER_REQUEST_BACKOFF.max_s,
    "controller-zookeeper": ZOOKEEPER_ELECTION_BACKOFF.max_s,
}


def _up_args(scenario: str) -> tuple[str, ...]:
    metadata = "kraft" if scenario == "controller-broker" else "zookeeper"
    timeout = f"controller.request.timeout.ms={REQUEST_TIMEOUT_MS}"
    return ("--brokers", "2", "--metadata", metadata, "--controller-config", timeout)


def _since(t0: datetime, at: datetime) -> float:
    return (at - t0).total_seconds()


def _kill(data: Path, name: str) -> None:
    pid = LocalCluster(data).running(name)
    assert pid is not None, f"{name} is not running"
    os.kill(pid, signal.SIGKILL)
    poll_until(lambda: LocalCluster(data).running(name) is None, 30, f"{name} to die")


def _restart(data: Path) -> None:
    """``up`` again: starts what is not running, returns once it serves."""
    result = cluster_cli("up", "--data-dir", str(data))
    assert result.returncode == 0, result.stderr


def _controllers(data: Path) -> tuple[str, str, AdminClient]:
    """(active, standby, a client of both) once every process is up and reached."""
    poll_until(lambda: cluster_status(data)[0] == 0, 120, "the cluster to settle")
    status = cluster_status(data)[1]
    active = status["active_controller"]
    standby = next(
        p["name"] for p in status["processes"] if p["role"] == "controller" and p["name"] != active
    )
    bootstrap = f"{client_address(status, active)},{client_address(status, standby)}"
    return active, standby, AdminClient(bootstrap, timeout_s=30)


def _disable_round(
    data: Path, network: Network, variant: str, round_: int, topics: int, hold_s: float
) -> float:
    """One controller-broker round: seconds from broker-2's return to every disable done."""
    active, _, admin = _controllers(data)
    names = [f"r{round_}-{variant}-{i}" for i in range(topics)]
    for name in names:
        admin.create_topic(name, PARTITIONS, {"remote.storage.enable": "true"})
    owed = sum(p.leader == 2 for name in names for p in admin.describe_topic(name).partitions)
    assert owed, "broker-2 leads none of the round's partitions"
    if variant == "cut":
        network.cut(active, VICTIM, both_ways=True)
    else:
        _kill(data, VICTIM)
    for name in names:
        admin.alter_configs(name, {"remote.storage.enable": "false"})

    def owes_only_the_victims_share() -> bool:
        described = admin.describe_topics(names, include_partition_state=False)
        return sum(d.disable_acks_owed for d in described) == owed

    poll_until(owes_only_the_victims_share, 60, "every broker but broker-2 to ack")
    time.sleep(hold_s)  # the outage under measure, not a synchronisation
    t0 = datetime.now()
    if variant == "cut":
        network.heal()
    else:
        _restart(data)

    def disabled_at() -> list[datetime]:
        return [at for at, m in log_matches(data, active, DISABLED_LINE) if m.group(1) in names]

    poll_until(lambda: len(disabled_at()) == len(names), RECOVERY_TIMEOUT_S, "every disable")
    admin.close()
    return _since(t0, max(disabled_at()))


def _takeover_round(data: Path, network: Network, variant: str) -> float:
    """One controller-zookeeper round: seconds from the cut (or kill) of the active controller
    to the standby's election."""
    active, standby, admin = _controllers(data)
    admin.close()
    elected_before = len(log_matches(data, standby, ELECTED_LINE))
    t0 = datetime.now()
    if variant == "cut":
        network.cut(active, "zookeeper", both_ways=True)
    else:
        _kill(data, active)

    def elected() -> list[tuple[datetime, Any]]:
        return log_matches(data, standby, ELECTED_LINE)[elected_before:]

    poll_until(elected, RECOVERY_TIMEOUT_S, f"{standby} to be elected")
    if variant == "cut":
        network.heal()
    else:
        _restart(data)
    return _since(t0, elected()[0][0])


def run_scenario(
    root: Path, scenario: str, rounds: int, topics: int, hold_s: float
) -> dict[str, Any]:
    data = root / scenario
    seconds: dict[str, list[float]] = {"cut": [], "kill": []}
    with partitioned_cluster(data, *_up_args(scenario)) as (network, _):
        for round_ in range(rounds):
            for variant, figures in seconds.items():
                if scenario == "controller-broker":
                    figures.append(_disable_round(data, network, variant, round_, topics, hold_s))
                else:
                    figures.append(_takeover_round(data, network, variant))
                print(f"  {scenario} {variant} round {round_}: {figures[-1]:.2f}s", flush=True)
    cut, kill = statistics.median(seconds["cut"]), statistics.median(seconds["kill"])
    goal = max(2 * kill, CAPS_S[scenario] + 1.0)
    return {
        "scenario": scenario,
        "cut_s": seconds["cut"],
        "kill_s": seconds["kill"],
        "cut_median_s": cut,
        "kill_median_s": kill,
        "backoff_cap_s": CAPS_S[scenario],
        "goal_s": goal,
        "goal_met": cut <= goal,
    }


FIGURES = {
    "controller-broker": (
        "heal of the active controller <-> broker-2 cut to every disable completed (median)",
        "broker-2 killed -9, restart to every disable completed (median)",
    ),
    "controller-zookeeper": (
        "active controller cut from ZooKeeper to the standby elected (median)",
        "active controller killed -9 to the standby elected (median)",
    ),
}


def summarize(results: list[dict[str, Any]], topics: int) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        figure, baseline = FIGURES[r["scenario"]]
        where = f"{r['scenario']}, {len(r['cut_s'])} rounds"
        if r["scenario"] == "controller-broker":
            where += f", {topics} topics x {PARTITIONS} partitions a round"
        outcome = "met" if r["goal_met"] else "MISSED"
        goal = f"{figure}; goal <= max(2 x kill, backoff cap {r['backoff_cap_s']:g} s + 1 s)"
        goal += f" = {r['goal_s']:.2f} s: {outcome}"
        rows.append(summary_row(where, goal, r["cut_median_s"], "s", baseline, r["kill_median_s"]))
    return rows


def print_results(results: list[dict[str, Any]]) -> None:
    rows = [
        [
            r["scenario"],
            format_seconds(r["cut_median_s"]),
            format_seconds(r["kill_median_s"]),
            format_seconds(r["goal_s"]),
            "met" if r["goal_met"] else "MISSED",
        ]
        for r in results
    ]
    print(format_table(["scenario", "after heal", "after kill", "goal", "goal"], rows))


def _in_own_namespace(argv: list[str]) -> int:
    """Runs this script again in a network namespace of its own; its exit status."""
    command = namespace_command([sys.executable, str(Path(__file__).resolve()), *argv])
    return subprocess.run(command, env=namespace_env(), check=False).returncode


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not in_test_namespace():
        return _in_own_namespace(argv)
    exit_on_sigterm()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one round, a 12 s hold")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per variant (3)")
    parser.add_argument("--hold", type=float, default=None, help="outage in seconds (20)")
    parser.add_argument("--topics", type=int, default=5, help="topics disabled a round")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)
    hold_s = args.hold if args.hold is not None else (12.0 if args.quick else 20.0)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        parser.error(f"--scenarios: unknown {unknown}; valid: {', '.join(SCENARIOS)}")
    document: dict[str, Any] = {
        "benchmark": "partitions",
        "started": utc_now(),
        "machine": machine_info(),
        "code": code_fingerprint(),
        "parameters": {
            "rounds": rounds,
            "hold_s": hold_s,
            "topics": args.topics,
            "partitions_per_topic": PARTITIONS,
            "scenarios": scenarios,
            "controller_request_timeout_ms": REQUEST_TIMEOUT_MS,
        },
        "results": [],
        "failures": [],
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tiered-partitions-") as tmp:
        for scenario in scenarios:
            try:
                result = run_scenario(Path(tmp), scenario, rounds, args.topics, hold_s)
                document["results"].append(result)
            except Exception as e:
                traceback.print_exc()
                document["failures"].append(f"{scenario}: {e}")
    document["finished"] = utc_now()
    document["elapsed_s"] = time.perf_counter() - started
    document["summary"] = summarize(document["results"], args.topics)
    document["ok"] = not document["failures"]
    print()
    print_results(document["results"])
    write_json(args.out, document)
    print(f"results: {args.out} ({document['elapsed_s']:.0f}s)")
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
