"""The cluster metadata domain: plain frozen values; protobuf conversion lives in ``serde``."""

from __future__ import annotations

import enum
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from tiered.net import PLAINTEXT, Listener
from tiered.security.acl_index import AclIndex
from tiered.security.scram import ScramCredential, ScramMechanism

ScramCredentialKey = tuple[str, ScramMechanism]
"""A SCRAM credential's key: (user name, mechanism)."""


class TieredState(enum.Enum):
    """KIP-950's per-topic tiered storage state (docs/design.md §2). A topic that was never
    tiered is DISABLED with tiered epoch 0."""

    ENABLED = "ENABLED"
    DISABLING = "DISABLING"
    DISABLED = "DISABLED"


# Read-only config sets by their items: topics with the same configs share one (most topics of a
# cluster carry the same few overrides, so a dict per topic would mostly hold copies).
_SHARED_CONFIGS: dict[tuple[tuple[str, str], ...], Mapping[str, str]] = {}
# The same shared copies by id, each holding its copy (so the id is not reused while listed): a
# topic built from a shared copy is recognised without reading its items again.
_SHARED_BY_ID: dict[int, Mapping[str, str]] = {}
_SHARED_CONFIGS_LIMIT = 4096  # distinct sets kept for sharing; beyond it the table starts over
_shared_configs_lock = threading.Lock()


def frozen_configs(configs: Mapping[str, str]) -> Mapping[str, str]:
    """A read-only copy of ``configs``, shared with every topic whose configs have the same items
    in the same order (``TopicMetadata`` keeps its configs so). One of those shared copies is
    returned as it is."""
    if _SHARED_BY_ID.get(id(configs)) is configs:
        return configs
    key = tuple(configs.items())
    shared = _SHARED_CONFIGS.get(key)
    if shared is None:
        copy = dict(key)
        with _shared_configs_lock:
            shared = _SHARED_CONFIGS.get(key)
            if shared is None:
                if len(_SHARED_CONFIGS) >= _SHARED_CONFIGS_LIMIT:
                    _SHARED_CONFIGS.clear()
                    _SHARED_BY_ID.clear()
                shared = _SHARED_CONFIGS[key] = MappingProxyType(copy)
                _SHARED_BY_ID[id(shared)] = shared
    return shared


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    replicas: tuple[int, ...]  # replicas[p]: the broker hosting partition p (replication factor 1)
    configs: Mapping[str, str] = field(default_factory=dict)  # keys set on the topic only
    tiered_state: TieredState = TieredState.DISABLED
    tiered_epoch: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "configs", frozen_configs(self.configs))
        object.__setattr__(self, "replicas", tuple(self.replicas))

    @property
    def partition_count(self) -> int:
        return len(self.replicas)

    def with_configs(self, configs: Mapping[str, str]) -> TopicMetadata:
        return replace(self, configs=configs)

    def with_replicas(self, replicas: tuple[int, ...]) -> TopicMetadata:
        return replace(self, replicas=replicas)

    def with_tiered_state(self, state: TieredState, tiered_epoch: int) -> TopicMetadata:
        return replace(self, tiered_state=state, tiered_epoch=tiered_epoch)

    def partitions_on(self, broker_id: int) -> list[int]:
        return [p for p, b in enumerate(self.replicas) if b == broker_id]


@dataclass(frozen=True)
class BrokerRegistration:
    """A broker as it registers: ``host:port`` is its gRPC endpoint (the controller's link, the
    CLIs), ``kafka_endpoints`` its Kafka listeners as clients reach them (advertised)."""

    broker_id: int
    host: str
    port: int
    incarnation_id: uuid.UUID = field(default_factory=uuid.uuid4)
    kafka_endpoints: tuple[Listener, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kafka_endpoints", tuple(self.kafka_endpoints))

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def kafka_endpoint(self, name: str = PLAINTEXT) -> Listener | None:
        """The Kafka listener called ``name``, or None."""
        return next((e for e in self.kafka_endpoints if e.name == name), None)


class DeleteJobState(enum.Enum):
    """A bulk delete job's state. SCHEDULED: a delayed delete-policy job waiting for its
    ``starts_at_ms``; PENDING: queued to run at once; RUNNING: attempted at least once; DONE
    and CANCELLED are finished (a finished job is never run, resumed nor changed again)."""

    SCHEDULED = "SCHEDULED"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    DONE = "DONE"
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        return self in _FINISHED_JOB_STATES


_FINISHED_JOB_STATES = frozenset({DeleteJobState.DONE, DeleteJobState.CANCELLED})

# Every valid change of a job's state, in one place (``DeleteJob.with_state`` checks it): a
# SCHEDULED job starts (RUNNING) or is cancelled; RUNNING repeats for each attempt.
_JOB_TRANSITIONS: Mapping[DeleteJobState, frozenset[DeleteJobState]] = {
    DeleteJobState.SCHEDULED: frozenset({DeleteJobState.RUNNING, DeleteJobState.CANCELLED}),
    DeleteJobState.PENDING: frozenset({DeleteJobState.RUNNING}),
    DeleteJobState.RUNNING: frozenset({DeleteJobState.RUNNING, DeleteJobState.DONE}),
    DeleteJobState.DONE: frozenset(),
    DeleteJobState.CANCELLED: frozenset(),
}


class InvalidDeleteJobTransition(ValueError):  # noqa: N818 - as the other transition tables'
    """A change of a delete job's state that ``_JOB_TRANSITIONS`` does not allow."""


@dataclass(frozen=True)
class PartitionDeletionEstimate:
    """What a delete job would remove from one partition: its segments stamped below the job's
    epoch, their recorded sizes (as ``remote_log_size`` adds them) and their objects (data and
    indexes)."""

    partition: int
    objects: int
    bytes: int
    segments: int


@dataclass(frozen=True)
class DeletionEstimate:
    """What a delete job below ``tiered_epoch`` would remove, per partition (in order) and in
    total: a dry run's answer, read from the RLMM's aggregates without listing."""

    tiered_epoch: int
    partitions: tuple[PartitionDeletionEstimate, ...]

    @property
    def objects(self) -> int:
        return sum(p.objects for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    @property
    def segments(self) -> int:
        return sum(p.segments for p in self.partitions)


@dataclass(frozen=True)
class MissingRemoteSegment:
    """A segment the RLMM lists as COPY_SEGMENT_FINISHED whose objects remote storage lacks, or
    whose data object has another size than recorded: ``objects`` names them (keys relative to
    the storage root; the data object's for a wrong size)."""

    topic: str
    partition: int
    segment_id: uuid.UUID
    tiered_epoch: int
    start_offset: int
    end_offset: int
    objects: tuple[str, ...]


@dataclass(frozen=True)
class RemoteStorageVerification:
    """A verify's answer: the finished segments checked, and those found wanting, in order."""

    segments_checked: int
    missing: tuple[MissingRemoteSegment, ...]


class OrphanReason(enum.Enum):
    """Why the scrub takes an object that nothing claims for an orphan (docs/design.md, "Scrub")."""

    DELETED_TOPIC = "deleted_topic"
    """Under a topic id the cluster does not have."""
    UNKNOWN_SEGMENT = "unknown_segment"
    """Under a live topic, of a segment the RLMM does not know (or of no segment at all)."""
    DELETED_SEGMENT = "deleted_segment"
    """Of a segment whose metadata is gone as deleted: stamped below the epoch of the topic's
    finished delete job."""


@dataclass(frozen=True)
class RemoteStorageScrub:
    """A scrub's answer: the objects listed, the orphans among them (objects nothing claims,
    older than the scrub's minimum age) in all and by reason, up to ``MAX_SCRUB_EXAMPLES`` of
    their keys, how many the scrub deleted (0 unless asked to), and the orphans still stored
    after it (all of them unless it deleted)."""

    scanned_objects: int
    orphan_objects: int
    orphan_bytes: int
    by_reason: Mapping[OrphanReason, int]
    examples: tuple[str, ...]
    deleted: int = 0
    left_objects: int | None = None  # None: every orphan (nothing was deleted)
    left_bytes: int | None = None

    @property
    def orphans_left(self) -> tuple[int, int]:
        """(objects, bytes) of the orphans still stored after the scrub."""
        if self.left_objects is None or self.left_bytes is None:
            return self.orphan_objects, self.orphan_bytes
        return self.left_objects, self.left_bytes


MAX_SCRUB_EXAMPLES = 20
DEFAULT_SCRUB_MIN_AGE_MS = 3_600_000
"""How old an object must be for a scrub to take it for an orphan unless told otherwise: far
longer than any copy takes, so that a copy in flight is never one."""


@dataclass(frozen=True)
class PartitionDeleteProgress:
    partition: int
    objects_total: int = -1  # -1: not listed yet
    objects_deleted: int = 0
    segments_deleted: int = 0
    done: bool = False


@dataclass(frozen=True)
class DeleteJob:
    """The bulk deletion of a topic's remote data stamped with tiered epochs below
    ``tiered_epoch``: KIP-950's delete policy, or (``topic_deleted``) the deletion of the topic
    itself, whose job reaches one past its last epoch so that every epoch goes. Durable so that
    a new controller resumes it."""

    topic: str
    topic_id: uuid.UUID
    tiered_epoch: int
    partition_count: int
    state: DeleteJobState = DeleteJobState.PENDING
    progress: tuple[PartitionDeleteProgress, ...] = ()  # one per partition once started
    attempts: int = 0
    last_error: str = ""
    topic_deleted: bool = False
    # A delayed job's start, wall-clock ms since the epoch (absolute: a failover keeps its clock);
    # None for a job that runs at once.
    starts_at_ms: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "progress", tuple(self.progress))

    @classmethod
    def scheduled(cls, topic: TopicMetadata, starts_at_ms: int) -> DeleteJob:
        """The delete-policy job of ``topic`` (DISABLED at its epoch) delayed to
        ``starts_at_ms``."""
        return cls(
            topic.name,
            topic.topic_id,
            topic.tiered_epoch,
            topic.partition_count,
            state=DeleteJobState.SCHEDULED,
            starts_at_ms=starts_at_ms,
        )

    @classmethod
    def of_deleted_topic(cls, topic: TopicMetadata) -> DeleteJob:
        """The job that deletes every epoch of ``topic``'s remote data once the topic is gone:
        no copy is ever stamped above the topic's current epoch."""
        return cls(
            topic.name,
            topic.topic_id,
            topic.tiered_epoch + 1,
            topic.partition_count,
            topic_deleted=True,
        )

    @property
    def key(self) -> tuple[uuid.UUID, int]:
        return self.topic_id, self.tiered_epoch

    @property
    def objects_total(self) -> int:
        """Objects listed so far, over the partitions (unlisted ones count 0)."""
        return sum(max(p.objects_total, 0) for p in self.progress)

    @property
    def objects_deleted(self) -> int:
        return sum(p.objects_deleted for p in self.progress)

    @property
    def partitions_done(self) -> int:
        return sum(1 for p in self.progress if p.done)

    @property
    def delayed(self) -> bool:
        """Whether the job was scheduled: the brokers stopped its topic as under the retain
        policy, so its start must first have them stop as under the delete policy."""
        return self.starts_at_ms is not None

    def with_state(self, state: DeleteJobState, **changes: object) -> DeleteJob:
        """The job in ``state``; :class:`InvalidDeleteJobTransition` unless the table allows it."""
        if state is not self.state and state not in _JOB_TRANSITIONS[self.state]:
            valid = ", ".join(sorted(s.value for s in _JOB_TRANSITIONS[self.state])) or "none"
            raise InvalidDeleteJobTransition(
                f"delete job of {self.topic} below tiered epoch {self.tiered_epoch}: "
                f"{self.state.value} cannot become {state.value}; valid: {valid}"
            )
        return replace(self, state=state, **changes)  # type: ignore[arg-type]


@dataclass
class MetadataImage:
    """Everything the controller knows, as of ``offset`` (KRaft) or the last load (ZooKeeper)."""

    topics: dict[str, TopicMetadata] = field(default_factory=dict)  # by name
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    controller_id: int = -1
    controller_epoch: int = 0
    controller_endpoint: str = ""
    offset: int = -1  # KRaft: the offset of the last applied record; -1 for none
    delete_jobs: dict[tuple[uuid.UUID, int], DeleteJob] = field(default_factory=dict)
    # Salted and hashed only (``ScramCredential``); by (user name, mechanism).
    scram_credentials: dict[ScramCredentialKey, ScramCredential] = field(default_factory=dict)
    acls: AclIndex = field(default_factory=AclIndex)  # by id, indexed for the authorizer
    _by_id: dict[uuid.UUID, str] = field(default_factory=dict, repr=False)
    # Topics per tiered state, kept by put_topic and remove_topic: a metrics scrape reads it in
    # O(1) however many topics there are.
    _by_state: dict[TieredState, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {t.topic_id: t.name for t in self.topics.values()}
        self._by_state = dict.fromkeys(TieredState, 0)
        for topic in self.topics.values():
            self._by_state[topic.tiered_state] += 1

    def topic_count(self, state: TieredState) -> int:
        """How many topics are in ``state``, in O(1)."""
        return self._by_state[state]

    def copy(self) -> MetadataImage:
        """An independent image with the same contents (values are frozen: shallow is enough)."""
        return MetadataImage(
            topics=dict(self.topics),
            brokers=dict(self.brokers),
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            controller_endpoint=self.controller_endpoint,
            offset=self.offset,
            delete_jobs=dict(self.delete_jobs),
            scram_credentials=dict(self.scram_credentials),
            acls=self.acls.copy(),
        )

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        name = self._by_id.get(topic_id)
        return None if name is None else self.topics.get(name)

    def put_topic(self, topic: TopicMetadata) -> None:
        previous = self.topics.get(topic.name)
        if previous is not None:
            self._by_state[previous.tiered_state] -= 1
            if previous.topic_id != topic.topic_id:
                self._by_id.pop(previous.topic_id, None)
        self.topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic.name
        self._by_state[topic.tiered_state] += 1

    def put_new_topics(self, topics: Sequence[TopicMetadata]) -> bool:
        """Puts ``topics`` into an image that has none, in bulk (a snapshot's 100k): True if
        done; False, changing nothing, if the image has topics or two of ``topics`` share a
        name or an id (``put_topic`` one by one then decides which stays)."""
        if self.topics:
            return False
        by_name = {t.name: t for t in topics}
        by_id = {t.topic_id: t.name for t in topics}
        if len(by_name) != len(topics) or len(by_id) != len(topics):
            return False
        self.topics.update(by_name)
        self._by_id.update(by_id)
        for state in TieredState:  # by identity: an enum's hash is a Python call
            self._by_state[state] += sum(1 for t in topics if t.tiered_state is state)
        return True

    def remove_topic(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        name = self._by_id.pop(topic_id, None)
        removed = None if name is None else self.topics.pop(name, None)
        if removed is not None:
            self._by_state[removed.tiered_state] -= 1
        return removed
