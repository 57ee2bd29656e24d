"""The broker agent: the partitions this broker hosts (replication factor 1, so it leads each of
them), their local logs, and the RemoteLogManager that tiers them. Plain Python: the gRPC servicer
converts at the edge and calls these methods.

Assignments are persisted (``broker.assignment_journal``: a snapshot and a journal in the log dir)
so that a broker restarted after a crash serves its partitions again before the controller
re-sends anything. A controller request is answered only once what it changed is persisted;
changes applied from the KRaft metadata log (which a restarted broker replays from the start) are
persisted together within ``_PERSIST_DELAY_S``. Only the partitions a request touched are
serialized, and the journal appends only the entries that changed: persisting costs what changed,
not what the broker hosts.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from broker.assignment_journal import AssignmentJournal
from broker.config import BrokerConfig
from broker.hosted import HostedPartition, PartitionKey, PartitionStop, entry_from_journal
from broker.log import AppendInfo, BatchRead, Log, LogConfig, TimestampOffset
from broker.rlm.manager import RemoteLogManager
from broker.rlm.partition_tiering import PartitionTiering
from broker.tiering import TieringDriver
from tiered import failpoints
from tiered import rlmm as rlmm_factory
from tiered import rsm as rsm_factory
from tiered.api import (
    BulkDeleteRemoteLogMetadataManager,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.config import (
    CLEANUP_POLICY,
    CLEANUP_POLICY_DELETE,
    TopicConfig,
    validate_topic_name,
)
from tiered.errors import ErrorCode, TieredError
from tiered.retry import Backoff
from tiered.retry_policies import ASSIGNMENT_PERSIST_BACKOFF

log = logging.getLogger(__name__)

# How long changes applied from the metadata log wait to be persisted together (a burst of
# metadata batches then costs one append to the assignment journal, not one each).
_PERSIST_DELAY_S = 0.05


@dataclass(frozen=True)
class PartitionOffsets:
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class PartitionLogDir:
    topic_id_partition: TopicIdPartition
    offsets: PartitionOffsets
    local_size_bytes: int
    remote_size_bytes: int
    remote_segment_count: int
    remote_copy_finished_bytes: int
    tiered_epoch: int
    copying: bool
    copy_lag_bytes: int = 0
    copy_lag_segments: int = 0
    remote_fetch_enabled: bool = False
    remote_log_start_offset: int = -1
    remote_delete_state: str = ""


def _checked_topic_config(tp: TopicIdPartition, configs: Mapping[str, str]) -> TopicConfig:
    """The config a partition is hosted with, checked as the controller checks it.

    The topic name becomes a directory under log.dirs: a name Kafka does not allow ('..', 'a/b',
    '') would put it elsewhere (INVALID_TOPIC_EXCEPTION)."""
    validate_topic_name(tp.topic)
    return _topic_config_of(tuple(sorted(configs.items())))


@functools.lru_cache(maxsize=1024)
def _topic_config_of(items: tuple[tuple[str, str], ...]) -> TopicConfig:
    """Read and checked once per distinct config set: a topic's partitions share one (a refused
    set raises each time; only accepted ones are kept)."""
    return TopicConfig.of(dict(items))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _stop_error(stop: PartitionStop) -> TieredError | None:
    """What is wrong with one DisableRemoteTopic entry, or None; it fails only that entry. Each
    disablement raises the topic's tiered epoch from 0, so a real one is at least 1: stopping
    at a lower epoch would stop copying for a disablement that never happened."""
    if stop.tiered_epoch < 1:
        return TieredError(
            ErrorCode.INVALID_REQUEST,
            f"tiered epoch {stop.tiered_epoch} of partition {stop.partition} of topic id "
            f"{stop.topic_id} is not valid; valid values: an integer >= 1 (a disablement raises "
            f"the epoch from 0)",
        )
    return None


class BrokerAgent:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        config.log_dir.mkdir(parents=True, exist_ok=True)
        self.rlm: RemoteLogManager | None = None
        self._tiering: TieringDriver | None = None
        if config.remote_storage_enabled:
            self.rlm = RemoteLogManager(
                config.rlm, rlmm_factory.create(config.rlmm), rsm_factory.create(config.rsm)
            )
            self._tiering = TieringDriver(self.rlm)
        self._partitions: dict[PartitionKey, HostedPartition] = {}
        # (topic name, partition) -> its key: the local directory a partition owns
        self._by_name: dict[tuple[str, int], PartitionKey] = {}
        # Stops acked for partitions not hosted yet: applied when they are (see broker.tiering).
        self._stops_before_hosting: dict[PartitionKey, PartitionStop] = {}
        self._lock = threading.Lock()
        self._controller_epoch = 0
        self._assignments = AssignmentJournal(config.log_dir)
        # Partitions hosted, re-configured, stopped or removed since the last persist (guarded by
        # the state change lock).
        self._touched: set[PartitionKey] = set()
        self._persist_wanted = threading.Event()
        self._closed = threading.Event()
        self._persister: threading.Thread | None = None
        self.persist_backoff = ASSIGNMENT_PERSIST_BACKOFF
        # Assignment and stop requests arrive from the controller's pushes and from the metadata
        # follower at once; they are applied one at a time (as Kafka's replicaStateChangeLock).
        self._state_change_lock = threading.RLock()
        self._append_listeners: list[Callable[[TopicIdPartition, int], None]] = []
        self._hosting_listeners: list[Callable[[TopicIdPartition], None]] = []
        self._restore_assignments()

    # ----------------------------------------------------------------------------- assignment

    def check_controller_epoch(self, controller_epoch: int) -> None:
        """Rejects a request of a controller older than one already heard from (a zombie).
        Epoch 0 marks a local call (tests, tools), which is not fenced."""
        if controller_epoch == 0:
            return
        with self._lock:
            if controller_epoch < self._controller_epoch:
                raise TieredError(
                    ErrorCode.STALE_CONTROLLER_EPOCH,
                    f"controller epoch {controller_epoch} is older than "
                    f"{self._controller_epoch}, already seen by broker {self.config.node_id}",
                )
            if controller_epoch > self._controller_epoch:
                log.info("Controller epoch is now %d", controller_epoch)
            self._controller_epoch = controller_epoch

    @property
    def controller_epoch(self) -> int:
        return self._controller_epoch

    def assign(
        self,
        assignments: Iterable[tuple[TopicIdPartition, Mapping[str, str], int]],
        controller_epoch: int = 0,
        *,
        persist_now: bool = True,
    ) -> list[TieredError | None]:
        """Hosts each partition with its topic's configs and tiered epoch, or re-configures a
        hosted one: retention, segments, Kafka 3.9's copy pause, a re-enable. The epoch and
        ``remote.storage.enable=false`` set the tiering of a partition hosted for the first time
        only; a hosted one stops tiering through :meth:`disable_remote_topic` alone (the rules
        are ``broker.tiering``'s). One partition's bad config fails only it.

        The assignments are persisted before this returns, unless ``persist_now`` is False: the
        metadata follower's changes, which a restarted broker replays from the log anyway (and
        which nobody is acked for), are persisted a moment later, together."""
        with self._state_change_lock:
            self.check_controller_epoch(controller_epoch)
            outcomes: list[TieredError | None] = []
            for tp, configs, tiered_epoch in assignments:
                try:
                    self._assign(tp, dict(configs), tiered_epoch)
                    outcomes.append(None)
                except ValueError as e:
                    outcomes.append(TieredError(ErrorCode.INVALID_CONFIG, str(e)))
                except TieredError as e:
                    outcomes.append(e)
            if persist_now:
                self._persist_assignments()
            else:
                self._persist_soon()
            return outcomes

    def _assign(self, tp: TopicIdPartition, configs: dict[str, str], tiered_epoch: int) -> None:
        hosted, new = self._host(tp, configs, tiered_epoch)
        if self._tiering is None:
            return
        if new:
            self._tiering.start(hosted, self._stops_before_hosting.pop(hosted.key, None))
        else:
            self._tiering.reconfigure(hosted, tiered_epoch)

    def disable_remote_topic(
        self, controller_epoch: int, stops: Iterable[PartitionStop]
    ) -> list[TieredError | None]:
        """KIP-950 DisableRemoteTopic: stops tiering of each partition for its tiered epoch and
        policy; returns once each stop returned and was persisted (only then may the controller
        count the ack). A partition not hosted here has nothing to stop and is acked; a
        controller's stop (not a local call's, epoch 0: nobody counts that ack) is kept for when
        the partition is hosted, in case its configs then are older than the stop."""
        with self._state_change_lock:
            stops = list(stops)
            self.check_controller_epoch(controller_epoch)
            outcomes: list[TieredError | None] = []
            hosted_stops: dict[int, tuple[HostedPartition, PartitionStop]] = {}
            for index, stop in enumerate(stops):
                hosted = self._partitions.get(stop.key)
                if hosted is not None and self._tiering is not None and _stop_error(stop) is None:
                    self._touched.add(stop.key)
                    hosted_stops[index] = (hosted, stop)
                    outcomes.append(None)
                else:
                    outcomes.append(self._disable_unhosted(stop, keep=controller_epoch != 0))
            if hosted_stops and self._tiering is not None:
                errors = self._tiering.stop(
                    [
                        (hosted, stop.tiered_epoch, stop.policy)
                        for hosted, stop in hosted_stops.values()
                    ]
                )
                for index, error in zip(hosted_stops, errors, strict=True):
                    outcomes[index] = error
            self._persist_assignments()
            acked = [stop for stop, outcome in zip(stops, outcomes, strict=True) if outcome is None]
            if acked:
                log.info(self._stops_summary(controller_epoch, acked))
                failpoints.hit("broker.disable.stopped")
            return outcomes

    def _stops_summary(self, controller_epoch: int, stops: list[PartitionStop]) -> str:
        """One line for a DisableRemoteTopic, naming every partition it stopped (a request
        carries thousands: a line each would cost more than the stops)."""
        groups: dict[tuple[int, str], dict[str, list[int]]] = {}
        for stop in stops:
            hosted = self._partitions.get(stop.key)
            topic = str(stop.topic_id) if hosted is None else hosted.topic_id_partition.topic
            group = groups.setdefault((stop.tiered_epoch, stop.policy.value), {})
            group.setdefault(topic, []).append(stop.partition)
        parts = [
            f"at tiered epoch {epoch} with policy {policy}, {_count(len(topics), 'topic')}: "
            + ", ".join(f"{topic} {sorted(partitions)}" for topic, partitions in topics.items())
            for (epoch, policy), topics in sorted(groups.items())
        ]
        return (
            f"DisableRemoteTopic of controller epoch {controller_epoch}: tiering stopped for "
            f"{_count(len(stops), 'partition')} " + "; ".join(parts)
        )

    def _disable_unhosted(self, stop: PartitionStop, *, keep: bool) -> TieredError | None:
        """A stop with nothing hosted to stop: an invalid one's error, else None (kept, for a
        controller's stop, for when the partition is hosted)."""
        invalid = _stop_error(stop)
        if invalid is not None or self._tiering is None:
            return invalid
        log.info(
            "DisableRemoteTopic for partition %d of topic id %s at tiered epoch %d, not "
            "hosted here: nothing to stop%s",
            stop.partition,
            stop.topic_id,
            stop.tiered_epoch,
            " (kept for when it is)" if keep else "",
        )
        known = self._stops_before_hosting.get(stop.key)
        if keep and (known is None or known.tiered_epoch <= stop.tiered_epoch):
            self._stops_before_hosting[stop.key] = stop
            self._touched.add(stop.key)
        return None

    def _host(
        self, tp: TopicIdPartition, configs: dict[str, str], tiered_epoch: int
    ) -> tuple[HostedPartition, bool]:
        """The partition, hosted with these configs; True if it was not hosted before (then at
        ``tiered_epoch``; a hosted partition keeps its own)."""
        topic_config = _checked_topic_config(tp, configs)  # before touching anything
        key = (tp.topic_id, tp.partition)
        self._touched.add(key)
        previous = self._hosted_by_name(tp.topic, tp.partition)
        if previous is not None and previous.topic_id_partition.topic_id != tp.topic_id:
            # A topic of the same name was deleted and created again while this broker missed
            # the removal: the old incarnation's log must not become the new topic's.
            log.warning("%s replaces %s: removing the old one", tp, previous.topic_id_partition)
            self._remove(previous)
        with self._lock:
            hosted = self._partitions.get(key)
            if hosted is not None:
                hosted.config, hosted.raw_configs = topic_config, configs
                return hosted, False
            directory = self.config.log_dir / f"{tp.topic}-{tp.partition}"
            hosted = HostedPartition(
                tp,
                Log.open(directory, LogConfig.of(topic_config)),
                topic_config,
                configs,
                PartitionTiering(tp, tiered_epoch),
            )
            self._partitions[key] = hosted
            self._by_name[(tp.topic, tp.partition)] = key
        log.info("Hosting %s (tiered epoch %d) in %s", tp, tiered_epoch, directory)
        for listener in self._hosting_listeners:
            listener(tp)
        return hosted, True

    def _persist_soon(self) -> None:
        """Called under the state change lock."""
        if self._persister is None:
            self._persister = threading.Thread(
                target=self._persist_later, name="broker-assignments-persister", daemon=True
            )
            self._persister.start()
        self._persist_wanted.set()

    def _persist_later(self) -> None:
        backoff = Backoff(self.persist_backoff)
        while True:
            self._persist_wanted.wait()
            if self._closed.wait(_PERSIST_DELAY_S):
                return  # close() persists what is owed
            self._persist_wanted.clear()
            try:
                self._persist_assignments()
                backoff.reset()
                continue
            except OSError:
                delay_s = backoff.next_delay()
                log.exception("Could not persist the assignments; retrying in %.2fs", delay_s)
                self._persist_wanted.set()
            self._closed.wait(delay_s)

    def _persist_assignments(self) -> None:
        """Appends the entries of the partitions touched since the last call. One writer at a
        time: the controller's pushes and the metadata follower both persist, under the state
        change lock."""
        with self._state_change_lock:
            if not self._touched:
                return
            with self._lock:
                changes = {key: self._journal_text(key) for key in self._touched}
            self._assignments.write(changes)  # what did not change is not written
            self._touched.clear()

    def _journal_text(self, key: PartitionKey) -> str | None:
        hosted = self._partitions.get(key)
        if hosted is not None:
            return hosted.assignment_json()
        stop = self._stops_before_hosting.get(key)
        return None if stop is None else stop.journal_json()

    def _restore_assignments(self) -> None:
        entries = self._assignments.load()
        for e in entries:
            try:
                restored = entry_from_journal(e)
            except (KeyError, TypeError, ValueError) as error:
                log.error("Could not restore %s: %s", e, error)
                continue
            if isinstance(restored, PartitionStop):
                self._stops_before_hosting[restored.key] = restored
                continue
            tp = restored.topic_id_partition
            try:
                hosted, _ = self._host(tp, restored.configs, restored.tiered_epoch)
                restored.restore(hosted)  # as persisted before the crash
                if self._tiering is not None:
                    self._tiering.restore(hosted)
            except (ValueError, TieredError) as error:
                log.error("Could not restore %s: %s", tp, error)
        self._touched.clear()  # as the journal holds them
        if entries:
            log.info("Restored %d partitions from %s", len(entries), self.config.log_dir)

    def _hosted_by_name(self, topic: str, partition: int) -> HostedPartition | None:
        with self._lock:
            key = self._by_name.get((topic, partition))
            return None if key is None else self._partitions.get(key)

    def remove_partitions(
        self, controller_epoch: int, partitions: Iterable[PartitionKey]
    ) -> list[TieredError | None]:
        """A deleted topic: stops tiering each partition and deletes its local log. Remote data
        stays for the delete job. Removing a partition that is not hosted is a no-op."""
        with self._state_change_lock:
            self.check_controller_epoch(controller_epoch)
            outcomes: list[TieredError | None] = []
            for key in partitions:
                if self._stops_before_hosting.pop(key, None) is not None:
                    self._touched.add(key)
                hosted = self._partitions.get(key)
                try:
                    if hosted is not None:
                        self._remove(hosted)
                    outcomes.append(None)
                except OSError as e:
                    outcomes.append(TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)))
            self._persist_assignments()
            return outcomes

    def _remove(self, hosted: HostedPartition) -> None:
        tp = hosted.topic_id_partition
        self._touched.add(hosted.key)
        if self._tiering is not None:
            self._tiering.drop(hosted)
        with hosted.lock:
            hosted.log.close()
        shutil.rmtree(hosted.log.directory, ignore_errors=False)
        with self._lock:  # listed until its log is gone, so a removal seen is a removal done
            self._partitions.pop(hosted.key, None)
            if self._by_name.get((tp.topic, tp.partition)) == hosted.key:
                del self._by_name[(tp.topic, tp.partition)]
        log.info("Removed %s and its local log", tp)

    def hosted_by_name(self, topic: str, partition: int) -> HostedPartition | None:
        """The partition of the topic named ``topic`` if hosted here (the Kafka APIs address
        partitions by name), else None."""
        return self._hosted_by_name(topic, partition)

    def hosted(self, topic_id: uuid.UUID, partition: int) -> HostedPartition:
        found = self._partitions.get((topic_id, partition))
        if found is None:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of topic id {topic_id} is not hosted by broker "
                f"{self.config.node_id}",
            )
        return found

    # ----------------------------------------------------------------------------- data path

    def on_append(self, listener: Callable[[TopicIdPartition, int], None]) -> None:
        """Calls ``listener(partition, bytes appended)`` after every append that wrote records,
        on the appending thread (a Kafka Fetch waiting for data wakes up); it must not block."""
        self._append_listeners.append(listener)

    def on_hosting(self, listener: Callable[[TopicIdPartition], None]) -> None:
        """Calls ``listener(partition)`` once a partition is hosted here for the first time
        (the group coordinator loads a ``__consumer_offsets`` partition it now leads); it must
        not block."""
        self._hosting_listeners.append(listener)

    def produce(
        self,
        topic_id: uuid.UUID,
        partition: int,
        records: bytes | bytearray | memoryview,
        leader_epoch: int = 0,
    ) -> AppendInfo:
        """Appends a produce payload (one or more Kafka record batches v2) with
        ``Log.append_batches`` (its errors); durable before this returns. A segment it closed
        is copied to remote storage right away."""
        hosted = self.hosted(topic_id, partition)
        if not records:
            raise TieredError(ErrorCode.INVALID_REQUEST, "a produce request needs records")
        with hosted.lock:
            info = hosted.log.append_batches(records, leader_epoch)
        if info.rolled and self.rlm is not None:
            self.rlm.trigger_copy(hosted.topic_id_partition)
        if not info.duplicate:
            for listener in self._append_listeners:
                listener(hosted.topic_id_partition, len(records))
        return info

    def fetch(
        self, topic_id: uuid.UUID, partition: int, offset: int, max_bytes: int
    ) -> tuple[BatchRead, bool]:
        """Whole batches from the one holding ``offset`` (at least one, else up to
        ``max_bytes``) and whether they came from remote storage. OFFSET_OUT_OF_RANGE outside
        [log start, log end]; KAFKA_STORAGE_ERROR if remote storage fails."""
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        hosted = self.hosted(topic_id, partition)
        log_ = hosted.log
        if offset < log_.log_start_offset or offset > log_.log_end_offset:
            raise TieredError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is outside [{log_.log_start_offset}, {log_.log_end_offset}] "
                f"of {hosted.topic_id_partition}",
            )
        if offset >= log_.local_log_start_offset or self.rlm is None:
            return log_.read(offset, max_bytes), False
        try:
            return self.rlm.read(hosted.topic_id_partition, offset, max_bytes), True
        except RemoteStorageException as e:
            raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e

    def delete_records(self, topic_id: uuid.UUID, partition: int, offset: int) -> int:
        """Kafka's DeleteRecords (``Log.delete_records``: -1 is the high watermark; its
        OFFSET_OUT_OF_RANGE): the log start offset rises to ``offset``, durably, before this
        returns the new low watermark; local segments wholly below it are deleted. Remote
        segments wholly below it are the expiration task's, run now, under every tiering state
        that keeps one (a delete-policy stop leaves them to the bulk delete). A topic whose
        ``cleanup.policy`` lacks ``delete`` is POLICY_VIOLATION, as in Kafka."""
        hosted = self.hosted(topic_id, partition)
        if CLEANUP_POLICY_DELETE not in hosted.config.cleanup_policy:
            raise TieredError(
                ErrorCode.POLICY_VIOLATION,
                f"records of {hosted.topic_id_partition} cannot be deleted: its "
                f"{CLEANUP_POLICY}={','.join(hosted.config.cleanup_policy)} lacks "
                f"{CLEANUP_POLICY_DELETE}",
            )
        low_watermark = hosted.log.delete_records(offset)
        if self.rlm is not None:
            self.rlm.trigger_expiration(hosted.topic_id_partition)
        return low_watermark

    def offset_for_timestamp(
        self, topic_id: uuid.UUID, partition: int, timestamp_ms: int
    ) -> TimestampOffset | None:
        """ListOffsets by timestamp across both tiers: the first record from the log start
        offset on whose timestamp is at least ``timestamp_ms`` (remote segments first, then the
        local log); None if there is none."""
        hosted = self.hosted(topic_id, partition)
        found = None
        if self.rlm is not None and hosted.log.log_start_offset < hosted.log.local_log_start_offset:
            try:
                found = self.rlm.find_offset_by_timestamp(hosted.topic_id_partition, timestamp_ms)
            except RemoteStorageException as e:
                raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e
        return found if found is not None else hosted.log.offset_for_timestamp(timestamp_ms)

    def offsets(self, topic_id: uuid.UUID, partition: int) -> PartitionOffsets:
        log_ = self.hosted(topic_id, partition).log
        return PartitionOffsets(
            log_.log_start_offset, log_.local_log_start_offset, log_.log_end_offset
        )

    def describe_log_dirs(self) -> list[PartitionLogDir]:
        result = []
        for hosted in list(self._partitions.values()):
            tp = hosted.topic_id_partition
            remote = (0, 0, 0)
            remote_start, delete_state = -1, ""
            if self.rlm is not None:
                try:
                    totals = self.rlm.rlmm.remote_log_totals(tp)
                    remote = (
                        totals.size_bytes,
                        totals.segment_count,
                        totals.copy_finished_size_bytes,
                    )
                    if totals.segment_count:
                        first = next(iter(self.rlm.rlmm.list_remote_log_segments(tp)), None)
                        remote_start = -1 if first is None else first.start_offset
                    deleting = (
                        self.rlm.rlmm.remote_partition_delete_state(tp)
                        if isinstance(self.rlm.rlmm, BulkDeleteRemoteLogMetadataManager)
                        else None  # a plugin without the capability: no delete state to show
                    )
                    delete_state = "" if deleting is None else deleting.name
                except RemoteResourceNotFoundException:
                    pass
            lag = self.rlm.copy_lag(tp) if self.rlm is not None else None
            result.append(
                PartitionLogDir(
                    tp,
                    self.offsets(tp.topic_id, tp.partition),
                    sum(s.size_bytes for s in hosted.log.segments()),
                    *remote,
                    tiered_epoch=hosted.tiered_epoch,
                    copying=lag is not None,
                    copy_lag_bytes=sum(s.size_bytes for s in lag or ()),
                    copy_lag_segments=len(lag or ()),
                    remote_fetch_enabled=self.rlm is not None
                    and self.rlm.accepts_remote_fetches(tp),
                    remote_log_start_offset=remote_start,
                    remote_delete_state=delete_state,
                )
            )
        return result

    def close(self) -> None:
        self._closed.set()
        self._persist_wanted.set()
        if self._persister is not None:
            self._persister.join(timeout=10)
        try:
            self._persist_assignments()  # what the persister still owed, if anything
        except OSError:
            log.exception("Could not persist the assignments on close")
        self._assignments.close()
        if self.rlm is not None:
            self.rlm.close()
            self.rlm.rlmm.close()
        for hosted in self._partitions.values():
            hosted.log.close()
