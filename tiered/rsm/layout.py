"""Object keys of remote segments (docs/design.md §3.3): the one place they are built.

Keys are relative to the storage root and use ``/`` as separator::

    {topic}-{topic_id}/{partition}/te={tiered_epoch}/{start_offset:020d}-{segment_id}.{suffix}

``suffix`` is ``log`` for the segment's data and the :class:`~tiered.api.IndexType` value
(``index``, ``timeindex``, ``epochs``, ``snapshot``, ``txnindex``) for its indexes. The tiered
epoch is a directory of its own so that the bulk-delete job can remove every object of an epoch
by prefix, whether or not its metadata reached COPY_SEGMENT_FINISHED.
"""

from __future__ import annotations

import re
import uuid

from tiered.api import IndexType, RemoteLogSegmentMetadata, TopicIdPartition

LOG_SUFFIX = "log"
"""The suffix of a segment's data object."""

TIERED_EPOCH_DIR_PREFIX = "te="

_TIERED_EPOCH_DIR = re.compile(r"te=(0|[1-9][0-9]*)")

ALL_SUFFIXES: tuple[str, ...] = (LOG_SUFFIX, *(t.value for t in IndexType))
"""Every suffix a segment's objects may have, data first."""

WRITTEN_BY_EVERY_COPY: tuple[str, ...] = (
    LOG_SUFFIX,
    IndexType.OFFSET.value,
    IndexType.TIMESTAMP.value,
    IndexType.LEADER_EPOCH.value,
)
"""The suffixes of the objects every copy writes (the producer snapshot and transaction index
are optional)."""


def partition_prefix(topic_id_partition: TopicIdPartition) -> str:
    """``{topic}-{topic_id}/{partition}``: every object of the partition is below it."""
    tp = topic_id_partition
    return f"{tp.topic}-{tp.topic_id}/{tp.partition}"


def tiered_epoch_prefix(topic_id_partition: TopicIdPartition, tiered_epoch: int) -> str:
    """``{topic}-{topic_id}/{partition}/te={tiered_epoch}``: the objects of one tiered epoch."""
    if tiered_epoch < 0:
        raise ValueError(f"tiered_epoch must be >= 0, got {tiered_epoch}")
    return f"{partition_prefix(topic_id_partition)}/{TIERED_EPOCH_DIR_PREFIX}{tiered_epoch}"


def segment_prefix_of(
    topic_id_partition: TopicIdPartition,
    tiered_epoch: int,
    start_offset: int,
    segment_id: uuid.UUID,
) -> str:
    """The key of a segment's objects without the ``.suffix``."""
    if start_offset < 0:
        raise ValueError(f"start_offset must be >= 0, got {start_offset}")
    return (
        f"{tiered_epoch_prefix(topic_id_partition, tiered_epoch)}/{start_offset:020d}-{segment_id}"
    )


def segment_prefix(metadata: RemoteLogSegmentMetadata) -> str:
    """The key of the segment's objects without the ``.suffix``."""
    return segment_prefix_of(
        metadata.topic_id_partition,
        metadata.tiered_epoch,
        metadata.start_offset,
        metadata.remote_log_segment_id.id,
    )


def object_key(prefix: str, suffix: str) -> str:
    """``{prefix}.{suffix}`` for a segment prefix and one of :data:`ALL_SUFFIXES`."""
    if suffix not in ALL_SUFFIXES:
        raise ValueError(f"unknown object suffix {suffix!r}; expected one of {ALL_SUFFIXES}")
    return f"{prefix}.{suffix}"


def parse_tiered_epoch_dir(name: str) -> int | None:
    """The epoch of a ``te=N`` directory name (the last path component), or None."""
    match = _TIERED_EPOCH_DIR.fullmatch(name.rstrip("/").rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None
