"""RemoteStorageManager implementations.

``create(config)`` builds the fsspec-backed manager from Kafka-style config keys:

=============================================  =========================================
``remote.storage.root``                        a local path or an fsspec URL (``memory://x``,
                                               ``file:///...``, ``s3://bucket/prefix``);
                                               required
``remote.storage.delete.threads``              thread pool size of a bulk delete (default
                                               16; per Spark partition on Spark)
``remote.storage.retry.*``                     the retry policy of remote calls
                                               (:mod:`tiered.rsm.settings`)
``remote.storage.s3.*``                        endpoint, region and credentials of an
                                               ``s3://`` root (:mod:`tiered.rsm.s3`)
=============================================  =========================================

Object keys are built by :mod:`tiered.rsm.layout` (docs/design.md §3.3); the custom metadata a
copy returns is described in :mod:`tiered.rsm.custom_metadata`; the bulk delete's object deleters,
which Spark executors run, are :mod:`tiered.rsm.fsspec_delete` and :mod:`tiered.rsm.s3_delete`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import cast

from tiered.api import RemoteStorageManager
from tiered.rsm.custom_metadata import (
    SegmentLocation,
    decode_custom_metadata,
    encode_custom_metadata,
)
from tiered.rsm.fsspec_delete import DEFAULT_DELETE_THREADS, FsspecObjectDeleter
from tiered.rsm.fsspec_rsm import FsspecRemoteStorageManager, create_from_config
from tiered.rsm.s3 import S3Credentials, S3Settings
from tiered.rsm.s3_delete import S3ObjectDeleter
from tiered.rsm.settings import (
    DELETE_THREADS_CONFIG,
    ROOT_CONFIG,
)

__all__ = [
    "CLASS_NAME_CONFIG",
    "DEFAULT_DELETE_THREADS",
    "DELETE_THREADS_CONFIG",
    "ROOT_CONFIG",
    "FsspecObjectDeleter",
    "FsspecRemoteStorageManager",
    "S3Credentials",
    "S3ObjectDeleter",
    "S3Settings",
    "SegmentLocation",
    "config_from_properties",
    "create",
    "decode_custom_metadata",
    "encode_custom_metadata",
]


CLASS_NAME_CONFIG = "remote.log.storage.manager.class.name"
"""Kafka's key: a RemoteStorageManager class (``package.module.ClassName``) constructed with the
whole config mapping. Absent: the fsspec RemoteStorageManager."""


PLUGIN_PREFIX = "rsm.config."
"""Kafka's ``remote.log.storage.manager.impl.prefix``: the plugin's own settings, passed to it
with the prefix stripped."""

_RSM_KEY_PREFIXES = ("remote.storage.", "remote.log.storage.manager.")


def config_from_properties(values: Mapping[str, str]) -> dict[str, str]:
    """What a daemon (broker or controller) hands ``create`` from its ``.properties``: the
    ``remote.storage.*`` and ``remote.log.storage.manager.*`` keys as they are, and the
    ``rsm.config.*`` keys with the prefix stripped (as Kafka's brokers configure the plugin)."""
    config = {k: v for k, v in values.items() if k.startswith(_RSM_KEY_PREFIXES)}
    config.update(
        {k[len(PLUGIN_PREFIX) :]: v for k, v in values.items() if k.startswith(PLUGIN_PREFIX)}
    )
    return config


def create(config: Mapping[str, object]) -> RemoteStorageManager:
    """The RemoteStorageManager configured by ``config``: the class named by
    ``remote.log.storage.manager.class.name`` if given, else the fsspec one (see the module
    docstring). ``ValueError`` names the offending key when the config is invalid."""
    class_name = config.get(CLASS_NAME_CONFIG)
    if class_name is None or not str(class_name).strip():
        return create_from_config(config)
    module_name, _, attribute = str(class_name).strip().rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as e:
        raise ValueError(f"{CLASS_NAME_CONFIG}={class_name!r} can not be loaded: {e}") from None
    if not (isinstance(cls, type) and issubclass(cls, RemoteStorageManager)):
        raise ValueError(f"{CLASS_NAME_CONFIG}={class_name!r} is not a RemoteStorageManager")
    # Plugins take the whole config mapping, as Kafka's configure(configs) does.
    factory = cast(Callable[[Mapping[str, object]], RemoteStorageManager], cls)
    return factory(config)
