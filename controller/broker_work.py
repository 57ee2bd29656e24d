"""What each broker is owed, in the order it needs it: the disables ``Disablements`` says it
owes (first: after a failover they are what operators wait for), then the delete-policy stops a
delayed delete job's start owes (``delete_stops_owed``: the job waits for them), then the removals of deleted
topics' partitions (a partition must be dropped before a topic of the same name arrives), then
the assignments (configs, new partitions). Each ``BrokerChannel`` pulls its next request here
(``next_work``) and hands the answer back here; ``BrokerRegistry`` keeps who is alive and the
channels, and wakes them.

A partition placed in this term is *unhosted* until its leader acks the assignment that carries
it: Metadata names no leader for it (LEADER_NOT_AVAILABLE, as Kafka answers before its
LeaderAndIsr reached the leader) and CreateTopics/CreatePartitions wait for it. Naming a leader
that does not host the partition yet made it refuse a producer's first batches and accept the
later ones: records stored out of order, with no error at a client that pipelines requests. A
restarted broker hosts what it acked before from its own journal, so only partitions never acked
are unhosted.

Every method takes the term's lock.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from controller.broker_channel import AssignWork, DisableWork, RemoveWork, Work
from controller.disablements import DisableEntry, Disablements
from controller.leadership import Term
from tiered.cluster.model import DeleteJob, MetadataImage, TopicMetadata
from tiered.config import RemoteLogDisablePolicy
from tiered.errors import TieredError

__all__ = ["BrokerWork"]

log = logging.getLogger(__name__)


class BrokerWork:
    def __init__(
        self,
        term: Term,
        disablements: Disablements,
        max_entries_per_request: int,
        live_endpoint: Callable[[int], str | None],
        wake: Callable[[Iterable[int]], None],
        *,
        brokers_follow_log: bool,
    ) -> None:
        """``live_endpoint(broker)``: where a live broker is reached, None for one that is not;
        ``wake(brokers)``: their channels look here again (both ``BrokerRegistry``'s);
        ``brokers_follow_log``: the brokers apply topic changes from the metadata log (KRaft
        mode), so a reconfigured topic is not pushed to them as well."""
        self._term = term
        self._brokers_follow_log = brokers_follow_log
        self._disablements = disablements
        self._limit = max_entries_per_request
        self._live_endpoint = live_endpoint
        self._wake = wake
        # broker -> topic name -> generation: configs the broker has not acked yet
        self._pending_assign: dict[int, dict[str, int]] = defaultdict(dict)
        self._generation = 0
        # broker -> partitions of deleted topics it should drop; owed again across terms and
        # broker restarts while the topic's remote data is being deleted (a broker that misses it
        # otherwise drops the old log when a topic of the same name arrives)
        self._pending_remove: dict[int, dict[tuple[uuid.UUID, int], str]] = defaultdict(dict)
        # broker -> partition -> the delete-policy stop a delayed job's start owes it; and the
        # jobs that owed them in this term (a new term owes them again: repeating one is a no-op)
        self._pending_delete_stop: dict[int, dict[tuple[uuid.UUID, int], DisableEntry]] = (
            defaultdict(dict)
        )
        self._delete_stops_owed_for: set[tuple[uuid.UUID, int]] = set()
        # topic id -> partitions placed in this term that their leader has not acked hosting
        self._unhosted: dict[uuid.UUID, set[int]] = {}
        self._hosting_changed = threading.Condition(term.lock)

    # ----------------------------------------------------------------------------- events

    def term_started(self, image: MetadataImage) -> None:
        """Every broker may have missed anything: every assignment is owed again, and every
        removal of a deleted topic whose remote data is still being deleted."""
        with self._term.lock:
            self._pending_assign.clear()
            self._pending_remove.clear()
            self._pending_delete_stop.clear()
            self._delete_stops_owed_for.clear()
            self._unhosted.clear()
            for topic in image.topics.values():
                self._owe_assignment(topic)
            for broker_id in image.brokers:
                self._owe_removals_of_deleted_topics(broker_id)

    def broker_came_back(self, broker_id: int) -> None:
        """A new broker incarnation: it may have lost nothing (persisted assignments), but the
        controller cannot know what it applied, so everything it hosts is owed again."""
        with self._term.lock:
            for topic in self._term.image.topics.values():
                if broker_id in topic.replicas:
                    self._generation += 1
                    self._pending_assign[broker_id][topic.name] = self._generation
            self._owe_removals_of_deleted_topics(broker_id)

    def topic_changed(self, topic: TopicMetadata, placed: range = range(0)) -> None:
        """``topic`` was persisted (created, grown by the partitions ``placed``, or
        reconfigured, a disable queued with it): its brokers are woken and owed its configs,
        unless they read a reconfiguration from the metadata log; the ``placed`` partitions are
        pushed in every mode, and unhosted until their leaders ack them (the ack is what
        Metadata and CreateTopics wait for)."""
        with self._term.lock:
            if placed:
                self._unhosted.setdefault(topic.topic_id, set()).update(placed)
            if placed or not self._brokers_follow_log:
                self._owe_assignment(topic)
            self._wake(set(topic.replicas))

    def topic_deleted(self, topic: TopicMetadata) -> None:
        """``topic`` was deleted: its brokers should drop its partitions."""
        with self._term.lock:
            for pending in self._pending_assign.values():
                pending.pop(topic.name, None)
            self._unhosted.pop(topic.topic_id, None)
            for partition, broker_id in enumerate(topic.replicas):
                self._pending_remove[broker_id][(topic.topic_id, partition)] = topic.name
            self._wake(set(topic.replicas))

    # ----------------------------------------------------------------------------- queries

    def unhosted(self) -> dict[uuid.UUID, frozenset[int]]:
        """Every topic with partitions whose leader does not host them yet, and those partitions
        (a copy; empty but for the moments after a creation or growth)."""
        with self._term.lock:
            return {t: frozenset(p) for t, p in self._unhosted.items()}

    def wait_hosted(self, topic_ids: Sequence[uuid.UUID], timeout_s: float) -> set[uuid.UUID]:
        """Waits up to ``timeout_s`` until every partition of the topics is hosted by its
        leader; returns the topics that still have unhosted partitions."""
        deadline = time.monotonic() + timeout_s
        with self._hosting_changed:
            while True:
                waiting = {t for t in topic_ids if self._unhosted.get(t)}
                left = deadline - time.monotonic()
                if not waiting or left <= 0:
                    return waiting
                self._hosting_changed.wait(left)

    def brokers_owing_removal(self, topic_id: uuid.UUID) -> list[int]:
        """The live brokers that have not yet dropped the partitions of the deleted topic
        ``topic_id`` (its delete job waits for them)."""
        with self._term.lock:
            return sorted(
                broker_id
                for broker_id, owed in self._pending_remove.items()
                if self._live_endpoint(broker_id) is not None
                and any(t == topic_id for t, _ in owed)
            )

    def delete_stops_owed(self, job: DeleteJob) -> list[int]:
        """The live brokers that have not acked the delete-policy stop of the delayed ``job``'s
        topic at its epoch (remote fetches refused, the log start raised, the partitions marked
        DELETE_PARTITION_MARKED, as an immediate delete's disablement does); the first call of a
        term owes it to every broker hosting a partition. None is owed for a topic that is gone
        or at another epoch."""
        with self._term.lock:
            topic = self._term.image.topic_by_id(job.topic_id)
            if topic is None or topic.tiered_epoch != job.tiered_epoch:
                return []
            if job.key not in self._delete_stops_owed_for:
                self._delete_stops_owed_for.add(job.key)
                for partition, broker_id in enumerate(topic.replicas):
                    self._pending_delete_stop[broker_id][(topic.topic_id, partition)] = (
                        DisableEntry(
                            topic.name,
                            topic.topic_id,
                            partition,
                            job.tiered_epoch,
                            RemoteLogDisablePolicy.DELETE,
                        )
                    )
                self._wake(set(topic.replicas))
            return sorted(
                broker_id
                for broker_id, owed in self._pending_delete_stop.items()
                if self._live_endpoint(broker_id) is not None
                and any(t == topic.topic_id for t, _ in owed)
            )

    # ----------------------------------------------------------------------------- ChannelOwner

    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        with self._term.lock:
            epoch = self._term.active_epoch
            endpoint = self._live_endpoint(broker_id)
            if epoch is None or endpoint is None:
                return None
            entries = self._disablements.owed_by(broker_id, self._limit)
            if entries:
                return endpoint, DisableWork(epoch, entries)
            stops = self._pending_delete_stop.get(broker_id)
            if stops:
                return endpoint, DisableWork(epoch, list(stops.values())[: self._limit])
            removals = self._pending_remove.get(broker_id)
            if removals:
                batch = [(name, tid, p) for (tid, p), name in list(removals.items())[: self._limit]]
                return endpoint, RemoveWork(epoch, batch)
            assignments = self._assignments_owed(broker_id)
            if assignments:
                return endpoint, AssignWork(epoch, assignments, broker_id)
            return None

    def on_disable_response(
        self, broker_id: int, work: DisableWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._term.lock:
            stops = self._pending_delete_stop.get(broker_id, {})
            for entry, error in zip(work.entries, errors, strict=True):
                key = (entry.topic_id, entry.partition)
                if error is None and stops.get(key) == entry:
                    del stops[key]
            disabled = self._disablements.broker_acked(
                broker_id, work.controller_epoch, work.entries, errors
            )
        if disabled is None:
            return
        self._term.topic_writes.wait(disabled)  # outside the lock: alters keep coming
        if disabled.error is not None:
            log.error(
                "Could not persist DISABLED for %d of %d topics (%s...): %s",
                len(disabled.changes) - disabled.committed,
                len(disabled.changes),
                disabled.changes[disabled.committed][1].name,
                disabled.error,
            )

    def on_assign_response(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._term.lock:
            if self._term.active_epoch != work.controller_epoch:
                return
            pending = self._pending_assign.get(broker_id, {})
            failed = {e.message for e in errors if e is not None}
            for topic, generation in work.topics:
                if pending.get(topic.name) == generation:
                    del pending[topic.name]
            self._hosted(broker_id, work, errors)
            if failed:
                log.warning("Broker %d rejected assignments: %s", broker_id, "; ".join(failed))

    def on_remove_response(
        self, broker_id: int, work: RemoveWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._term.lock:
            pending = self._pending_remove.get(broker_id, {})
            for (_, topic_id, partition), error in zip(work.partitions, errors, strict=True):
                if error is None:
                    pending.pop((topic_id, partition), None)
                else:
                    log.warning("Broker %d could not remove a partition: %s", broker_id, error)

    def on_stale_controller_epoch(self, broker_id: int, message: str) -> None:
        log.error(
            "Broker %d rejected controller epoch %s as stale (%s): another controller is active",
            broker_id,
            self._term.active_epoch,
            message,
        )
        self._term.step_down(f"broker {broker_id} has seen a newer controller epoch")

    # ----------------------------------------------------------------------------- inside

    def _assignments_owed(self, broker_id: int) -> list[tuple[TopicMetadata, int]]:
        """Topics whose configs the broker has not acked, up to about the request limit in
        partitions; deleted topics are dropped from what it is owed on the way."""
        pending = self._pending_assign.get(broker_id)
        if not pending:
            return []
        topics = self._term.image.topics
        batch: list[tuple[TopicMetadata, int]] = []
        count = 0
        gone = []
        for name, generation in pending.items():
            topic = topics.get(name)
            if topic is None:
                gone.append(name)
                continue
            batch.append((topic, generation))
            count += len(topic.partitions_on(broker_id))
            if count >= self._limit:
                break
        for name in gone:
            del pending[name]
        return batch

    def _hosted(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None:
        """The partitions an assignment answer acked are hosted by their leader (the answer's
        errors are parallel to the request's partitions, topic by topic)."""
        if not self._unhosted:
            return
        outcomes = iter(errors)
        became_hosted = False
        for topic, _ in work.topics:
            for partition in topic.partitions_on(broker_id):
                if next(outcomes, None) is not None:
                    continue
                unhosted = self._unhosted.get(topic.topic_id)
                if unhosted is not None and partition in unhosted:
                    unhosted.discard(partition)
                    became_hosted = True
                    if not unhosted:
                        del self._unhosted[topic.topic_id]
        if became_hosted:
            self._hosting_changed.notify_all()

    def _owe_removals_of_deleted_topics(self, broker_id: int) -> None:
        """A broker that may have missed a removal (a new term, a new incarnation) is told again
        about every deleted topic whose remote data is still being deleted: a broker still
        hosting such a partition would copy it again. Removing what it does not host is a
        no-op."""
        for job in self._term.image.delete_jobs.values():
            if job.topic_deleted and not job.state.finished:
                for partition in range(job.partition_count):
                    self._pending_remove[broker_id][(job.topic_id, partition)] = job.topic

    def _owe_assignment(self, topic: TopicMetadata) -> None:
        self._generation += 1
        for broker_id in set(topic.replicas):
            self._pending_assign[broker_id][topic.name] = self._generation
