"""``tiered-cluster up --profile distributed`` as an operator uses it: a three-server ZooKeeper
ensemble, an S3 endpoint (moto's server), a Spark master and two workers, two controllers and
the brokers, each its own process over TCP and no file shared between them. One cluster serves
the module (it takes about 30 s to start); the tests run in order on it: status, the configs, a
tiered topic through the Kafka protocol tiering to S3, a delete-policy disable whose bulk delete
is a Spark application on the standalone master, a second ``up`` after kill -9 of an ensemble
member and a worker, and ``down``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic

from cli.cluster import LocalCluster
from cli.launch.spark_standalone import master_state
from cli.launch.zookeeper import FOLLOWER, LEADER, server_mode
from tests.cli.test_cluster_cli import cluster_cli, metrics_text
from tests.cli.test_demo import processes_of
from tests.support.kafka_clients import SMALL_BATCHES, TIERED, confluent_produce, sample
from tests.support.kafka_cluster import QUIET
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import AdminClient

pytestmark = pytest.mark.processes

BROKERS = 2
PROCESSES = {
    "zookeeper-1": "zookeeper",
    "zookeeper-2": "zookeeper",
    "zookeeper-3": "zookeeper",
    "s3": "s3",
    "spark-master": "spark-master",
    "spark-worker-1": "spark-worker",
    "spark-worker-2": "spark-worker",
    "controller-0": "controller",
    "controller-1": "controller",
    "broker-1": "broker",
    "broker-2": "broker",
}
STOP_ORDER = [
    "broker-1", "broker-2", "controller-0", "controller-1", "spark-worker-1", "spark-worker-2",
    "spark-master", "s3", "zookeeper-1", "zookeeper-2", "zookeeper-3",
]  # fmt: skip
TOPIC = "orders"
SPARK_APP = "tiered-bulk-delete"
ADDRESS = r"127\.0\.0\.1:\d+"


@dataclass
class Distributed:
    dir: Path
    bootstrap: str
    local: LocalCluster

    @property
    def layout(self) -> dict[str, Any]:
        layout: dict[str, Any] = json.loads((self.dir / "cluster.json").read_text())
        return layout

    @property
    def kafka_bootstrap(self) -> str:
        """What the Kafka client helpers take from a cluster."""
        return str(self.layout["kafka_bootstrap_servers"])

    def properties(self, name: str) -> dict[str, str]:
        text = (self.dir / "config" / f"{name}.properties").read_text()
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def status(self) -> tuple[int, dict[str, Any]]:
        result = cluster_cli("status", "--data-dir", str(self.dir), "--format", "json")
        assert result.stderr == ""
        return result.returncode, json.loads(result.stdout)

    def s3_keys(self) -> list[str]:
        """Every object key of the cluster's remote storage, listed through the endpoint."""
        remote = self.properties("broker-1")
        bucket, _, prefix = remote["remote.storage.root"].removeprefix("s3://").partition("/")
        s3 = boto3.client(
            "s3",
            endpoint_url=self.layout["s3_endpoint"],
            # A secure cluster's endpoint serves https:// with a certificate of the cluster CA.
            verify=remote.get("remote.storage.s3.ca.file"),
            region_name="us-east-1",
            aws_access_key_id="tests",
            aws_secret_access_key="tests",
        )
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def epoch_keys(self, epoch: int) -> list[str]:
        return [key for key in self.s3_keys() if f"/te={epoch}/" in key]


def up_distributed(data: Path, *flags: str) -> Iterator[Distributed]:
    """A distributed cluster of ``BROKERS`` brokers in ``data`` (``flags``: more of ``up``'s),
    every bulk delete a Spark job however small; down afterwards."""
    local = LocalCluster(data)
    try:
        up = cluster_cli(
            "up", "--data-dir", str(data), "--profile", "distributed", *flags,
            "--brokers", str(BROKERS),
            "--controller-config", "bulk.delete.fast.path.max.objects=0",
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        assert f"started: {', '.join(PROCESSES)}\n" in up.stderr
        yield Distributed(data, up.stdout.strip().splitlines()[-1], local)
    finally:
        local.down(timeout_s=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Distributed]:
    yield from up_distributed(tmp_path_factory.mktemp("distributed") / "cluster")


def test_status_lists_every_role_alive_with_its_ports(cluster: Distributed) -> None:
    layout = cluster.layout
    # cluster.json's contract fields (docs/operations/distributed-profile.md).
    hosts, _, chroot = layout["zookeeper"].partition("/")
    assert re.fullmatch(rf"{ADDRESS},{ADDRESS},{ADDRESS}", hosts) and chroot == "tiered"
    assert re.fullmatch(rf"http://{ADDRESS}", layout["s3_endpoint"])
    assert re.fullmatch(rf"spark://{ADDRESS}", layout["spark_master"])
    assert re.fullmatch(rf"http://{ADDRESS}", layout["spark_master_web"])
    assert re.fullmatch(rf"{ADDRESS},{ADDRESS}", layout["kafka_bootstrap_servers"])

    code, status = cluster.status()
    assert code == 0
    by_name = {p["name"]: p for p in status["processes"]}
    assert {name: p["role"] for name, p in by_name.items()} == PROCESSES
    assert all(p["alive"] and p["pid"] == cluster.local.running(n) for n, p in by_name.items())
    assert set(status) == {"active_controller", "processes"}
    assert status["active_controller"] in ("controller-0", "controller-1")
    for p in status["processes"]:
        reach = {"reachable", "last_reached_ms"} if p["role"] == "broker" else set()
        assert set(p) == {"name", "role", "pid", "alive", "ports"} | reach
        assert p.get("reachable", True) is True, p
        assert p["ports"] and all(type(port) is int for port in p["ports"].values()), p

    def port(url: str) -> int:
        return int(url.rpartition(":")[2].split("/")[0])

    for server_id, member in enumerate(layout["zookeeper_ensemble"], start=1):
        assert by_name[f"zookeeper-{server_id}"]["ports"] == member
    assert [f"127.0.0.1:{m['client']}" for m in layout["zookeeper_ensemble"]] == hosts.split(",")
    assert by_name["s3"]["ports"] == {"client": port(layout["s3_endpoint"])}
    assert by_name["spark-master"]["ports"] == {
        "client": port(layout["spark_master"]),
        "web": port(layout["spark_master_web"]),
    }
    for i, worker in enumerate(layout["spark_workers"], start=1):
        assert by_name[f"spark-worker-{i}"]["ports"] == {
            "client": worker["port"],
            "web": worker["web_port"],
        }
    for i, controller_port in enumerate(layout["controllers"]):
        metrics = layout["controller_metrics_ports"][i]
        assert by_name[f"controller-{i}"]["ports"] == {
            "client": controller_port,
            "metrics": metrics,
        }
        assert "kafka_controller_kafkacontroller_activecontrollercount" in metrics_text(metrics)
    for i, broker_port in enumerate(layout["brokers"]):
        metrics = layout["broker_metrics_ports"][i]
        assert by_name[f"broker-{i + 1}"]["ports"] == {
            "client": broker_port,
            "kafka": layout["kafka_brokers"][i],
            "metrics": metrics,
        }
        assert "kafka_server_brokertopicmetrics" in metrics_text(metrics)
    state = master_state(layout["spark_master_web"])
    assert state is not None and state["aliveworkers"] == 2


def _paths(value: str) -> list[Path]:
    return [Path(part) for part in value.split(",") if part.startswith("/")]


def test_no_file_or_directory_is_shared_between_processes(cluster: Distributed) -> None:
    used: dict[Path, str] = {}  # every path a config names -> the process whose config it is
    configs = sorted((cluster.dir / "config").glob("*.properties")) + sorted(
        (cluster.dir / "config").glob("*.cfg")
    )
    # Spark's daemons and the S3 endpoint take their few settings on the command line.
    assert {c.stem for c in configs} == {
        n for n, role in PROCESSES.items() if role in ("zookeeper", "controller", "broker")
    }
    assert {c.stem for c in configs if c.suffix == ".cfg"} == {"zookeeper-1", "zookeeper-2",
                                                              "zookeeper-3"}  # fmt: skip
    for config in configs:
        for line in config.read_text().splitlines():
            key, _, value = line.partition("=")
            assert "sqlite" not in key, (config.name, line)
            for path in _paths(value):
                owner = used.setdefault(path, config.stem)
                assert owner == config.stem, f"{path} is named by {owner} and {config.stem}"
    for path, owner in used.items():
        for other, other_owner in used.items():
            if other_owner != owner:
                assert not other.is_relative_to(path), f"{owner}'s {path} holds {other_owner}'s"
    # Each process that reaches S3 has its own credentials file, beside its own properties.
    for name, role in PROCESSES.items():
        if role in ("controller", "broker"):
            properties = cluster.properties(name)
            credentials = Path(properties["remote.storage.s3.credentials.file"])
            assert credentials == cluster.dir / "config" / f"{name}.s3-credentials"
            assert credentials.stat().st_mode & 0o077 == 0
            assert properties["remote.storage.root"] == "s3://tiered/cluster"
            assert properties["rlmm.backend"] == "zookeeper"
            assert properties["rlmm.zookeeper.connect"].endswith("/tiered-rlmm")
            assert properties["zookeeper.connect"] == cluster.layout["zookeeper"]
    assert cluster.properties("controller-1")["spark.master"] == cluster.layout["spark_master"]
    assert not list(cluster.dir.rglob("*.db")) and not (cluster.dir / "remote").exists()
    assert not (cluster.dir / "metadata").exists()  # no KRaft log either


def disable_with_delete_policy(
    bootstrap: str, topic: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """``tiered-configs --alter`` turning ``topic``'s tiering off with the delete policy, waited
    for until DISABLED (``options``: ``--command-config FILE`` for a secure cluster)."""
    wait = subprocess.run(
        [
            sys.executable, "-m", "cli.configs", "--bootstrap-server", bootstrap, *options,
            "--alter", "--entity-type", "topics", "--entity-name", topic,
            "--add-config", "remote.log.disable.policy=delete,remote.storage.enable=false",
            "--wait", "--timeout", "150",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert wait.returncode == 0, wait.stderr
    assert wait.stdout.strip().endswith(
        f"Topic {topic}: tiered_state=DISABLED tiered_epoch=1 policy=delete"
    ), wait.stdout
    return wait


def test_a_tiered_topic_tiers_to_s3_and_its_delete_disable_is_a_spark_job(
    cluster: Distributed,
) -> None:
    admin = KafkaAdmin({"bootstrap.servers": cluster.kafka_bootstrap, **QUIET})
    [created] = admin.create_topics([NewTopic(TOPIC, 2, 1, config=dict(TIERED))]).values()
    assert created.result(30) is None
    with AdminClient(cluster.bootstrap) as tiered_admin:

        def hosted() -> bool:
            topic = tiered_admin.describe_topic(TOPIC, include_partition_state=True)
            return all(p.leader > 0 for p in topic.partitions)

        poll_until(hosted, timeout=30, what=f"{TOPIC}'s partitions to have leaders")
        confluent_produce(cluster, TOPIC, sample(300, partitions=2, size=100), **SMALL_BATCHES)

        def tiered() -> bool:
            topic = tiered_admin.describe_topic(TOPIC, include_partition_state=True)
            return all(p.remote_segment_count >= 3 for p in topic.partitions)

        poll_until(tiered, timeout=60, what="3 remote segments in each partition")
    before = cluster.epoch_keys(0)
    assert before and all(key.startswith("cluster/") for key in before), before

    wait = disable_with_delete_policy(cluster.bootstrap, TOPIC)
    # --wait shows the job's progress while it runs (its Spark session alone takes seconds).
    progress = re.findall(r"deleting remote data below epoch 1 .* (\d+)/(\d+) objects", wait.stderr)
    assert progress, wait.stderr
    with AdminClient(cluster.bootstrap) as tiered_admin:
        job = tiered_admin.describe_topic(TOPIC, include_partition_state=True).delete_job
    assert job is not None and job.state == "DONE"
    total = job.objects_total
    assert total >= len(before) > 0 and job.objects_deleted == total
    assert all(int(done) <= int(of) <= total for done, of in progress), wait.stderr
    assert cluster.epoch_keys(0) == []  # nothing of the old epoch is left in S3

    logs = "".join(
        p.read_text(errors="replace") for p in (cluster.dir / "logs").glob("controller-*.log")
    )
    assert re.search(r"deleting \d+ objects with .* via Spark", logs), logs[-3000:]
    state = master_state(cluster.layout["spark_master_web"])
    assert state is not None
    apps = state["activeapps"] + state["completedapps"]
    assert [app["name"] for app in apps] == [SPARK_APP], apps


def test_up_restarts_only_a_killed_ensemble_member_and_worker(cluster: Distributed) -> None:
    _, status = cluster.status()
    pids = {p["name"]: p["pid"] for p in status["processes"]}
    os.kill(pids["zookeeper-2"], signal.SIGKILL)
    os.killpg(pids["spark-worker-1"], signal.SIGKILL)  # the worker and its executor
    poll_until(
        lambda: (
            cluster.local.running("zookeeper-2") is None
            and cluster.local.running("spark-worker-1") is None
        ),
        what="the member and the worker to die",
    )
    assert cluster.status()[0] == 1

    again = cluster_cli("up", "--data-dir", str(cluster.dir))
    assert again.returncode == 0, again.stderr
    assert "started: zookeeper-2, spark-worker-1\n" in again.stderr  # and nothing else
    assert again.stdout.strip().splitlines()[-1] == cluster.bootstrap
    code, status = cluster.status()
    assert code == 0
    now = {p["name"]: p["pid"] for p in status["processes"]}
    assert {n: pid for n, pid in now.items() if n not in ("zookeeper-2", "spark-worker-1")} == {
        n: pid for n, pid in pids.items() if n not in ("zookeeper-2", "spark-worker-1")
    }
    modes = [server_mode("127.0.0.1", m["client"]) for m in cluster.layout["zookeeper_ensemble"]]
    assert sorted(modes, key=str) == [FOLLOWER, FOLLOWER, LEADER]  # one ensemble again
    poll_until(
        lambda: (master_state(cluster.layout["spark_master_web"]) or {}).get("aliveworkers") == 2,
        what="the restarted worker registered with the master",
    )
    with AdminClient(cluster.bootstrap) as admin:  # the same data
        assert admin.describe_topic(TOPIC, include_partition_state=False).tiered_epoch == 1

    mismatch = cluster_cli("up", "--data-dir", str(cluster.dir), "--profile", "local")
    assert mismatch.returncode == 1
    assert mismatch.stderr.startswith("INVALID_REQUEST: --profile local does not match")


def test_down_stops_every_process_in_order(cluster: Distributed) -> None:
    _, status = cluster.status()
    pids = {p["name"]: p["pid"] for p in status["processes"]}
    # The active controller keeps its Spark session for the next job; stopped, it ends it.
    active = status["active_controller"]
    os.kill(pids[active], signal.SIGTERM)

    def finished() -> bool:
        state = master_state(cluster.layout["spark_master_web"]) or {}
        return [(a["name"], a["state"]) for a in state.get("completedapps", [])] == [
            (SPARK_APP, "FINISHED")
        ]

    poll_until(finished, timeout=60, what="the bulk delete's application to be FINISHED")
    poll_until(lambda: cluster.local.running(active) is None, what=f"{active} to stop")

    down = cluster_cli("down", "--data-dir", str(cluster.dir))
    assert down.returncode == 0, down.stderr
    stopped = [name for name in STOP_ORDER if name != active]
    assert down.stdout.strip() == f"stopped: {', '.join(stopped)}"
    assert all(cluster.local.running(name) is None for name in pids)
    poll_until(lambda: processes_of(cluster.dir) == [], what="no process left")
    assert not list((cluster.dir / "pids").glob("*.pid"))
