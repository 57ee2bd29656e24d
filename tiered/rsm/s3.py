"""S3 for the fsspec RemoteStorageManager: its settings, its credentials and its filesystem.

``remote.storage.root=s3://BUCKET/PREFIX`` selects it, with these keys (broker and controller):

- ``remote.storage.s3.endpoint.url``: ``http(s)://host[:port]`` of an S3-API endpoint (default:
  AWS's endpoint of the region);
- ``remote.storage.s3.region``: the signing region (default: botocore's resolution);
- ``remote.storage.s3.credentials.file``: an AWS shared-credentials file: a ``[default]`` section
  (or the profile below) with ``aws_access_key_id``, ``aws_secret_access_key`` and optionally
  ``aws_session_token``;
- ``remote.storage.s3.credentials.profile``: the section to read (default ``default``);
- ``remote.storage.s3.executor.credentials.file``: the credentials file the bulk delete's Spark
  executors read on their own host (default: the path of ``remote.storage.s3.credentials.file``);
- ``remote.storage.s3.ca.file``: a PEM file of the CA certificates an ``https://`` endpoint's
  certificate is verified against (default: the system's trust store);
- ``remote.storage.s3.connect.timeout.ms``: how long one connection attempt may take (default
  10000);
- ``remote.storage.s3.request.timeout.ms``: how long one read of an answer may wait for bytes
  (default 30000).

Without a credentials file, ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (and
``AWS_SESSION_TOKEN``) of the environment are used; without those either, botocore's own chain
(an instance role, ...). Credentials are read once, where the storage is configured, and never
leave that process: a pickled :class:`S3Settings` (the bulk delete's Spark task ships one inside
its deleter) carries the credentials file's path and not the credentials, and the process that
unpickles it (an executor) reads that file on its own host, or without one uses its own
environment. They never appear in a repr, a log line or an error message: texts built from remote
errors go through :meth:`S3Settings.redact`. An endpoint whose certificate is not trusted fails
with an error naming ``remote.storage.s3.ca.file`` (:func:`describe_error`), at once (it is not
transient).

One retry loop: s3fs retries SlowDown and connection errors itself and botocore retries again
underneath; both are set to a single attempt here (s3fs's ``retries`` attribute, botocore's
``total_max_attempts``), and the callers retry transient errors (:func:`is_transient`) with
their :class:`~tiered.retry.RetryPolicy`. Below them aiohttp resends an idempotent request (GET,
PUT, DELETE) once, at once, when its connection breaks before the answer: that is how a client
recovers a pooled connection the server had closed, not a backoff, and it stays.

Both timeouts bound one attempt (an upload's body is sent without waiting for a ``100 Continue``,
which nothing times out), so that an endpoint that stops answering (a network partition
drops packets: no error comes back) fails the call after the retry policy's attempts instead of
holding the copier, a remote read or a bulk delete for botocore's minute per attempt.

A filesystem's connections come from the process's ``source.address`` (``tiered.source_address``)
when it has one: a daemon's, set by its ``main``; an executor of the bulk delete has none.
"""

from __future__ import annotations

import asyncio
import configparser
import os
import re
import socket
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tiered import source_address
from tiered.rsm.settings import ROOT_CONFIG

__all__ = [
    "CA_FILE_CONFIG",
    "CONNECT_TIMEOUT_CONFIG",
    "CREDENTIALS_FILE_CONFIG",
    "CREDENTIALS_PROFILE_CONFIG",
    "ENDPOINT_URL_CONFIG",
    "EXECUTOR_CREDENTIALS_FILE_CONFIG",
    "REGION_CONFIG",
    "REQUEST_TIMEOUT_CONFIG",
    "TRANSIENT_ERROR_CODES",
    "S3Credentials",
    "S3Settings",
    "check_ca_file",
    "describe_error",
    "ensure_bucket",
    "error_code",
    "is_s3_url",
    "is_transient",
    "is_untrusted_certificate",
    "read_credentials_file",
    "s3_settings_from_config",
]

ENDPOINT_URL_CONFIG = "remote.storage.s3.endpoint.url"
REGION_CONFIG = "remote.storage.s3.region"
CREDENTIALS_FILE_CONFIG = "remote.storage.s3.credentials.file"
CREDENTIALS_PROFILE_CONFIG = "remote.storage.s3.credentials.profile"
CONNECT_TIMEOUT_CONFIG = "remote.storage.s3.connect.timeout.ms"
REQUEST_TIMEOUT_CONFIG = "remote.storage.s3.request.timeout.ms"
DEFAULT_CONNECT_TIMEOUT_MS = 10_000
DEFAULT_REQUEST_TIMEOUT_MS = 30_000
EXECUTOR_CREDENTIALS_FILE_CONFIG = "remote.storage.s3.executor.credentials.file"
CA_FILE_CONFIG = "remote.storage.s3.ca.file"
DEFAULT_PROFILE = "default"

ACCESS_KEY_OPTION = "aws_access_key_id"
SECRET_KEY_OPTION = "aws_secret_access_key"
SESSION_TOKEN_OPTION = "aws_session_token"
ENV_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
ENV_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_SESSION_TOKEN = "AWS_SESSION_TOKEN"

S3_SCHEMES = ("s3", "s3a")
DEFAULT_POOL_CONNECTIONS = 32
"""A broker's copier, expiration and reader threads share its storage's connections."""
TRANSIENT_ERROR_CODES = frozenset(
    {
        "SlowDown",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequests",
    }
)
"""S3 error codes (whole requests, or single keys of a DeleteObjects answer) worth retrying."""

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_REGION = re.compile(r"[a-z0-9][a-z0-9-]*")
_HIDDEN = "***"


@dataclass(frozen=True, repr=False)
class S3Credentials:
    """An access key pair (and session token). ``source`` says where it came from, for humans;
    the repr shows only that."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None
    source: str = field(default="given", compare=False)

    def __repr__(self) -> str:
        return f"S3Credentials(from {self.source})"

    def secrets(self) -> tuple[str, ...]:
        return tuple(
            s for s in (self.access_key_id, self.secret_access_key, self.session_token) if s
        )


@dataclass(frozen=True, repr=False)
class S3Settings:
    """Where and how to reach one S3 root. ``credentials`` are never shown, and never pickled:
    a pickled copy keeps ``credentials_file`` (a path) and the process that unpickles it reads
    that file there (:meth:`resolved_credentials`)."""

    bucket: str
    prefix: str = ""  # key prefix below the bucket, without leading or trailing "/"
    endpoint_url: str | None = None
    region: str | None = None
    credentials: S3Credentials | None = None  # None: credentials_file, else botocore's chain
    credentials_file: str | None = None
    """The AWS shared-credentials file a pickled copy reads on the host that unpickles it."""
    credentials_profile: str = DEFAULT_PROFILE
    ca_file: str | None = None
    """PEM CA certificates an ``https://`` endpoint is verified against (None: the system's)."""
    connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS
    request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS

    def __repr__(self) -> str:
        return (
            f"S3Settings(bucket={self.bucket!r}, prefix={self.prefix!r}, "
            f"endpoint_url={self.endpoint_url!r}, region={self.region!r}, "
            f"credentials={self.credentials!r}, credentials_file={self.credentials_file!r}, "
            f"ca_file={self.ca_file!r}, connect_timeout_ms={self.connect_timeout_ms}, "
            f"request_timeout_ms={self.request_timeout_ms})"
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The secret stays in the process that read it: a Spark task holding these settings is
        # serialized, sent over the network and written to executors' disks.
        return (
            S3Settings,
            (
                self.bucket,
                self.prefix,
                self.endpoint_url,
                self.region,
                None,
                self.credentials_file,
                self.credentials_profile,
                self.ca_file,
                self.connect_timeout_ms,
                self.request_timeout_ms,
            ),
        )

    def resolved_credentials(self) -> S3Credentials | None:
        """``credentials``, else those of ``credentials_file`` read here (``ValueError`` names
        the key), else None: botocore's chain (this process's environment, an instance role)."""
        if self.credentials is not None:
            return self.credentials
        if self.credentials_file is not None:
            return read_credentials_file(self.credentials_file, self.credentials_profile)
        return None

    @property
    def root_path(self) -> str:
        """``bucket/prefix``: the root as s3fs paths spell it."""
        return f"{self.bucket}/{self.prefix}" if self.prefix else self.bucket

    def redact(self, text: str) -> str:
        """``text`` with every credential replaced by ``***``."""
        if self.credentials is not None:
            for secret in self.credentials.secrets():
                text = text.replace(secret, _HIDDEN)
        return text

    def filesystem(self, *, pool_connections: int = DEFAULT_POOL_CONNECTIONS) -> Any:
        """A new s3fs filesystem for these settings, with its own and botocore's retries off and
        no listings cache (other processes write the same prefixes); ``pool_connections``: the
        HTTP connections it keeps, one per thread that may use it at once."""
        from s3fs import S3FileSystem  # noqa: PLC0415 - s3fs only where S3 is used

        credentials = self.resolved_credentials()
        client_kwargs: dict[str, Any] = {"region_name": self.region} if self.region else {}
        if self.ca_file is not None:
            client_kwargs["verify"] = self.ca_file
        fs = S3FileSystem(
            session=_botocore_session(),
            endpoint_url=self.endpoint_url,
            key=credentials.access_key_id if credentials else None,
            secret=credentials.secret_access_key if credentials else None,
            token=credentials.session_token if credentials else None,
            client_kwargs=client_kwargs,
            config_kwargs={
                # botocore's retries: one attempt in all ("total_max_attempts" counts the first).
                "retries": {"total_max_attempts": 1, "mode": "standard"},
                "max_pool_connections": pool_connections,
                "connect_timeout": self.connect_timeout_ms / 1000,
                "read_timeout": self.request_timeout_ms / 1000,
                **_connector_args(),
            },
            use_listings_cache=False,
            skip_instance_cache=True,  # this instance alone gets the setting below
        )
        fs.retries = 1  # s3fs's own retry loop (several tries, its own backoff) runs once
        return fs


def _connector_args() -> dict[str, Any]:
    """aiohttp's connector settings under aiobotocore: its sockets from the process's source
    address, when it has one."""
    if source_address.chosen() is None:
        return {}
    return {"connector_args": {"socket_factory": _source_bound_socket}}


def _source_bound_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """aiohttp's ``socket_factory``: a socket for one of the endpoint's addresses
    (``getaddrinfo``'s family, type, protocol, ...), bound to the process's source address."""
    family, type_, proto = addr_info[:3]
    return source_address.bound_socket(family, type_, proto)


_sessions: dict[int, Any] = {}
_sessions_lock = threading.Lock()


def _botocore_session() -> Any:
    """One aiobotocore session per process: each loads botocore's S3 model (a costly parse)
    once for all the clients made from it. Credentials are given to each client, not to it."""
    from aiobotocore.session import AioSession  # noqa: PLC0415 - only where S3 is used
    from botocore.handlers import add_expect_header  # noqa: PLC0415

    with _sessions_lock:
        session = _sessions.get(os.getpid())
        if session is None:
            session = _sessions[os.getpid()] = AioSession()
            # No "Expect: 100-continue" on uploads: aiohttp waits for the 100 Continue answer
            # with no timeout, and starts a request's read timeout only once its body is
            # written, so an endpoint that stopped answering held every upload forever.
            session.unregister("before-call.s3", add_expect_header)
        return session


def is_s3_url(root: str) -> bool:
    return urlsplit(root.strip()).scheme.lower() in S3_SCHEMES


def _text(config: Mapping[str, object], key: str) -> str | None:
    raw = config.get(key)
    if raw is None:
        return None
    value = str(raw).strip()
    return value or None


def s3_settings_from_config(root: str, config: Mapping[str, object]) -> S3Settings:
    """The settings of ``root`` (an ``s3://`` URL) and the ``remote.storage.s3.*`` keys;
    ``ValueError`` names the offending key (and never shows a credential)."""
    if "@" in root:  # user:secret@bucket; a secret may hold "/", so the URL is not parsed
        raise ValueError(
            f"{ROOT_CONFIG} must not carry credentials (it holds '@'); give them in "
            f"{CREDENTIALS_FILE_CONFIG} or the AWS environment variables"
        )
    parts = urlsplit(root.strip())
    bucket = parts.netloc
    if not bucket:
        raise ValueError(f"{ROOT_CONFIG}={root!r} names no bucket; expected s3://BUCKET[/PREFIX]")
    if not _BUCKET.fullmatch(bucket):
        raise ValueError(
            f"{ROOT_CONFIG}={root!r}: bucket {bucket!r} is not a valid bucket name (3 to 63 "
            "lowercase letters, digits, dots and hyphens)"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"{ROOT_CONFIG}={root!r}: expected s3://BUCKET[/PREFIX], no query")
    prefix = parts.path.strip("/")
    endpoint = _text(config, ENDPOINT_URL_CONFIG)
    if endpoint is not None:
        endpoint_parts = urlsplit(endpoint)
        if endpoint_parts.scheme not in ("http", "https") or not endpoint_parts.hostname:
            raise ValueError(
                f"{ENDPOINT_URL_CONFIG}={endpoint!r} is not valid; expected http://HOST[:PORT] "
                "or https://HOST[:PORT]"
            )
        if endpoint_parts.username is not None or endpoint_parts.password is not None:
            raise ValueError(f"{ENDPOINT_URL_CONFIG} must not carry credentials")
        endpoint = endpoint.rstrip("/")
    region = _text(config, REGION_CONFIG)
    if region is not None and not _REGION.fullmatch(region):
        raise ValueError(
            f"{REGION_CONFIG}={region!r} is not valid; expected a region name such as us-east-1"
        )
    profile = _text(config, CREDENTIALS_PROFILE_CONFIG) or DEFAULT_PROFILE
    credentials_file = _text(config, CREDENTIALS_FILE_CONFIG)
    if credentials_file is not None:
        credentials: S3Credentials | None = read_credentials_file(credentials_file, profile)
    else:
        credentials = _environment_credentials()
    executor_file = _text(config, EXECUTOR_CREDENTIALS_FILE_CONFIG) or credentials_file
    ca_file = _text(config, CA_FILE_CONFIG)
    if ca_file is not None:
        check_ca_file(ca_file)
    return S3Settings(
        bucket,
        prefix,
        endpoint,
        region,
        credentials,
        executor_file,
        profile,
        ca_file,
        _timeout_ms(config, CONNECT_TIMEOUT_CONFIG, DEFAULT_CONNECT_TIMEOUT_MS),
        _timeout_ms(config, REQUEST_TIMEOUT_CONFIG, DEFAULT_REQUEST_TIMEOUT_MS),
    )


_PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"


def check_ca_file(path: str) -> None:
    """``ValueError`` naming :data:`CA_FILE_CONFIG` unless ``path`` is a readable file holding
    at least one PEM certificate."""
    where = f"{CA_FILE_CONFIG}={path!r}"
    try:
        text = Path(path).read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else "not a PEM text file"
        raise ValueError(f"{where} can not be read: {reason}") from None
    if _PEM_CERTIFICATE not in text:
        raise ValueError(f"{where} holds no PEM certificate ({_PEM_CERTIFICATE})")


def _timeout_ms(config: Mapping[str, object], key: str, default: int) -> int:
    raw = _text(config, key)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{key}={raw!r} is not valid; expected a whole number of ms >= 1")
    return value


def read_credentials_file(path: str | Path, profile: str = DEFAULT_PROFILE) -> S3Credentials:
    """The credentials of ``profile`` in an AWS shared-credentials file. ``ValueError`` names
    :data:`CREDENTIALS_FILE_CONFIG`, the file and what is wrong, never a value of the file
    (configparser's own messages quote the offending line, so they are not passed on)."""
    where = f"{CREDENTIALS_FILE_CONFIG}={str(path)!r}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise ValueError(f"{where} can not be read: {reason}") from None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as e:
        line = getattr(e, "lineno", None)
        at = f" (line {line})" if line else ""
        raise ValueError(
            f"{where} is not an AWS shared-credentials file{at}: expected [{profile}] with "
            f"{ACCESS_KEY_OPTION} and {SECRET_KEY_OPTION}"
        ) from None
    if not parser.has_section(profile):
        sections = ", ".join(parser.sections()) or "none"
        raise ValueError(
            f"{where} has no [{profile}] section (sections: {sections}); set "
            f"{CREDENTIALS_PROFILE_CONFIG} or add [{profile}]"
        )
    section = parser[profile]
    values = {
        option: (section.get(option) or "").strip()
        for option in (ACCESS_KEY_OPTION, SECRET_KEY_OPTION, SESSION_TOKEN_OPTION)
    }
    missing = [o for o in (ACCESS_KEY_OPTION, SECRET_KEY_OPTION) if not values[o]]
    if missing:
        raise ValueError(f"{where}: [{profile}] lacks {' and '.join(missing)}")
    return S3Credentials(
        values[ACCESS_KEY_OPTION],
        values[SECRET_KEY_OPTION],
        values[SESSION_TOKEN_OPTION] or None,
        source=f"{path} [{profile}]",
    )


def _environment_credentials() -> S3Credentials | None:
    access = os.environ.get(ENV_ACCESS_KEY, "").strip()
    secret = os.environ.get(ENV_SECRET_KEY, "").strip()
    if not access and not secret:
        return None
    if not (access and secret):
        given, lacking = (
            (ENV_ACCESS_KEY, ENV_SECRET_KEY) if access else (ENV_SECRET_KEY, ENV_ACCESS_KEY)
        )
        raise ValueError(
            f"the environment sets {given} but not {lacking}; set both, or neither and give "
            f"{CREDENTIALS_FILE_CONFIG}"
        )
    token = os.environ.get(ENV_SESSION_TOKEN, "").strip() or None
    return S3Credentials(access, secret, token, source="the environment")


# -- errors ---------------------------------------------------------------------------------------


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def error_code(error: BaseException) -> str | None:
    """The S3 error code of a botocore ``ClientError`` in ``error``'s chain (s3fs translates
    them into ``OSError`` with the ClientError as cause), or None."""
    for e in _chain(error):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            return str(code) if code is not None else None
    return None


def is_untrusted_certificate(error: BaseException) -> bool:
    """Whether ``error`` (in its chain) is a TLS certificate that failed verification: the
    endpoint's certificate is not from a CA this process trusts."""
    for e in _chain(error):
        if isinstance(e, ssl.SSLCertVerificationError):
            return True
        if type(e).__name__ == "ClientConnectorCertificateError":  # aiohttp's, kept lazy
            return True
        if "CERTIFICATE_VERIFY_FAILED" in str(e):
            return True
    return False


def describe_error(error: BaseException) -> str:
    """One line about a failed S3 call: S3's error code, HTTP status and message when S3
    answered (s3fs's translated ``OSError`` keeps only the message); for an endpoint whose
    certificate is not trusted, that and the key that fixes it; else the exception."""
    if is_untrusted_certificate(error):
        return (
            f"the S3 endpoint's TLS certificate is not trusted ({type(error).__name__}: "
            f"certificate verify failed); set {CA_FILE_CONFIG} to the PEM certificate of the CA "
            "that issued it"
        )
    for e in _chain(error):
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            details = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return f"{details.get('Code')} (HTTP {status}): {details.get('Message', '')}"
    return f"{type(error).__name__}: {error}"


def is_transient(error: BaseException) -> bool:
    """Whether an S3 call that raised ``error`` may succeed if repeated: throttling (503
    SlowDown), 5xx answers and broken connections or timeouts. A missing object, a denied
    request, a bad argument or an untrusted certificate is not."""
    if is_untrusted_certificate(error):
        return False
    for e in _chain(error):
        if isinstance(e, (FileNotFoundError, PermissionError, FileExistsError)):
            return False
        response = getattr(e, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return code in TRANSIENT_ERROR_CODES or (
                isinstance(status, int) and (status >= 500 or status == 429)
            )
        if isinstance(e, (ConnectionError, TimeoutError, asyncio.TimeoutError)):
            return True
        # botocore's HTTPClientError (connection closed, read timeout, endpoint unreachable),
        # aiohttp's ClientError (payload cut short) and botocore's ResponseParserError (a
        # throttling answer with a garbled body), matched by module to keep them lazy imports.
        module = type(e).__module__
        name = type(e).__name__
        if module.startswith("aiohttp") or (
            module.startswith("botocore")
            and (
                name in ("ResponseParserError", "IncompleteReadError")
                or any(c.__name__ == "HTTPClientError" for c in type(e).__mro__)
            )
        ):
            return True
    return False


def ensure_bucket(settings: S3Settings, fs: Any = None) -> bool:
    """Creates the bucket of ``settings`` (with ``fs``, a filesystem of those settings, if
    given) unless it exists; True if this call created it.
    Outside us-east-1 the bucket's region is stated (S3 rejects a ``LocationConstraint`` of
    us-east-1, which s3fs's ``mkdir`` sends when given that region)."""
    fs = fs if fs is not None else settings.filesystem(pool_connections=1)
    kwargs: dict[str, Any] = {"Bucket": settings.bucket}
    if settings.region and settings.region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": settings.region}
    try:
        fs.call_s3("create_bucket", **kwargs)
    except Exception as e:
        if error_code(e) in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            return False
        raise
    return True
