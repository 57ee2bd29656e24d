"""The brokers as the active controller sees them: who is alive, and what each one is owed.

Liveness comes from RegisterBroker and heartbeats, or, for a store whose brokers register
themselves (``MetadataStore.watch_live_brokers``), from the store's live set. Each live broker
gets a ``BrokerChannel``; this is its ``ChannelOwner``: it hands out the broker's owed work
(disables first, from ``DisableCompletion``; then removals of deleted topics' partitions; then
assignments) and takes the answers back, passing disable acks on to ``DisableCompletion``.
Every method takes the term's lock.

A partition placed in this term is *unhosted* until its leader acks the assignment that carries
it: Metadata names no leader for it (LEADER_NOT_AVAILABLE, as Kafka answers before its
LeaderAndIsr reached the leader) and CreateTopics/CreatePartitions wait for it. Naming a leader
that does not host the partition yet made it refuse a producer's first batches and accept the
later ones: records stored out of order, with no error at a client that pipelines requests. A
restarted broker hosts what it acked before from its own journal, so only partitions never acked
are unhosted.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence

from controller.broker_channel import AssignWork, BrokerChannel, DisableWork, RemoveWork, Work
from controller.brokers import BrokerLiveness
from controller.config import ControllerConfig
from controller.disablements import Disablements
from controller.leadership import Term
from controller.metrics import ControllerMetrics
from controller.store import MetadataStore
from tiered.cluster.model import BrokerRegistration, DeleteJobState, MetadataImage, TopicMetadata
from tiered.errors import ErrorCode, TieredError

log = logging.getLogger(__name__)


class BrokerRegistry:
    def __init__(
        self,
        config: ControllerConfig,
        store: MetadataStore,
        term: Term,
        disablements: Disablements,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._store = store
        self._term = term
        self._disablements = disablements
        self.liveness = BrokerLiveness(config.broker_session_timeout_s)
        self._channels: dict[int, BrokerChannel] = {}
        # broker -> topic name -> generation: configs the broker has not acked yet
        self._pending_assign: dict[int, dict[str, int]] = defaultdict(dict)
        self._generation = 0
        # broker -> partitions of deleted topics it should drop; owed again across terms and
        # broker restarts while the topic's remote data is being deleted (a broker that misses it
        # otherwise drops the old log when a topic of the same name arrives)
        self._pending_remove: dict[int, dict[tuple[uuid.UUID, int], str]] = defaultdict(dict)
        # Whether the store's brokers register themselves: learnt once, from the watch it sets.
        self._self_registering: bool | None = None
        self._store_live: dict[int, BrokerRegistration] = {}  # kept while standing by too
        # topic id -> partitions placed in this term that their leader has not acked hosting
        self._unhosted: dict[uuid.UUID, set[int]] = {}
        self._hosting_changed = threading.Condition(term.lock)

    # ----------------------------------------------------------------------------- terms

    def take_over(self, image: MetadataImage) -> None:
        """As a term begins (under the lock): every broker may have missed anything, so every
        assignment is owed again, and every registered broker is presumed alive for a session
        (or, where brokers register themselves, the store's live set will say)."""
        self._pending_assign.clear()
        self._pending_remove.clear()
        self._unhosted.clear()
        for topic in image.topics.values():
            self._owe_assignment(topic)
        for broker_id in image.brokers:
            self._owe_removals_of_deleted_topics(broker_id)
        if self._self_registering is None:
            # The store's watch calls back from a thread of its own, which waits for the lock.
            self._self_registering = self._store.watch_live_brokers(self._on_live_brokers)
        if self._self_registering:
            self.liveness = BrokerLiveness(self._config.broker_session_timeout_s)
        else:
            self.liveness.adopt(image.brokers)

    def serve(self) -> None:
        """Once the term's epoch is published: starts a channel to every registered broker."""
        with self._term.lock:
            if self._self_registering:
                self._on_live_brokers(self._store_live)
            for broker_id in self.liveness.registrations:
                self._channel(broker_id).wake()

    def stand_down(self) -> None:
        """As a term ends: closes every channel (outside the lock: their threads take it)."""
        with self._term.lock:
            channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.close()

    # ----------------------------------------------------------------------------- liveness

    def register(self, registration: BrokerRegistration) -> int:
        """A broker (re)registers over ControllerService. Returns the controller epoch."""
        endpoints = [(registration.host, registration.port)] + [
            (e.host, e.port) for e in registration.kafka_endpoints
        ]
        if not all(host and 0 < port < 65536 for host, port in endpoints):
            raise ValueError(
                "a broker registration needs a host and a port in 1..65535, and so does each of "
                "its Kafka endpoints"
            )
        with self._term.lock:
            epoch = self._term.require_active()
            image = self._term.image
            if image.brokers.get(registration.broker_id) != registration:
                self._term.persist(lambda: self._store.register_broker(registration))
                image.brokers[registration.broker_id] = registration
            if self.liveness.register(registration):
                log.info(
                    "Broker %d registered at %s (incarnation %s)",
                    registration.broker_id,
                    registration.endpoint,
                    registration.incarnation_id,
                )
            self._came_back(registration.broker_id)
            return epoch

    def heartbeat(self, broker_id: int, incarnation_id: uuid.UUID) -> int:
        """Returns the controller epoch; STALE_BROKER_EPOCH when the broker must register."""
        with self._term.lock:
            epoch = self._term.require_active()
            was_live = self.liveness.is_live(broker_id)
            if not self.liveness.heartbeat(broker_id, incarnation_id):
                raise TieredError(
                    ErrorCode.STALE_BROKER_EPOCH,
                    f"broker {broker_id} incarnation {incarnation_id} is not registered; register",
                )
            if not was_live:
                log.info("Broker %d is alive again (unfenced)", broker_id)
                self._channel(broker_id).wake()
            return epoch

    def _on_live_brokers(self, live: Mapping[int, BrokerRegistration]) -> None:
        """The store's live registrations changed (brokers that register themselves)."""
        with self._term.lock:
            self._store_live = dict(live)
            if self._term.active_epoch is None:
                return
            changed = self.liveness.replace_live(live)
            self._term.image.brokers = dict(live)
            for broker_id in changed:
                log.info("Broker %d is registered at %s", broker_id, live[broker_id].endpoint)
                self._came_back(broker_id)

    def _came_back(self, broker_id: int) -> None:
        """A new broker incarnation: it may have lost nothing (persisted assignments), but the
        controller cannot know what it applied, so everything it hosts is re-sent."""
        for topic in self._term.image.topics.values():
            if broker_id in topic.replicas:
                self._generation += 1
                self._pending_assign[broker_id][topic.name] = self._generation
        self._owe_removals_of_deleted_topics(broker_id)
        channel = self._channel(broker_id)
        channel.reset_backoff()
        channel.wake()

    def live_ids(self) -> list[int]:
        """Ids of the live (unfenced) brokers, in order."""
        with self._term.lock:
            return sorted(self.liveness.live())

    def endpoints(self) -> dict[int, str]:
        """Every registered broker's endpoint, fenced ones included."""
        with self._term.lock:
            return {b: r.endpoint for b, r in self.liveness.registrations.items()}

    def registrations(self) -> list[tuple[BrokerRegistration, bool]]:
        """(registration, fenced) of every registered broker, by id."""
        with self._term.lock:
            live = self.liveness.live()
            return [(r, b not in live) for b, r in sorted(self.liveness.registrations.items())]

    # ----------------------------------------------------------------------------- owed work

    def topic_changed(self, topic: TopicMetadata, placed: range = range(0)) -> None:
        """``topic`` was persisted (created, grown by the partitions ``placed``, or
        reconfigured, a disable queued with it): its brokers are owed its configs and are
        woken; the ``placed`` partitions are unhosted until their leaders ack them."""
        with self._term.lock:
            if placed:
                self._unhosted.setdefault(topic.topic_id, set()).update(placed)
            self._owe_assignment(topic)
            self._wake(set(topic.replicas))

    def unhosted_partitions(self, topic_id: uuid.UUID) -> frozenset[int]:
        """The partitions of a topic whose leader does not host them yet."""
        with self._term.lock:
            return frozenset(self._unhosted.get(topic_id, ()))

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

    def topic_deleted(self, topic: TopicMetadata) -> None:
        """``topic`` was deleted: its brokers should drop its partitions."""
        with self._term.lock:
            for pending in self._pending_assign.values():
                pending.pop(topic.name, None)
            self._unhosted.pop(topic.topic_id, None)
            for partition, broker_id in enumerate(topic.replicas):
                self._pending_remove[broker_id][(topic.topic_id, partition)] = topic.name
            self._wake(set(topic.replicas))

    def brokers_owing_removal(self, topic_id: uuid.UUID) -> list[int]:
        """The live brokers that have not yet dropped the partitions of the deleted topic
        ``topic_id`` (its delete job waits for them)."""
        with self._term.lock:
            live = self.liveness.live()
            return sorted(
                broker_id
                for broker_id, owed in self._pending_remove.items()
                if broker_id in live and any(t == topic_id for t, _ in owed)
            )

    def _owe_removals_of_deleted_topics(self, broker_id: int) -> None:
        """A broker that may have missed a removal (a new term, a new incarnation) is told again
        about every deleted topic whose remote data is still being deleted: a broker still
        hosting such a partition would copy it again. Removing what it does not host is a
        no-op."""
        for job in self._term.image.delete_jobs.values():
            if job.topic_deleted and job.state is not DeleteJobState.DONE:
                for partition in range(job.partition_count):
                    self._pending_remove[broker_id][(job.topic_id, partition)] = job.topic

    def _owe_assignment(self, topic: TopicMetadata) -> None:
        self._generation += 1
        for broker_id in set(topic.replicas):
            self._pending_assign[broker_id][topic.name] = self._generation

    def _wake(self, brokers: set[int]) -> None:
        for broker_id in brokers:
            if broker_id in self.liveness.registrations:
                self._channel(broker_id).wake()

    def _channel(self, broker_id: int) -> BrokerChannel:
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = BrokerChannel(
                broker_id,
                self,
                self._config.backoff,
                self._config.request_timeout_s,
                self._metrics,
                credentials=self._config.grpc_security.channel_credentials,
            )
            self._channels[broker_id] = channel
        return channel

    # ----------------------------------------------------------------------------- ChannelOwner

    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        with self._term.lock:
            epoch = self._term.active_epoch
            registration = self.liveness.registrations.get(broker_id)
            if epoch is None or registration is None or not self.liveness.is_live(broker_id):
                return None
            limit = self._config.max_entries_per_request
            # Disables first: after a failover they are what operators are waiting for.
            entries = self._disablements.owed_by(broker_id, limit)
            if entries:
                return registration.endpoint, DisableWork(epoch, entries)
            removals = self._pending_remove.get(broker_id)
            if removals:
                batch_ = [(name, tid, p) for (tid, p), name in list(removals.items())[:limit]]
                return registration.endpoint, RemoveWork(epoch, batch_)
            assignments = self._assignments_owed(broker_id, limit)
            if assignments:
                return registration.endpoint, AssignWork(epoch, assignments, broker_id)
            return None

    def _assignments_owed(self, broker_id: int, limit: int) -> list[tuple[TopicMetadata, int]]:
        """Topics whose configs the broker has not acked, up to about ``limit`` partitions;
        deleted topics are dropped from what it is owed on the way."""
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
            if count >= limit:
                break
        for name in gone:
            del pending[name]
        return batch

    def on_disable_response(
        self, broker_id: int, work: DisableWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._term.lock:
            disabled = self._disablements.broker_acked(
                broker_id, work.controller_epoch, work.entries, errors
            )
        if disabled is not None:
            self._term.topic_writes.wait(disabled)
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
        self._term.step_down()
