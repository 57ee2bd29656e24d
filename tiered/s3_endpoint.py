"""An S3-API endpoint on loopback: moto's server (``python -m moto.server``) in its own process,
for tests and for ``tiered-cluster up --profile distributed``.

Moto keeps buckets and objects in memory: they are gone once the process stops. It accepts any
credentials (it does not check signatures), so the brokers' and controllers' credentials files
only need to be well formed; :data:`ENDPOINT_CREDENTIALS` are what this module itself uses.

An endpoint listens on ``127.0.0.1`` on a port chosen once (a free one unless given); its output
goes to ``log_path`` (default ``BASE_DIR/s3.log``) and its pid to ``pid_file`` if given. It counts
as started once ``GET /`` answers (ListBuckets). As with :mod:`tiered.zookeeper_server`, the child
dies with the thread that started it unless ``die_with_parent=False``, and ``detach()`` leaves it
running as a daemon (:mod:`tiered.child_process`).
"""

from __future__ import annotations

import configparser
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Self

from tiered.child_process import ChildProcess
from tiered.daemon_logging import log_tail
from tiered.ports import LOOPBACK, free_port
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
    "S3Endpoint",
    "S3EndpointError",
    "is_serving",
    "write_credentials_file",
]

ENDPOINT_CREDENTIALS = S3Credentials("tiered-endpoint", "tiered-endpoint", source="the endpoint")
_POLL_INTERVAL_S = 0.05
_LOG_TAIL_LINES = 40


class S3EndpointError(RuntimeError):
    """The S3 endpoint could not be started."""


def is_serving(url: str, timeout_s: float = 1.0) -> bool:
    """Whether an S3 endpoint answers ``GET /`` (ListBuckets) at ``url``."""
    try:
        with urllib.request.urlopen(f"{url}/", timeout=timeout_s) as response:
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


class S3Endpoint:
    """One moto S3 server on a loopback port; see the module docstring."""

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
    ) -> None:
        self._owns_dir = base_dir is None
        self.base_dir = Path(
            tempfile.mkdtemp(prefix="tiered-s3-") if base_dir is None else base_dir
        ).resolve()
        self._port_settled = port is not None
        self.port = port if port is not None else free_port()
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.die_with_parent = die_with_parent
        self.log_path = Path(log_path).resolve() if log_path else self.base_dir / "s3.log"
        self.pid_file = Path(pid_file).resolve() if pid_file is not None else None
        self._python = python
        self._child: ChildProcess | None = None
        self.last_start_seconds: float | None = None

    @property
    def host(self) -> str:
        return LOOPBACK

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: ``remote.storage.s3.endpoint.url``."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    @property
    def is_running(self) -> bool:
        return self._child is not None and self._child.is_running

    def start(self) -> None:
        """Starts the server and waits until it serves. A port chosen here that turns out to be
        taken is replaced by another free one (until the first successful start)."""
        if self.is_running:
            raise S3EndpointError(f"the S3 endpoint on port {self.port} is already running")
        attempts = 1 if self._port_settled else 3
        for attempt in range(attempts):
            if is_serving(self.url):
                if attempt + 1 == attempts:
                    raise S3EndpointError(
                        f"port {self.port} is already in use (an S3 endpoint answers at "
                        f"{self.url}); cannot start another there"
                    )
                self.port = free_port()
                continue
            try:
                self._start_once()
            except S3EndpointError:
                if attempt + 1 == attempts or "Address already in use" not in self.log_tail():
                    raise
                self.port = free_port()
            else:
                self._port_settled = True
                return

    def create_bucket(self, bucket: str, region: str | None = None) -> S3Settings:
        """Creates ``bucket`` (if missing) and returns settings that reach it here."""
        settings = S3Settings(bucket, "", self.url, region, ENDPOINT_CREDENTIALS)
        ensure_bucket(settings)
        return settings

    def stop(self) -> None:
        """SIGTERM the server, SIGKILL after ``stop_timeout_s``."""
        if self._child is not None:
            self._child.stop(self.stop_timeout_s)
            self._child = None

    def kill(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child = None

    def detach(self) -> int | None:
        """Leaves the server running on its own and forgets it; returns its pid. Create the
        endpoint with ``die_with_parent=False`` for this, and stop it later by its pid file."""
        child, self._child = self._child, None
        return child.detach() if child is not None else None

    def close(self) -> None:
        """Stops the server and removes its directory if this object created it."""
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start_once(self) -> None:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        command = [self._python, "-m", "moto.server", "-H", LOOPBACK, "-p", str(self.port)]
        started = time.monotonic()
        child = ChildProcess(
            command,
            log_path=self.log_path,
            cwd=self.base_dir,
            pid_file=self.pid_file,
            die_with_parent=self.die_with_parent,
        )
        self._child = child
        deadline = started + self.start_timeout_s
        try:
            while not is_serving(self.url, timeout_s=0.5):
                code = child.exit_code()
                if code is not None:
                    raise S3EndpointError(
                        f"the S3 endpoint on port {self.port} exited with code {code} during "
                        f"startup; log {self.log_path}:\n{self.log_tail()}"
                    )
                if time.monotonic() >= deadline:
                    raise S3EndpointError(
                        f"the S3 endpoint on port {self.port} did not serve within "
                        f"{self.start_timeout_s}s; log {self.log_path}:\n{self.log_tail()}"
                    )
                time.sleep(_POLL_INTERVAL_S)
        except BaseException:
            self.kill()
            raise
        self.last_start_seconds = time.monotonic() - started
