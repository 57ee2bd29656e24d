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

from tiered.api import IndexType, RemoteLogSegmentMetadata, RemoteSegmentKey, TopicIdPartition

LOG_SUFFIX = "log"
"""The suffix of a segment's data object."""

TIERED_EPOCH_DIR_PREFIX = "te="

_TIERED_EPOCH_DIR = re.compile(r"te=(0|[1-9][0-9]*)")

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_TOPIC_DIR = re.compile(rf"(.+)-({_UUID})")
# A segment's object, or a local copy's temporary file of one (``{key}.tmp-{hex}``).
_SEGMENT_OBJECT = re.compile(
    rf"(0|[1-9][0-9]*)/te=(0|[1-9][0-9]*)/([0-9]{{20}})-({_UUID})\.[a-z]+(\.tmp-[0-9a-f]+)?"
)

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


def parse_object_key(key: str) -> tuple[str, uuid.UUID, RemoteSegmentKey | None] | None:
    """The topic (name and id) and the segment that an object's key (relative to the root)
    names: None outside any ``{topic}-{topic_id}/`` directory, no segment under one but outside
    a segment's key."""
    topic_dir, _, rest = key.partition("/")
    topic = _TOPIC_DIR.fullmatch(topic_dir)
    if topic is None or not rest:
        return None
    name, topic_id = topic.group(1), uuid.UUID(topic.group(2))
    segment = _SEGMENT_OBJECT.fullmatch(rest)
    if segment is None:
        return name, topic_id, None
    partition, epoch, start, segment_id = segment.group(1, 2, 3, 4)
    return (
        name,
        topic_id,
        RemoteSegmentKey(int(partition), int(epoch), int(start), uuid.UUID(segment_id)),
    )
