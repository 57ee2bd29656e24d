"""The dry run of a delete-policy disable (``tiered-configs --alter --dry-run``: AlterTopicConfigs
with ``validate_only``) against a plain describe of the same topic (``tiered-topics --describe``:
DescribeTopics with the partitions' state, which asks the hosting brokers), in one run, on a
topic of 100 partitions x 1,000 remote segments. Goal: the dry run at most 2x the describe.

The cluster is the tests' (two controllers, two brokers, KRaft by default, the RLMM on sqlite
shared by the processes). The topic is created through the admin API, then its RLMM records are
written in bulk straight into the database, in the layout of ``bench/remote_log_size.py`` (its
``Scenario`` and ``layout_records``: every segment of tiered epoch 0, one copy in progress, one
deletion under way), since 100,000 segments through the API would take far too long. Both calls
are then timed in alternation, after a warm-up that lets the brokers load what was written.

Checked (the process exits 1 if a check fails, never because of a timing): the dry run answers
every partition with its 1,000 segments and their bytes as the scenario's totals, and nothing
changed (state, epoch, configs).

Usage: ``python bench/dry_run.py [--quick] [--mode kraft|zookeeper] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    finish_run,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    sample,
    summarize,
    summary_row,
    utc_now,
)
from bench.remote_log_size import Scenario, layout_records, new_ancestors
from tests.support.cluster import Cluster
from tests.support.zookeeper import ZooKeeperServer
from tiered import rlmm
from tiered.admin import AdminClient, TopicDescription
from tiered.api import RemoteLogTotals, TopicIdPartition
from tiered.cluster.model import DeletionEstimate
from tiered.rlmm.backend import parent_of

DEFAULT_OUT = RESULTS_DIR / "dry_run.json"
TOPIC = "bench-dry-run"
PARTITIONS = 100
SEGMENTS = 1_000
GOAL_RATIO = 2.0
# The seeded segments are years old: without retention limits the brokers' expiration would
# delete them while they are measured.
TOPIC_CONFIGS = {"remote.storage.enable": "true", "retention.ms": "-1", "retention.bytes": "-1"}
DISABLE_DELETING = {"remote.log.disable.policy": "delete", "remote.storage.enable": "false"}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed(database: Path, scenarios: Iterable[Scenario]) -> int:
    """Writes the scenarios' records into the brokers' sqlite RLMM in one transaction. A record
    already there (the partition record, an empty ancestor of the claim a leader wrote) is
    replaced with its version moved on, so that the leader's next read reloads it."""
    db = sqlite3.connect(database, isolation_level=None, timeout=60)
    try:
        known: set[str] = set()
        ancestors: list[str] = []
        count = 0

        def rows() -> Iterator[tuple[str, str, bytes]]:
            nonlocal count
            for scenario in scenarios:
                for key, value in layout_records(scenario):
                    ancestors.extend(new_ancestors(key, known))
                    count += 1
                    yield key, parent_of(key), value

        db.execute("BEGIN IMMEDIATE")
        db.executemany(
            "INSERT INTO kv (key, parent, value, version) VALUES (?, ?, ?, 0) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value, version = kv.version + 1",
            rows(),
        )
        db.executemany(
            "INSERT OR IGNORE INTO kv (key, parent, value, version) VALUES (?, ?, x'', 0)",
            [(a, parent_of(a)) for a in ancestors],
        )
        db.execute("COMMIT")
    finally:
        db.close()
    return count


def check(failures: list[str], condition: bool, message: str) -> None:
    if not condition:
        failures.append(message)
        log(f"CHECK FAILED: {message}")


def rlmm_totals(cluster: Cluster, scenarios: list[Scenario]) -> list[RemoteLogTotals]:
    manager = rlmm.create(cluster.rlmm_properties())
    try:
        return [manager.remote_log_totals(s.tp) for s in scenarios]
    finally:
        manager.close()


def settle(cluster: Cluster, scenarios: list[Scenario], quiet_s: float, timeout_s: float) -> None:
    """Waits until the brokers are done with the seeded metadata (their expiration finishes the
    deletion under way and takes what lies below the log start): the RLMM's totals unchanged for
    ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last, since = rlmm_totals(cluster, scenarios), time.monotonic()
    while time.monotonic() - since < quiet_s:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the RLMM's totals still move after {timeout_s:g}s")
        time.sleep(0.5)
        now = rlmm_totals(cluster, scenarios)
        if now != last:
            last, since = now, time.monotonic()


def check_against_the_rlmm(
    failures: list[str],
    cluster: Cluster,
    scenarios: list[Scenario],
    estimate: DeletionEstimate,
    described: TopicDescription,
    args: argparse.Namespace,
) -> None:
    """The dry run's answer is the RLMM's totals of each partition (every segment is of tiered
    epoch 0, below the epoch the disable would set), as the describe counts them too; and the
    brokers kept nearly all that was seeded (their expiration finishes the seeded deletion under
    way, and may take the odd segment below the log start)."""
    held = rlmm_totals(cluster, scenarios)
    check(
        failures,
        [(p.segments, p.bytes) for p in estimate.partitions]
        == [(t.segment_count, t.size_bytes) for t in held],
        "the dry run's segments and bytes are the RLMM's totals of each partition: "
        f"{[(p.segments, p.bytes) for p in estimate.partitions][:4]} against "
        f"{[(t.segment_count, t.size_bytes) for t in held][:4]}",
    )
    check(
        failures,
        [p.remote_segment_count for p in described.partitions] == [t.segment_count for t in held],
        "the describe counts the same segments: "
        f"{[p.remote_segment_count for p in described.partitions][:10]} ...",
    )
    check(
        failures,
        min(t.segment_count for t in held) >= args.segments - 3,
        f"each partition still holds about {args.segments} segments",
    )


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    zookeeper = None
    if args.mode == "zookeeper":
        zookeeper = ZooKeeperServer(workdir / "zookeeper")
        zookeeper.start()
    cluster = Cluster(
        workdir / "cluster",
        args.mode,
        zookeeper.connect_string if zookeeper is not None else None,
    )
    failures: list[str] = []
    try:
        (workdir / "cluster").mkdir(parents=True, exist_ok=True)
        cluster.start()
        admin: AdminClient = cluster.admin
        admin.create_topic(TOPIC, PARTITIONS, TOPIC_CONFIGS)
        topic = admin.describe_topic(TOPIC)
        scenarios = [
            Scenario(TopicIdPartition(topic.topic_id, TOPIC, p), args.segments)
            for p in range(PARTITIONS)
        ]
        begin = time.perf_counter()
        rows = seed(cluster.root / "rlmm.db", scenarios)
        log(f"seeded {rows} RLMM rows in {time.perf_counter() - begin:.1f} s")

        def describe() -> Any:
            return admin.describe_topic(TOPIC, include_partition_state=True)

        def dry_run() -> Any:
            [result] = admin.incremental_alter_topics([TOPIC], DISABLE_DELETING, validate_only=True)
            return result

        for _ in range(args.warmup):  # the leaders reload what was written behind them
            describe()
            dry_run()
        settle(cluster, scenarios, quiet_s=5.0, timeout_s=300.0)
        describe_samples: list[float] = []
        dry_samples: list[float] = []
        answer: Any = None
        for _ in range(args.repeat):  # alternating, so that both see the same machine
            describe_samples.extend(sample(describe, 1)[0])
            seconds, answer = sample(dry_run, 1)
            dry_samples.extend(seconds)
        answer = dry_run()  # the moment the checks compare with
        estimate = answer.would_delete
        check(failures, estimate is not None, "the dry run answers what it would delete")
        if estimate is not None:
            check(failures, estimate.tiered_epoch == 1, "below tiered epoch 1")
            check_against_the_rlmm(failures, cluster, scenarios, estimate, describe(), args)
        after = admin.describe_topic(TOPIC, include_partition_state=False)
        check(
            failures,
            (after.tiered_state, after.tiered_epoch, dict(after.configs))
            == (topic.tiered_state, topic.tiered_epoch, dict(topic.configs)),
            "nothing changed",
        )
        describe_stats, dry_stats = summarize(describe_samples), summarize(dry_samples)
        ratio = dry_stats["median_s"] / describe_stats["median_s"]
        return {
            "mode": args.mode,
            "partitions": PARTITIONS,
            "segments_per_partition": args.segments,
            "describe": describe_stats,
            "dry_run": dry_stats,
            "ratio": ratio,
            "goal_ratio": GOAL_RATIO,
            "failures": failures,
        }
    finally:
        cluster.close()
        if zookeeper is not None:
            zookeeper.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--mode", choices=("kraft", "zookeeper"), default="kraft")
    parser.add_argument("--segments", type=int, default=SEGMENTS, help="per partition")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    args.repeat, args.warmup = (5, 2) if args.quick else (15, 3)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-dry-run-") as tmp:
        result = run(args, Path(tmp))
    figures = [
        summary_row(
            f"{PARTITIONS} partitions x {args.segments} segments ({args.mode})",
            "dry run of a delete-policy disable (median)",
            result["dry_run"]["median_s"],
            "s",
            "describe with partition state (median)",
            result["describe"]["median_s"],
        )
    ]
    document = {
        "benchmark": "dry_run",
        "when": utc_now(),
        "machine": machine_info(),
        "load_average": load_average(),
        "code": code_fingerprint(),
        "result": result,
        "summary": figures,
    }
    failures = list(result["failures"])
    if result["ratio"] > GOAL_RATIO:
        log(f"goal missed: dry run / describe = {result['ratio']:.2f} > {GOAL_RATIO}")

    def table() -> None:
        print(
            format_table(
                ["call", "median", "p90", "n"],
                [
                    [
                        name,
                        format_seconds(result[key]["median_s"]),
                        format_seconds(result[key]["p90_s"]),
                        result[key]["n"],
                    ]
                    for name, key in (("describe", "describe"), ("dry run", "dry_run"))
                ],
            )
        )
        print(f"dry run / describe = {result['ratio']:.2f} (goal <= {GOAL_RATIO})")

    return finish_run(args.out, document, time.perf_counter() - started, failures, table, log)


if __name__ == "__main__":
    raise SystemExit(main())
