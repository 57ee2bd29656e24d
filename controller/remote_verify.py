"""Verify: metadata that promises what the bucket does not hold (docs/design.md, "Verify").

Every segment the RLMM lists as COPY_SEGMENT_FINISHED must have, in remote storage, the objects
every copy writes, and a data object of the segment's recorded size. :class:`SegmentVerifier`
checks partitions against that, through the storage plugin's optional
:class:`~tiered.api.RemoteStorageInspector`; :class:`RemoteVerify` is what the admin call asks
(the active controller's image says which partitions a topic has).

A segment found wanting is read again from the RLMM before it is reported: retention or a delete
job moves a segment to DELETE_SEGMENT_STARTED before it removes its objects, so a segment whose
objects went while it was checked is no longer COPY_SEGMENT_FINISHED and is not data loss.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from tiered.api import (
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageInspector,
    RemoteStorageManager,
    TopicIdPartition,
    missing_capability,
)
from tiered.cluster.model import MetadataImage, MissingRemoteSegment, RemoteStorageVerification
from tiered.errors import ErrorCode, TieredError

__all__ = [
    "RemoteVerify",
    "SegmentVerifier",
    "VerifyUnsupportedError",
    "inspector_of",
    "partitions_of",
]


class VerifyUnsupportedError(RemoteStorageException):
    """The configured RemoteStorageManager does not implement the inspection capability."""


def inspector_of(storage: RemoteStorageManager) -> RemoteStorageInspector:
    """``storage`` as :class:`~tiered.api.RemoteStorageInspector`, or
    :class:`VerifyUnsupportedError` naming its class and the missing capability."""
    if isinstance(storage, RemoteStorageInspector):
        return storage
    raise VerifyUnsupportedError(
        missing_capability(
            storage,
            RemoteStorageInspector,
            "segment_objects",
            "remote storage can not be verified",
        )
    )


def check_segment(
    inspector: RemoteStorageInspector, metadata: RemoteLogSegmentMetadata
) -> MissingRemoteSegment | None:
    """What the store lacks of a finished segment, or None when it holds it all."""
    held = inspector.segment_objects(metadata)
    objects = list(held.missing)
    if held.data_size_bytes is not None and held.data_size_bytes != metadata.segment_size_in_bytes:
        objects.append(held.data_key)
    if not objects:
        return None
    tp = metadata.topic_id_partition
    return MissingRemoteSegment(
        tp.topic,
        tp.partition,
        metadata.remote_log_segment_id.id,
        metadata.tiered_epoch,
        metadata.start_offset,
        metadata.end_offset,
        tuple(objects),
    )


class SegmentVerifier:
    """Checks the finished segments of partitions against the store. Thread-safe as its RLMM
    and plugin are."""

    def __init__(self, rlmm: RemoteLogMetadataManager, storage: RemoteStorageManager) -> None:
        self._rlmm = rlmm
        self._storage = storage

    def inspector(self) -> RemoteStorageInspector:
        """:class:`VerifyUnsupportedError` for a plugin without the capability."""
        return inspector_of(self._storage)

    def finished_segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        """The partition's COPY_SEGMENT_FINISHED segments, ascending by start offset (none for a
        partition without remote metadata)."""
        try:
            segments = list(self._rlmm.list_remote_log_segments(tp))
        except RemoteResourceNotFoundException:
            return []
        finished = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
        return [s for s in segments if s.state is finished]

    def check(
        self, tp: TopicIdPartition, segments: Sequence[RemoteLogSegmentMetadata]
    ) -> list[MissingRemoteSegment]:
        """What the store lacks of ``segments`` (finished segments of ``tp``), each confirmed
        still finished in the RLMM after its objects were found wanting."""
        inspector = self.inspector()
        found = [m for m in (check_segment(inspector, s) for s in segments) if m is not None]
        if not found:
            return []
        still = {s.remote_log_segment_id.id for s in self.finished_segments(tp)}
        return [m for m in found if m.segment_id in still]

    def verify(self, partitions: Iterable[TopicIdPartition]) -> RemoteStorageVerification:
        """Every finished segment of ``partitions``, in order."""
        self.inspector()  # the plugin's capability refused before anything is read
        checked = 0
        missing: list[MissingRemoteSegment] = []
        for tp in partitions:
            segments = self.finished_segments(tp)
            checked += len(segments)
            missing.extend(self.check(tp, segments))
        return RemoteStorageVerification(checked, tuple(missing))


def partitions_of(image: MetadataImage, topic: str | None = None) -> list[TopicIdPartition]:
    """The partitions of ``topic`` (every topic when None), by topic name then partition;
    UNKNOWN_TOPIC_OR_PARTITION naming a topic the image does not have."""
    topics = sorted(image.topics.values(), key=lambda t: (t.name, str(t.topic_id)))
    if topic is not None:
        topics = [t for t in topics if t.name == topic]
        if not topics:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} does not exist"
            )
    return [
        TopicIdPartition(t.topic_id, t.name, p) for t in topics for p in range(t.partition_count)
    ]


class RemoteVerify:
    """What the admin call asks of the active controller: a verify of one topic or all.

    ``verifier`` is None on a controller without remote storage settings; ``partitions`` reads
    a topic's partitions (every topic's for None) from the active term's image, as
    :func:`partitions_of` does (NOT_CONTROLLER on a standby)."""

    def __init__(
        self,
        verifier: SegmentVerifier | None,
        partitions: Callable[[str | None], list[TopicIdPartition]],
    ) -> None:
        self._verifier = verifier
        self._partitions = partitions

    def verify(self, topic: str | None = None) -> RemoteStorageVerification:
        """The topic's finished segments (every topic's when None) checked against the store.
        Errors: NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION naming the topic, INVALID_REQUEST on a
        controller without remote storage settings or with a plugin that can not be inspected,
        KAFKA_STORAGE_ERROR when the store or the RLMM can not be read."""
        partitions = self._partitions(topic)
        if self._verifier is None:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                "the active controller has no remote storage settings "
                "(remote.storage.root or remote.log.storage.manager.class.name): "
                "nothing to verify against",
            )
        try:
            return self._verifier.verify(partitions)
        except VerifyUnsupportedError as e:
            raise TieredError(ErrorCode.INVALID_REQUEST, str(e)) from None
        except RemoteStorageException as e:
            raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, f"verify failed: {e}") from None
