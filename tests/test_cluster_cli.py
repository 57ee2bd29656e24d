"""``tiered-cluster`` as an operator uses it: up, a second up that starts only what is missing
(a killed broker), and down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.rlmm_support import poll_until
from tests.support.processes import REPO
from tiered.admin import AdminClient
from tiered.cli.cluster import LocalCluster


def cluster_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiered.cli.cluster", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_up_again_starts_only_what_is_missing_and_down_stops_everything(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    local = LocalCluster(data)
    try:
        first = cluster_cli("up", "--data-dir", str(data), "--brokers", "2")
        assert first.returncode == 0, first.stderr
        bootstrap = first.stdout.strip().splitlines()[-1]
        with AdminClient(bootstrap) as admin:
            cluster = admin.describe_cluster()
            assert {b.broker_id for b in cluster.brokers if not b.fenced} == {1, 2}
            admin.create_topic("kept", 1, {"remote.storage.enable": "true"})

        broker_pid = local.running("broker-2")
        controller_pid = local.running("controller-0")
        assert broker_pid is not None and controller_pid is not None
        os.kill(broker_pid, signal.SIGKILL)
        poll_until(lambda: local.running("broker-2") is None, what="broker 2 to die")

        again = cluster_cli("up", "--data-dir", str(data), "--brokers", "2")
        assert again.returncode == 0, again.stderr
        assert "started: broker-2" in again.stderr
        assert again.stdout.strip().splitlines()[-1] == bootstrap  # same ports, same data
        assert local.running("controller-0") == controller_pid  # untouched
        with AdminClient(bootstrap) as admin:
            assert admin.describe_topic("kept", include_partition_state=False).name == "kept"

        down = cluster_cli("down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
        assert all(local.running(n) is None for n in ("broker-1", "broker-2", "controller-0"))
    finally:
        local.down()


def test_bad_input_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    bad = cluster_cli("up", "--data-dir", str(tmp_path / "z"), "--metadata", "zookeeper")
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_REQUEST: ")
    assert not (tmp_path / "z" / "pids").exists()  # nothing started
