"""``make demo`` end to end: ``bash scripts/demo.sh`` on a small data set (``TIERED_DEMO_RECORDS``)
in a temporary data directory (``TIERED_DEMO_DIR``), checked on what it prints and on what it
leaves behind; and a demo interrupted mid-way still stops its cluster."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import REPO

pytestmark = pytest.mark.processes

RECORDS = 3000  # ~100 segments a partition: tiers >= 10 of them, on the bulk delete's fast path
DEMO_TIMEOUT_S = 240


def demo_env(data: Path) -> dict[str, str]:
    return {
        **os.environ,
        "TIERED_DEMO_DIR": str(data),
        "TIERED_DEMO_RECORDS": str(RECORDS),
        "NO_COLOR": "1",
    }


def processes_of(data: Path) -> list[str]:
    """Command lines of the running processes that name ``data`` (the cluster's daemons name
    their config file under it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(data) in text:
            found.append(text.strip())
    return found


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "tiered-demo"
    yield data
    if (data / "cluster.json").exists() and processes_of(data):
        # The demo failed to clean up (the test fails on that itself): do not leak daemons.
        subprocess.run(
            [sys.executable, "-m", "cli.cluster", "down", "--data-dir", str(data)],
            cwd=REPO,
            capture_output=True,
            timeout=60,
            check=False,
        )


def output_of(transcript: str, command: str, nth: int = 0) -> str:
    """What the ``nth`` printed command starting with ``$ command`` wrote, up to the next
    command or comment line."""
    blocks = re.split(r"^(?=\$ |# )", transcript, flags=re.MULTILINE)
    matching = [b for b in blocks if b.startswith(f"$ {command}")]
    assert len(matching) > nth, f"no command #{nth} starting with {command!r}:\n{transcript}"
    return matching[nth].split("\n", 1)[1]


def partition_fields(describe: str, name: str) -> list[int]:
    return [int(v) for v in re.findall(rf"\t{name}: (-?\d+)", describe)]


def test_demo_runs_a_disable_on_a_local_cluster(data_dir: Path) -> None:
    result = subprocess.run(
        ["bash", "scripts/demo.sh"],
        cwd=REPO,
        env=demo_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out
    assert processes_of(data_dir) == []

    # The cluster came up.
    up = output_of(out, "tiered-cluster up")
    assert f"--data-dir {data_dir} --brokers 3" in out
    assert "started: controller-0, controller-1, broker-1, broker-2, broker-3" in up
    assert re.search(r"^127\.0\.0\.1:\d+,127\.0\.0\.1:\d+$", up, flags=re.MULTILINE), up
    assert "Created topic orders." in output_of(out, "tiered-topics")
    assert f"Sent {RECORDS} records to topic orders" in out

    # Segments tiered, older local segments expired.
    before = output_of(out, "tiered-topics --bootstrap-server", 2)  # create, poll, describe
    assert "TieredState: ENABLED\tTieredEpoch: 0" in before, before
    assert all(n >= 10 for n in partition_fields(before, "RemoteSegmentCount")), before
    assert len(partition_fields(before, "RemoteSegmentCount")) == 3
    local_starts = partition_fields(before, "LocalLogStartOffset")
    assert all(n > 0 for n in local_starts), before
    remote_read = output_of(out, "tiered-console-consumer")
    assert "Processed a total of 3 messages" in remote_read
    assert "order-000000 " in remote_read

    # The dry run first: what the disable would delete, per partition, nothing changed.
    dry_run = output_of(out, "tiered-configs")
    assert "remote.log.disable.policy=delete,remote.storage.enable=false --dry-run" in out
    assert "Dry run: the change of topic orders is valid; nothing was changed." in dry_run
    assert re.search(r"would delete below tiered epoch 1: [1-9]\d* objects", dry_run), dry_run
    assert [f"partition {p}: " in dry_run for p in range(3)] == [True] * 3, dry_run

    # The disable: DISABLED at tiered epoch 1, remote data gone, log start raised.
    disable = output_of(out, "tiered-configs", 1)
    assert "remote.log.disable.policy=delete,remote.storage.enable=false --wait" in out
    assert "Topic orders: tiered_state=DISABLED tiered_epoch=1 policy=delete" in disable
    after = output_of(out, "tiered-topics --bootstrap-server", 3)
    assert "TieredState: DISABLED\tTieredEpoch: 1" in after, after
    assert partition_fields(after, "RemoteSegmentCount") == [0, 0, 0], after
    assert partition_fields(after, "RemoteLogSizeBytes") == [0, 0, 0], after
    assert after.count("RemoteDeleteState: DELETE_PARTITION_FINISHED") == 3, after
    assert partition_fields(after, "LogStartOffset") == local_starts, after
    assert "none left" in out
    assert "OFFSET_OUT_OF_RANGE: offset 0 of orders-0 is below the log start offset" in out

    # Re-enabled: new data tiers under epoch 1.
    assert "--add-config remote.storage.enable=true" in out
    final = output_of(out, "tiered-topics --bootstrap-server", 5)
    assert "TieredState: ENABLED\tTieredEpoch: 1" in final, final
    assert all(n > 0 for n in partition_fields(final, "RemoteSegmentCount")), final
    assert f"order-{RECORDS:06d} " in output_of(out, "tiered-console-consumer", 3)
    epochs = {f.parent.name for f in (data_dir / "remote").rglob("*") if f.is_file()}
    assert epochs == {"te=1"}  # objects, that is: the delete leaves te=0/ directories empty

    # A Kafka client (confluent-kafka's AdminClient) turns tiered storage off: retain policy.
    assert re.search(r"kafka_bootstrap_servers=(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+$", up, re.M)
    kafka = output_of(out, "python -")
    assert "incremental_alter_configs" in kafka and "IncrementalAlterConfigs: done" in kafka
    assert "remote.log.tiered.state=DISABLED remote.log.tiered.epoch=2" in kafka, kafka
    retained = output_of(out, "tiered-topics --bootstrap-server", 6)
    assert "TieredState: DISABLED\tTieredEpoch: 2" in retained, retained
    assert "objects under te=1/ are kept (retain)" in out

    # The cluster is down again.
    assert "stopped: broker-1, broker-2, broker-3, controller-0, controller-1" in output_of(
        out, "tiered-cluster down"
    )
    # The secure step: a principal without Delete is refused the delete-policy disable (the
    # topic unchanged), then granted Delete it disables the topic; the secure cluster stops too.
    secure = data_dir / "secure"
    assert f"$ tiered-cluster up --data-dir {secure} --secure --brokers 1" in out
    refused = output_of(out, "tiered-configs", 3)
    assert "--command-config " + str(secure / "config" / "alice.properties") in out
    assert (
        "TOPIC_AUTHORIZATION_FAILED: User:CN=alice,OU=users,O=tiered from 127.0.0.1 is not "
        "authorized to Delete topic 'payments'" in refused
    ), refused
    assert "payments: still ENABLED at tiered epoch 0" in refused
    granted = output_of(out, "tiered-configs", 4)
    assert "Topic payments: tiered_state=DISABLED tiered_epoch=1 policy=delete" in granted
    assert "stopped: broker-1, controller-0, controller-1" in output_of(
        out, "tiered-cluster down", 1
    )
    assert re.search(r"Demo done in (\d+m )?\d+s\.", out), out
    assert f"logs: {data_dir / 'logs'}" in out


def test_an_interrupted_demo_stops_its_cluster(data_dir: Path) -> None:
    demo = subprocess.Popen(
        ["bash", "scripts/demo.sh"],
        cwd=REPO,
        env=demo_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert demo.stdout is not None
    lines = []
    deadline = time.monotonic() + DEMO_TIMEOUT_S
    for line in demo.stdout:
        lines.append(line)
        if line.startswith("Created topic orders."):
            break
        assert time.monotonic() < deadline, "".join(lines)
    assert processes_of(data_dir), "".join(lines)
    demo.send_signal(signal.SIGINT)  # demo.sh execs demo.py: this is Ctrl-C for the demo
    rest, _ = demo.communicate(timeout=120)
    out = "".join(lines) + rest
    assert demo.returncode == 130, out
    assert "demo: interrupted" in out
    assert f"$ tiered-cluster down --data-dir {data_dir}" in out
    assert "stopped: broker-1, broker-2, broker-3, controller-0, controller-1" in out
    assert f"logs are in {data_dir / 'logs'}" in out
    assert processes_of(data_dir) == []
