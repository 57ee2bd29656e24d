"""``tiered-cluster`` as an operator uses it: up, a second up that starts only what is missing
(a killed broker, a killed ZooKeeper), and down; in KRaft mode and with the local ZooKeeper that
``--metadata zookeeper`` starts without ``--zookeeper``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin

from cli.cluster import START_TIMEOUT_S, ClusterRequest, LocalCluster, build_parser
from cli.cluster.daemons import ClusterFiles
from cli.launch import zookeeper
from cli.launch.spark_standalone import master_state
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tests.support.zookeeper import ZooKeeperServer, is_serving, start_kazoo_client
from tiered.admin import AdminClient
from tiered.cluster import zk_paths
from tiered.errors import TieredError

pytestmark = pytest.mark.processes

ZK_CLUSTER_PROCESSES = ("broker-1", "broker-2", "controller-0", "controller-1", "zookeeper")


def cluster_cli(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.cluster", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else dict(env),
    )


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie not yet reaped counts as exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rpartition(")")[2].split()[0] == "Z"


def _pids(local: LocalCluster) -> dict[str, int]:
    pids = {name: local.running(name) for name in ZK_CLUSTER_PROCESSES}
    assert all(pid is not None for pid in pids.values()), pids
    return {name: pid for name, pid in pids.items() if pid is not None}


def _zk_up(data: Path) -> tuple[str, str]:
    """``up --metadata zookeeper --brokers 2`` without ``--zookeeper``: the bootstrap address
    and what ``up`` said on stderr."""
    result = cluster_cli("up", "--data-dir", str(data), "--metadata", "zookeeper", "--brokers", "2")
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1], result.stderr


def _znodes_of_topic_exist(zookeeper: str, topic: str) -> None:
    client = start_kazoo_client(zookeeper)
    try:
        for path in (zk_paths.topic(topic), zk_paths.topic_config(topic), zk_paths.CONTROLLER):
            assert client.exists(path) is not None, path
        poll_until(
            lambda: (
                client.exists(zk_paths.broker(1)) is not None
                and client.exists(zk_paths.broker(2)) is not None
            ),
            timeout=20,
            what="both broker registrations in ZooKeeper",
        )
    finally:
        client.stop()
        client.close()


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


@pytest.fixture
def zk_cluster_dir(tmp_path: Path) -> Iterator[Path]:
    """A cluster directory whose processes (the local ZooKeeper too) are stopped at teardown,
    whatever the test did."""
    data = tmp_path / "cluster"
    try:
        yield data
    finally:
        LocalCluster(data).down(timeout_s=10)


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
        layout = json.loads((data / "cluster.json").read_text())
        kafka = layout["kafka_bootstrap_servers"]
        assert kafka == ",".join(f"127.0.0.1:{port}" for port in layout["kafka_brokers"])
        metadata = KafkaAdmin({"bootstrap.servers": kafka, "log_level": 3}).list_topics(timeout=30)
        assert [f"{b.host}:{b.port}" for _, b in sorted(metadata.brokers.items())] == kafka.split(
            ","
        )
        assert "kept" in metadata.topics
        # Every controller and broker serves its metrics on the port cluster.json records.
        for port in layout["controller_metrics_ports"]:
            assert "kafka_controller_kafkacontroller_activecontrollercount" in metrics_text(port)
        for port in layout["broker_metrics_ports"]:
            assert "kafka_server_brokertopicmetrics" in metrics_text(port)
        for name, port in (("controller-1", 1), ("broker-2", 1)):
            key = f"{name.split('-')[0]}_metrics_ports"
            properties = (data / "config" / f"{name}.properties").read_text()
            assert f"metrics.port={layout[key][port]}\n" in properties

        broker_pid = local.running("broker-2")
        controller_pid = local.running("controller-0")
        assert broker_pid is not None and controller_pid is not None
        os.kill(broker_pid, signal.SIGKILL)
        poll_until(lambda: local.running("broker-2") is None, what="broker 2 to die")

        again = cluster_cli("up", "--data-dir", str(data), "--brokers", "2")
        assert again.returncode == 0, again.stderr
        assert "started: broker-2" in again.stderr
        assert again.stdout.strip().splitlines()[-1] == bootstrap  # same ports, same data
        assert json.loads((data / "cluster.json").read_text()) == layout
        assert local.running("controller-0") == controller_pid  # untouched
        with AdminClient(bootstrap) as admin:
            assert admin.describe_topic("kept", include_partition_state=False).name == "kept"

        down = cluster_cli("down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
        assert all(local.running(n) is None for n in ("broker-1", "broker-2", "controller-0"))
    finally:
        local.down()


def test_a_layout_without_kafka_listeners_or_metrics_gains_them(tmp_path: Path) -> None:
    """A cluster.json written before brokers had Kafka listeners, and before every process had
    metrics, keeps its ports and gains the new ones."""
    (tmp_path / "cluster.json").write_text(
        json.dumps({"metadata": "kraft", "controllers": [1, 2], "brokers": [3, 4]})
    )
    layout = LocalCluster(tmp_path).layout(ClusterRequest(brokers=2))
    assert (layout["controllers"], layout["brokers"]) == ([1, 2], [3, 4])
    assert len(layout["controller_metrics_ports"]) == 2
    assert len(layout["broker_metrics_ports"]) == 2
    ports = layout["kafka_brokers"]
    assert len(set(ports)) == 2 and layout["kafka_bootstrap_servers"] == (
        f"127.0.0.1:{ports[0]},127.0.0.1:{ports[1]}"
    )
    assert json.loads((tmp_path / "cluster.json").read_text()) == layout
    broker_1 = next(s for s in LocalCluster(tmp_path).profile(layout) if s.name == "broker-1")
    assert (
        broker_1.properties["listeners"] == f"GRPC://127.0.0.1:3,PLAINTEXT://127.0.0.1:{ports[0]}"
    )


def test_up_fails_at_once_naming_a_broker_that_could_not_start(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    data.mkdir()
    (data / "broker-2").write_text("a file where broker 2's log directory goes\n")
    local = LocalCluster(data)
    try:
        started = time.monotonic()
        result = cluster_cli("up", "--data-dir", str(data), "--brokers", "2")
        elapsed = time.monotonic() - started
        assert result.returncode == 1, result.stderr
        assert "BROKER_NOT_AVAILABLE: broker-2 exited while the cluster was starting" in (
            result.stderr
        )
        # The end of its log says why, as one line, not a traceback.
        expected = "KAFKA_STORAGE_ERROR: cannot open the broker's storage: [Errno 17] File exists"
        assert f"{expected}: '{data / 'broker-2'}'" in result.stderr
        assert "Traceback" not in result.stderr
        # Not the start timeout: up noticed the exit (START_TIMEOUT_S is 60 s).
        assert elapsed < START_TIMEOUT_S, elapsed
    finally:
        local.down()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--brokers", "0"], "--brokers must be at least 1"),
        (
            ["--profile", "distributed", "--metadata", "kraft"],
            "--metadata kraft cannot be used with --profile distributed",
        ),
        (
            ["--profile", "distributed", "--zookeeper", "127.0.0.1:2181"],
            "--zookeeper cannot be used with --profile distributed",
        ),
        (
            ["--profile", "distributed", "--spark-workers", "0"],
            "--spark-workers 0 cannot be used with --profile distributed",
        ),
        (["--controller-config", "no-value"], "--controller-config 'no-value': expected KEY=VALUE"),
        (["--broker-config", "node.id=7"], "--broker-config node.id: the cluster sets this key"),
    ],
)
def test_bad_input_is_an_error_not_a_traceback(tmp_path: Path, args: list[str], said: str) -> None:
    bad = cluster_cli("up", "--data-dir", str(tmp_path / "z"), *args)
    assert bad.returncode == 1 and bad.stderr.startswith(f"INVALID_REQUEST: {said}"), bad.stderr
    assert not (tmp_path / "z").exists()  # nothing written, nothing started


def test_a_later_up_keeps_the_profile_and_the_overrides_of_the_first(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path)
    first = ClusterRequest(brokers=1, controller_config={"bulk.delete.fast.path.max.objects": "0"})
    layout = local.layout(first)
    assert layout["profile"] == "local" and layout["metadata"] == "kraft"
    controller = next(s for s in local.profile(layout) if s.name == "controller-0")
    assert controller.properties["bulk.delete.fast.path.max.objects"] == "0"
    assert local.layout(ClusterRequest(brokers=1)) == layout  # the flags left out: as recorded
    assert local.layout(ClusterRequest(brokers=1, profile="local")) == layout
    with pytest.raises(TieredError) as refused:
        local.layout(ClusterRequest(brokers=1, profile="distributed"))
    assert str(refused.value).startswith(
        "INVALID_REQUEST: --profile distributed does not match the cluster in this directory, "
        "which has local; valid values: local"
    )
    with pytest.raises(TieredError) as refused:
        local.layout(ClusterRequest(brokers=1, controller_config={}))
    assert "--controller-config none does not match" in str(refused.value)


def test_managed_zookeeper_is_started_stopped_and_keeps_the_data(zk_cluster_dir: Path) -> None:
    data = zk_cluster_dir
    local = LocalCluster(data)
    bootstrap, said = _zk_up(data)
    assert f"started: zookeeper, {', '.join(ZK_CLUSTER_PROCESSES[2:4])}" in said

    layout = json.loads((data / "cluster.json").read_text())
    assert layout["metadata"] == "zookeeper" and layout["zookeeper_managed"] is True
    host, _, port = layout["zookeeper"].rpartition(":")
    assert host == "127.0.0.1" and is_serving(host, int(port))
    config = (data / "config" / "zookeeper.cfg").read_text()
    assert "forceSync=yes" in config and f"dataDir={data / 'zookeeper' / 'data'}" in config
    assert (data / "logs" / "zookeeper.log").exists()
    for name in ("controller-0", "broker-1"):
        properties = (data / "config" / f"{name}.properties").read_text()
        assert f"zookeeper.connect={layout['zookeeper']}\n" in properties
    first_pids = _pids(local)  # the JVM outlived `up`: it is a daemon

    with AdminClient(bootstrap) as admin:
        assert admin.describe_cluster().metadata_mode == "zookeeper"
        admin.create_topic("kept", 1, {"remote.storage.enable": "true"})
    _znodes_of_topic_exist(layout["zookeeper"], "kept")

    down = cluster_cli("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    # brokers first, then the controllers, then ZooKeeper
    assert down.stdout.strip() == f"stopped: {', '.join(ZK_CLUSTER_PROCESSES)}"
    assert [name for name, pid in first_pids.items() if not _gone(pid)] == []
    assert not is_serving(host, int(port))
    assert not list((data / "pids").glob("*.pid"))

    again, said = _zk_up(data)
    assert f"started: zookeeper, {', '.join(ZK_CLUSTER_PROCESSES[2:4])}" in said
    assert again == bootstrap
    assert json.loads((data / "cluster.json").read_text()) == layout  # same port
    with AdminClient(bootstrap) as admin:
        assert admin.describe_topic("kept", include_partition_state=False).name == "kept"
    _znodes_of_topic_exist(layout["zookeeper"], "kept")  # same data directory

    second_pids = _pids(local)
    down = cluster_cli("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert [name for name, pid in second_pids.items() if not _gone(pid)] == []


def test_a_killed_zookeeper_is_restarted_by_the_next_up(zk_cluster_dir: Path) -> None:
    data = zk_cluster_dir
    local = LocalCluster(data)
    bootstrap, _ = _zk_up(data)
    with AdminClient(bootstrap) as admin:
        admin.create_topic("survivor", 1, {"remote.storage.enable": "true"})
    pids = _pids(local)

    os.kill(pids["zookeeper"], signal.SIGKILL)
    poll_until(lambda: local.running("zookeeper") is None, what="ZooKeeper to die")

    again, said = _zk_up(data)
    assert again == bootstrap
    assert "started: zookeeper\n" in said  # and nothing else
    restarted = local.running("zookeeper")
    assert restarted is not None and restarted != pids["zookeeper"]
    assert {name: local.running(name) for name in pids if name != "zookeeper"} == {
        name: pid for name, pid in pids.items() if name != "zookeeper"
    }  # only ZooKeeper was started again
    layout = json.loads((data / "cluster.json").read_text())
    _znodes_of_topic_exist(layout["zookeeper"], "survivor")
    with AdminClient(bootstrap) as admin:
        assert admin.describe_topic("survivor", include_partition_state=False).name == "survivor"


def test_local_zookeeper_without_java_names_what_is_missing(tmp_path: Path) -> None:
    data = tmp_path / "nojava"
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(empty_bin)
    bad = cluster_cli("up", "--data-dir", str(data), "--metadata", "zookeeper", env=env)
    assert bad.returncode == 1, bad.stderr
    assert bad.stderr.startswith("UNKNOWN_SERVER_ERROR: cannot run ZooKeeper: missing java")
    assert "scripts/ensure_env.sh" in bad.stderr
    assert not data.exists()  # nothing written, nothing started

    missing_jar = tmp_path / "no-zookeeper.jar"
    with pytest.raises(zookeeper.ZooKeeperError) as excinfo:
        zookeeper.check_requirements(classpath=[missing_jar])
    assert str(missing_jar) in str(excinfo.value)
    assert "scripts/ensure_env.sh" in str(excinfo.value)


def test_an_external_zookeeper_is_neither_started_nor_stopped(
    zk_cluster_dir: Path, zookeeper_server: ZooKeeperServer, zk_connect: str
) -> None:
    data = zk_cluster_dir
    up = cluster_cli(
        "up", "--data-dir", str(data), "--metadata", "zookeeper", "--zookeeper", zk_connect,
        "--brokers", "1",
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    assert "zookeeper" not in up.stderr.splitlines()[-1]  # the "started: ..." line
    layout = json.loads((data / "cluster.json").read_text())
    assert (layout["zookeeper"], layout["zookeeper_managed"]) == (zk_connect, False)
    assert not (data / "pids" / "zookeeper.pid").exists()
    assert not (data / "zookeeper").exists()

    down = cluster_cli("down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert down.stdout.strip() == "stopped: broker-1, controller-0, controller-1"
    assert zookeeper_server.is_running and zookeeper_server.is_serving()


# ----------------------------------------------------------------------------- Spark, status


def _status(data: Path) -> tuple[int, dict[str, Any]]:
    result = cluster_cli("status", "--data-dir", str(data), "--format", "json")
    assert result.stderr == ""
    return result.returncode, json.loads(result.stdout)


def test_spark_daemons_are_started_recorded_reported_restarted_and_stopped(
    tmp_path: Path,
) -> None:
    data = tmp_path / "cluster"
    local = LocalCluster(data)
    try:
        up = cluster_cli("up", "--data-dir", str(data), "--brokers", "1", "--spark-workers", "2")
        assert up.returncode == 0, up.stderr
        assert "started: spark-master, spark-worker-1, spark-worker-2, controller-0" in up.stderr
        layout = json.loads((data / "cluster.json").read_text())
        master, web = layout["spark_master"], layout["spark_master_web"]
        assert master.startswith("spark://127.0.0.1:") and web.startswith("http://127.0.0.1:")
        state = master_state(web)
        assert state is not None and state["aliveworkers"] == 2
        properties = (data / "config" / "controller-1.properties").read_text()
        assert f"spark.master={master}\n" in properties
        assert "spark.cores.max=2\n" in properties
        for name in ("spark-master", "spark-worker-1", "spark-worker-2"):
            assert (data / "logs" / f"{name}.log").exists()
            assert local.running(name) is not None  # the JVMs outlived `up`: daemons

        code, status = _status(data)
        assert code == 0
        by_name = {p["name"]: p for p in status["processes"]}
        assert list(by_name) == [
            "spark-master", "spark-worker-1", "spark-worker-2",
            "controller-0", "controller-1", "broker-1",
        ]  # fmt: skip
        assert {p["role"] for p in status["processes"]} == {
            "spark-master",
            "spark-worker",
            "controller",
            "broker",
        }
        assert all(p["alive"] and p["pid"] == local.running(n) for n, p in by_name.items())
        assert by_name["spark-master"]["ports"] == {
            "client": int(master.rpartition(":")[2]),
            "web": int(web.rpartition(":")[2]),
        }
        assert by_name["broker-1"]["ports"] == {
            "client": layout["brokers"][0],
            "kafka": layout["kafka_brokers"][0],
            "metrics": layout["broker_metrics_ports"][0],
        }
        assert by_name["controller-1"]["ports"] == {
            "client": layout["controllers"][1],
            "metrics": layout["controller_metrics_ports"][1],
        }
        assert all(
            isinstance(port, int) for p in status["processes"] for port in p["ports"].values()
        )
        assert status["active_controller"] in ("controller-0", "controller-1")
        text = cluster_cli("status", "--data-dir", str(data))
        assert text.returncode == 0
        assert text.stdout.splitlines()[0].split() == ["NAME", "ROLE", "PID", "ALIVE", "PORTS"]
        assert f"active controller: {status['active_controller']}" in text.stdout

        killed = by_name["spark-worker-2"]["pid"]
        os.killpg(killed, signal.SIGKILL)  # the worker and its process group
        poll_until(lambda: local.running("spark-worker-2") is None, what="worker 2 to die")
        code, status = _status(data)
        assert code == 1
        assert [p["name"] for p in status["processes"] if not p["alive"]] == ["spark-worker-2"]
        assert {p["name"]: p["pid"] for p in status["processes"]}["spark-worker-2"] == killed

        again = cluster_cli("up", "--data-dir", str(data), "--brokers", "1")
        assert again.returncode == 0, again.stderr
        assert "started: spark-worker-2\n" in again.stderr  # and nothing else
        assert {n: local.running(n) for n in by_name if n != "spark-worker-2"} == {
            n: p["pid"] for n, p in by_name.items() if n != "spark-worker-2"
        }
        poll_until(
            lambda: (master_state(web) or {}).get("aliveworkers") == 2,
            what="the restarted worker registered with the master",
        )
        assert _status(data)[0] == 0

        mismatch = cluster_cli("up", "--data-dir", str(data), "--spark-workers", "3")
        assert mismatch.returncode == 1
        assert mismatch.stderr.startswith("INVALID_REQUEST: --spark-workers 3 does not match")

        pids = {n: local.running(n) for n in by_name}
        down = cluster_cli("down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == (
            "stopped: broker-1, controller-0, controller-1, spark-worker-1, spark-worker-2, "
            "spark-master"
        )
        assert [n for n, pid in pids.items() if pid is not None and not _gone(pid)] == []
        assert master_state(web) is None
        code, status = _status(data)  # a dead cluster still prints its table
        assert code == 1 and status["active_controller"] is None
        assert not any(p["alive"] for p in status["processes"])
    finally:
        local.down()


def test_status_marks_a_frozen_broker_unreachable_until_it_runs_again(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    local = LocalCluster(data)

    def reachability() -> tuple[int, dict[str, tuple[bool, bool | None, int | None]]]:
        code, status = _status(data)
        return code, {
            p["name"]: (p["alive"], p["reachable"], p["last_reached_ms"])
            for p in status["processes"]
            if p["role"] == "broker"
        }

    try:
        # Heartbeats (KRaft) well inside the request timeout, which is short so the test is.
        up = cluster_cli(
            "up", "--data-dir", str(data), "--brokers", "2",
            "--controller-config", "controller.request.timeout.ms=3000",
            "--broker-config", "broker.heartbeat.interval.ms=500",
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        code, brokers = reachability()
        assert code == 0 and all(reachable for _, reachable, _ in brokers.values()), brokers

        frozen = local.running("broker-2")
        assert frozen is not None
        os.kill(frozen, signal.SIGSTOP)
        try:
            seen: list[tuple[int, dict[str, tuple[bool, bool | None, int | None]]]] = []

            def broker_2_unreachable() -> bool:
                seen.append(reachability())
                return seen[-1][1]["broker-2"][1] is False

            poll_until(broker_2_unreachable, timeout=60, what="broker-2 to be unreachable")
            code, brokers = seen[-1]
            assert code == 1
            alive, _, last_reached_ms = brokers["broker-2"]
            assert alive and last_reached_ms is not None and last_reached_ms > 3000
            assert brokers["broker-1"][:2] == (True, True)
            text = cluster_cli("status", "--data-dir", str(data))
            assert text.returncode == 1
            assert "unreachable: broker-2, last reached by the active controller" in text.stdout
        finally:
            os.kill(frozen, signal.SIGCONT)

        def all_reachable_again() -> bool:
            code, brokers = reachability()
            return code == 0 and brokers["broker-2"][1] is True

        poll_until(all_reachable_again, timeout=60, what="broker-2 reachable again")
    finally:
        local.down()


def test_status_of_a_directory_without_a_cluster_is_an_error(tmp_path: Path) -> None:
    result = cluster_cli("status", "--data-dir", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.startswith("INVALID_REQUEST: no cluster in ")


def test_help_reads_like_the_other_clis() -> None:
    parser = build_parser()
    text = parser.format_help()
    assert "``" not in text and ".. " not in text and "ensure_env" not in text
    assert text.count("\n\n") >= 3
    description = text.split("\n\n")[1]
    assert "\n" not in description.strip()  # one line of purpose
    for flag in (
        "--data-dir", "--profile", "--brokers", "--metadata", "--zookeeper", "--spark-workers",
        "--controller-config", "--broker-config",
    ):  # fmt: skip
        assert f"\n  {flag} " in text, flag
    assert "examples:\n  tiered-cluster up --data-dir" in text
    assert "profiles:\n  local " in text and "\n  distributed " in text
    subcommands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(subcommands) == {"up", "down", "status"}
    for name, command in subcommands.items():
        for action in command._actions:
            assert action.help, (name, action.option_strings)


def test_a_recorded_pid_counts_only_for_the_process_of_this_cluster(tmp_path: Path) -> None:
    """A pid file whose pid now belongs to a daemon of the same kind but of another cluster
    (pids are reused) is not taken for this cluster's process: markers are config paths."""
    files = ClusterFiles(tmp_path / "cluster")
    other_config = tmp_path / "other" / "config" / "broker-1.properties"

    def sleeper(config: Path) -> subprocess.Popen[bytes]:
        code = "import time; time.sleep(60)"
        return subprocess.Popen(
            [sys.executable, "-c", code, "broker.main", "--config", str(config)]
        )

    for config, ours in ((other_config, False), (files.config_file("broker-1"), True)):
        process = sleeper(config)
        try:
            files.pid_file("broker-1").parent.mkdir(parents=True, exist_ok=True)
            files.pid_file("broker-1").write_text(f"{process.pid}\n")
            poll_until(
                lambda p=process, c=config: (
                    str(c).encode() in Path(f"/proc/{p.pid}/cmdline").read_bytes()
                ),
                timeout=10,
                what="the sleeper's command line",
            )
            found = files.running("broker-1", str(files.config_file("broker-1")))
            assert found == (process.pid if ours else None)
        finally:
            process.kill()
            process.wait()
