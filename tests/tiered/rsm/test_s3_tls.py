"""S3 over TLS: a moto server serving HTTPS with a certificate from a CA of the test's own, and the
fsspec RemoteStorageManager reaching it with ``remote.storage.s3.ca.file`` (copy, read, delete, a
pickled deleter as the bulk delete's executors run it); without that key the call fails at once
with an error naming it; a bad CA file is refused as configuration."""

from __future__ import annotations

import pickle
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launch.s3_endpoint import EndpointTls, S3Endpoint, write_credentials_file
from cli.security.certs import CertificateAuthority
from tests.support.s3 import TEST_CREDENTIALS
from tests.tiered.rsm.test_rsm_fsspec import LOG, TP, segment_data, segment_meta
from tiered import rsm
from tiered.api import DeleteOutcome, RemoteStorageException
from tiered.rsm import FsspecRemoteStorageManager

pytestmark = [pytest.mark.s3, pytest.mark.processes]

CA_FILE = "remote.storage.s3.ca.file"


@pytest.fixture(scope="module")
def https_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    directory = tmp_path_factory.mktemp("s3-tls")
    ca = CertificateAuthority.create("CN=s3-test-ca,O=tiered")
    ca_file = ca.write_certificate(directory / "ca.pem")
    served = ca.issue("CN=s3,O=tiered").write_pem_files(directory, "s3")
    endpoint = S3Endpoint(
        directory / "endpoint",
        tls=EndpointTls(served.certificate, served.private_key, ca_file),
    )
    endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


def config_of(endpoint: S3Endpoint, tmp_path: Path, **extra: str) -> dict[str, str]:
    bucket = f"tiered-{uuid.uuid4().hex[:16]}"
    endpoint.create_bucket(bucket)
    credentials = write_credentials_file(tmp_path / "s3-credentials", TEST_CREDENTIALS)
    return {
        "remote.storage.root": f"s3://{bucket}/cluster/remote",
        "remote.storage.s3.endpoint.url": endpoint.url,
        "remote.storage.s3.credentials.file": str(credentials),
        "remote.storage.retry.backoff.ms": "2",
        **extra,
    }


def storage_of(config: dict[str, str]) -> FsspecRemoteStorageManager:
    storage = rsm.create(config)
    assert isinstance(storage, FsspecRemoteStorageManager)
    return storage


def test_copy_read_and_delete_over_https_with_the_ca_file(
    https_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    assert https_endpoint.url.startswith("https://")
    assert https_endpoint.ca_file is not None
    storage = storage_of(
        config_of(https_endpoint, tmp_path, **{CA_FILE: str(https_endpoint.ca_file)})
    )
    meta = segment_meta()
    storage.copy_log_segment_data(meta, segment_data(tmp_path))
    assert storage.fetch_log_segment(meta, 0) == LOG
    keys = storage.object_keys(TP)
    assert len(keys) == 6
    deleter = pickle.loads(pickle.dumps(storage.object_deleter()))  # as an executor gets it
    assert deleter.delete_objects(keys) == DeleteOutcome(6)
    assert storage.object_keys(TP) == []


def test_without_the_ca_file_a_call_fails_at_once_naming_the_key(
    https_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    config = config_of(https_endpoint, tmp_path, **{"remote.storage.retry.backoff.ms": "1000"})
    storage = storage_of(config)
    started = time.monotonic()
    with pytest.raises(RemoteStorageException) as info:
        storage.copy_log_segment_data(segment_meta(), segment_data(tmp_path))
    assert CA_FILE in str(info.value) and "not trusted" in str(info.value)
    # Not retried: ten attempts would wait at least 0.5 s each.
    assert time.monotonic() - started < 5
    outcome = storage.object_deleter().delete_objects(["a"])
    assert outcome.failed == 1 and CA_FILE in (outcome.first_error or "")


def test_a_ca_file_of_another_ca_is_not_trusted(https_endpoint: S3Endpoint, tmp_path: Path) -> None:
    other = CertificateAuthority.create("CN=another-ca").write_certificate(tmp_path / "other.pem")
    storage = storage_of(config_of(https_endpoint, tmp_path, **{CA_FILE: str(other)}))
    with pytest.raises(RemoteStorageException, match=r"remote\.storage\.s3\.ca\.file"):
        storage.list_tiered_epochs(TP)


@pytest.mark.parametrize(
    ("content", "reason"),
    [(None, "can not be read"), ("not a certificate\n", "holds no PEM certificate")],
)
def test_a_bad_ca_file_is_a_config_error_naming_the_key(
    https_endpoint: S3Endpoint, tmp_path: Path, content: str | None, reason: str
) -> None:
    path = tmp_path / "ca.pem"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=r"remote\.storage\.s3\.ca\.file") as info:
        rsm.create(config_of(https_endpoint, tmp_path, **{CA_FILE: str(path)}))
    assert reason in str(info.value) and str(path) in str(info.value)
