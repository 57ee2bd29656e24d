"""An S3-API endpoint on loopback: moto's server (``python -m moto.server``) in its own process,
for tests and for ``tiered-cluster up --profile distributed``.

Moto keeps buckets and objects in memory: they are gone once the process stops. It accepts any
credentials (it does not check signatures), so the brokers' and controllers' credentials files
only need to be well formed; :data:`ENDPOINT_CREDENTIALS` are what this module itself uses.

An endpoint listens on ``127.0.0.1`` (or the loopback address ``host``) on a port chosen once (a
free one unless given), over HTTPS when given ``tls`` (a :class:`EndpointTls`: its certificate and
key, and the CA file that verifies it: ``remote.storage.s3.ca.file``); its output goes to
``log_path`` (default ``BASE_DIR/s3.log``) and its pid to ``pid_file`` if given. It counts as
started once ``GET /`` answers (ListBuckets). As with :mod:`cli.launch.zookeeper`, the child dies
with the thread that started it unless ``die_with_parent=False``, ``start()`` refuses a port
something listens on (a port chosen here is replaced instead), and ``detach()`` leaves it running
as a daemon (:mod:`cli.launch.server_launcher`).
"""

from __future__ import annotations

import configparser
import ssl
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from cli.launch.ports import LOOPBACK
from cli.launch.server_launcher import SecondsAlias, ServerLauncher, base_directory
from tiered.rsm.s3 import (
    ACCESS_KEY_OPTION,
    DEFAULT_PROFILE,
    SECRET_KEY_OPTION,
    SESSION_TOKEN_OPTION,
    S3Credentials,
    S3Settings,
    ensure_bucket,
)

__all__ = [
    "ENDPOINT_CREDENTIALS",
    "EndpointTls",
    "S3Endpoint",
    "S3EndpointError",
    "is_serving",
    "write_credentials_file",
]

ENDPOINT_CREDENTIALS = S3Credentials("tiered-endpoint", "tiered-endpoint", source="the endpoint")


class S3EndpointError(RuntimeError):
    """The S3 endpoint could not be started."""


@dataclass(frozen=True)
class EndpointTls:
    """What an HTTPS endpoint serves (``certificate``, ``private_key``: PEM files) and the PEM
    file of the CA that issued it, which clients verify it against."""

    certificate: Path
    private_key: Path
    ca_file: Path


def is_serving(url: str, timeout_s: float = 1.0, ca_file: Path | None = None) -> bool:
    """Whether an S3 endpoint answers ``GET /`` (ListBuckets) at ``url`` (an ``https://`` one
    verified against ``ca_file``)."""
    context = ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else None
    try:
        with urllib.request.urlopen(f"{url}/", timeout=timeout_s, context=context) as response:
            return bool(response.status == 200 and b"ListAllMyBucketsResult" in response.read())
    except (OSError, urllib.error.URLError):
        return False


def write_credentials_file(
    path: Path, credentials: S3Credentials, profile: str = DEFAULT_PROFILE
) -> Path:
    """Writes ``credentials`` as an AWS shared-credentials file readable by its owner only."""
    parser = configparser.ConfigParser(interpolation=None)
    parser[profile] = {
        ACCESS_KEY_OPTION: credentials.access_key_id,
        SECRET_KEY_OPTION: credentials.secret_access_key,
    }
    if credentials.session_token:
        parser[profile][SESSION_TOKEN_OPTION] = credentials.session_token
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.chmod(0o600)
    with path.open("w", encoding="utf-8") as f:
        parser.write(f)
    return path


class S3Endpoint(ServerLauncher):
    """One moto S3 server on a loopback port; see the module docstring."""

    error = S3EndpointError
    server_name = "the S3 endpoint"

    def __init__(
        self,
        base_dir: Path | str | None = None,
        *,
        port: int | None = None,
        start_timeout_s: float = 30.0,
        stop_timeout_s: float = 10.0,
        die_with_parent: bool = True,
        log_path: Path | str | None = None,
        pid_file: Path | str | None = None,
        python: str = sys.executable,
        host: str = LOOPBACK,
        tls: EndpointTls | None = None,
    ) -> None:
        self.base_dir = base_directory(base_dir, "tiered-s3-")
        self.tls = tls
        super().__init__(
            port=port,
            log_path=Path(log_path).resolve() if log_path else self.base_dir / "s3.log",
            pid_file=pid_file,
            start_timeout=start_timeout_s,
            stop_timeout=stop_timeout_s,
            die_with_parent=die_with_parent,
            owned_dir=self.base_dir if base_dir is None else None,
            host=host,
        )
        self._python = python

    start_timeout_s = SecondsAlias("start_timeout")
    stop_timeout_s = SecondsAlias("stop_timeout")

    @property
    def url(self) -> str:
        """``http(s)://HOST:PORT``: ``remote.storage.s3.endpoint.url``."""
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def ca_file(self) -> Path | None:
        """What verifies this endpoint's certificate (``remote.storage.s3.ca.file``)."""
        return self.tls.ca_file if self.tls is not None else None

    def create_bucket(self, bucket: str, region: str | None = None) -> S3Settings:
        """Creates ``bucket`` (if missing) and returns settings that reach it here."""
        ca_file = str(self.ca_file) if self.ca_file is not None else None
        settings = S3Settings(bucket, "", self.url, region, ENDPOINT_CREDENTIALS, ca_file=ca_file)
        ensure_bucket(settings)
        return settings

    def _spawn(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        command = [self._python, "-m", "moto.server", "-H", self.host, "-p", str(self.port)]
        if self.tls is not None:
            command += ["--ssl-cert", str(self.tls.certificate)]
            command += ["--ssl-key", str(self.tls.private_key)]
        self._spawn_child(command, cwd=self.base_dir)

    def _serves_now(self) -> bool:
        return is_serving(self.url, timeout_s=0.5, ca_file=self.ca_file)
