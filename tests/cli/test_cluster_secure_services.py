"""``tiered-cluster up --secure``'s services (cli.cluster.secure_services), tested on their own
rather than through a whole cluster: the distributed profile's S3 endpoint serving HTTPS with a
certificate from the cluster CA that every controller's and broker's ``remote.storage.s3.ca.file``
verifies; the Spark secret given to the controllers by path and to the master and workers in a
``spark-defaults.conf`` of their own (both mode 600), never on a command line, and the master
started from the profile's spec with authentication on; and a whole secure local cluster with a
Spark worker, whose active controller's application the secured master admits."""

from __future__ import annotations

import json
import os
import signal
import uuid
from pathlib import Path

import pytest

from cli.cluster import layout as layouts
from cli.cluster import profile, secure, secure_services, services
from cli.cluster.local import LocalCluster
from cli.cluster.spec import SPARK_MASTER, broker_name
from cli.launch.spark_standalone import master_state
from tests.cli.test_cluster_cli import cluster_cli
from tests.controller.jobs.test_spark_secured import command_lines
from tests.support.polling import poll_until
from tiered import rsm
from tiered.api import RemoteStorageException, TopicIdPartition
from tiered.security.spark_auth import SECRET_FILE_CONFIG, read_secret

pytestmark = pytest.mark.processes

CA_FILE = "remote.storage.s3.ca.file"


def secure_cluster(tmp_path: Path, **request: object) -> tuple[LocalCluster, layouts.Layout]:
    cluster = LocalCluster(tmp_path / "cluster")
    layout = cluster.layout(layouts.ClusterRequest(brokers=1, secure=True, **request))  # type: ignore[arg-type]
    secure.write_files(cluster.files, layout)  # as ``up`` writes them, in this order
    secure_services.write_files(cluster.files, layout)
    return cluster, layout


def test_the_distributed_profiles_s3_endpoint_serves_https_that_the_daemons_verify(
    tmp_path: Path,
) -> None:
    cluster, layout = secure_cluster(tmp_path, profile="distributed")
    files = cluster.files
    assert layout["s3_endpoint"].startswith("https://")
    ca = str(files.dir / "config" / "ca.pem")
    controller = profile.controller_properties(files, layout, 0)
    broker = profile.broker_properties(files, layout, 1)
    assert controller[CA_FILE] == ca and broker[CA_FILE] == ca
    assert controller[SECRET_FILE_CONFIG] == str(secure_services.spark_secret_file(files))
    assert SECRET_FILE_CONFIG not in broker  # brokers hold no Spark secret
    assert (files.config_file("s3", "key").stat().st_mode & 0o077) == 0

    endpoint = services.s3_endpoint(files, layout)
    assert endpoint.url == layout["s3_endpoint"]
    [spec] = services.s3_specs(files, layout)
    endpoint.start()
    try:
        assert spec.serving()  # the profile's readiness check verifies the certificate too
        endpoint.create_bucket(layouts.S3_BUCKET)
        services.write_credentials(files, layout, broker_name(1))
        storage = rsm.create(rsm.config_from_properties(broker))
        assert storage.list_tiered_epochs(TopicIdPartition(uuid.uuid4(), "t", 0)) == []
        storage.close()
        del broker[CA_FILE]
        untrusting = rsm.create(rsm.config_from_properties(broker))
        with pytest.raises(RemoteStorageException, match=r"remote\.storage\.s3\.ca\.file"):
            untrusting.list_tiered_epochs(TopicIdPartition(uuid.uuid4(), "t", 0))
        untrusting.close()
    finally:
        endpoint.stop()


def test_the_spark_secret_reaches_the_controllers_by_path_and_the_daemons_by_their_conf(
    tmp_path: Path,
) -> None:
    cluster, layout = secure_cluster(tmp_path, spark_workers=1)
    files = cluster.files
    secret_file = secure_services.spark_secret_file(files)
    secret = read_secret(secret_file)  # mode 600, or it would be refused
    conf_dir = secure_services.spark_conf_dir(files, layout)
    assert conf_dir is not None
    defaults = (conf_dir / "spark-defaults.conf").read_text()
    assert (conf_dir / "spark-defaults.conf").stat().st_mode & 0o077 == 0
    for line in ("spark.authenticate true", f"spark.authenticate.secret {secret}",
                 "spark.network.crypto.enabled true", "spark.redaction.regex "):  # fmt: skip
        assert line in defaults
    controller = profile.controller_properties(files, layout, 0)
    assert controller[SECRET_FILE_CONFIG] == str(secret_file)
    assert all(secret not in value for value in controller.values())

    [master] = [s for s in services.spark_specs(files, layout) if s.name == SPARK_MASTER]
    master.launch()
    pid = files.running(SPARK_MASTER, master.marker)
    assert pid is not None
    try:
        poll_until(master.serving, timeout=120, what="the secured Spark master")
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert f"SPARK_CONF_DIR={conf_dir}".encode() in environment
        assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        log = files.log_file(SPARK_MASTER).read_text()
        assert "authentication enabled" in log and secret not in log
    finally:
        os.killpg(pid, signal.SIGKILL)


def test_the_active_controller_of_a_secure_local_cluster_runs_its_application_on_the_master(
    tmp_path: Path,
) -> None:
    data = tmp_path / "cluster"
    up = cluster_cli(
        "up", "--data-dir", str(data), "--secure", "--brokers", "1", "--spark-workers", "1",
        timeout_s=600,
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        layout = json.loads((data / "cluster.json").read_text())

        def admitted() -> bool:
            state = master_state(layout["spark_master_web"]) or {}
            return [a["name"] for a in state.get("activeapps", [])] == ["tiered-bulk-delete"]

        poll_until(admitted, timeout=300, what="the active controller's application admitted")
        secret = read_secret(data / "config" / "spark.secret")
        assert "authentication enabled" in (data / "logs" / "spark-master.log").read_text()
        for log in sorted((data / "logs").glob("*.log")):
            assert secret not in log.read_text(errors="replace"), log.name
        assert all(secret not in line for line in command_lines())
    finally:
        down = cluster_cli("down", "--data-dir", str(data), timeout_s=300)
        assert down.returncode == 0, down.stderr
