"""The RemoteLogMetadataManager and its storage backends.

``create(config)`` builds one from Kafka-style config keys:

==========================  ==========================================================
``rlmm.backend``            ``sqlite`` (default) or ``zookeeper``
``rlmm.sqlite.path``        the database file (sqlite; shared by the processes of a host)
``rlmm.zookeeper.connect``  ``host:port[,host:port...][/chroot]`` (zookeeper)
``rlmm.zookeeper.session.timeout.ms``  ZooKeeper session timeout (default 10000)
``zookeeper.jaas.config.file`` / ``zookeeper.set.acl``  the process's ZooKeeper identity and
                            znode ACLs (``tiered.security.zookeeper_auth``), zookeeper too
``broker.id`` / ``node.id`` the id recorded as leader when this process claims a partition
==========================  ==========================================================

Backends are imported only when chosen, so kazoo is needed only for ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiered.properties import int_property
from tiered.rlmm.backend import MetadataStorageBackend, StorageBackendError, VersionConflictError
from tiered.rlmm.manager import (
    RemoteLogMetadataConflictException,
    RemoteLogMetadataFencedException,
    StoreRemoteLogMetadataManager,
)

BACKENDS = ("sqlite", "zookeeper")

__all__ = [
    "BACKENDS",
    "MetadataStorageBackend",
    "RemoteLogMetadataConflictException",
    "RemoteLogMetadataFencedException",
    "StorageBackendError",
    "StoreRemoteLogMetadataManager",
    "VersionConflictError",
    "create",
    "create_backend",
]


def _required(config: Mapping[str, str], key: str, backend: str) -> str:
    value = config.get(key)
    if value is None or not str(value).strip():
        raise ValueError(f"{key} is required when rlmm.backend={backend}")
    return str(value).strip()


def create_backend(config: Mapping[str, str]) -> MetadataStorageBackend:
    """The storage backend that ``rlmm.backend`` names."""
    backend = str(config.get("rlmm.backend", "sqlite")).strip()
    if backend == "sqlite":
        from tiered.rlmm.sqlite_backend import SqliteBackend  # noqa: PLC0415 - lazy by design

        return SqliteBackend(_required(config, "rlmm.sqlite.path", backend))
    if backend == "zookeeper":
        from tiered.rlmm.zookeeper_backend import ZooKeeperBackend  # noqa: PLC0415
        from tiered.security.zookeeper_auth import ZooKeeperSecurity  # noqa: PLC0415

        timeout_ms = int_property(config, "rlmm.zookeeper.session.timeout.ms", 10_000)
        return ZooKeeperBackend(
            _required(config, "rlmm.zookeeper.connect", backend),
            session_timeout_s=timeout_ms / 1000,
            security=ZooKeeperSecurity.from_config(config),
        )
    raise ValueError(f"rlmm.backend={backend!r} is not valid; valid values: {', '.join(BACKENDS)}")


def create(config: Mapping[str, str]) -> StoreRemoteLogMetadataManager:
    """A RemoteLogMetadataManager configured by ``config`` (see the module docstring)."""
    broker_id = int_property(config, "broker.id", int_property(config, "node.id", -1))
    return StoreRemoteLogMetadataManager(create_backend(config), broker_id=broker_id)
