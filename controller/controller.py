"""The active controller: the metadata image, the admin operations, the tiered-state machine's
effects, the disablement queue and the per-broker senders.

Every change follows one order: validate (nothing persisted on rejection), persist atomically
(state and epoch with the config), update the in-memory image, then tell brokers. Operations are
serialized by one lock, as Kafka's controller serializes its events; I/O to brokers happens on
the channel threads, outside the lock.

Leadership: ``run`` elects, activates (loads the image, rebuilds the disablement queue from every
DISABLING topic, re-sends everything brokers may have missed), and serves until the store says
leadership is lost or a store write fails (its outcome is then unknown); it then deactivates,
resigns and campaigns again.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import grpc

from controller.broker_channel import AssignWork, BrokerChannel, DisableWork, RemoveWork, Work
from controller.brokers import BrokerLiveness
from controller.config import ControllerConfig
from controller.disablement import DisablementQueue
from controller.jobs.runner import DeleteJobRunner
from controller.store import MetadataStore, MetadataStoreError, TopicChange
from controller.tiered_state import (
    complete_disablement,
    initial_topic_state,
    plan_config_change,
)
from tiered import failpoints
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    MetadataImage,
    TieredState,
    TopicMetadata,
)
from tiered.config import (
    RemoteLogDisablePolicy,
    disable_policy,
    validate_partition_count,
    validate_topic_config_keys,
    validate_topic_configs,
    validate_topic_name,
)
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionState:
    """What the hosting broker reported for one partition (DescribeLogDirs)."""

    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int
    remote_size_bytes: int
    remote_segment_count: int
    remote_log_start_offset: int = -1
    remote_delete_state: str = ""


@dataclass(frozen=True)
class TopicView:
    topic: TopicMetadata
    acks_owed: int = 0
    acks_total: int = 0
    owed_partitions: frozenset[int] = frozenset()
    partition_states: Mapping[int, PartitionState | None] = field(default_factory=dict)
    delete_job: DeleteJob | None = None  # the topic's latest bulk delete, freshest progress

    @property
    def disable_policy(self) -> str:
        return disable_policy(self.topic.configs).value


@dataclass(frozen=True)
class ClusterView:
    controller_id: int
    controller_epoch: int
    controller_endpoint: str
    metadata_mode: str
    brokers: Sequence[tuple[BrokerRegistration, bool]]  # (registration, fenced)


class _RequeuedDisablements:
    """What a newly active controller owes from its predecessor: every partition of every topic
    that was DISABLING when it took over. It logs once every one of them has been re-sent (a
    broker answered a DisableRemoteTopic carrying it, ack or error) and once every such topic is
    DISABLED, with the time since activation: how long a failover mid-DISABLING holds them up."""

    def __init__(self, topics: Sequence[TopicMetadata]) -> None:
        self.started = time.monotonic()
        self.partitions = sum(t.partition_count for t in topics)
        self.topics = len(topics)
        self._unsent: dict[str, set[int]] = {t.name: set(range(t.partition_count)) for t in topics}
        self._undone = {t.name for t in topics}
        self._brokers: set[int] = set()

    def sent(self, broker_id: int, topic: str, partition: int) -> None:
        partitions = self._unsent.get(topic)
        if partitions is None:
            return
        self._brokers.add(broker_id)
        partitions.discard(partition)
        if not partitions:
            del self._unsent[topic]
            if not self._unsent:
                log.info(
                    "Re-sent %d outstanding disablements (every partition of the %d topics "
                    "DISABLING at activation) to brokers %s in %.3fs since activation",
                    self.partitions,
                    self.topics,
                    sorted(self._brokers),
                    time.monotonic() - self.started,
                )

    def done(self, topic: str) -> None:
        if topic not in self._undone:
            return
        self._undone.discard(topic)
        if not self._undone:
            log.info(
                "All %d topics DISABLING at activation are DISABLED, %.3fs since activation",
                self.topics,
                time.monotonic() - self.started,
            )

    def forget(self, topic: str) -> None:
        """A deleted topic is owed nothing any more."""
        if self._unsent.pop(topic, None) is not None and not self._unsent:
            log.info("Every outstanding disablement re-sent (the last ones' topics were deleted)")
        self.done(topic)


# Builds the delete-job runner of an active controller, given how it persists progress.
JobRunnerFactory = Callable[[Callable[[DeleteJob], None]], DeleteJobRunner]


class Controller:
    def __init__(
        self,
        config: ControllerConfig,
        store: MetadataStore,
        jobs: JobRunnerFactory | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self._jobs_factory = jobs
        self._jobs: DeleteJobRunner | None = None
        self._lock = threading.RLock()
        self._epoch: int | None = None  # set while active
        self.image = MetadataImage()
        self.queue = DisablementQueue()
        self.liveness = BrokerLiveness(config.broker_session_timeout_s)
        self._channels: dict[int, BrokerChannel] = {}
        # broker -> topic name -> generation: configs the broker has not acked yet
        self._pending_assign: dict[int, dict[str, int]] = defaultdict(dict)
        self._generation = 0
        # broker -> partitions of deleted topics it should drop (best effort: a broker that
        # misses it drops the old log when a topic of the same name arrives)
        self._pending_remove: dict[int, dict[tuple[uuid.UUID, int], str]] = defaultdict(dict)
        self._in_doubt = threading.Event()
        self._activated = threading.Event()
        self._describe_pool = ThreadPoolExecutor(8, thread_name_prefix="controller-describe")
        self._describe_lock = threading.Lock()
        self._describe_stubs: dict[str, tuple[grpc.Channel, pb_grpc.BrokerServiceStub]] = {}
        self._zk_watch_started = False
        self._zk_live: dict[int, BrokerRegistration] = {}
        self._requeued = _RequeuedDisablements(())

    # ----------------------------------------------------------------------------- leadership

    @property
    def active_epoch(self) -> int | None:
        return self._epoch

    def wait_active(self, timeout_s: float) -> bool:
        return self._activated.wait(timeout_s)

    def run(self, stop: threading.Event) -> None:
        """Campaigns, serves while active, and campaigns again after losing leadership."""
        while not stop.is_set():
            try:
                epoch = self.store.elect(self.config.node_id, self.config.endpoint, stop)
            except MetadataStoreError as e:
                log.warning("Election failed (%s); retrying", e)
                stop.wait(1.0)
                continue
            if epoch is None:
                break
            try:
                self._activate(epoch)
            except Exception:
                log.exception("Activation as controller epoch %d failed; resigning", epoch)
                self._deactivate()
                continue
            while not (stop.is_set() or self.store.leadership_lost.is_set()):
                if self._in_doubt.wait(0.5):
                    break
            reason = (
                "stopping"
                if stop.is_set()
                else "a metadata write failed"
                if self._in_doubt.is_set()
                else "leadership lost"
            )
            log.warning("Controller epoch %d: stepping down (%s)", epoch, reason)
            self._deactivate()
        self._deactivate()

    def _activate(self, epoch: int) -> None:
        image = self.store.load()
        with self._lock:
            self.image = image
            self.queue = DisablementQueue()
            self._pending_assign.clear()
            self._pending_remove.clear()
            disabling: list[TopicMetadata] = []
            for topic in image.topics.values():
                if topic.tiered_state is TieredState.DISABLING:
                    self.queue.enqueue(topic)
                    disabling.append(topic)
                self._mark_assign(topic)
            self._requeued = _RequeuedDisablements(disabling)
            if self.store.mode == "zookeeper":
                self.liveness = BrokerLiveness(self.config.broker_session_timeout_s)
            else:
                self.liveness.adopt(image.brokers)
            self._in_doubt.clear()
            self._epoch = epoch
        if self.store.mode == "zookeeper":
            if not self._zk_watch_started:
                self._zk_watch_started = self.store.watch_live_brokers(self._on_live_brokers)
            self._on_live_brokers(self._zk_live)
        with self._lock:
            for broker_id in self.liveness.registrations:
                self._channel(broker_id).wake()
        self._start_jobs(list(image.delete_jobs.values()))
        self._activated.set()
        log.info(
            "Active as controller %d with controller epoch %d: %d topics, %d brokers, %d topics "
            "DISABLING re-queued",
            self.config.node_id,
            epoch,
            len(image.topics),
            len(image.brokers),
            len(disabling),
        )

    def _deactivate(self) -> None:
        self._activated.clear()
        with self._lock:
            self._epoch = None
            channels, self._channels = self._channels, {}
            jobs, self._jobs = self._jobs, None
        for channel in channels.values():
            channel.close()
        if jobs is not None:
            jobs.stop()
        self.store.resign()

    # ----------------------------------------------------------------------------- delete jobs

    def _start_jobs(self, jobs: list[DeleteJob]) -> None:
        unfinished = [j for j in jobs if j.state is not DeleteJobState.DONE]
        if self._jobs_factory is None:
            if unfinished:
                log.error(
                    "%d delete jobs are unfinished but this controller cannot run them: set "
                    "remote.storage.root (and the rlmm.* keys) as on the brokers",
                    len(unfinished),
                )
            return
        runner = self._jobs_factory(self._persist_job)
        runner.start(unfinished)
        with self._lock:
            self._jobs = runner
        if unfinished:
            log.info("Resuming %d unfinished delete jobs", len(unfinished))

    def _persist_job(self, job: DeleteJob) -> None:
        with self._lock:
            self._require_active()
            self._persist(lambda: self.store.put_delete_job(job))
            self.image.delete_jobs[job.key] = job

    def _latest_jobs(self) -> dict[uuid.UUID, DeleteJob]:
        """Each topic's latest delete job, freshest progress first (one pass over the jobs)."""
        latest: dict[uuid.UUID, DeleteJob] = {}
        for (topic_id, _), job in self.image.delete_jobs.items():
            known = latest.get(topic_id)
            if known is None or job.tiered_epoch > known.tiered_epoch:
                latest[topic_id] = job
        if self._jobs is not None:
            latest = {t: self._jobs.progress(j) for t, j in latest.items()}
        return latest

    def close(self) -> None:
        self._deactivate()
        self._describe_pool.shutdown(wait=False)
        with self._describe_lock:
            for channel, _ in self._describe_stubs.values():
                channel.close()
            self._describe_stubs.clear()

    def _require_active(self) -> int:
        epoch = self._epoch
        if epoch is None:
            active = None
            with contextlib.suppress(MetadataStoreError):
                active = self.store.active_controller()
            where = f"; the active controller is {active[0]} at {active[1]}" if active else ""
            raise TieredError(
                ErrorCode.NOT_CONTROLLER,
                f"controller {self.config.node_id} is not the active controller{where}",
            )
        return epoch

    def _persist(self, write: Callable[[], None]) -> None:
        """Runs a store write; a failure leaves the outcome unknown, so this controller steps
        down and the next one reloads the truth."""
        try:
            write()
        except MetadataStoreError as e:
            self._in_doubt.set()
            raise TieredError(
                ErrorCode.NOT_CONTROLLER,
                f"the metadata store write failed ({e}); the controller is stepping down, retry",
            ) from e

    # ----------------------------------------------------------------------------- brokers

    def _channel(self, broker_id: int) -> BrokerChannel:
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = BrokerChannel(
                broker_id, self, self.config.backoff, self.config.request_timeout_s
            )
            self._channels[broker_id] = channel
        return channel

    def _mark_assign(self, topic: TopicMetadata) -> None:
        self._generation += 1
        for broker_id in set(topic.replicas):
            self._pending_assign[broker_id][topic.name] = self._generation

    def _wake_brokers(self, brokers: set[int]) -> None:
        for broker_id in brokers:
            if broker_id in self.liveness.registrations:
                self._channel(broker_id).wake()

    def _broker_came_back(self, broker_id: int) -> None:
        """A new broker incarnation: it may have lost nothing (persisted assignments), but the
        controller cannot know what it applied, so everything it hosts is re-sent."""
        for topic in self.image.topics.values():
            if broker_id in topic.replicas:
                self._generation += 1
                self._pending_assign[broker_id][topic.name] = self._generation
        channel = self._channel(broker_id)
        channel.failures = 0
        channel.wake()

    def register_broker(self, registration: BrokerRegistration) -> int:
        """KRaft mode: a broker (re)registers. Returns the controller epoch."""
        if not registration.host or not 0 < registration.port < 65536:
            raise ValueError("a broker registration needs a host and a port in 1..65535")
        with self._lock:
            epoch = self._require_active()
            known = self.image.brokers.get(registration.broker_id)
            if known != registration:
                self._persist(lambda: self.store.register_broker(registration))
                self.image.brokers[registration.broker_id] = registration
            if self.liveness.register(registration):
                log.info(
                    "Broker %d registered at %s (incarnation %s)",
                    registration.broker_id,
                    registration.endpoint,
                    registration.incarnation_id,
                )
            self._broker_came_back(registration.broker_id)
            return epoch

    def broker_heartbeat(self, broker_id: int, incarnation_id: uuid.UUID) -> int:
        with self._lock:
            epoch = self._require_active()
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
        """ZooKeeper mode: the ephemeral registrations changed (kept while standing by too)."""
        with self._lock:
            self._zk_live = dict(live)
            if self._epoch is None:
                return
            changed = self.liveness.replace_live(live)
            self.image.brokers = dict(live)
            for broker_id in changed:
                log.info("Broker %d is registered at %s", broker_id, live[broker_id].endpoint)
                self._broker_came_back(broker_id)

    # ----------------------------------------------------------------------------- channel owner

    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        with self._lock:
            epoch = self._epoch
            registration = self.liveness.registrations.get(broker_id)
            if epoch is None or registration is None or not self.liveness.is_live(broker_id):
                return None
            limit = self.config.max_entries_per_request
            # Disables first: after a failover they are what operators are waiting for.
            entries = self.queue.owed_by(broker_id, limit)
            if entries:
                return registration.endpoint, DisableWork(epoch, entries)
            removals = self._pending_remove.get(broker_id)
            if removals:
                batch_ = [(name, tid, p) for (tid, p), name in list(removals.items())[:limit]]
                return registration.endpoint, RemoveWork(epoch, batch_)
            pending = self._pending_assign.get(broker_id)
            if pending:
                batch: list[tuple[TopicMetadata, int]] = []
                count = 0
                gone = []
                for name, generation in pending.items():
                    topic = self.image.topics.get(name)
                    if topic is None:
                        gone.append(name)
                        continue
                    batch.append((topic, generation))
                    count += len(topic.partitions_on(broker_id))
                    if count >= limit:
                        break
                for name in gone:
                    del pending[name]
                if batch:
                    return registration.endpoint, AssignWork(epoch, batch, broker_id)
            return None

    def on_disable_response(
        self, broker_id: int, work: DisableWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._lock:
            if self._epoch != work.controller_epoch:
                return
            completed: list[TopicMetadata] = []
            for entry, error in zip(work.entries, errors, strict=True):
                self._requeued.sent(broker_id, entry.topic, entry.partition)
                if error is not None:
                    log.warning(
                        "Broker %d could not stop %s-%d for tiered epoch %d: %s",
                        broker_id,
                        entry.topic,
                        entry.partition,
                        entry.tiered_epoch,
                        error,
                    )
                    continue
                done = self.queue.ack(broker_id, entry)
                if done is not None:
                    completed.append(done)
                elif entry.topic in self.queue:
                    failpoints.hit("controller.disable.some_acked")
            if completed:
                self._complete_disablements(completed)

    def _complete_disablements(self, acked: Sequence[TopicMetadata]) -> None:
        """Persists DISABLED (and, with the delete policy, the bulk delete job) for every topic
        whose last ack one broker response brought, in one store write: a response acking 10k
        topics costs one fsync'd batch (KRaft) or a few multis (ZooKeeper), not 10k."""
        changes: list[TopicChange] = []
        for topic in acked:
            current = self.image.topics.get(topic.name)
            if current is None or current.topic_id != topic.topic_id:
                continue
            after = complete_disablement(current)
            job = None
            if disable_policy(after.configs) is RemoteLogDisablePolicy.DELETE:
                job = DeleteJob(
                    after.name, after.topic_id, after.tiered_epoch, after.partition_count
                )
            changes.append((current, after, job))
        if not changes:
            return
        failpoints.hit("controller.disable.all_acked")
        try:
            self._persist(lambda: self.store.update_topics(changes))
        except TieredError:
            log.exception(
                "Could not persist DISABLED for %d topics (%s...)", len(changes), changes[0][0].name
            )
            return
        for _, after, job in changes:
            self.image.put_topic(after)
            self._requeued.done(after.name)
            log.info(
                "Topic %s: every broker acked tiered epoch %d; DISABLED (policy %s)",
                after.name,
                after.tiered_epoch,
                disable_policy(after.configs).value,
            )
            if job is not None:
                self.image.delete_jobs[job.key] = job
                if self._jobs is not None:
                    self._jobs.submit(job)
                log.info(
                    "Topic %s: bulk delete of remote data below tiered epoch %d queued",
                    after.name,
                    after.tiered_epoch,
                )

    def on_assign_response(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._lock:
            if self._epoch != work.controller_epoch:
                return
            pending = self._pending_assign.get(broker_id, {})
            failed = {e.message for e in errors if e is not None}
            for topic, generation in work.topics:
                if pending.get(topic.name) == generation:
                    del pending[topic.name]
            if failed:
                log.warning("Broker %d rejected assignments: %s", broker_id, "; ".join(failed))

    def on_remove_response(
        self, broker_id: int, work: RemoveWork, errors: Sequence[TieredError | None]
    ) -> None:
        with self._lock:
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
            self._epoch,
            message,
        )
        self._in_doubt.set()

    # ----------------------------------------------------------------------------- admin

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], validate_only: bool = False
    ) -> TopicMetadata:
        validate_topic_name(name)
        validate_partition_count(partitions)
        normalized = validate_topic_configs(configs)
        with self._lock:
            self._require_active()
            if name in self.image.topics:
                raise TieredError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            live = sorted(self.liveness.live())
            if not live:
                raise TieredError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    "no live brokers to host the partitions (replication factor 1)",
                )
            start = random.randrange(len(live))
            replicas = tuple(live[(start + p) % len(live)] for p in range(partitions))
            state, epoch = initial_topic_state(normalized)
            topic = TopicMetadata(name, uuid.uuid4(), replicas, normalized, state, epoch)
            if validate_only:
                return topic
            self._persist(lambda: self.store.create_topic(topic))
            self.image.put_topic(topic)
            self._mark_assign(topic)
            self._wake_brokers(set(replicas))
        log.info(
            "Created topic %s (%s): %d partitions on brokers %s, tiered %s",
            name,
            topic.topic_id,
            partitions,
            sorted(set(replicas)),
            state.value,
        )
        return topic

    def delete_topic(self, name: str) -> None:
        with self._lock:
            self._require_active()
            topic = self._topic(name)
            self._persist(lambda: self.store.delete_topic(topic))
            self.image.remove_topic(topic.topic_id)
            self.queue.remove(name)
            self._requeued.forget(name)
            for pending in self._pending_assign.values():
                pending.pop(name, None)
            for partition, broker_id in enumerate(topic.replicas):
                self._pending_remove[broker_id][(topic.topic_id, partition)] = name
            self._wake_brokers(set(topic.replicas))
        log.info("Deleted topic %s (%s)", name, topic.topic_id)

    def _topic(self, name: str) -> TopicMetadata:
        topic = self.image.topics.get(name)
        if topic is None:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            )
        return topic

    def alter_configs(
        self,
        name: str,
        configs: Mapping[str, str] | None = None,
        set_: Mapping[str, str] | None = None,
        delete: Sequence[str] = (),
        validate_only: bool = False,
    ) -> TopicMetadata:
        """Replaces the topic's configs (``configs``) or sets and deletes keys; a change of
        ``remote.storage.enable`` fires the state machine. Persisted before brokers are told."""
        with self._lock:
            self._require_active()
            before = self._topic(name)
            requested: set[str] | None = None
            if configs is not None:
                new = dict(configs)
            else:
                # The set keys are checked with the whole new set below; a deleted key would
                # only vanish from it, so a typo there is caught here, before anything changes.
                validate_topic_config_keys(delete)
                new = dict(before.configs)
                for key in delete:
                    new.pop(key, None)
                new.update(set_ or {})
                requested = {*delete, *(set_ or {})}
            after, trigger = plan_config_change(before, new, requested_keys=requested)
            if validate_only or after == before:
                return after
            self._persist(lambda: self.store.update_topic(before, after))
            if trigger == "disable":
                failpoints.hit("controller.disable.persisted")
            self.image.put_topic(after)
            if trigger == "disable":
                self.queue.enqueue(after)
            self._mark_assign(after)
            self._wake_brokers(set(after.replicas))
        if trigger is not None:
            log.info(
                "Topic %s: %s -> %s, tiered epoch %d (policy %s)",
                name,
                before.tiered_state.value,
                after.tiered_state.value,
                after.tiered_epoch,
                disable_policy(after.configs).value,
            )
        return after

    def describe_topics(
        self, names: Sequence[str] = (), include_partition_state: bool = False
    ) -> list[TopicView | TieredError]:
        with self._lock:
            self._require_active()
            wanted = list(names) or sorted(self.image.topics)
            jobs = self._latest_jobs()
            views: list[TopicView | TieredError] = []
            for name in wanted:
                topic = self.image.topics.get(name)
                if topic is None:
                    views.append(
                        TieredError(
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                        )
                    )
                    continue
                owed, total = self.queue.progress(name) or (0, 0)
                views.append(
                    TopicView(
                        topic,
                        owed,
                        total,
                        frozenset(self.queue.owed_partitions(name)),
                        delete_job=jobs.get(topic.topic_id),
                    )
                )
            brokers = {b: r.endpoint for b, r in self.liveness.registrations.items()}
        if not include_partition_state:
            return views
        wanted_brokers = {
            b for v in views if isinstance(v, TopicView) for b in v.topic.replicas if b in brokers
        }
        reports = self._describe_log_dirs({b: brokers[b] for b in wanted_brokers})
        result: list[TopicView | TieredError] = []
        for v in views:
            if isinstance(v, TieredError):
                result.append(v)
                continue
            states: dict[int, PartitionState | None] = {}
            for p, b in enumerate(v.topic.replicas):
                states[p] = reports.get(b, {}).get((v.topic.topic_id, p))
            result.append(replace(v, partition_states=states))
        return result

    def _describe_stub(self, endpoint: str) -> pb_grpc.BrokerServiceStub:
        """One channel per broker endpoint for describes (``--wait`` polls every half second)."""
        with self._describe_lock:
            found = self._describe_stubs.get(endpoint)
            if found is None:
                channel = grpc.insecure_channel(endpoint)
                stub = pb_grpc.BrokerServiceStub(channel)  # type: ignore[no-untyped-call]
                found = self._describe_stubs[endpoint] = (channel, stub)
            return found[1]

    def _describe_log_dirs(
        self, brokers: Mapping[int, str]
    ) -> dict[int, dict[tuple[uuid.UUID, int], PartitionState]]:
        def one(broker_id: int, endpoint: str) -> dict[tuple[uuid.UUID, int], PartitionState]:
            response: pb.DescribeLogDirsResponse = self._describe_stub(endpoint).DescribeLogDirs(
                pb.DescribeLogDirsRequest(), timeout=5.0
            )
            return {
                (uuid.UUID(bytes=d.partition.topic_id), d.partition.partition): PartitionState(
                    d.offsets.log_start_offset,
                    d.offsets.local_log_start_offset,
                    d.offsets.log_end_offset,
                    d.remote_size_bytes,
                    d.remote_segment_count,
                    d.remote_log_start_offset,
                    d.remote_delete_state,
                )
                for d in response.partitions
            }

        futures = {b: self._describe_pool.submit(one, b, e) for b, e in brokers.items()}
        reports: dict[int, dict[tuple[uuid.UUID, int], PartitionState]] = {}
        for b, future in futures.items():
            try:
                reports[b] = future.result()
            except Exception as e:
                log.info("Broker %d did not describe its log dirs: %s", b, e)
        return reports

    def describe_configs(self, name: str) -> TopicMetadata:
        with self._lock:
            self._require_active()
            return self._topic(name)

    def describe_cluster(self) -> ClusterView:
        with self._lock:
            epoch = self._require_active()
            live = self.liveness.live()
            return ClusterView(
                self.config.node_id,
                epoch,
                self.config.endpoint,
                self.store.mode,
                [(r, b not in live) for b, r in sorted(self.liveness.registrations.items())],
            )
