"""A real S3 endpoint for tests: one moto server per test run (``cli.launch.s3_endpoint``), a fresh
bucket per test, the remote storage config that reaches it (directly or through the run's
:class:`~tests.support.s3_fault_proxy.S3FaultProxy`, whose plan and counts each test starts
afresh) with credentials from a credentials file.

The fixtures are registered in tests/conftest.py; tests that use them are marked ``s3``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cli.launch.s3_endpoint import S3Endpoint, write_credentials_file
from tests.support.s3_fault_proxy import FaultPlan, S3FaultProxy
from tiered.rsm.s3 import S3Credentials, S3Settings, ensure_bucket

__all__ = [
    "FAST_RETRIES",
    "TEST_CREDENTIALS",
    "S3Store",
    "new_store",
    "s3_endpoint",
    "s3_proxy",
    "s3_store",
]

TEST_CREDENTIALS = S3Credentials(
    "AKIATIEREDTESTKEY01", "tiered/test+secret/Zq8w3ExampleKeyDoNotUse", source="tests"
)
FAST_RETRIES = {
    "remote.storage.retry.max.attempts": "10",
    "remote.storage.retry.backoff.ms": "2",
    "remote.storage.retry.backoff.max.ms": "40",
}
"""Retry settings that keep tests under faults quick (the schedule's shape is unchanged)."""


@dataclass
class S3Store:
    """One bucket and key prefix of the test endpoint, as remote storage."""

    endpoint_url: str
    bucket: str
    prefix: str
    credentials_file: Path

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def settings(self) -> S3Settings:
        """Direct access to the endpoint (never through a proxy), for seeding and checking."""
        return S3Settings(self.bucket, self.prefix, self.endpoint_url, None, TEST_CREDENTIALS)

    def config(self, endpoint_url: str | None = None, **extra: str) -> dict[str, str]:
        """``rsm.create``'s config for this store, through ``endpoint_url`` (a proxy) if given."""
        return {
            "remote.storage.root": self.root,
            "remote.storage.s3.endpoint.url": endpoint_url or self.endpoint_url,
            "remote.storage.s3.credentials.file": str(self.credentials_file),
            **FAST_RETRIES,
            **extra,
        }

    @functools.cached_property
    def fs(self) -> Any:
        return self.settings.filesystem()

    def write(self, key: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.settings.root_path}/{key}", data)

    def write_many(self, objects: dict[str, bytes]) -> None:
        base = self.settings.root_path
        self.fs.pipe({f"{base}/{key}": data for key, data in objects.items()})

    def keys(self) -> set[str]:
        """Every key below the prefix, relative to it."""
        base = self.settings.root_path + "/"
        return {str(p)[len(base) :] for p in self.fs.find(base)}


def new_store(endpoint: S3Endpoint, directory: Path) -> S3Store:
    """A new bucket on ``endpoint``, a credentials file in ``directory``."""
    bucket = f"tiered-{uuid.uuid4().hex[:16]}"
    credentials_file = write_credentials_file(directory / "s3-credentials", TEST_CREDENTIALS)
    store = S3Store(endpoint.url, bucket, "cluster/remote", credentials_file)
    ensure_bucket(store.settings, store.fs)
    return store


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Endpoint]:
    """One moto server for the whole run. Tests must not stop it (they use their own)."""
    endpoint = S3Endpoint(tmp_path_factory.mktemp("s3-endpoint"))
    endpoint.start()
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture
def s3_store(s3_endpoint: S3Endpoint, tmp_path: Path) -> S3Store:
    """A fresh bucket on the shared endpoint."""
    if not s3_endpoint.is_running:
        pytest.fail("the session S3 endpoint is down (did a test stop it?)")
    return new_store(s3_endpoint, tmp_path)


@pytest.fixture(scope="session")
def _s3_session_proxy(s3_endpoint: S3Endpoint) -> Iterator[S3FaultProxy]:
    with S3FaultProxy(s3_endpoint.url, seed=22) as proxy:
        yield proxy


@pytest.fixture
def s3_proxy(_s3_session_proxy: S3FaultProxy) -> S3FaultProxy:
    """The fault proxy in front of the shared endpoint, with no faults, zero counts and its
    random draws from the start of its seed's sequence."""
    _s3_session_proxy.set_plan(FaultPlan())
    _s3_session_proxy.reset_counts()
    _s3_session_proxy.reseed()
    return _s3_session_proxy
