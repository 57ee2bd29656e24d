"""The plugin API: Kafka's tiered storage-api (KIP-405, KIP-852, KIP-917) in Python naming.

Value types are frozen dataclasses; the two ABCs are what storage plugins implement. Semantics follow
``org.apache.kafka.server.log.remote.storage``; where this module differs it says so and why.
KIP-950 adds ``tiered_epoch`` to segment metadata: the topic's tiered epoch in force when the copy
began, which decides what a disablement's deletion removes.

Beyond Kafka, two optional capabilities serve the controller's bulk delete job (the delete policy,
docs/design.md §3.3): :class:`BulkDeleteRemoteLogMetadataManager` (delete state and batched segment
updates) and :class:`RemoteStorageBulkDeleter` (list and delete a partition's objects below a
tiered epoch, with a picklable :class:`RemoteObjectDeleter` that Spark executors run). A third,
:class:`RemoteStorageInspector`, serves the controller's verify: what the store holds of a
segment's objects. A fourth, :class:`RemoteStorageScanner`, serves the controller's scrub: every
object under the store's root, with what its key says it belongs to.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import uuid
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any


class RemoteStorageException(Exception):  # noqa: N818 - Kafka's name, part of the contract
    """A remote storage or remote log metadata operation failed."""


class RemoteResourceNotFoundException(RemoteStorageException):
    """The requested remote resource (partition, segment, object) does not exist."""


def _require(value: object, name: str, kind: type | tuple[type, ...]) -> None:
    if value is None:
        raise TypeError(f"{name} can not be None")
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be {kind}, got {type(value).__name__}")


def _require_int(value: object, name: str) -> None:
    # bool is an int subclass; a True offset is always a bug.
    if value is None or isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")


@dataclass(frozen=True, slots=True)
class TopicIdPartition:
    """A partition named both by topic id (stable across re-creation) and by topic name."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    def __post_init__(self) -> None:
        _require(self.topic_id, "topic_id", uuid.UUID)
        _require(self.topic, "topic", str)
        _require_int(self.partition, "partition")
        if self.partition < 0:
            raise ValueError(f"partition must be >= 0, got {self.partition}")

    def __str__(self) -> str:
        return f"{self.topic_id}:{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentId:
    """Identifies one uploaded copy of a segment: a new id is generated for every copy attempt."""

    topic_id_partition: TopicIdPartition
    id: uuid.UUID

    def __post_init__(self) -> None:
        _require(self.topic_id_partition, "topic_id_partition", TopicIdPartition)
        _require(self.id, "id", uuid.UUID)

    @classmethod
    def generate_new(cls, topic_id_partition: TopicIdPartition) -> RemoteLogSegmentId:
        return cls(topic_id_partition=topic_id_partition, id=uuid.uuid4())

    def __str__(self) -> str:
        return f"{self.topic_id_partition}/{self.id}"


@dataclass(frozen=True, slots=True)
class CustomMetadata:
    """KIP-917: opaque bytes a RemoteStorageManager returns from a copy, stored with the segment.

    ``CustomMetadata(b"")`` and no custom metadata at all (``None``) are different values.
    """

    value: bytes

    def __post_init__(self) -> None:
        _require(self.value, "value", bytes)

    def __len__(self) -> int:
        return len(self.value)


class RemoteLogSegmentState(enum.Enum):
    """Lifecycle of a remote segment; the value is Kafka's id for the state."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    @staticmethod
    def is_valid_transition(
        source: RemoteLogSegmentState | None, target: RemoteLogSegmentState
    ) -> bool:
        """Kafka's ``RemoteLogSegmentState.isValidTransition``.

        ``None`` (no segment yet) may only go to COPY_SEGMENT_STARTED. A self-transition is valid so
        that retries and failover are idempotent. Otherwise STARTED goes to FINISHED or
        DELETE_SEGMENT_STARTED, FINISHED to DELETE_SEGMENT_STARTED, DELETE_SEGMENT_STARTED to
        DELETE_SEGMENT_FINISHED, and DELETE_SEGMENT_FINISHED nowhere.
        """
        _require(target, "target", RemoteLogSegmentState)
        if source is None:
            return target is RemoteLogSegmentState.COPY_SEGMENT_STARTED
        return source is target or target in _SEGMENT_TRANSITIONS[source]


_SEGMENT_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    RemoteLogSegmentState.COPY_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.COPY_SEGMENT_FINISHED, RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.COPY_SEGMENT_FINISHED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_STARTED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_STARTED: frozenset(
        {RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}
    ),
    RemoteLogSegmentState.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(enum.Enum):
    """Lifecycle of the deletion of a partition's remote data; the value is Kafka's id."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2

    @staticmethod
    def is_valid_transition(
        source: RemotePartitionDeleteState | None, target: RemotePartitionDeleteState
    ) -> bool:
        """Kafka's ``RemotePartitionDeleteState.isValidTransition``: MARKED, STARTED, FINISHED in
        order, starting from MARKED, self-transitions allowed."""
        _require(target, "target", RemotePartitionDeleteState)
        if source is None:
            return target is RemotePartitionDeleteState.DELETE_PARTITION_MARKED
        return source is target or target.value == source.value + 1


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    """A state change of an existing remote segment (anything after COPY_SEGMENT_STARTED)."""

    remote_log_segment_id: RemoteLogSegmentId
    event_timestamp_ms: int
    custom_metadata: CustomMetadata | None
    state: RemoteLogSegmentState
    broker_id: int

    def __post_init__(self) -> None:
        _require(self.remote_log_segment_id, "remote_log_segment_id", RemoteLogSegmentId)
        _require_int(self.event_timestamp_ms, "event_timestamp_ms")
        if self.custom_metadata is not None:
            _require(self.custom_metadata, "custom_metadata", CustomMetadata)
        _require(self.state, "state", RemoteLogSegmentState)
        _require_int(self.broker_id, "broker_id")
        if self.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED:
            raise ValueError(
                "an update can not have the state COPY_SEGMENT_STARTED: add the segment with "
                "add_remote_log_segment_metadata instead"
            )

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition


@dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """Metadata of one remote segment copy.

    ``segment_leader_epochs`` maps each leader epoch in the segment to the first offset written in
    it; it is stored sorted by epoch and is read-only in spirit (a copy is taken on construction).
    """

    remote_log_segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    max_timestamp_ms: int
    broker_id: int
    event_timestamp_ms: int
    segment_size_in_bytes: int
    segment_leader_epochs: dict[int, int]
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    custom_metadata: CustomMetadata | None = None
    tiered_epoch: int = 0
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        _require(self.remote_log_segment_id, "remote_log_segment_id", RemoteLogSegmentId)
        for name in (
            "start_offset",
            "end_offset",
            "max_timestamp_ms",
            "broker_id",
            "event_timestamp_ms",
            "segment_size_in_bytes",
            "tiered_epoch",
        ):
            _require_int(getattr(self, name), name)
        _require(self.state, "state", RemoteLogSegmentState)
        if self.custom_metadata is not None:
            _require(self.custom_metadata, "custom_metadata", CustomMetadata)
        if self.start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, got {self.start_offset}")
        if self.end_offset < self.start_offset:
            raise ValueError(
                f"end_offset {self.end_offset} can not be less than start_offset {self.start_offset}"
            )
        if self.segment_size_in_bytes < 0:
            raise ValueError(
                f"segment_size_in_bytes must be >= 0, got {self.segment_size_in_bytes}"
            )
        if self.tiered_epoch < 0:
            raise ValueError(f"tiered_epoch must be >= 0, got {self.tiered_epoch}")
        _require(self.segment_leader_epochs, "segment_leader_epochs", Mapping)
        if not self.segment_leader_epochs:
            raise ValueError("segment_leader_epochs can not be empty")
        for epoch, offset in self.segment_leader_epochs.items():
            _require_int(epoch, "a leader epoch")
            _require_int(offset, f"the start offset of leader epoch {epoch}")
        epochs = dict(sorted(self.segment_leader_epochs.items()))
        object.__setattr__(self, "segment_leader_epochs", epochs)
        object.__setattr__(
            self, "_hash", hash((self.remote_log_segment_id, self.state, self.event_timestamp_ms))
        )

    def __hash__(self) -> int:
        return self._hash

    @property
    def topic_id_partition(self) -> TopicIdPartition:
        return self.remote_log_segment_id.topic_id_partition

    def leader_epoch_end_offset(self, leader_epoch: int) -> int:
        """The last offset of ``leader_epoch`` within this segment: the next epoch's start offset
        minus one, or the segment's end offset for its last epoch."""
        following = [o for e, o in self.segment_leader_epochs.items() if e > leader_epoch]
        return following[0] - 1 if following else self.end_offset

    def create_with_updates(
        self, update: RemoteLogSegmentMetadataUpdate
    ) -> RemoteLogSegmentMetadata:
        """This metadata with the update's state, event time, broker and custom metadata applied.

        Differs from Kafka: an update whose ``custom_metadata`` is None keeps this segment's custom
        metadata. Kafka replaces it with empty, which silently loses what a RemoteStorageManager
        needs to find the segment later (KIP-917's bucket example) when a caller does not repeat it.
        """
        _require(update, "update", RemoteLogSegmentMetadataUpdate)
        if update.remote_log_segment_id != self.remote_log_segment_id:
            raise ValueError(
                f"update is for segment {update.remote_log_segment_id}, "
                f"not {self.remote_log_segment_id}"
            )
        return self._replace(
            state=update.state,
            event_timestamp_ms=update.event_timestamp_ms,
            broker_id=update.broker_id,
            custom_metadata=(
                update.custom_metadata
                if update.custom_metadata is not None
                else self.custom_metadata
            ),
        )

    def create_with_custom_metadata(
        self, custom_metadata: CustomMetadata
    ) -> RemoteLogSegmentMetadata:
        _require(custom_metadata, "custom_metadata", CustomMetadata)
        return self._replace(custom_metadata=custom_metadata)

    def _replace(self, **changes: Any) -> RemoteLogSegmentMetadata:
        return dataclasses.replace(self, **changes)  # validates again, like the constructor


@dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    """A step in deleting all of a partition's remote data."""

    topic_id_partition: TopicIdPartition
    state: RemotePartitionDeleteState
    event_timestamp_ms: int
    broker_id: int

    def __post_init__(self) -> None:
        _require(self.topic_id_partition, "topic_id_partition", TopicIdPartition)
        _require(self.state, "state", RemotePartitionDeleteState)
        _require_int(self.event_timestamp_ms, "event_timestamp_ms")
        _require_int(self.broker_id, "broker_id")


@dataclass(frozen=True, slots=True)
class RemoteLogTotals:
    """A partition's remote log across all leader epochs, each segment counted once."""

    size_bytes: int
    """Bytes of every segment not yet DELETE_SEGMENT_FINISHED (what the metrics report)."""
    segment_count: int
    copy_finished_size_bytes: int
    """Bytes of COPY_SEGMENT_FINISHED segments only: what size-based retention compares against
    ``retention.bytes`` (counting unfinished copies deletes too early, KAFKA-17062)."""
    copy_finished_segment_count: int


@dataclass(frozen=True, slots=True)
class RemoteLogBelowEpoch:
    """A partition's segments stamped below a tiered epoch, from its aggregates."""

    segment_count: int
    size_bytes: int
    """The segments' recorded sizes (``segment_size_in_bytes``), as ``remote_log_size`` adds
    them."""


class IndexType(enum.Enum):
    """The files stored beside a segment's data (Kafka's ``RemoteStorageManager.IndexType``)."""

    OFFSET = "index"
    TIMESTAMP = "timeindex"
    LEADER_EPOCH = "epochs"
    PRODUCER_SNAPSHOT = "snapshot"
    TRANSACTION = "txnindex"


@dataclass(frozen=True, slots=True)
class LogSegmentData:
    """The local files of a closed segment handed to ``copy_log_segment_data``."""

    log_segment: str
    offset_index: str
    time_index: str
    leader_epoch_index: bytes
    producer_snapshot_index: str | None = None
    transaction_index: str | None = None


class RemoteLogMetadataManager(abc.ABC):
    """Stores and serves remote segment metadata with strongly consistent semantics.

    Contract shared by every method:

    - Writes return once the change is durable in the backing store; there are no futures.
    - A write that loses a race with another writer of the same partition raises
      :class:`tiered.rlmm.RemoteLogMetadataConflictException` (a ``RemoteStorageException``); it
      never overwrites the other writer's change. A writer whose leadership of the partition was
      taken over by another process is fenced the same way.
    - Invalid arguments raise ``TypeError`` (None, wrong type) or ``ValueError`` (wrong state).
    - A state transition that ``is_valid_transition`` rejects is dropped and logged, as in Kafka's
      ``RemoteLogMetadataCache``; it is not an error.
    - Reads of a partition this manager has never seen, or whose deletion reached
      DELETE_PARTITION_FINISHED, raise :class:`RemoteResourceNotFoundException`.
    """

    @abc.abstractmethod
    def add_remote_log_segment_metadata(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Records a segment whose copy is starting. Its state must be COPY_SEGMENT_STARTED
        (``ValueError`` otherwise). The segment is listed but not yet readable."""

    @abc.abstractmethod
    def update_remote_log_segment_metadata(self, update: RemoteLogSegmentMetadataUpdate) -> None:
        """Moves an existing segment to ``update.state``. Raises
        ``RemoteResourceNotFoundException`` if the segment is unknown (or already
        DELETE_SEGMENT_FINISHED); an invalid transition is dropped and logged."""

    @abc.abstractmethod
    def remote_log_segment_metadata(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int, offset: int
    ) -> RemoteLogSegmentMetadata | None:
        """The COPY_SEGMENT_FINISHED segment holding ``offset`` written in ``leader_epoch``, or
        None. Segments in any other state are never returned."""

    @abc.abstractmethod
    def highest_offset_for_epoch(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int
    ) -> int | None:
        """The highest offset of ``leader_epoch`` copied to remote storage (segments that reached
        COPY_SEGMENT_FINISHED), or None."""

    @abc.abstractmethod
    def put_remote_partition_delete_metadata(self, metadata: RemotePartitionDeleteMetadata) -> None:
        """Records a step of the partition's remote deletion. At DELETE_PARTITION_FINISHED all of
        the partition's remote log metadata is removed."""

    def put_remote_partition_delete_metadata_all(
        self, metadatas: Sequence[RemotePartitionDeleteMetadata]
    ) -> list[Exception | None]:
        """:meth:`put_remote_partition_delete_metadata` of each, in order: None where it is
        durable, else what it raised (one partition's failure does not stop the rest). A
        broker stopping thousands of partitions at once marks them all here; a manager whose
        store can make them durable in one write overrides this. The default puts them one
        at a time."""
        outcomes: list[Exception | None] = []
        for metadata in metadatas:
            try:
                self.put_remote_partition_delete_metadata(metadata)
                outcomes.append(None)
            except Exception as e:
                outcomes.append(e)
        return outcomes

    @abc.abstractmethod
    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        """Segments in every state but DELETE_SEGMENT_FINISHED, ascending by start offset: those
        holding ``leader_epoch``, or all of the partition's when it is None."""

    @abc.abstractmethod
    def on_partition_leadership_changes(
        self, leaders: Set[TopicIdPartition], followers: Set[TopicIdPartition]
    ) -> None:
        """This broker now leads ``leaders`` (it takes them over and serves them from memory) and
        follows ``followers`` (read from the store)."""

    @abc.abstractmethod
    def on_stop_partitions(self, partitions: Set[TopicIdPartition]) -> None:
        """This broker no longer hosts ``partitions``; their in-memory state is released."""

    def remote_log_segment_ids(self, topic_id_partition: TopicIdPartition) -> set[uuid.UUID]:
        """The ids of the segments :meth:`list_remote_log_segments` lists for the partition:
        what claims remote objects (the scrub reads it for every partition that has some). The
        default reads the listing; a manager that knows the ids without reading each segment's
        metadata overrides it."""
        return {
            m.remote_log_segment_id.id for m in self.list_remote_log_segments(topic_id_partition)
        }

    def remote_log_start_offset(self, topic_id_partition: TopicIdPartition) -> int | None:
        """The lowest start offset of the segments :meth:`list_remote_log_segments` lists for
        the partition, None when it lists none: where its remote log starts (a describe shows
        it for every partition). The default reads the listing; a manager that finds it without
        reading every segment overrides it."""
        first = next(iter(self.list_remote_log_segments(topic_id_partition)), None)
        return None if first is None else first.start_offset

    @abc.abstractmethod
    def remote_log_size(self, topic_id_partition: TopicIdPartition, leader_epoch: int) -> int:
        """KIP-852: the bytes of what ``list_remote_log_segments(tp, leader_epoch)`` lists, in O(1)."""

    @abc.abstractmethod
    def remote_log_totals(self, topic_id_partition: TopicIdPartition) -> RemoteLogTotals:
        """The partition's totals across epochs, in O(1) (metrics and size-based retention)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases connections and threads. Idempotent."""

    def __enter__(self) -> RemoteLogMetadataManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BulkDeleteRemoteLogMetadataManager(RemoteLogMetadataManager):
    """A RemoteLogMetadataManager that the controller's bulk delete job can drive (an optional
    capability, beyond Kafka's API): it tells where a partition's remote deletion stands and moves
    thousands of segments at once. The contract of :class:`RemoteLogMetadataManager` holds."""

    @abc.abstractmethod
    def remote_partition_delete_state(
        self, topic_id_partition: TopicIdPartition
    ) -> RemotePartitionDeleteState | None:
        """Where the partition's remote deletion stands: the last state recorded by
        ``put_remote_partition_delete_metadata``, or None when no deletion is under way (never
        marked, or a finished deletion that kept newer segments). Raises
        ``RemoteResourceNotFoundException`` as every read does."""

    @abc.abstractmethod
    def update_remote_log_segment_metadata_batch(
        self, updates: Sequence[RemoteLogSegmentMetadataUpdate]
    ) -> None:
        """Applies ``updates`` as ``update_remote_log_segment_metadata`` would, in batches (each
        batch of one partition's updates durable at once). Invalid transitions are dropped and
        logged one by one; updates of segments that are gone (already DELETE_SEGMENT_FINISHED)
        are skipped, not raised. ``TypeError`` for anything that is not an update; a lost race
        raises as a single write does, after the batches before it were applied."""

    @abc.abstractmethod
    def handle_partition_segments_delete_started_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> list[RemoteLogSegmentMetadata]:
        """Every segment of the partition stamped below ``tiered_epoch`` is going: from now on
        each reads as DELETE_SEGMENT_STARTED, to every reader and to the transition checks of
        later events (as if ``update_remote_log_segment_metadata`` had moved it; segments stamped
        below it later, by a copy still running, too), durably at once. Returns those segments
        as read before the move: their objects are what the caller deletes. Only a partition in
        DELETE_PARTITION_STARTED takes the event; otherwise it is dropped and logged, and none
        is returned. Errors as :meth:`handle_partition_segments_deleted_below_epoch`."""

    @abc.abstractmethod
    def handle_partition_segments_deleted_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> None:
        """The objects of the partition's DELETE_SEGMENT_STARTED segments stamped below
        ``tiered_epoch`` are deleted: their metadata goes, as DELETE_SEGMENT_FINISHED of each
        would remove it, in batches (each durable at once) and with the aggregates kept exact.
        Segments in any other state, and those stamped ``tiered_epoch`` or later, are kept; so
        is a copy stamped below it that started after the last marking (it reads as deleting,
        but its objects may still be landing): the next marking moves it for the next removal. Only
        a partition in DELETE_PARTITION_STARTED takes the event; otherwise it is dropped and
        logged, as an invalid transition is. ``TypeError`` for a partition that is not a
        ``TopicIdPartition``, ``ValueError`` for a negative epoch; raises
        ``RemoteResourceNotFoundException`` as every read does."""

    @abc.abstractmethod
    def remote_log_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> RemoteLogBelowEpoch:
        """How many of the partition's segments stamped below ``tiered_epoch`` are still recorded,
        and their bytes as ``remote_log_size`` counts them, in O(1), from the partition's
        aggregates: what a delete job below that epoch has left to delete (and what a dry run of
        a disable reports), known before it reads a single segment. Only finished copies are
        aggregated by tiered epoch, so a segment in another state (a copy in progress, a
        deletion under way) counts whatever its epoch: the figures may exceed the exact ones by
        those few. Raises
        ``RemoteResourceNotFoundException`` as every read does."""


class RemoteStorageManager(abc.ABC):
    """Copies segments to remote storage and reads and deletes them there."""

    @abc.abstractmethod
    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> CustomMetadata | None:
        """Uploads the segment and its indexes. Returns custom metadata to store with the segment
        (KIP-917) or None. Raises ``RemoteStorageException`` on failure, after which the caller
        deletes whatever may have been written."""

    @abc.abstractmethod
    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        """Bytes ``[start_position, end_position]`` (inclusive) of the segment's data, to its end
        when ``end_position`` is None. ``RemoteResourceNotFoundException`` if it is gone."""

    @abc.abstractmethod
    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The whole index of ``index_type``. ``RemoteResourceNotFoundException`` if absent."""

    @abc.abstractmethod
    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Deletes the segment's data and indexes. Idempotent: missing objects are not an error."""

    def close(self) -> None:  # noqa: B027 - optional, as Kafka's Closeable: nothing by default
        """Releases connections and threads. Idempotent; does nothing unless overridden."""


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """What a batched delete did: ``deleted`` objects removed by it and ``missing`` ones already
    gone (both count as done; a store that can not tell reports a missing object as deleted),
    ``failed_handles`` the objects still there, ``first_error`` one failure described, for logs."""

    deleted: int = 0
    missing: int = 0
    failed_handles: tuple[str, ...] = ()
    first_error: str | None = None

    def __post_init__(self) -> None:
        for name in ("deleted", "missing"):
            _require_int(getattr(self, name), name)
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        _require(self.failed_handles, "failed_handles", tuple)

    @property
    def failed(self) -> int:
        return len(self.failed_handles)

    @property
    def done(self) -> int:
        """Objects that are gone: deleted now or missing already."""
        return self.deleted + self.missing

    def __add__(self, other: DeleteOutcome) -> DeleteOutcome:
        if not isinstance(other, DeleteOutcome):
            return NotImplemented
        return DeleteOutcome(
            self.deleted + other.deleted,
            self.missing + other.missing,
            self.failed_handles + other.failed_handles,
            self.first_error if self.first_error is not None else other.first_error,
        )


class RemoteObjectDeleter(abc.ABC):
    """Deletes objects of one remote store by the handles its
    :meth:`RemoteStorageBulkDeleter.list_objects_below_epoch` listed or its
    :meth:`RemoteStorageBulkDeleter.object_handles_of` derived.

    The bulk delete job pickles it (cloudpickle) and calls it in other processes, Spark executors
    included: it holds only what reaching the store again takes (a URL, settings), opens
    connections when called, and its class must be importable where it runs (the plugin installed
    on the executors). It may be called concurrently from several threads and processes."""

    @abc.abstractmethod
    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        """Deletes the objects named by ``handles``, however the store does it best (a thread
        pool, batched requests). Idempotent: an object already gone counts as ``missing`` (or
        ``deleted`` where the store can not tell), never as a failure. An object whose delete
        fails is reported in ``failed_handles`` after every other handle was attempted, not
        raised. Raises ``RemoteStorageException`` only when the batch as a whole could not be
        attempted (the store unreachable, a broken configuration); the caller then retries the
        batch. Empty ``handles``: an empty outcome."""


class RemoteStorageBulkDeleter(abc.ABC):
    """Optional capability of a :class:`RemoteStorageManager`: finding and deleting, in bulk,
    everything it stored for a partition below a tiered epoch. The controller's bulk delete job
    (KIP-950's delete policy, docs/design.md §3.3) reaches remote storage only through it; with
    an RSM that does not implement it, delete jobs fail (and say so) rather than leave data."""

    @abc.abstractmethod
    def list_objects_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> Iterator[list[str]]:
        """Handles of every object stored for the partition's segments of tiered epochs
        ``< tiered_epoch``, in non-empty batches, each handle once: whatever copies of those
        epochs left, whether or not their metadata reached COPY_SEGMENT_FINISHED (a copy that
        died mid-way included). Objects of epochs ``>= tiered_epoch`` are never listed. Nothing
        stored: no batch. Handles are opaque, short strings, each naming one object of the
        store, that only :meth:`object_deleter`'s deleter interprets. ``TypeError`` or
        ``ValueError`` for a bad partition or a negative epoch; ``RemoteStorageException`` when
        the store can not be listed."""

    def object_handles_of(self, segments: Sequence[RemoteLogSegmentMetadata]) -> list[str]:
        """Handles of the objects a copy of each of ``segments`` stores, derived from their
        metadata alone (no listing: the job deletes these first, then lists to find the rest),
        each handle once. Handles of objects that do not exist (a copy that failed part-way, an
        object already deleted) may be included: deleting them counts them ``missing``. Never a
        handle of another segment's object. Objects the metadata does not tell (temporary
        files, optional indexes) may be left out: :meth:`list_objects_below_epoch` finds them.
        The default knows nothing and returns no handle. ``TypeError`` for anything that is not
        :class:`RemoteLogSegmentMetadata`."""
        for metadata in segments:
            if not isinstance(metadata, RemoteLogSegmentMetadata):
                raise TypeError(f"expected RemoteLogSegmentMetadata, got {metadata!r}")
        return []

    def objects_per_segment(self) -> int:
        """How many objects every copy of a segment stores: with the RLMM's segment counts, the
        size of a delete job before any segment is read (the job chooses where it deletes from
        it). The default, one, is the least a copy stores: its data."""
        return 1

    @abc.abstractmethod
    def object_deleter(self) -> RemoteObjectDeleter:
        """A picklable deleter of this store's objects (see :class:`RemoteObjectDeleter`)."""


@dataclass(frozen=True, slots=True)
class RemoteSegmentObjects:
    """What the store holds of one segment's required objects (:class:`RemoteStorageInspector`).

    ``missing``: the keys of the objects every copy writes that the store lacks, in the layout's
    order; ``data_key``: the key of the segment's data object; ``data_size_bytes``: that
    object's size, None when it is missing."""

    missing: tuple[str, ...]
    data_key: str
    data_size_bytes: int | None


class RemoteStorageInspector(abc.ABC):
    """Optional capability of a :class:`RemoteStorageManager`: telling which of a segment's
    objects the store holds, and the size of its data. The controller's verify (docs/design.md,
    "Verify") reaches remote storage only through it; with a plugin that does not implement it,
    a verify fails with an error that says so."""

    @abc.abstractmethod
    def segment_objects(self, metadata: RemoteLogSegmentMetadata) -> RemoteSegmentObjects:
        """The objects a finished copy of ``metadata`` must have (its data and the indexes every
        copy writes), checked one by one without reading them. ``TypeError`` for anything that
        is not :class:`RemoteLogSegmentMetadata`; ``RemoteStorageException`` when the store
        can not be asked (a missing object is an answer, not an error)."""


@dataclass(frozen=True, slots=True)
class RemoteSegmentKey:
    """What an object's key says of the segment it belongs to (the plugin's layout)."""

    partition: int
    tiered_epoch: int
    start_offset: int
    segment_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class RemoteStoredObject:
    """One object found under the store's root (:class:`RemoteStorageScanner`).

    ``handle``: what the plugin's :class:`RemoteObjectDeleter` deletes it by (for the fsspec
    plugin, its key relative to the root); ``last_modified_ms``: when the store last wrote it
    (now, from a store that can not tell: such an object is never old enough to be an orphan);
    ``topic`` and ``topic_id``: the topic its key places it under, both None for an object
    outside the plugin's layout (the scrub never counts those as orphans: a shared prefix may
    hold other objects); ``segment``: the segment its key names, None under a topic but outside
    any segment's key (an object dropped there by hand)."""

    handle: str
    size_bytes: int
    last_modified_ms: int
    topic: str | None
    topic_id: uuid.UUID | None
    segment: RemoteSegmentKey | None


class RemoteStorageScanner(abc.ABC):
    """Optional capability of a :class:`RemoteStorageManager`: listing every object under its
    root. The controller's scrub (docs/design.md, "Scrub") reaches remote storage only through it
    (and deletes through :class:`RemoteStorageBulkDeleter`'s deleter); with a plugin that does
    not implement it, a scrub fails with an error that says so."""

    @abc.abstractmethod
    def scan_objects(self, parallelism: int) -> Iterator[list[RemoteStoredObject]]:
        """Every object under the root, each once, in non-empty batches, listed by prefix on up
        to ``parallelism`` concurrent listings (an object store lists a page of keys per request:
        one listing of a large bucket is as slow as its pages one after another). ``ValueError``
        for a ``parallelism`` below 1; ``RemoteStorageException`` when the store can not be
        listed (no partial answer is taken for a whole one)."""

    @abc.abstractmethod
    def objects_still_stored(self, handles: Sequence[str], parallelism: int) -> set[str]:
        """Those of ``handles`` (from :meth:`scan_objects`) that the store holds now, each asked
        for by itself on up to ``parallelism`` threads: the scrub confirms its few orphans this
        way, since an object listed before a retention or a delete job removed it and its record
        would otherwise look unclaimed. ``RemoteStorageException`` when the store can not be
        asked."""


def missing_capability(storage: object, capability: type, methods: str, consequence: str) -> str:
    """The error text for a plugin ``storage`` that lacks the optional ``capability`` (whose
    ``methods`` are named): its class, the capability and what cannot be done without it."""
    cls = type(storage)
    return (
        f"the RemoteStorageManager {cls.__module__}.{cls.__qualname__} does not implement "
        f"{capability.__module__}.{capability.__qualname__} ({methods}): {consequence}"
    )
