"""The admin operations of the active controller (AdminService, in plain Python): create,
delete, alter and describe topics, describe the cluster and the metadata Kafka clients need.

A change is validated (nothing persisted on rejection), persisted through the term (state and
epoch with the config, in one write), applied to the image, then passed on: a disable is queued
with ``Disablements`` and every change is owed to the hosting brokers through the
``BrokerRegistry``, whose channels send it outside the lock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from controller.broker_registry import BrokerRegistry
from controller.broker_work import BrokerWork
from controller.delete_jobs import DeleteJobSupervisor
from controller.delete_schedule import cancelled_by
from controller.disablements import Disablements
from controller.leadership import Term
from controller.log_dirs import LogDirsClient, ReportedPartition
from controller.partition_growth import PartitionIncrease, grown_topic, place_partitions
from controller.reachability import Reach
from controller.store import MetadataStore, TopicChange
from controller.tiered_state import (
    DISABLE,
    initial_topic_state,
    plan_config_change,
    was_ever_tiered,
)
from tiered import failpoints
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeletionEstimate,
    TopicMetadata,
)
from tiered.config import (
    INTERNAL_TOPICS,
    REMOTE_STORAGE_ENABLE,
    ConfigOperation,
    RemoteLogDisablePolicy,
    apply_config_operations,
    disable_policy,
    remote_storage_enabled,
    validate_partition_count,
    validate_topic_configs,
    validate_topic_name,
)
from tiered.errors import ErrorCode, TieredError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicView:
    topic: TopicMetadata
    acks_owed: int = 0
    acks_total: int = 0
    owed_partitions: frozenset[int] = frozenset()
    partition_states: Mapping[int, ReportedPartition | None] = field(default_factory=dict)
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
    reach: Mapping[int, Reach] = field(default_factory=dict)  # by broker id


@dataclass(frozen=True)
class TopicAlteration:
    """One topic's config change: ``(key, operation, value)`` operations in order, or with
    ``replace`` its whole new config set (every operation a SET), as Kafka's AlterConfigs."""

    topic: str
    operations: tuple[tuple[str, ConfigOperation, str], ...] = ()
    replace: bool = False

    @classmethod
    def replacing(cls, topic: str, configs: Mapping[str, str]) -> TopicAlteration:
        return cls(topic, tuple((k, ConfigOperation.SET, v) for k, v in configs.items()), True)


@dataclass(frozen=True)
class MetadataView:
    """What Kafka's Metadata needs: live brokers (by id), and each asked-for topic or its
    error."""

    cluster_id: str
    brokers: Sequence[BrokerRegistration]
    topics: Sequence[TopicMetadata | TieredError]
    # topic id -> partitions whose leader does not host them yet (no leader is named for them)
    unhosted: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)


class AlterationAuthorizer(Protocol):
    """Whether the requester may make a config change (the servicer's, for the caller): None
    when allowed, else the error that is the topic's result."""

    def may_alter_configs(self, topic: str) -> TieredError | None:
        """Any change of the topic's configs (AlterConfigs on the topic)."""

    def may_delete_remote_data(self, topic: str) -> TieredError | None:
        """A change that turns tiering off with the delete policy: it destroys the topic's
        remote data (Delete on the topic, besides AlterConfigs)."""


# A change that changes something: (before, after, the state machine's trigger or None).
_Planned = tuple[TopicMetadata, TopicMetadata, str | None]


@dataclass(frozen=True)
class DryRun:
    """A dry run's answer for one topic: the configs and state the change would give it, and,
    for a delete-policy disable, what its bulk delete would remove (None for any other change,
    or when this controller has no remote storage settings to read it with)."""

    topic: TopicMetadata
    would_delete: DeletionEstimate | None = None


def _named_twice(name: str) -> TieredError:
    return TieredError(
        ErrorCode.INVALID_REQUEST,
        f"topic {name!r} appears more than once in the request; valid: each topic once",
    )


def _raise_if(error: TieredError | None) -> None:
    if error is not None:
        raise error


def _deletes_remote_data(after: TopicMetadata, trigger: str | None) -> bool:
    """A disable whose policy, read from the topic's resulting configs, is delete."""
    return trigger == DISABLE and disable_policy(after.configs) is RemoteLogDisablePolicy.DELETE


def _internal_topic_error(name: str, configs: Mapping[str, str]) -> TieredError | None:
    if name in INTERNAL_TOPICS and remote_storage_enabled(configs):
        return TieredError(
            ErrorCode.INVALID_CONFIG,
            f"{REMOTE_STORAGE_ENABLE}='true' is not valid for the internal topic {name!r}: "
            f"its records are the brokers' own; valid: {REMOTE_STORAGE_ENABLE}=false",
        )
    return None


def _unknown_topic(name: str) -> TieredError:
    return TieredError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")


class AdminOperations:
    def __init__(
        self,
        node_id: int,
        endpoint: str,
        store: MetadataStore,
        term: Term,
        brokers: BrokerRegistry,
        work: BrokerWork,
        disablements: Disablements,
        jobs: DeleteJobSupervisor,
        log_dirs: LogDirsClient,
        cluster_id: str = "",
    ) -> None:
        self._node_id = node_id
        self._cluster_id = cluster_id
        self._endpoint = endpoint
        self._store = store
        self._term = term
        self._brokers = brokers
        self._work = work
        self._disablements = disablements
        self._jobs = jobs
        self._log_dirs = log_dirs

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str], validate_only: bool = False
    ) -> TopicMetadata:
        validate_topic_name(name)
        validate_partition_count(partitions)
        normalized = validate_topic_configs(configs)
        _raise_if(_internal_topic_error(name, normalized))
        with self._term.lock:
            self._term.require_active()
            if name in self._term.image.topics:
                raise TieredError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            replicas = place_partitions(self._brokers.live_ids(), partitions)
            state, epoch = initial_topic_state(normalized)
            topic = TopicMetadata(name, uuid.uuid4(), replicas, normalized, state, epoch)
            if validate_only:
                return topic
            self._term.persist(lambda: self._store.writes.create_topic(topic))
            self._term.image.put_topic(topic)
            self._work.topic_changed(topic, placed=range(partitions))
        log.info(
            "Created topic %s (%s): %d partitions on brokers %s, tiered %s",
            name,
            topic.topic_id,
            partitions,
            sorted(set(replicas)),
            state.value,
        )
        return topic

    def create_partitions(
        self, increases: Sequence[PartitionIncrease], validate_only: bool = False
    ) -> list[TopicMetadata | TieredError]:
        """Kafka's CreatePartitions: each topic grown, or its error, in request order. Every
        increase is checked first (``partition_growth``: a refused one changes nothing); the
        accepted ones are persisted in one write, then their brokers are owed the topic and host
        the new partitions, which take the topic's tiering as any partition hosted for the first
        time does (copying at its epoch, or stopped at it once disabled). A topic named twice is
        INVALID_REQUEST for both, as Kafka's "Duplicate topic name."."""
        with self._term.lock:
            self._term.require_active()
            names = [i.topic for i in increases]
            registered = {r.broker_id for r, _ in self._brokers.registrations()}
            live = self._brokers.live_ids()
            results: list[TopicMetadata | TieredError] = []
            growths: list[tuple[TopicMetadata, TopicMetadata]] = []
            for increase in increases:
                if names.count(increase.topic) > 1:
                    results.append(TieredError(ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
                    continue
                try:
                    before = self._current(increase.topic)
                    after = grown_topic(before, increase, registered, live)
                except TieredError as e:
                    results.append(e)
                    continue
                results.append(after)
                growths.append((before, after))
            if validate_only or not growths:
                return results
            self._term.persist(lambda: self._store.writes.add_partitions(growths))
            for before, after in growths:
                self._term.image.put_topic(after)
                self._work.topic_changed(
                    after, placed=range(before.partition_count, after.partition_count)
                )
        for before, after in growths:
            log.info(
                "Topic %s (%s): partitions %d..%d added on brokers %s, tiered %s",
                after.name,
                after.topic_id,
                before.partition_count,
                after.partition_count - 1,
                sorted(set(after.replicas[before.partition_count :])),
                after.tiered_state.value,
            )
        return results

    def delete_topic(self, name: str) -> None:
        """Removes the topic; a topic that was ever tiered is persisted with the delete job of
        every epoch of its remote data, in the same write (a crash must not leave the deletion
        without its job). The brokers are told to drop its partitions, and the job lists the
        remote data once they did (``DeleteJobSupervisor``)."""
        if name in INTERNAL_TOPICS:
            # kafka-topics.sh's refusal: the group coordinators keep their data there.
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"Topic {name} is a kafka internal topic and is not allowed to be marked for "
                f"deletion",
            )
        with self._term.lock:
            self._term.require_active()
            topic = self._current(name)
            job = DeleteJob.of_deleted_topic(topic) if was_ever_tiered(topic) else None
            self._term.persist(lambda: self._store.writes.delete_topic(topic, job))
            self._term.image.remove_topic(topic.topic_id)
            self._disablements.topic_deleted(name)
            self._work.topic_deleted(topic)
            if job is not None:
                self._jobs.queued(job)
        log.info(
            "Deleted topic %s (%s)%s",
            name,
            topic.topic_id,
            f"; its remote data (tiered epochs 0..{topic.tiered_epoch}) goes to a delete job"
            if job is not None
            else "",
        )

    def alter_configs(
        self,
        name: str,
        configs: Mapping[str, str] | None = None,
        set_: Mapping[str, str] | None = None,
        delete: Sequence[str] = (),
        validate_only: bool = False,
        authorizer: AlterationAuthorizer | None = None,
    ) -> TopicMetadata:
        """Replaces the topic's configs (``configs``) or sets and deletes keys: one topic's
        ``alter_topic_configs``, whose error is raised."""
        if configs is not None:
            alteration = TopicAlteration.replacing(name, configs)
        else:
            set_ = set_ or {}
            alteration = TopicAlteration(
                name,
                # A key both deleted and set ends up set: the set is the value asked for.
                tuple(
                    (key, ConfigOperation.DELETE, "")
                    for key in dict.fromkeys(delete)
                    if key not in set_
                )
                + tuple((key, ConfigOperation.SET, value) for key, value in set_.items()),
            )
        [result] = self.alter_topic_configs([alteration], validate_only, authorizer)
        if isinstance(result, TieredError):
            raise result
        return result

    def alter_topic_configs(
        self,
        alterations: Sequence[TopicAlteration],
        validate_only: bool = False,
        authorizer: AlterationAuthorizer | None = None,
    ) -> list[TopicMetadata | TieredError]:
        """Each topic's new value or error, in request order. Every change is validated first
        (a rejected one changes nothing); the accepted ones are persisted in one write, before
        brokers are told; a change of ``remote.storage.enable`` fires the state machine. A
        topic named twice is INVALID_REQUEST for both.

        With ``authorizer``, each change is authorized before anything is written: AlterConfigs
        first (before the topic's existence is told), and, for a change whose *resulting*
        configs turn tiering off with the delete policy, Delete too: however the policy is
        spelled (``remote.log.disable.policy=delete``, ``remote.log.delete.on.disable=true``)
        and whichever earlier alter set it."""
        writes = self._term.topic_writes
        with self._term.lock:
            results, planned = self._validate(alterations, authorizer)
            if validate_only or not planned:
                return results
            disables = {after.name for _, after, trigger in planned if trigger == "disable"}

            def durable(changes: Sequence[TopicChange]) -> None:
                if disables:
                    failpoints.hit("controller.disable.persisted")
                for _, after, cancelled in changes:
                    self._term.image.put_topic(after)
                    if after.name in disables:
                        self._disablements.disabling_persisted(after)
                    if cancelled is not None:
                        self._jobs.cancelled(cancelled)
                    self._work.topic_changed(after)

            # A change that re-enables tiering or sets the retain policy cancels the topic's
            # scheduled delete in the same write.
            changes: list[TopicChange] = [
                (b, a, cancelled_by(self._jobs.scheduled_job(b.topic_id, b.tiered_epoch), a))
                for b, a, _ in planned
            ]
            submission = writes.submit(changes, durable)
        writes.wait(submission)
        failed = {
            change[1].name: error
            for index, change in enumerate(submission.changes)
            if (error := submission.failed(index)) is not None
        }
        if failed:
            results = [
                failed.get(r.name, r) if isinstance(r, TopicMetadata) else r for r in results
            ]
        for before, after, trigger in planned:
            if trigger is not None and after.name not in failed:
                log.info(
                    "Topic %s: %s -> %s, tiered epoch %d (policy %s)",
                    after.name,
                    before.tiered_state.value,
                    after.tiered_state.value,
                    after.tiered_epoch,
                    disable_policy(after.configs).value,
                )
        return results

    def _validate(
        self,
        alterations: Sequence[TopicAlteration],
        authorizer: AlterationAuthorizer | None,
    ) -> tuple[list[TopicMetadata | TieredError], list[_Planned]]:
        """The one validation of config changes, the real ones and the dry runs: each topic's
        new value or error, in request order, and the changes that change something. Under the
        lock; persists nothing."""
        self._term.require_active()
        names = [a.topic for a in alterations]
        results: list[TopicMetadata | TieredError] = []
        planned: list[_Planned] = []
        for alteration in alterations:
            if names.count(alteration.topic) > 1:
                results.append(_named_twice(alteration.topic))
                continue
            try:
                if authorizer is not None:
                    _raise_if(authorizer.may_alter_configs(alteration.topic))
                before = self._current(alteration.topic)
                after, trigger = self._plan(before, alteration)
                _raise_if(_internal_topic_error(after.name, after.configs))
                if authorizer is not None and _deletes_remote_data(after, trigger):
                    _raise_if(authorizer.may_delete_remote_data(alteration.topic))
            except TieredError as e:
                results.append(e)
                continue
            results.append(after)
            if after != before:
                planned.append((before, after, trigger))
        return results, planned

    def dry_run_topic_configs(
        self,
        alterations: Sequence[TopicAlteration],
        authorizer: AlterationAuthorizer | None = None,
    ) -> list[DryRun | TieredError]:
        """``alter_topic_configs`` with ``validate_only``, and for each change that would
        disable tiering with the delete policy what its bulk delete would remove (below the
        epoch the disable would set), read from the RLMM's aggregates outside the lock. Nothing
        is persisted nor queued."""
        with self._term.lock:
            results, planned = self._validate(alterations, authorizer)
        deleting = {
            after.name: after
            for _, after, trigger in planned
            if _deletes_remote_data(after, trigger)
        }
        answers: list[DryRun | TieredError] = []
        for result in results:
            if isinstance(result, TieredError):
                answers.append(result)
                continue
            after = deleting.get(result.name)
            estimate = (
                None
                if after is None
                else self._jobs.estimate(
                    DeleteJob(after.name, after.topic_id, after.tiered_epoch, after.partition_count)
                )
            )
            answers.append(DryRun(result, estimate))
        return answers

    @staticmethod
    def _plan(
        before: TopicMetadata, alteration: TopicAlteration
    ) -> tuple[TopicMetadata, str | None]:
        if alteration.replace:
            new = {key: value for key, _, value in alteration.operations}
            return plan_config_change(before, new)
        new = apply_config_operations(before.configs, alteration.operations)
        requested = {key for key, _, _ in alteration.operations}
        return plan_config_change(before, new, requested_keys=requested)

    def describe_topics(
        self, names: Sequence[str] = (), include_partition_state: bool = False
    ) -> list[TopicView | TieredError]:
        """One view or error per name (every topic when ``names`` is empty). With
        ``include_partition_state`` the hosting brokers are asked, outside the lock."""
        with self._term.lock:
            self._term.require_active()
            topics = self._term.image.topics
            jobs = self._jobs.latest()
            views: list[TopicView | TieredError] = []
            for name in list(names) or sorted(topics):
                topic = topics.get(name)
                if topic is None:
                    views.append(_unknown_topic(name))
                    continue
                owed, total, owed_partitions = self._disablements.progress(topic)
                views.append(
                    TopicView(
                        topic,
                        owed,
                        total,
                        owed_partitions,
                        delete_job=jobs.get(topic.topic_id),
                    )
                )
            endpoints = self._brokers.endpoints()
        if not include_partition_state:
            return views
        return self._with_partition_states(views, endpoints)

    def describe_deleted_topics(self, names: Sequence[str] = ()) -> list[DeleteJob]:
        """The jobs of deleted topics (named in ``names``, or all) whose remote data is still
        being deleted, freshest progress, by name."""
        wanted = set(names)
        with self._term.lock:
            self._term.require_active()
            jobs = self._jobs.deleted_topics_being_deleted()
        return [j for j in jobs if not wanted or j.topic in wanted]

    def _with_partition_states(
        self, views: list[TopicView | TieredError], endpoints: Mapping[int, str]
    ) -> list[TopicView | TieredError]:
        wanted = {
            b for v in views if isinstance(v, TopicView) for b in v.topic.replicas if b in endpoints
        }
        reports = self._log_dirs.describe({b: endpoints[b] for b in wanted})
        result: list[TopicView | TieredError] = []
        for v in views:
            if isinstance(v, TieredError):
                result.append(v)
                continue
            states: dict[int, ReportedPartition | None] = {}
            for p, b in enumerate(v.topic.replicas):
                states[p] = reports.get(b, {}).get((v.topic.topic_id, p))
            result.append(replace(v, partition_states=states))
        return result

    def describe_metadata(self, names: Sequence[str] | None = None) -> MetadataView:
        """The live brokers and the named topics (every topic when ``names`` is None), from the
        image alone: cheap enough for Kafka clients' Metadata requests with 100k topics (the
        topics are listed under the lock, their values are frozen)."""
        with self._term.lock:
            self._term.require_active()
            topics = self._term.image.topics
            found: list[TopicMetadata | TieredError]
            if names is None:
                found = list(topics.values())
            else:
                found = [topics.get(n) or _unknown_topic(n) for n in names]
            live = [r for r, fenced in self._brokers.registrations() if not fenced]
            waiting = self._work.unhosted()
            unhosted = {
                t.topic_id: waiting[t.topic_id]
                for t in found
                if isinstance(t, TopicMetadata) and t.topic_id in waiting
            }
        return MetadataView(self._cluster_id, live, found, unhosted)

    def describe_configs(self, name: str) -> TopicMetadata:
        with self._term.lock:
            self._term.require_active()
            return self._topic(name)

    def describe_cluster(self) -> ClusterView:
        with self._term.lock:
            epoch = self._term.require_active()
            return ClusterView(
                self._node_id,
                epoch,
                self._endpoint,
                self._store.mode,
                self._brokers.registrations(),
                self._brokers.reach(),
            )

    def active_controller(self) -> tuple[int, str] | None:
        """(id, endpoint) of the active controller as the store knows it, for NOT_CONTROLLER
        answers; raises ``MetadataStoreError`` when the store cannot tell."""
        return self._store.active_controller()

    def _current(self, name: str) -> TopicMetadata:
        """The topic as every change submitted so far leaves it: what a change is planned
        from (the image may not have the ones still being written)."""
        topic = self._term.topic_writes.current(name)
        if topic is None:
            raise _unknown_topic(name)
        return topic

    def _topic(self, name: str) -> TopicMetadata:
        topic = self._term.image.topics.get(name)
        if topic is None:
            raise _unknown_topic(name)
        return topic
