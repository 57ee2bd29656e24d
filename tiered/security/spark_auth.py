"""A Spark secured by a shared secret: what the bulk delete's driver (in the controller) and the
standalone master and workers it runs on all set, so that only holders of the secret join and
their traffic is encrypted (docs/operations/security.md#spark).

- ``spark.authenticate=true`` with ``spark.authenticate.secret``: the master refuses an
  application that does not know the secret, and the driver and executors refuse each other's
  connections without it. The secret lives in a file readable by its owner only: the controller
  names it with ``bulk.delete.spark.authenticate.secret.file``; the master and workers read it
  from their own ``spark-defaults.conf`` (mode 0600). It is never on a command line: a worker
  hands it to its executors in their environment, and the controller sets it on its driver's
  configuration once the driver's JVM runs (:func:`without_secret`).
- ``spark.network.crypto.enabled=true``: RPC and block transfers encrypted (AES, keys agreed
  from the secret).
- ``spark.redaction.regex``: :data:`REDACTION_REGEX`, so that no credential key's value shows
  in a web UI, an event log or a logged command line.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "AUTHENTICATE_KEY",
    "CRYPTO_KEY",
    "REDACTION_KEY",
    "REDACTION_REGEX",
    "SECRET_FILE_CONFIG",
    "SECRET_KEY",
    "generate_secret",
    "read_secret",
    "secured_settings",
    "settings_of_secret_file",
    "without_secret",
]

SECRET_FILE_CONFIG = "bulk.delete.spark.authenticate.secret.file"
"""The controller's key: the file holding the Spark cluster's secret."""
AUTHENTICATE_KEY = "spark.authenticate"
SECRET_KEY = "spark.authenticate.secret"
CRYPTO_KEY = "spark.network.crypto.enabled"
REDACTION_KEY = "spark.redaction.regex"
REDACTION_REGEX = r"(?i)secret|password|token|access[._]?key|credentials"
"""Spark's default (``secret|password|token|access[.]?key``) and the S3 credential keys' spellings
it misses: ``AWS_ACCESS_KEY_ID`` in an environment, ``...credentials...`` in a key name."""
_SECRET_BYTES = 32
_GROUP_OR_OTHER = 0o077


def generate_secret() -> str:
    return secrets.token_urlsafe(_SECRET_BYTES)


def read_secret(path: str | Path) -> str:
    """The secret in ``path`` (its first line). ``ValueError`` names :data:`SECRET_FILE_CONFIG`
    and what is wrong (unreadable, empty, readable by others), never the secret."""
    where = f"{SECRET_FILE_CONFIG}={str(path)!r}"
    try:
        mode = Path(path).stat().st_mode
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else "not a text file"
        raise ValueError(f"{where} can not be read: {reason}") from None
    if mode & _GROUP_OR_OTHER:
        raise ValueError(f"{where} is readable by others (mode {mode & 0o777:o}); expected 600")
    lines = text.strip().splitlines()
    if not lines or not lines[0].strip():
        raise ValueError(f"{where} is empty; expected the cluster's Spark secret")
    return lines[0].strip()


def secured_settings(secret: str) -> dict[str, str]:
    """The settings every member of the secured Spark cluster sets (driver, master, workers)."""
    return {
        AUTHENTICATE_KEY: "true",
        SECRET_KEY: secret,
        CRYPTO_KEY: "true",
        REDACTION_KEY: REDACTION_REGEX,
    }


def settings_of_secret_file(values: Mapping[str, str]) -> dict[str, str]:
    """The driver's secured settings when ``values`` (a controller's properties) name
    :data:`SECRET_FILE_CONFIG`, else none; ``ValueError`` as :func:`read_secret`."""
    path = (values.get(SECRET_FILE_CONFIG) or "").strip()
    return secured_settings(read_secret(path)) if path else {}


def without_secret(settings: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """``settings`` less :data:`SECRET_KEY`, and its value: PySpark passes the settings it
    launches a driver JVM with on that JVM's command line, so the secret is set afterwards."""
    rest = dict(settings)
    return rest, rest.pop(SECRET_KEY, None)
