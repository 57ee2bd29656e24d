"""Topic and server configuration keys shared by the controller and the brokers.

Only what the broker's RemoteLogManager needs so far; the controller's validation (DESIGN.md
section 5) builds on these names.
"""

from __future__ import annotations

import enum

REMOTE_STORAGE_ENABLE = "remote.storage.enable"
REMOTE_LOG_DISABLE_POLICY = "remote.log.disable.policy"
REMOTE_LOG_COPY_DISABLE = "remote.log.copy.disable"
REMOTE_LOG_DELETE_ON_DISABLE = "remote.log.delete.on.disable"
CUSTOM_METADATA_MAX_BYTES = "remote.log.metadata.custom.metadata.max.bytes"
COPIER_THREAD_POOL_SIZE = "remote.log.manager.copier.thread.pool.size"
EXPIRATION_THREAD_POOL_SIZE = "remote.log.manager.expiration.thread.pool.size"
READER_THREADS = "remote.log.reader.threads"
TASK_INTERVAL_MS = "remote.log.manager.task.interval.ms"


class RemoteLogDisablePolicy(enum.Enum):
    """What happens to a topic's remote data when tiered storage is disabled (KIP-950)."""

    RETAIN = "retain"
    DELETE = "delete"

    @classmethod
    def parse(cls, value: str) -> RemoteLogDisablePolicy:
        try:
            return cls(value.strip().lower())
        except ValueError:
            valid = ", ".join(p.value for p in cls)
            raise ValueError(
                f"{REMOTE_LOG_DISABLE_POLICY}={value!r} is not valid; valid values: {valid}"
            ) from None
