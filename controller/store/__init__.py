"""The controller's metadata store: one abstract contract (``base``), two backends chosen by the
``metadata.store`` config key and imported only when chosen."""

from __future__ import annotations

from collections.abc import Mapping

from controller.store.base import (
    ControllerFencedError,
    MetadataStore,
    MetadataStoreError,
    PartialWriteError,
    TopicChange,
)

__all__ = [
    "ControllerFencedError",
    "MetadataStore",
    "MetadataStoreError",
    "PartialWriteError",
    "TopicChange",
    "create",
]

BACKENDS = ("kraft", "zookeeper")


def create(config: Mapping[str, str]) -> MetadataStore:
    """Builds the store named by ``metadata.store`` (``kraft``, the default, or ``zookeeper``).

    kraft: ``metadata.log.dir`` (required), ``metadata.log.segment.bytes``,
    ``metadata.log.snapshot.interval.records``. zookeeper: ``zookeeper.connect`` (host:port[,...]
    with an optional /chroot), ``zookeeper.session.timeout.ms`` (default 6000),
    ``zookeeper.suspended.grace.ms`` (default 2000), ``zookeeper.jaas.config.file`` and
    ``zookeeper.set.acl`` (``tiered.security.zookeeper_auth``)."""
    backend = config.get("metadata.store", "kraft").strip().lower()
    if backend == "kraft":
        from controller.store.kraft import KRaftMetadataStore  # noqa: PLC0415 - lazy by design

        return KRaftMetadataStore.from_config(config)
    if backend == "zookeeper":
        from controller.store.zookeeper import ZooKeeperMetadataStore  # noqa: PLC0415

        return ZooKeeperMetadataStore.from_config(config)
    raise ValueError(
        f"metadata.store={backend!r} is not valid; valid values: {', '.join(BACKENDS)}"
    )
