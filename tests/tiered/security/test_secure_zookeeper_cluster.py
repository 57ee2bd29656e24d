"""A ZooKeeper-mode cluster of real processes with ``zookeeper.set.acl=true`` and a JAAS file:
it works as without (a topic tiered, then disabled with the delete policy), nobody else can change
its znodes, a controller with the wrong password stops with one clear line, no password reaches a
log or a describe, and the metrics endpoints listen on loopback only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient as KafkaAdminClient
from confluent_kafka.admin import ConfigResource
from kazoo.exceptions import NoAuthError

from cli.launch.ports import free_port
from tests.support.cluster import Cluster
from tests.support.polling import poll_until
from tests.support.processes import DaemonProcess
from tests.support.secrets import assert_no_secrets
from tests.support.zookeeper import ZooKeeperServer, fresh_chroot, start_kazoo_client
from tiered.cluster.model import TieredState
from tiered.security.zookeeper_auth import ZooKeeperSecurity, jaas_client_file_text

pytestmark = [pytest.mark.processes, pytest.mark.zookeeper]

PASSWORD = "cluster-Zk-pw-4e1d9b"
WRONG_PASSWORD = "wrong-Zk-pw-0c7a22"
TIERED = {"remote.storage.enable": "true", "segment.bytes": "2000", "local.retention.bytes": "4000"}
DELETE = {"remote.log.disable.policy": "delete", "remote.storage.enable": "false"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("secure-zk-cluster")


@pytest.fixture(scope="module")
def jaas(root: Path) -> Path:
    path = root / "secrets" / "zookeeper.jaas"
    path.parent.mkdir()
    path.write_text(jaas_client_file_text("tiered", PASSWORD))
    return path


@pytest.fixture(scope="module")
def base(zookeeper_server: ZooKeeperServer, jaas: Path) -> Iterator[str]:
    security = ZooKeeperSecurity.from_config({"zookeeper.jaas.config.file": str(jaas)})
    with fresh_chroot(zookeeper_server, security=security) as connect:
        yield connect


@pytest.fixture(scope="module")
def cluster(root: Path, jaas: Path, base: str) -> Iterator[Cluster]:
    secure = {
        "zookeeper.jaas.config.file": str(jaas),
        "zookeeper.set.acl": "true",
        "rlmm.backend": "zookeeper",
        "rlmm.zookeeper.connect": f"{base}/rlmm",
        "metrics.port": "0",
    }
    c = Cluster(
        root,
        "zookeeper",
        f"{base}/cluster",
        brokers=1,
        controller_extra=secure,
        broker_extra=secure,
    )
    try:
        c.start()
        yield c
    finally:
        c.close()


def listening_addresses(port: int) -> set[str]:
    """The local addresses with a listening TCP socket on ``port`` (IPv4, /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:
            found.add(".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_the_secure_cluster_tiers_and_deletes(cluster: Cluster) -> None:
    cluster.tiered_topic("payments", 1, TIERED, records=200, expire_locally=True)
    cluster.admin.incremental_alter_configs("payments", DELETE)
    cluster.wait_for_state("payments", TieredState.DISABLED)

    def deleted() -> bool:
        job = cluster.admin.describe_topic("payments", include_partition_state=False).delete_job
        return job is not None and job.state == "DONE"

    poll_until(deleted, timeout=90, what="the delete job of payments")
    job = cluster.admin.describe_topic("payments").delete_job
    assert job is not None and job.objects_deleted == job.objects_total > 0


def test_an_outsider_cannot_change_the_cluster_znodes(cluster: Cluster, base: str) -> None:
    cluster.admin.create_topic("orders", 1, dict(TIERED))
    hosts, chroot = base.partition("/")[0], "/" + base.partition("/")[2]
    outsider = start_kazoo_client(hosts)
    try:
        znodes, pending = [], [f"{chroot}/cluster", f"{chroot}/rlmm"]
        while pending:
            path = pending.pop()
            znodes.append(path)
            try:
                pending += [f"{path}/{child}" for child in outsider.get_children(path)]
            except NoAuthError:  # a sensitive znode (SCRAM credentials): not even listed
                assert "/config/users" in path, path
        assert f"{chroot}/cluster/brokers/ids/1" in znodes  # the broker's registration
        assert f"{chroot}/cluster/brokers/topics/orders/tieredstorage/state" in znodes
        assert any(p.startswith(f"{chroot}/rlmm/") for p in znodes)  # the brokers' RLMM
        for path in znodes:
            with pytest.raises(NoAuthError):
                outsider.set(path, b"x")
            with pytest.raises(NoAuthError):
                outsider.create(f"{path}/intruder", b"x")
    finally:
        outsider.stop()
        outsider.close()


def test_a_controller_with_the_wrong_password_stops_with_one_line(
    cluster: Cluster, root: Path
) -> None:
    wrong = root / "secrets" / "wrong.jaas"
    wrong.write_text(jaas_client_file_text("tiered", WRONG_PASSWORD))
    properties = {
        **cluster.controllers[0].properties,
        "node.id": "109",
        "listeners": f"127.0.0.1:{free_port()}",
        "zookeeper.jaas.config.file": str(wrong),
    }
    intruder = DaemonProcess("controller.main", root / "controller-wrong.properties", properties)
    try:
        intruder.start(ready="ZooKeeper authentication failed")
        assert intruder.process is not None and intruder.process.wait(30) == 2
        lines = [line for line in intruder.output if "authentication failed" in line.lower()]
        assert len(lines) == 1, intruder.output
        assert "zookeeper.jaas.config.file" in lines[0] and "wrong password" in lines[0]
        assert_no_secrets([PASSWORD, WRONG_PASSWORD], processes=[intruder])
    finally:
        intruder.close()


def test_no_password_in_any_log_nor_describe(cluster: Cluster, root: Path) -> None:
    admin = KafkaAdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    resource = ConfigResource("broker", "1")
    entries = admin.describe_configs([resource])[resource].result(30)
    jaas_entry = entries["zookeeper.jaas.config.file"]
    assert jaas_entry.value is None and jaas_entry.is_sensitive
    processes = [*cluster.controllers, *cluster.brokers.values()]
    assert_no_secrets([PASSWORD, WRONG_PASSWORD], root=root, processes=processes)


def test_metrics_listen_on_loopback_by_default(cluster: Cluster) -> None:
    for process in [cluster.controllers[0], *cluster.brokers.values()]:
        line = process.wait_for_line("metrics on http://")
        match = re.search(r"http://([\d.]+):(\d+)/metrics", line)
        assert match is not None and match.group(1) == "127.0.0.1", line
        port = int(match.group(2))
        poll_until(lambda port=port: bool(listening_addresses(port)), timeout=10, what="listen")
        assert listening_addresses(port) == {"127.0.0.1"}
