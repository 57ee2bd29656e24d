"""``tiered-cluster up --loopback-hosts``: every process binds and advertises its own loopback
address, 127.0.0.11, 127.0.0.12, ... in the order of ``status``, which reports it as ``host``.

The layout, the properties, the certificates and the refusals are checked without starting
anything; a local KRaft cluster and a distributed one are then started (``processes``) to see
where each process listens."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic
from cryptography import x509

from cli.cluster import ClusterRequest, LocalCluster, main, secure, services
from cli.cluster import layout as layouts
from cli.cluster.spec import BROKER, CONTROLLER, ProcessSpec
from cli.cluster.status import status_table
from cli.launch.ports import accepts_connections
from cli.launch.spark_standalone import master_state
from tests.cli.test_cluster_cli import cluster_cli
from tests.cli.test_cluster_profile import SPARK_APP, Distributed
from tests.support.kafka_clients import SMALL_BATCHES, TIERED, confluent_produce, sample
from tests.support.kafka_cluster import QUIET
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tests.support.sockets import listening_addresses
from tiered.admin import AdminClient
from tiered.errors import TieredError
from tiered.net import parse_listeners

ADDRESS = re.compile(r"\b(\d+\.\d+\.\d+\.\d+):(\d+)\b")
REQUESTS = {
    "local-kraft": ClusterRequest(brokers=2, loopback_hosts=True),
    "local-zookeeper-spark": ClusterRequest(
        brokers=1, metadata="zookeeper", spark_workers=2, loopback_hosts=True
    ),
    "distributed": ClusterRequest(brokers=2, profile="distributed", loopback_hosts=True),
}


def _hosts(count: int) -> list[str]:
    return [f"127.0.0.{11 + i}" for i in range(count)]


def _named_addresses(text: str) -> set[tuple[str, int]]:
    return {(host, int(port)) for host, port in ADDRESS.findall(text)}


# ----------------------------------------------------------------------------- without processes


@pytest.mark.parametrize("request_", REQUESTS.values(), ids=REQUESTS.keys())
def test_each_process_binds_and_advertises_its_own_address_in_the_order_of_status(
    tmp_path: Path, request_: ClusterRequest
) -> None:
    local = LocalCluster(tmp_path)
    layout = layouts.create(request_)
    specs = local.profile(layout)
    assert [s.host for s in specs] == _hosts(len(specs))
    assert layout["loopback_hosts"] is True
    assert layout["hosts"] == {s.name: s.host for s in specs}
    # Every address cluster.json or a config names is one a process listens on, at its own
    # address: the listeners, the advertised ones, the links between processes.
    served = {(s.host, port) for s in specs for port in s.ports.values()}
    named = _named_addresses(json.dumps(layout))
    for spec in specs:
        named |= _named_addresses(" ".join(spec.properties.values()))
    assert named and named <= served, named - served
    for spec in specs:
        if spec.role not in (CONTROLLER, BROKER):
            continue
        listeners = parse_listeners(spec.properties["listeners"])
        assert {listener.host for listener in listeners.values()} == {spec.host}
        assert "advertised.listeners" not in spec.properties  # they advertise their listeners
        assert spec.properties["metrics.host"] == spec.properties["source.address"] == spec.host
        if spec.role == CONTROLLER:
            assert spec.properties["spark.driver.host"] == spec.host
    brokers = [s for s in specs if s.role == BROKER]
    assert [a.partition(":")[0] for a in layout["kafka_bootstrap_servers"].split(",")] == [
        b.host for b in brokers
    ]


def test_the_spark_daemons_and_zookeeper_members_take_their_own_address(tmp_path: Path) -> None:
    local = LocalCluster(tmp_path)
    layout = layouts.create(REQUESTS["distributed"])
    host = {s.name: s.host for s in local.profile(layout)}
    for member in services.ensemble(local.files, layout).members:
        assert member.host == host[f"zookeeper-{member.server_id}"]
        assert member.connect_string == f"{member.host}:{member.port}"
    assert services.s3_endpoint(local.files, layout).url == layout["s3_endpoint"]
    assert layout["s3_endpoint"].startswith(f"http://{host['s3']}:")
    assert layout["spark_master"].startswith(f"spark://{host['spark-master']}:")


def test_status_text_shows_each_process_address() -> None:
    status = {
        "active_controller": None,
        "processes": [
            {"name": "controller-0", "role": "controller", "pid": 7, "alive": True,
             "host": "127.0.0.11", "ports": {"client": 12001}},
        ],
    }  # fmt: skip
    header, row, _ = status_table(status).splitlines()
    assert header.split() == ["NAME", "ROLE", "PID", "ALIVE", "HOST", "PORTS"]
    assert row.split() == ["controller-0", "controller", "7", "yes", "127.0.0.11", "client=12001"]
    del status["processes"][0]["host"]
    assert "HOST" not in status_table(status)


@pytest.mark.parametrize("metadata", ["kraft", "zookeeper"])
def test_each_certificate_names_its_process_address(tmp_path: Path, metadata: str) -> None:
    """The managed ZooKeeper's certificate too: its TLS clients verify its address."""
    local = LocalCluster(tmp_path)
    layout = layouts.create(
        ClusterRequest(brokers=2, secure=True, loopback_hosts=True, metadata=metadata)
    )
    secure.lay_out(local.files, layout)
    secure.write_files(local.files, layout)

    def ip_names(name: str) -> list[Any]:
        pem = (tmp_path / "config" / f"{name}.pem").read_bytes()
        certificate = x509.load_pem_x509_certificate(pem)
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        return list(names.value.get_values_for_type(x509.IPAddress))

    specs: list[ProcessSpec] = local.profile(layout)
    for spec in specs:
        assert spec.host is not None
        assert ip_names(spec.name) == [
            ipaddress.ip_address("127.0.0.1"),
            ipaddress.ip_address(spec.host),
        ]
    assert ip_names(secure.ADMIN) == [ipaddress.ip_address("127.0.0.1")]  # not a process


def test_with_an_external_zookeeper_it_is_refused_naming_both_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "cluster"
    code = main(["up", "--data-dir", str(data), "--metadata", "zookeeper",
                 "--zookeeper", "127.0.0.1:2181", "--loopback-hosts"])  # fmt: skip
    assert code == 1
    assert capsys.readouterr().err.startswith(
        "INVALID_REQUEST: --loopback-hosts cannot be used with --zookeeper: an external "
        "ZooKeeper is not a process of the cluster"
    )
    assert not data.exists()  # nothing written, nothing started


def test_it_is_chosen_on_the_first_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plain, hosted = LocalCluster(tmp_path / "plain"), LocalCluster(tmp_path / "hosted")
    plain_layout = plain.layout(ClusterRequest(brokers=1))
    assert "hosts" not in plain_layout and all(s.host is None for s in plain.profile(plain_layout))
    code = main(["up", "--data-dir", str(plain.dir), "--brokers", "1", "--loopback-hosts"])
    assert code == 1
    assert capsys.readouterr().err.startswith(
        "INVALID_REQUEST: --loopback-hosts True does not match the cluster in this directory, "
        "which has False"
    )
    assert plain.layout(ClusterRequest(brokers=1)) == plain_layout  # unchanged

    hosted_layout = hosted.layout(ClusterRequest(brokers=1, loopback_hosts=True))
    # A later up without the flag, or with it, keeps the addresses.
    assert hosted.layout(ClusterRequest(brokers=1)) == hosted_layout
    assert hosted.layout(ClusterRequest(brokers=1, loopback_hosts=True)) == hosted_layout
    with pytest.raises(TieredError, match="--profile distributed does not match"):
        hosted.layout(ClusterRequest(brokers=1, profile="distributed", loopback_hosts=True))


def test_more_processes_than_addresses_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TieredError) as refused:
        LocalCluster(tmp_path).layout(ClusterRequest(brokers=243, loopback_hosts=True))
    assert str(refused.value) == (
        "INVALID_REQUEST: --loopback-hosts gives each process one address of 127.0.0.11.."
        "127.0.0.254: at most 244 processes, and this cluster has 245 (--brokers 243, "
        "--spark-workers 0)"
    )
    assert LocalCluster(tmp_path).layout(ClusterRequest(brokers=242, loopback_hosts=True))


# ----------------------------------------------------------------------------- with processes


def _status(data: Path) -> list[dict[str, Any]]:
    """``status --format json``'s processes, once it names the active controller (which it asks
    at the controllers' own addresses)."""
    result = cluster_cli("status", "--data-dir", str(data), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    status = json.loads(result.stdout)
    assert status["active_controller"] in ("controller-0", "controller-1"), status
    processes: list[dict[str, Any]] = status["processes"]
    return processes


def _listens_only_on_its_own_address(process: dict[str, Any]) -> None:
    """The process listens on the ports ``status`` gives it (a ZooKeeper member on its quorum
    port only while it leads), each on its own address, and on nothing else; nothing answers
    on those ports at 127.0.0.1."""
    host, ports = process["host"], set(process["ports"].values())
    listening = listening_addresses(process["pid"])
    assert listening <= {(host, port) for port in ports}, (process, listening)
    not_listening = {port for port in ports if (host, port) not in listening}
    assert not_listening <= {process["ports"].get("quorum")}, (process, listening)
    for port in ports:
        assert not accepts_connections(port, "127.0.0.1", timeout_s=0.5), (process, port)


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip


def _disable_with_delete(bootstrap: str, topic: str) -> None:
    """``tiered-configs --alter ... --wait``: the topic's tiering disabled, its remote data
    deleted."""
    disabled = _run(
        "cli.configs", "--bootstrap-server", bootstrap,
        "--alter", "--entity-type", "topics", "--entity-name", topic,
        "--add-config", "remote.log.disable.policy=delete,remote.storage.enable=false",
        "--wait", "--timeout", "150",
    )  # fmt: skip
    assert disabled.returncode == 0, disabled.stderr
    assert disabled.stdout.strip().endswith(
        f"Topic {topic}: tiered_state=DISABLED tiered_epoch=1 policy=delete"
    ), disabled.stdout


@pytest.mark.processes
def test_a_local_kraft_cluster_listens_each_process_on_its_own_address(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    local = LocalCluster(data)
    try:
        up = cluster_cli("up", "--data-dir", str(data), "--brokers", "2", "--loopback-hosts")
        assert up.returncode == 0, up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1]
        processes = _status(data)
        assert [(p["name"], p["host"]) for p in processes] == list(
            zip(["controller-0", "controller-1", "broker-1", "broker-2"], _hosts(4), strict=True)
        )
        for process in processes:
            _listens_only_on_its_own_address(process)
        layout = json.loads((data / "cluster.json").read_text())
        assert bootstrap == ",".join(f"127.0.0.{11 + i}:{p}" for i, p in
                                     enumerate(layout["controllers"]))  # fmt: skip

        # The CLIs through the recorded addresses: a topic created, then its tiering disabled.
        created = _run("cli.topics", "--bootstrap-server", bootstrap, "--create",
                       "--topic", "hosted", "--partitions", "1",
                       "--config", "remote.storage.enable=true")  # fmt: skip
        assert created.returncode == 0, created.stderr
        kafka = layout["kafka_bootstrap_servers"]
        metadata = KafkaAdmin({"bootstrap.servers": kafka, **QUIET}).list_topics(timeout=30)
        assert [f"{b.host}:{b.port}" for _, b in sorted(metadata.brokers.items())] == kafka.split(
            ","
        )
        assert [address.partition(":")[0] for address in kafka.split(",")] == _hosts(4)[2:]
        assert "hosted" in metadata.topics
        _disable_with_delete(bootstrap, "hosted")

        text = cluster_cli("status", "--data-dir", str(data))
        assert text.returncode == 0 and text.stdout.split()[:6] == [
            "NAME", "ROLE", "PID", "ALIVE", "HOST", "PORTS",
        ]  # fmt: skip
        assert "127.0.0.14" in text.stdout.splitlines()[4]  # broker-2's row
    finally:
        local.down(timeout_s=10)


@pytest.mark.processes
def test_a_distributed_cluster_listens_each_process_on_its_own_address(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    local = LocalCluster(data)
    names = ["zookeeper-1", "zookeeper-2", "zookeeper-3", "s3", "spark-master",
             "spark-worker-1", "controller-0", "controller-1", "broker-1"]  # fmt: skip
    try:
        up = cluster_cli(
            "up", "--data-dir", str(data), "--profile", "distributed", "--brokers", "1",
            "--spark-workers", "1", "--loopback-hosts",
            # Every bulk delete a Spark job, however small.
            "--controller-config", "bulk.delete.fast.path.max.objects=0",
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        cluster = Distributed(data, up.stdout.strip().splitlines()[-1], local)
        processes = _status(data)
        assert [(p["name"], p["host"]) for p in processes] == list(
            zip(names, _hosts(len(names)), strict=True)
        )
        for process in processes:
            _listens_only_on_its_own_address(process)
        host = {p["name"]: p["host"] for p in processes}
        zoo_cfg = (data / "config" / "zookeeper-1.cfg").read_text()
        for server_id in (1, 2, 3):
            assert f"server.{server_id}={host[f'zookeeper-{server_id}']}:" in zoo_cfg

        # A tiered topic tiers to S3 and its delete disable runs on Spark, every link between
        # the processes on their own addresses.
        topic = "hosted"
        admin = KafkaAdmin({"bootstrap.servers": cluster.kafka_bootstrap, **QUIET})
        [created] = admin.create_topics([NewTopic(topic, 1, 1, config=dict(TIERED))]).values()
        assert created.result(30) is None
        confluent_produce(cluster, topic, sample(200, partitions=1, size=100), **SMALL_BATCHES)
        with AdminClient(cluster.bootstrap) as tiered_admin:

            def tiered() -> bool:
                described = tiered_admin.describe_topic(topic, include_partition_state=True)
                return all(p.remote_segment_count >= 2 for p in described.partitions)

            poll_until(tiered, timeout=60, what="2 remote segments")
        assert cluster.epoch_keys(0)
        _disable_with_delete(cluster.bootstrap, topic)
        assert cluster.epoch_keys(0) == []
        logs = "".join(p.read_text(errors="replace") for p in (data / "logs").glob("controller-*"))
        assert re.search(r"deleting \d+ objects with .* via Spark", logs), logs[-3000:]
        state = master_state(cluster.layout["spark_master_web"])
        assert state is not None
        assert [app["name"] for app in state["activeapps"] + state["completedapps"]] == [SPARK_APP]
    finally:
        local.down(timeout_s=10)
