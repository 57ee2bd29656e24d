"""RemoteStorageManager implementations.

``create(config)`` builds the fsspec-backed manager from Kafka-style config keys:

=================================  =====================================================
``remote.storage.root``            a local path or an fsspec URL (``memory://x``,
                                   ``file:///...``, ``s3://bucket/prefix``); required
``remote.storage.delete.threads``  thread pool size for bulk deletes (default 8)
=================================  =====================================================

Object keys are built by :mod:`tiered.rsm.layout` (DESIGN.md section 8); the custom metadata a
copy returns is described in :mod:`tiered.rsm.custom_metadata`.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiered.rsm.custom_metadata import (
    SegmentLocation,
    decode_custom_metadata,
    encode_custom_metadata,
)
from tiered.rsm.fsspec_rsm import (
    DEFAULT_DELETE_THREADS,
    DELETE_THREADS_CONFIG,
    ROOT_CONFIG,
    FsspecRemoteStorageManager,
    create_from_config,
)

__all__ = [
    "DEFAULT_DELETE_THREADS",
    "DELETE_THREADS_CONFIG",
    "ROOT_CONFIG",
    "FsspecRemoteStorageManager",
    "SegmentLocation",
    "create",
    "decode_custom_metadata",
    "encode_custom_metadata",
]


def create(config: Mapping[str, object]) -> FsspecRemoteStorageManager:
    """The fsspec RemoteStorageManager configured by ``config`` (see the module docstring).
    ``ValueError`` names the offending key when the config is invalid."""
    return create_from_config(config)
