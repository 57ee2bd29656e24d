"""The fsspec RemoteStorageManager's config keys (those of S3 are in :mod:`tiered.rsm.s3`) and
its one retry policy.

Every remote call (a put, a read, a listing, a batch of deletes) is retried, when its error is
transient, by one :class:`~tiered.retry.RetryPolicy`
(:func:`tiered.retry_policies.remote_storage_retry`) configured by:

======================================  ========================================================
``remote.storage.retry.max.attempts``   attempts of one call in all (default 10)
``remote.storage.retry.backoff.ms``     the first wait (default 100), doubling after each try
``remote.storage.retry.backoff.max.ms`` the longest wait (default 5000)
======================================  ========================================================

Waits are jittered (each a random time between half and all of its step), so that the copier
threads of many brokers throttled together do not come back in step. Only object stores have
transient errors (:func:`tiered.rsm.s3.is_transient`); a local filesystem's errors fail at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiered.properties import int_property
from tiered.retry import RetryPolicy
from tiered.retry_policies import remote_storage_retry

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "DELETE_THREADS_CONFIG",
    "RETRY_BACKOFF_MAX_MS_CONFIG",
    "RETRY_BACKOFF_MS_CONFIG",
    "RETRY_MAX_ATTEMPTS_CONFIG",
    "ROOT_CONFIG",
    "retry_policy_from_config",
]

ROOT_CONFIG = "remote.storage.root"
DELETE_THREADS_CONFIG = "remote.storage.delete.threads"
RETRY_MAX_ATTEMPTS_CONFIG = "remote.storage.retry.max.attempts"
RETRY_BACKOFF_MS_CONFIG = "remote.storage.retry.backoff.ms"
RETRY_BACKOFF_MAX_MS_CONFIG = "remote.storage.retry.backoff.max.ms"

DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_BACKOFF_MS = 100
DEFAULT_BACKOFF_MAX_MS = 5000
DEFAULT_RETRY_POLICY = remote_storage_retry(
    DEFAULT_MAX_ATTEMPTS, DEFAULT_BACKOFF_MS, DEFAULT_BACKOFF_MAX_MS
)


def retry_policy_from_config(config: Mapping[str, object]) -> RetryPolicy:
    """The policy the ``remote.storage.retry.*`` keys describe; ``ValueError`` names the key."""
    values = {k: str(v) for k, v in config.items() if k.startswith("remote.storage.retry.")}
    attempts = int_property(values, RETRY_MAX_ATTEMPTS_CONFIG, DEFAULT_MAX_ATTEMPTS, minimum=1)
    backoff = int_property(values, RETRY_BACKOFF_MS_CONFIG, DEFAULT_BACKOFF_MS, minimum=1)
    backoff_max = int_property(
        values, RETRY_BACKOFF_MAX_MS_CONFIG, max(DEFAULT_BACKOFF_MAX_MS, backoff), minimum=1
    )
    if backoff_max < backoff:
        raise ValueError(
            f"{RETRY_BACKOFF_MAX_MS_CONFIG}={backoff_max} is not valid; expected an integer >= "
            f"{RETRY_BACKOFF_MS_CONFIG} ({backoff})"
        )
    return remote_storage_retry(attempts, backoff, backoff_max)
