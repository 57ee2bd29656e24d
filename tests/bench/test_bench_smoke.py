"""Every benchmark still runs in its quick mode and writes a sane report, with the "summary" rows
that bench/report.py tabulates (timings are not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.processes

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO_ROOT / ".venv" / "bin" / "python"


def run_quick(script: str, out: Path, *args: str, timeout_s: float = 240) -> dict[str, Any]:
    """Runs ``bench/<script> --quick --out OUT`` and returns the JSON it wrote."""
    python = str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable
    completed = subprocess.run(
        [python, f"bench/{script}", "--quick", *args, "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    document: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return document


def check_summary(document: dict[str, Any], rows: int) -> None:
    """``rows`` well-formed summary rows (bench.common.summary_row) and the machine described."""
    summary = document["summary"]
    assert len(summary) == rows, summary
    for row in summary:
        assert set(row) == {
            "scenario",
            "figure",
            "value",
            "unit",
            "baseline",
            "baseline_value",
            "ratio",
        }
        assert row["value"] > 0 and row["baseline_value"] > 0, row
        assert row["ratio"] == pytest.approx(row["value"] / row["baseline_value"])
    assert document["machine"]["nproc"] >= 1


def test_remote_log_size_bench_quick(tmp_path: Path) -> None:
    document = run_quick("remote_log_size.py", tmp_path / "x.json", "--backends", "sqlite")
    assert document["ok"] is True
    assert document["verification_failures"] == []
    assert all(check["identical"] for check in document["layout_checks"])
    check_summary(document, rows=2)  # the largest partition, leader and store paths
    results = document["results"]
    assert sorted(r["segments"] for r in results) == [1_000, 10_000]
    for result in results:
        assert result["backend"] == "sqlite"
        for path in ("leader", "store"):
            figures = result[path]
            assert figures["ratio"] > 0, (result["segments"], path)
            assert figures["remote_log_size_bytes"] == figures["list_and_sum_bytes"] > 0


def test_dry_run_bench_small(tmp_path: Path) -> None:
    document = run_quick("dry_run.py", tmp_path / "x.json", "--segments", "20")
    result = document["result"]
    assert result["failures"] == []  # the dry run answered the RLMM's totals; nothing changed
    assert result["segments_per_partition"] == 20 and result["partitions"] == 100
    check_summary(document, rows=1)


def test_tiering_bench_quick(tmp_path: Path) -> None:
    document = run_quick("tiering.py", tmp_path / "t.json")
    assert document["ok"] is True
    assert document["failures"] == []
    assert document["verified"] is True
    check_summary(document, rows=1)
    results = document["results"]
    verification = results["verification"]
    assert verification["ok"] is True
    assert verification["problems"] == []
    assert verification["segments"] == document["setup"]["closed_segments"] > 0
    assert (
        verification["stored_file_object_bytes"]
        == verification["local_segment_file_bytes"]
        == document["setup"]["segment_file_bytes"]
        > 0
    )
    assert results["rlm"]["mb_per_s"] > 0
    for when in ("before", "after"):
        for name in ("serial", "parallel"):
            assert results["baseline"][when][name]["mb_per_s"] > 0, (when, name)
    assert results["ratios"] and all(r > 0 for r in results["ratios"].values())


def test_state_machine_bench_quick(tmp_path: Path) -> None:
    document = run_quick("state_machine.py", tmp_path / "s.json", timeout_s=120)
    assert document["ok"] is True and document["failures"] == []
    assert document["results"]["fire"]["models_attached_after"] == 1  # the resident one
    check_summary(document, rows=2)
    assert document["results"]["fire"]["per_event_s"] > 0
    assert all(r > 0 for r in document["results"]["ratios"].values())


def test_bulk_delete_bench_quick(tmp_path: Path) -> None:
    document = run_quick("bulk_delete.py", tmp_path / "b.json", timeout_s=300)
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=5)  # S3: two goals; under faults: one; local disk: two
    [result] = document["results"]
    assert result["objects"] == 4 * result["segments"] + result["orphan_objects"] > 2000
    scenarios = result["scenarios"]
    assert set(scenarios["s3"]["methods"]) == {"product", "product_session_up", "kafka", "floor"}
    assert set(scenarios["s3_faults"]["methods"]) == {"product", "kafka"}
    assert set(scenarios["local"]["methods"]) == {"product", "kafka", "floor"}
    product = scenarios["s3"]["methods"]["product"]
    assert product["session_start_s"] > 0  # the first job started the session
    assert product["objects_deleted"] == result["objects"]  # orphans included
    # More objects than the default fast-path limit: Spark, and the row says so; its progress
    # went to the controller's store.
    assert product["engine"].startswith("engine Spark") and "> " in product["engine"]
    assert product["progress_writes"] >= 2
    kafka = scenarios["s3_faults"]["methods"]["kafka"]
    assert kafka["extrapolated"] is True and kafka["measured_partitions"] == 1
    for data in scenarios.values():
        for name, method in data["methods"].items():
            assert method["seconds"] > 0, name


def test_scrub_bench_quick(tmp_path: Path) -> None:
    document = run_quick("scrub.py", tmp_path / "s.json", timeout_s=120)
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=1)  # scrub against the listing floor
    result = document["result"]
    assert result["objects"] > 1500 and 0 < result["orphan_objects"] < result["objects"] / 50
    assert sum(result["orphans_by_reason"].values()) == result["orphan_objects"]
    assert result["ratio"] == pytest.approx(result["scrub_s"] / result["floor_s"])
    assert len(result["rounds_s"]["floor"]) == len(result["rounds_s"]["scrub"]) >= 1


# The cluster benchmarks at sizes below --quick: enough to run every phase of each on real
# processes in both metadata modes within CI's budget. Their idle check before a phase looks at a
# shorter window: it steadies the timings, which these tests do not check.


def test_disable_throughput_bench_small(tmp_path: Path) -> None:
    document = run_quick(
        "disable_throughput.py",
        tmp_path / "d.json",
        "--topics",
        "12",
        "--partitions",
        "2",
        "--repeat",
        "3",
        "--baseline-sample",
        "4",
        "--brokers",
        "2",
        "--idle-window-s",
        "0.5",
        "--workdir",
        str(tmp_path / "work"),
        timeout_s=420,
    )
    assert document["ok"] is True and document["failures"] == []
    # per mode: batched against its floor, against one at a time (time and rate), clients at
    # once against one after another, two single disables against their floor
    check_summary(document, rows=12)
    for mode in ("kraft", "zookeeper"):
        result = document["results"][mode]
        assert result["failures"] == [], mode
        for phase in (
            "floor",
            "floor_batched",
            "single_small",
            "single_loaded",
            "clients_concurrent",
            "clients_sequential",
            "batched",
            "unbatched",
            "targets",
        ):
            assert result[phase], (mode, phase)


def test_controller_scale_bench_small(tmp_path: Path) -> None:
    document = run_quick(
        "controller_scale.py",
        tmp_path / "c.json",
        "--topics",
        "100,400",
        "--disables",
        "2",
        "--modes",
        "kraft",  # the failover smoke test seeds ZooKeeper: each seeding path runs once
        timeout_s=420,
    )
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=10)  # per size: start-up, load, CPU, RSS, a disable
    sizes = sorted((r["mode"], r["topics"]) for r in document["results"])
    # Size 0 (the probe topic alone) is the baseline of a single disable.
    assert sizes == [("kraft", n) for n in (0, 100, 400)]
    for result in document["results"]:
        if result["topics"] == 0:
            continue
        assert result["seed"]["topics"] == result["topics"] + 1  # and the probe topic
        assert result["startup_s"] > result["load_s"] > 0
        assert result["rss_bytes"] > 0


def test_failover_bench_small(tmp_path: Path) -> None:
    document = run_quick(
        "failover.py", tmp_path / "f.json", "--topics", "60", "--modes", "zookeeper", timeout_s=420
    )
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=3)  # re-sent, first and all DISABLED
    variants = sorted((r["mode"], r["variant"]) for r in document["results"])
    assert variants == [("zookeeper", "failover"), ("zookeeper", "no_failover")]
    for result in document["results"]:
        assert result["problems"] == [], result
        assert result["all_disabled_s"] >= result["first_disabled_s"] > 0


def test_kafka_protocol_bench_small(tmp_path: Path) -> None:
    document = run_quick(
        "kafka_protocol.py",
        tmp_path / "k.json",
        "--size-mb",
        "8",
        "--rounds",
        "2",
        "--commits",
        "50",
        "--handovers",
        "1",
        "--group-initial-rebalance-delay-ms",  # groups form untimed: the default delay only waits
        "1000",
        "--workdir",
        str(tmp_path / "work"),
        timeout_s=300,
    )
    assert document["ok"] is True and document["failures"] == []
    assert document["kafka_missing"] == {}  # the broker serves Kafka produce and fetch
    results = document["results"]
    phases = ["floor_produce", "floor_fetch", "kafka_produce_bare", "grpc_produce_tiered"]
    phases += ["kafka_produce_tiered"]
    for path in ("grpc", "kafka"):
        phases += [f"{path}_produce", f"{path}_fetch_local", f"{path}_fetch_remote"]
    phases += ["kafka_fetch_local_bare", "kafka_fetch_remote_bare", "kafka_fetch_stub"]
    for phase in phases:
        assert results[phase]["problems"] == [], phase
        assert results[phase]["mb_per_s"] > 0, phase
        if "tiered" not in phase:  # the tiered produce runs once (the remote data)
            rounds = results[phase]["rounds_mb_per_s"]
            assert len(rounds) == 2 and results[phase]["mb_per_s"] == min(rounds), phase
    assert results["workload"]["records"] == 8 * 1024
    assert results["move_to_remote"]["problems"] == []
    committed = results["offset_commit"]
    assert committed["problems"] == [] and committed["offset_commit"]["n"] == 50
    assert committed["no_op_request"]["n"] == 50
    assert committed["ratio"] > 0
    grouped = results["consumer_group"]
    assert grouped["problems"] == []  # every record seen once in each mode and round
    for mode in ("assigned", "group"):
        assert len(grouped[mode]["rounds_mb_per_s"]) == 2, mode
    assert grouped["group"]["join_s"] > 0
    for handovers in (grouped["handovers"], grouped["handovers_librdkafka_defaults"]):
        assert len(handovers) == 1
        for handover in handovers:
            assert len(handover["moved_partitions"]) == 2
            assert handover["all_moved_s"] >= handover["first_record_s"] > 0
    # Kafka, its bare client and gRPC against the floor, and Kafka against gRPC: produce, local
    # and remote fetch each; Kafka fetches against the stub broker, the stub against the floor;
    # the group against assigned consumers, a leaver's handover; OffsetCommit against an
    # fdatasync
    check_summary(document, rows=19)


def test_authorizer_bench_quick(tmp_path: Path) -> None:
    document = run_quick("authorizer.py", tmp_path / "a.json", "--repeat", "50", timeout_s=120)
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=2)  # 1k and 10k ACLs
    assert [r["acls"] for r in document["results"]] == [1_002, 10_002]
    assert document["flatness"] > 0


def test_security_cost_bench_small(tmp_path: Path) -> None:
    document = run_quick(
        "security_cost.py",
        tmp_path / "sc.json",
        "--topics",
        "6",
        "--partitions",
        "2",
        "--brokers",
        "2",
        "--repeat",
        "2",
        "--size-mb",
        "2",
        "--idle-window-s",
        "0.5",
        "--workdir",
        str(tmp_path / "work"),
        timeout_s=300,
    )
    assert document["ok"] is True and document["failures"] == []
    # one disable, all at once, produce; the produce's CPU seconds, brokers and producer apart;
    # the SSL listener against the PLAINTEXT one
    check_summary(document, rows=6)
    results = document["results"]
    assert results["acls"] > 0  # the secure cluster's clients are ACL holders, not super users
    for variant in ("plaintext", "secure"):
        assert results["produce"][variant]["problems"] == [], variant
        assert len(results["single"][variant]["samples_s"]) == 2, variant
        assert results["batched"][variant]["topics"] == 6, variant
    assert set(document["goals_met"]) == {
        "one_disable",
        "all_at_once",
        "produce",
        "produce_ssl_listener",
    }


def test_zookeeper_tls_bench_quick(tmp_path: Path) -> None:
    document = run_quick(
        "zookeeper_tls.py", tmp_path / "z.json", "--runs", "2", "--ops", "20", timeout_s=180
    )
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=2)  # setData and create, TLS against plaintext
    assert set(document["ratios"]) == {"setData", "create"}
    samples = document["results"]["samples_s"]
    assert all(len(samples[v][f]) == 2 for v in ("plaintext", "tls") for f in ("setData", "create"))


def test_partitions_bench_quick(tmp_path: Path) -> None:
    """In a network namespace of its own (the script re-runs itself under ``unshare --net``)."""
    document = run_quick(
        "partitions.py",
        tmp_path / "p.json",
        "--scenarios",
        "controller-zookeeper",
        "--topics",
        "1",
        timeout_s=420,
    )
    assert document["ok"] is True and document["failures"] == []
    check_summary(document, rows=1)  # cut against kill, to the standby elected
    (result,) = document["results"]
    assert result["scenario"] == "controller-zookeeper"
    assert len(result["cut_s"]) == len(result["kill_s"]) == 1
    assert result["goal_s"] >= result["backoff_cap_s"] + 1
