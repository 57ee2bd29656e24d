"""The contract every controller metadata store keeps.

A store holds the cluster metadata (topics with their replica assignment, configs, tiered state
and tiered epoch; broker registrations; the controller epoch) and elects the active controller.
The controller is the only writer, so the store needs no per-topic compare-and-set: it fences
whole controllers instead.

The contract has two parts. ``MetadataStore`` is the store itself: leadership, reads, broker
registration and liveness, lifecycle. ``FencedWrites`` (``MetadataStore.writes``) is every
metadata write of the active term; each backend implements it in a writer of its own, and callers
write through ``store.writes`` only.

Contract:

* **Leadership.** ``elect`` blocks until this process is the active controller, durably raises
  the controller epoch and returns it. From then on every write is fenced: it commits only while
  this process is still the active controller of that epoch, else it raises
  ``ControllerFencedError`` and writes nothing. ZooKeeper: the ephemeral ``/controller`` plus a
  multi that checks the version of ``/controller_epoch``. KRaft: an OS lock on the log directory
  held from election to exit.
* **Loss of leadership** sets ``leadership_lost`` (ZooKeeper: session LOST, or SUSPENDED for longer
  than the grace period). The controller must stop acting and ``resign``; it may ``elect`` again.
* **Atomicity.** Each method of ``FencedWrites`` commits all of its changes or none, except
  ``update_topics`` on a backend that splits it: there each change is atomic, and a failure after
  some committed raises ``PartialWriteError`` naming how many.
* **Refusals.** A write refuses an argument that breaks its documented precondition before
  anything is written, with ``ValueError`` unless the method says otherwise.
* **Failures.** A transport or storage failure raises ``MetadataStoreError``. The outcome of that
  write is then unknown, so the caller must not assume either: the controller resigns, and
  whoever is elected next reloads the truth with ``load``.
* **Reads** (``load``) return what committed writes left, in one consistent image for KRaft and
  topic by topic for ZooKeeper (each topic's znodes are written by one multi, and only the active
  controller writes).
* Methods never return False for failure: they return normally or raise.
"""

from __future__ import annotations

import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    MetadataImage,
    ScramCredentialKey,
    TopicMetadata,
)
from tiered.security.acl import AclBinding
from tiered.security.scram import ScramCredential

if TYPE_CHECKING:
    from tiered.rpc.v1.metadata_pb2 import MetadataRecordBatch

# (before, after, delete job or None): one topic's change, as ``update_topics`` takes it.
TopicChange = tuple[TopicMetadata, TopicMetadata, DeleteJob | None]
# (before, after): a topic grown by CreatePartitions, as ``add_partitions`` takes it.
PartitionGrowth = tuple[TopicMetadata, TopicMetadata]
# An ACL under its id, as ``MetadataImage.acls`` holds it.
StoredAcl = tuple[uuid.UUID, AclBinding]


def check_delete_job_of(topic: TopicMetadata, delete_job: DeleteJob) -> None:
    """``ValueError`` unless ``delete_job`` is one of ``topic``'s (a write that persists a topic
    change or deletion with a job)."""
    if delete_job.topic_id != topic.topic_id:
        raise ValueError(
            f"the delete job of topic id {delete_job.topic_id} is not {topic.name}'s "
            f"({topic.topic_id})"
        )


def check_partition_growth(before: TopicMetadata, after: TopicMetadata) -> None:
    """``ValueError`` unless ``after`` is ``before`` with partitions added (its existing
    partitions, configs and tiered state unchanged)."""
    if (before.name, before.topic_id) != (after.name, after.topic_id):
        raise ValueError(
            f"add_partitions: {before.name} ({before.topic_id}) and {after.name} "
            f"({after.topic_id}) are not the same topic"
        )
    if (
        after.partition_count <= before.partition_count
        or after.replicas[: before.partition_count] != before.replicas
    ):
        raise ValueError(
            f"add_partitions: {after.name} must keep its {before.partition_count} partitions "
            f"and gain some, not become {after.replicas}"
        )
    if (after.configs, after.tiered_state, after.tiered_epoch) != (
        before.configs,
        before.tiered_state,
        before.tiered_epoch,
    ):
        raise ValueError(f"add_partitions: only the partitions of {after.name} may change")


def check_scram_alteration(
    upsertions: Mapping[ScramCredentialKey, ScramCredential],
    deletions: Collection[ScramCredentialKey],
) -> None:
    """``ValueError`` for a credential both upserted and deleted in one alteration."""
    both = set(upsertions) & set(deletions)
    if both:
        user, mechanism = sorted(both, key=lambda k: (k[0], k[1].type_id))[0]
        raise ValueError(f"the {mechanism} credential of user {user!r} is both set and removed")


class MetadataStoreError(Exception):
    """The store could not be reached or failed; the outcome of a write in progress is unknown."""


class PartialWriteError(MetadataStoreError):
    """``update_topics`` committed its first ``committed`` changes, then failed (ZooKeeper: a
    later multi of the call); the outcome of the failed multi is unknown, as any failure's."""

    def __init__(self, message: str, committed: int) -> None:
        super().__init__(message)
        self.committed = committed


class ControllerFencedError(MetadataStoreError):
    """This process is no longer the active controller; nothing was written."""


class FencedWrites(ABC):
    """Every metadata write of the active term. Each commits only while this process is the
    active controller of the epoch ``elect`` returned, else raises ``ControllerFencedError`` and
    writes nothing. Each is atomic (``update_topics`` topic by topic where the backend splits
    it), and a transport or storage failure raises ``MetadataStoreError`` with the outcome
    unknown (the module's contract)."""

    @abstractmethod
    def create_topic(self, topic: TopicMetadata) -> None:
        """Persists a new topic: assignment, configs, tiered state and epoch, atomically."""

    def update_topic(
        self, before: TopicMetadata, after: TopicMetadata, delete_job: DeleteJob | None = None
    ) -> None:
        """``update_topics`` of this one change: one atomic write."""
        self.update_topics([(before, after, delete_job)])

    @abstractmethod
    def update_topics(self, changes: Sequence[TopicChange]) -> None:
        """Persists each change's ``after``: its configs, tiered state and tiered epoch (the
        replica assignment does not change), together with its delete job when given (a
        disablement with the delete policy completes and its bulk delete is queued in the same
        write). ``before`` is the controller's current view; a backend may use it to write only
        what changed. The controller persists in one call every disablement that one broker
        response completed: 10k topics acked at once must not cost 10k writes.

        Each topic's change is atomic; the whole call is one atomic write where the backend
        allows it (KRaft: one batch) and a few otherwise (ZooKeeper: one multi per bounded group
        of topics, in order). A failure after some changes committed raises
        ``PartialWriteError`` naming how many (the first groups); the rest have the unknown
        outcome of any failed write. ``ValueError`` (:func:`check_delete_job_of`) for a delete
        job that is not its topic's, before anything is written (ZooKeeper also refuses, with
        ``ValueError``, a change of a topic's name, id or assignment)."""

    @abstractmethod
    def add_partitions(self, growths: Sequence[PartitionGrowth]) -> None:
        """Persists the partitions each topic gains (CreatePartitions), all topics atomically:
        KRaft, one batch of PartitionRecords (Kafka's); ZooKeeper, one multi setting each
        topic's ``/brokers/topics/{topic}`` assignment, as Kafka's ``AdminZkClient`` does.
        ``ValueError`` (:func:`check_partition_growth`) before anything is written."""

    @abstractmethod
    def put_delete_job(self, job: DeleteJob) -> None:
        """Creates or replaces the job record keyed by (topic id, tiered epoch): its state and
        progress. Jobs outlive their topic: ``delete_topic`` leaves them."""

    @abstractmethod
    def delete_topic(self, topic: TopicMetadata, delete_job: DeleteJob | None = None) -> None:
        """Removes the topic and everything stored under it, atomically, together with the
        creation of ``delete_job`` when given (the job of the topic's remote data: a deletion
        persisted without its job would orphan that data). ``ValueError``
        (:func:`check_delete_job_of`) for another topic's job, before anything is written."""

    @abstractmethod
    def alter_scram_credentials(
        self,
        upsertions: Mapping[ScramCredentialKey, ScramCredential],
        deletions: Collection[ScramCredentialKey],
    ) -> None:
        """Creates or replaces each credential of ``upsertions`` and removes each of
        ``deletions`` (keys ``(user, mechanism)``), atomically; a key in both is refused with
        ValueError (:func:`check_scram_alteration`). Credentials are stored salted and hashed as
        given, never a password. KRaft: one batch of UserScramCredential /
        RemoveUserScramCredential records; ZooKeeper: one multi over Kafka's
        ``/config/users/{name}`` znodes (other keys of a user's config are kept; a user whose
        config becomes empty keeps an empty one, as Kafka leaves it). Removing a credential that
        is not there is not an error."""

    @abstractmethod
    def create_acls(self, acls: Sequence[StoredAcl]) -> None:
        """Persists new ACLs, atomically: KRaft, one AccessControlEntryRecord each (with its
        id) in one batch; ZooKeeper, Kafka's layout (``tiered.cluster.zk_acl_znodes``: each
        pattern's znode rewritten with its new entries, and one change notification per pattern)
        in one multi, where the ids are derived from the bindings (``acl_id``) and ``load``
        returns those. The caller passes ACLs not stored yet, with resource names the backend
        can store: ZooKeeper refuses one that cannot be a znode's name (one with ``/``) with
        ``MetadataStoreError``, before anything is written."""

    @abstractmethod
    def delete_acls(self, acls: Sequence[StoredAcl]) -> None:
        """Removes these ACLs (as ``load`` returned them), atomically: KRaft, one
        RemoveAccessControlEntryRecord each in one batch; ZooKeeper, each pattern's znode
        rewritten without them (deleted when none is left) with its change notification, in
        one multi."""


class MetadataStore(ABC):
    """A metadata store: leadership, reads, broker registration and liveness, lifecycle; its
    writes are ``writes``."""

    mode: str  # "kraft" or "zookeeper"
    writes: FencedWrites
    """The fenced writes of the active term, set by each backend's constructor."""

    def __init__(self) -> None:
        self.leadership_lost = threading.Event()

    # ----------------------------------------------------------------------------- leadership

    @abstractmethod
    def elect(self, controller_id: int, endpoint: str, stop: threading.Event) -> int | None:
        """Blocks until this process is the active controller, then durably raises the controller
        epoch, clears ``leadership_lost`` and returns the new epoch. Returns None if ``stop`` is set
        first. ``endpoint`` (host:port of the controller's gRPC server) is recorded so that clients
        and standbys can name the active controller."""

    @abstractmethod
    def resign(self) -> None:
        """Gives up leadership (if held) so that another controller can be elected. Idempotent."""

    @abstractmethod
    def active_controller(self) -> tuple[int, str] | None:
        """(controller id, endpoint) of the active controller as the store knows it, or None."""

    # ----------------------------------------------------------------------------- reads

    @abstractmethod
    def load(self) -> MetadataImage:
        """Everything committed: topics, registered brokers, delete jobs, SCRAM credentials,
        ACLs, the controller epoch."""

    # ----------------------------------------------------------------------------- brokers

    @abstractmethod
    def register_broker(self, registration: BrokerRegistration) -> None:
        """Persists a broker's registration (KRaft: a record, replacing the broker's previous one).
        ZooKeeper brokers register themselves with an ephemeral znode, so there this only checks
        that the registration is present."""

    def watch_live_brokers(self, callback: Callable[[dict[int, BrokerRegistration]], None]) -> bool:
        """Stores whose brokers register themselves (ZooKeeper's ephemeral znodes) call
        ``callback`` with every live registration now and on each change, from a thread of
        their own (this returns without waiting for the first call), and return True. Others
        return False: the controller tracks liveness through registrations and heartbeats.
        Raises ``MetadataStoreError`` if the store is closed."""
        return False

    # ----------------------------------------------------------------------------- lifecycle

    @abstractmethod
    def close(self) -> None:
        """Resigns and releases every resource. Idempotent."""


class MetadataLogSource(ABC):
    """A store whose metadata is a record log that brokers follow (KRaft: FetchMetadata streams
    it, as KRaft brokers follow ``__cluster_metadata``). Stores without one (ZooKeeper: brokers
    read the znodes) do not implement this."""

    @abstractmethod
    def read_batches(
        self, from_offset: int, max_wait_s: float
    ) -> tuple[list[MetadataRecordBatch], bool]:
        """Committed batches from the one holding ``from_offset`` on, ``(batches, False)``;
        ``([], False)`` when none came within ``max_wait_s``. When the history from
        ``from_offset`` is gone or not worth replaying, ``([snapshot], True)``: the whole image
        as one batch whose ``base_offset`` is the image's offset (continue from
        ``base_offset + 1``). Raises ``ControllerFencedError`` when this process is not the
        active controller and ``MetadataStoreError`` when the log cannot be read."""
