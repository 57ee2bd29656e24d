"""Where the RemoteLogMetadataManager keeps each record in the backend (the seed's key factory).

Per partition ``P = rlmm/partitions/{topic_id}-{partition}``::

    P                                   PartitionStateRecord (versioned: the write serializer)
    P/claim                             LeaderClaimRecord (versioned: the leader fence)
    P/s/{id[:2]}/{id}                   a segment's RemoteLogSegmentMetadataRecord
    P/e/{epoch:010d}                    LeaderEpochStateRecord
    P/e/{epoch:010d}/i/{offset:020d}    OffsetIndexChunkRecord: a bounded slice of the epoch's
                                        offset -> segment map, named by its lowest start offset
    P/e/{epoch:010d}/u/{id}             an unreferenced segment of the epoch (empty value)

Segment records fan out over 256 buckets so that no znode has more than a few thousand children
even with a million segments; zero-padded numbers make names sort numerically.
"""

from __future__ import annotations

import uuid

from tiered.api import TopicIdPartition

ROOT = "rlmm/partitions"


def partition_key(tp: TopicIdPartition) -> str:
    return f"{ROOT}/{tp.topic_id}-{tp.partition}"


def claim_key(tp: TopicIdPartition) -> str:
    return f"{partition_key(tp)}/claim"


def segments_key(tp: TopicIdPartition) -> str:
    return f"{partition_key(tp)}/s"


def segment_key(tp: TopicIdPartition, segment_id: uuid.UUID) -> str:
    hex_id = segment_id.hex
    return f"{partition_key(tp)}/s/{hex_id[:2]}/{hex_id}"


def epochs_key(tp: TopicIdPartition) -> str:
    return f"{partition_key(tp)}/e"


def epoch_key(tp: TopicIdPartition, leader_epoch: int) -> str:
    return f"{partition_key(tp)}/e/{leader_epoch:010d}"


def index_key(tp: TopicIdPartition, leader_epoch: int) -> str:
    return f"{epoch_key(tp, leader_epoch)}/i"


def chunk_key(tp: TopicIdPartition, leader_epoch: int, first_offset: int) -> str:
    return f"{index_key(tp, leader_epoch)}/{first_offset:020d}"


def unreferenced_key(tp: TopicIdPartition, leader_epoch: int) -> str:
    return f"{epoch_key(tp, leader_epoch)}/u"


def unreferenced_segment_key(tp: TopicIdPartition, leader_epoch: int, segment_id: uuid.UUID) -> str:
    return f"{unreferenced_key(tp, leader_epoch)}/{segment_id.hex}"
