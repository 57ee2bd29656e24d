"""The S3 endpoint launcher (cli.launch.s3_endpoint): a moto server in its own process, as
``tiered-cluster up`` will run it, with a pid file, a log, a refusal of a port in use, and
``detach()`` for a daemon."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cli.launch.s3_endpoint import (
    ENDPOINT_CREDENTIALS,
    S3Endpoint,
    S3EndpointError,
    is_serving,
    write_credentials_file,
)
from tests.support.polling import poll_until
from tests.tiered.rsm.test_rsm_fsspec import LOG, segment_data, segment_meta
from tiered import rsm
from tiered.rsm.s3 import read_credentials_file

pytestmark = pytest.mark.s3


def test_an_endpoint_serves_keeps_a_pid_file_and_refuses_a_taken_port(tmp_path: Path) -> None:
    pid_file = tmp_path / "run" / "s3.pid"
    endpoint = S3Endpoint(tmp_path / "s3", pid_file=pid_file)
    endpoint.start()
    try:
        assert endpoint.is_running and is_serving(endpoint.url)
        assert pid_file.read_text(encoding="utf-8").strip() == str(endpoint.pid)
        settings = endpoint.create_bucket("tiered-launcher")
        assert endpoint.create_bucket("tiered-launcher") == settings  # exists: fine
        assert settings.filesystem().ls("tiered-launcher") == []
        other = S3Endpoint(tmp_path / "other", port=endpoint.port)
        with pytest.raises(S3EndpointError, match=f"port {endpoint.port} is already in use"):
            other.start()
        assert endpoint.log_path == tmp_path / "s3" / "s3.log" and endpoint.log_path.exists()
    finally:
        endpoint.stop()
    assert not endpoint.is_running and not pid_file.exists()
    assert not is_serving(endpoint.url)


def test_a_detached_endpoint_outlives_its_handle(tmp_path: Path) -> None:
    pid_file = tmp_path / "s3.pid"
    endpoint = S3Endpoint(tmp_path, die_with_parent=False, pid_file=pid_file)
    endpoint.start()
    pid = endpoint.detach()
    assert pid is not None
    try:
        endpoint.stop()  # forgotten: no effect
        assert is_serving(endpoint.url) and pid_file.exists()
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)  # our child still: reap it
    poll_until(lambda: not is_serving(endpoint.url), what="the detached endpoint to stop")


def test_credentials_files_round_trip(tmp_path: Path) -> None:
    path = write_credentials_file(tmp_path / "credentials", ENDPOINT_CREDENTIALS, profile="x")
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_credentials_file(path, "x") == ENDPOINT_CREDENTIALS


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1"])
def test_buckets_and_objects_in_a_region(
    s3_endpoint: S3Endpoint, tmp_path: Path, region: str
) -> None:
    # s3fs's mkdir sends LocationConstraint=us-east-1, which S3 (and moto) refuse: the helper
    # states a location only outside us-east-1.
    bucket = f"tiered-{region}"
    s3_endpoint.create_bucket(bucket, region=region)
    credentials = write_credentials_file(tmp_path / "credentials", ENDPOINT_CREDENTIALS)
    storage = rsm.create(
        {
            "remote.storage.root": f"s3://{bucket}/p",
            "remote.storage.s3.endpoint.url": s3_endpoint.url,
            "remote.storage.s3.region": region,
            "remote.storage.s3.credentials.file": str(credentials),
        }
    )
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    assert storage.fetch_log_segment(meta, 0, 9) == LOG[:10]
