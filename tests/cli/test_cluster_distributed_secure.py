"""``tiered-cluster up --secure --profile distributed`` end to end: the three-server ensemble
serves TLS only and forms over TLS quorum links, every controller and broker reaches it with its
own certificate, a Kafka client over SASL_SSL (``admin-sasl.properties``) creates a tiered topic
and produces to it, the topic tiers to S3, a delete-policy disable completes with its bulk delete
a Spark application on the standalone master, and ``down`` stops everything."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdmin
from confluent_kafka.admin import NewTopic

from cli.cluster import secure
from cli.launch.spark_standalone import master_state
from cli.launch.zookeeper import FOLLOWER, LEADER, server_mode
from tests.cli.test_cluster_cli import cluster_cli
from tests.cli.test_cluster_profile import (
    Distributed,
    disable_with_delete_policy,
    up_distributed,
)
from tests.cli.test_demo import processes_of
from tests.support.kafka_clients import SMALL_BATCHES, TIERED, confluent_produce, sample
from tests.support.kafka_cluster import QUIET
from tests.support.polling import poll_until
from tests.support.sockets import listening_addresses
from tiered.admin import AdminClient
from tiered.properties import load_properties
from tiered.security.zookeeper_auth import ZooKeeperSecurity
from tiered.zk_client import ZkClient

pytestmark = pytest.mark.processes

TOPIC = "secure-orders"
SPARK_APP = "tiered-bulk-delete"
MEMBERS = ("zookeeper-1", "zookeeper-2", "zookeeper-3")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Distributed]:
    yield from up_distributed(tmp_path_factory.mktemp("distributed-secure") / "cluster", "--secure")


def test_the_ensemble_serves_tls_only_over_tls_quorum_links(cluster: Distributed) -> None:
    layout = cluster.layout
    assert layout["zookeeper_tls"] is True
    modes = []
    for name, member in zip(MEMBERS, layout["zookeeper_ensemble"], strict=True):
        config = (cluster.dir / "config" / f"{name}.cfg").read_text()
        assert "sslQuorum=true\n" in config and "portUnification=false\n" in config
        assert f"secureClientPort={member['client']}\n" in config
        assert f"\nclientPort={member['client']}" not in config
        tls = secure.zookeeper_server_tls(cluster.local.files, layout, name)
        assert tls is not None and tls.keystore.name == f"{name}.keystore.pem"
        modes.append(server_mode("127.0.0.1", member["client"], timeout=2.0, tls=tls))
        # Without TLS, nothing answers.
        assert server_mode("127.0.0.1", member["client"], timeout=2.0) is None
    assert sorted(modes, key=str) == [FOLLOWER, FOLLOWER, LEADER], modes
    # Each member listens on its TLS client port and its quorum links' ports, nothing else.
    _, status = cluster.status()
    pids = {p["name"]: p["pid"] for p in status["processes"]}
    for name, member in zip(MEMBERS, layout["zookeeper_ensemble"], strict=True):
        ports = {port for _, port in listening_addresses(pids[name])}
        assert member["client"] in ports and ports <= set(member.values()), (name, ports)
    for name in ("controller-0", "broker-1"):
        properties = cluster.properties(name)
        assert properties["zookeeper.ssl.client.enable"] == "true"
        assert properties["rlmm.backend"] == "zookeeper"
    # The RLMM's chroot, through the admin's ZooKeeper client config.
    client_config = load_properties(layout["zookeeper_client_config"])
    rlmm = ZkClient(
        cluster.properties("broker-1")["rlmm.zookeeper.connect"],
        10.0,
        ZooKeeperSecurity.from_config(client_config),
    )
    try:
        rlmm.start(15.0)
        assert rlmm.kazoo.exists(rlmm.chroot) is not None
    finally:
        rlmm.close()


def test_a_tiered_topic_produced_over_sasl_ssl_tiers_and_its_delete_disable_runs_on_spark(
    cluster: Distributed,
) -> None:
    files, layout = cluster.local.files, cluster.layout
    sasl = load_properties(secure.admin_sasl_file(files))
    admin = KafkaAdmin({"bootstrap.servers": cluster.kafka_bootstrap, **QUIET, **sasl})
    [created] = admin.create_topics([NewTopic(TOPIC, 2, 1, config=dict(TIERED))]).values()
    assert created.result(30) is None
    credentials = secure.admin_credentials(files, layout)
    with AdminClient(cluster.bootstrap, credentials=credentials) as tiered_admin:

        def hosted() -> bool:
            topic = tiered_admin.describe_topic(TOPIC, include_partition_state=True)
            return all(p.leader > 0 for p in topic.partitions)

        poll_until(hosted, timeout=30, what=f"{TOPIC}'s partitions to have leaders")
        confluent_produce(
            cluster, TOPIC, sample(300, partitions=2, size=100), **SMALL_BATCHES, **sasl
        )

        def tiered() -> bool:
            topic = tiered_admin.describe_topic(TOPIC, include_partition_state=True)
            return all(p.remote_segment_count >= 3 for p in topic.partitions)

        poll_until(tiered, timeout=90, what="3 remote segments in each partition")
    before = cluster.epoch_keys(0)
    assert before, "nothing tiered to S3"

    disable_with_delete_policy(
        cluster.bootstrap, TOPIC, "--command-config", str(secure.admin_properties_file(files))
    )
    with AdminClient(cluster.bootstrap, credentials=credentials) as tiered_admin:
        job = tiered_admin.describe_topic(TOPIC, include_partition_state=True).delete_job
    assert job is not None and job.state == "DONE"
    assert job.objects_deleted == job.objects_total >= len(before)
    assert cluster.epoch_keys(0) == []
    logs = "".join(
        p.read_text(errors="replace") for p in (cluster.dir / "logs").glob("controller-*.log")
    )
    assert re.search(r"deleting \d+ objects with .* via Spark", logs), logs[-3000:]
    state = master_state(layout["spark_master_web"])
    assert state is not None
    apps = state["activeapps"] + state["completedapps"]
    assert [app["name"] for app in apps] == [SPARK_APP], apps


def test_down_stops_every_process(cluster: Distributed) -> None:
    _, status = cluster.status()
    names = [p["name"] for p in status["processes"]]
    assert set(MEMBERS) <= set(names), names
    down = cluster_cli("down", "--data-dir", str(cluster.dir))
    assert down.returncode == 0, down.stderr
    assert all(cluster.local.running(name) is None for name in names)
    poll_until(lambda: processes_of(cluster.dir) == [], what="no process left")
