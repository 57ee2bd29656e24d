"""The bulk delete on a secured Spark standalone cluster (tiered.security.spark_auth): a master and
a worker whose ``spark-defaults.conf`` holds the cluster's secret, with authentication, encrypted
RPC and redaction; the controller's session built by its config and wiring from
``bulk.delete.spark.authenticate.secret.file``; the objects on a real S3 endpoint (moto, through
the fault proxy that tells whose keys signed each request).

What is checked: an application without the secret is refused by the master; with it the job
deletes on S3 with the executors' own credentials file; neither the Spark secret nor the S3
credentials show on any process's command line, in the daemons' logs or work directories, in the
master's ``/json/``, in the controller's log or in the application's event log (the keys are
there, redacted); and the pickled tasks the driver ships hold no credential."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.launch.s3_endpoint import write_credentials_file
from cli.launch.spark_standalone import SparkStandaloneCluster, master_state
from cli.security.certs import write_private_file
from controller.config import ControllerConfig
from controller.jobs import wiring
from controller.jobs.spark_delete import spark_task
from tests.controller.jobs.test_delete_job_runner import Persisted, Remote
from tests.support.polling import poll_until
from tests.support.s3 import TEST_CREDENTIALS, S3Store
from tests.support.s3_fault_proxy import S3FaultProxy
from tiered import rsm
from tiered.cluster.model import DeleteJob, DeleteJobState
from tiered.rsm import S3Credentials, S3ObjectDeleter
from tiered.security.spark_auth import SECRET_FILE_CONFIG, generate_secret, secured_settings

pytestmark = [pytest.mark.processes, pytest.mark.s3]

EXECUTOR_CREDENTIALS = S3Credentials(
    "AKIASECUREDEXECUTOR", "executor/secret+Kq2ExampleDoNotUse", source="tests"
)
REFUSED_APP = "tiered-without-the-secret"
_DRIVER_WITHOUT_SECRET = """
import sys
from pyspark.sql import SparkSession
(SparkSession.builder.master(sys.argv[1]).appName(sys.argv[2])
 .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
 .config("spark.cores.max", "1").getOrCreate())
"""


class SecuredSpark:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.secret = generate_secret()
        self.secret_file = base / "spark.secret"
        write_private_file(self.secret_file, f"{self.secret}\n".encode())
        self.cluster = SparkStandaloneCluster(
            base / "spark", workers=1, settings=secured_settings(self.secret)
        )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredSpark]:
    spark = SecuredSpark(tmp_path_factory.mktemp("secured-spark"))
    try:
        spark.cluster.start()
        yield spark
    finally:
        spark.cluster.stop()


def test_an_application_without_the_secret_is_refused_by_the_master(
    secured: SecuredSpark, tmp_path: Path
) -> None:
    master = secured.cluster.master
    stderr = tmp_path / "driver.err"
    with stderr.open("w") as err:
        driver = subprocess.Popen(
            [sys.executable, "-c", _DRIVER_WITHOUT_SECRET, master.url, REFUSED_APP],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
    try:
        poll_until(
            lambda: "Failed to connect to master" in stderr.read_text(errors="replace"),
            timeout=180,
            what="the driver without the secret to be refused by the master",
        )
        state = master_state(master.web_url)
        assert state is not None
        names = [a["name"] for a in state["activeapps"] + state["completedapps"]]
        assert REFUSED_APP not in names
    finally:
        driver.kill()
        driver.wait()


def controller_properties(
    secured: SecuredSpark, store: S3Store, proxy: S3FaultProxy, tmp_path: Path
) -> dict[str, str]:
    executors_file = write_credentials_file(tmp_path / "executors", EXECUTOR_CREDENTIALS)
    (tmp_path / "events").mkdir()
    return {
        "node.id": "100",
        "metadata.log.dir": str(tmp_path / "metadata"),
        "rlmm.sqlite.path": str(tmp_path / "rlmm.db"),
        "bulk.delete.fast.path.max.objects": "0",  # every delete on Spark
        SECRET_FILE_CONFIG: str(secured.secret_file),
        "spark.master": secured.cluster.master.url,
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": (tmp_path / "events").as_uri(),
        "spark.eventLog.compress": "false",  # read as text below
        # An S3 key's name that Spark's own redaction pattern misses.
        "spark.executorEnv.AWS_ACCESS_KEY_ID": EXECUTOR_CREDENTIALS.access_key_id,
        **store.config(proxy.url),
        "remote.storage.s3.executor.credentials.file": str(executors_file),
    }


class ShippedTasks:
    """Every function PySpark pickles to ship to executors, as the bytes it ships."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from pyspark import serializers

        self.pickled: list[bytes] = []
        dumps = serializers.CloudPickleSerializer.dumps

        def recording(serializer: Any, obj: Any) -> bytes:
            data: bytes = dumps(serializer, obj)
            self.pickled.append(data)
            return data

        monkeypatch.setattr(serializers.CloudPickleSerializer, "dumps", recording)


def command_lines() -> list[str]:
    lines = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                lines.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except OSError:
                continue  # exited meanwhile
    return lines


def files_text(*roots: Path) -> str:
    texts = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and path.name != "spark-defaults.conf":
                texts.append(path.read_bytes().decode(errors="replace"))
    return "\n".join(texts)


def test_the_bulk_delete_runs_on_the_secured_cluster_and_no_secret_shows(
    secured: SecuredSpark,
    s3_store: S3Store,
    s3_proxy: S3FaultProxy,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)  # the controller's log, Spark's and S3's clients' included
    shipped = ShippedTasks(monkeypatch)
    config = ControllerConfig.from_properties(
        controller_properties(secured, s3_store, s3_proxy, tmp_path)
    )
    bulk = wiring.create(config.node_id, config.remote, config.spark)
    assert bulk is not None
    remote: Remote | None = None
    try:
        remote = Remote(tmp_path, partitions=2, store=s3_store, storage=bulk.storage)
        kept_keys = remote.two_epochs(segments=4, kept_segments=1)
        s3_store.credentials_file.unlink()  # the executors read theirs
        s3_proxy.reset_counts()

        job = bulk.runner(Persisted()).run_job(DeleteJob(remote.topic, remote.topic_id, 1, 2))

        assert job.state is DeleteJobState.DONE and job.last_error == ""
        assert s3_store.keys() == kept_keys
        assert EXECUTOR_CREDENTIALS.access_key_id in s3_proxy.access_key_ids
        state = master_state(secured.cluster.master.web_url)
        assert state is not None
        assert [a["name"] for a in state["activeapps"]] == ["tiered-bulk-delete"]

        secrets = [
            secured.secret,
            TEST_CREDENTIALS.secret_access_key,
            EXECUTOR_CREDENTIALS.secret_access_key,
        ]
        assert shipped.pickled  # the tasks went through the recorder
        for data in shipped.pickled:
            for secret in [*secrets, TEST_CREDENTIALS.access_key_id]:
                assert secret.encode() not in data
        shown = {
            "command lines": "\n".join(command_lines()),
            "master /json/": str(state),
            "daemon logs and work dirs": files_text(secured.cluster.master.log_path.parent),
            "controller log": caplog.text,
        }
        for where, text in shown.items():
            for secret in secrets:
                assert secret not in text, f"a secret in the {where}"
        bulk.spark.stop()  # the event log is complete once the application ends
        events = files_text(tmp_path / "events")
        assert (
            "spark.authenticate.secret" in events
            and "spark.executorEnv.AWS_ACCESS_KEY_ID" in events
        )
        for secret in [*secrets, EXECUTOR_CREDENTIALS.access_key_id]:
            assert secret not in events, "a credential in the event log"
    finally:
        if remote is not None:
            remote.close()
        bulk.close()


def test_the_shipped_task_holds_no_credential(s3_store: S3Store) -> None:
    from pyspark import cloudpickle

    storage = rsm.create(s3_store.config())
    deleter = storage.object_deleter()
    assert isinstance(deleter, S3ObjectDeleter)
    assert deleter.settings.credentials == TEST_CREDENTIALS  # the controller holds them
    data = cloudpickle.dumps(spark_task(deleter, None, None))
    assert str(s3_store.credentials_file).encode() in data  # the file's path travels
    assert TEST_CREDENTIALS.secret_access_key.encode() not in data
    assert TEST_CREDENTIALS.access_key_id.encode() not in data
    storage.close()


@pytest.mark.parametrize(
    ("content", "mode", "reason"),
    [
        (None, 0o600, "can not be read"),
        ("\n", 0o600, "is empty"),
        ("s3cret\n", 0o644, "readable by others"),
    ],
)
def test_a_bad_secret_file_is_a_config_error_naming_the_key(
    tmp_path: Path, content: str | None, mode: int, reason: str
) -> None:
    path = tmp_path / "spark.secret"
    if content is not None:
        path.write_text(content, encoding="utf-8")
        path.chmod(mode)
    properties = {
        "node.id": "1",
        "metadata.log.dir": str(tmp_path / "metadata"),
        SECRET_FILE_CONFIG: str(path),
    }
    with pytest.raises(ValueError, match=r"bulk\.delete\.spark\.authenticate\.secret\.file") as e:
        ControllerConfig.from_properties(properties)
    assert reason in str(e.value) and "s3cret" not in str(e.value)
