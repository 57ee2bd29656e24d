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

import json
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.assignment_journal import AssignmentJournal
from broker.config import BrokerConfig, TopicConfig
from broker.log import Log, Record
from broker.rlm.manager import RemoteLogManager, TieredPartition
from tiered import failpoints
from tiered import rlmm as rlmm_factory
from tiered import rsm as rsm_factory
from tiered.api import RemoteResourceNotFoundException, TopicIdPartition
from tiered.config import (
    RemoteLogDisablePolicy,
    disable_policy,
    validate_topic_configs,
    validate_topic_name,
)
from tiered.errors import ErrorCode, TieredError

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


@dataclass
class HostedPartition:
    topic_id_partition: TopicIdPartition
    log: Log
    config: TopicConfig
    raw_configs: dict[str, str]
    tiered_epoch: int
    stopped_policy: str | None = None  # tiering stopped at tiered_epoch with this policy
    lock: threading.Lock = field(default_factory=threading.Lock)

    def assignment_json(self) -> str:
        """This partition's assignment journal entry (the journal skips it if unchanged)."""
        tp = self.topic_id_partition
        entry = {
            "topic_id": str(tp.topic_id),
            "topic": tp.topic,
            "partition": tp.partition,
            "configs": self.raw_configs,
            "tiered_epoch": self.tiered_epoch,
            "stopped_policy": self.stopped_policy,
        }
        # Compact: one line of the journal.
        return json.dumps(entry, separators=(",", ":"))


def _checked_topic_config(tp: TopicIdPartition, configs: Mapping[str, str]) -> TopicConfig:
    """The config a partition is hosted with, once the whole assignment is known to be valid.

    The topic name becomes a directory under log.dirs: a name Kafka does not allow ('..', 'a/b',
    '') would put it elsewhere (INVALID_TOPIC_EXCEPTION). TopicConfig reads the keys the log and
    the copier use (a bad one is INVALID_CONFIG, as ever); the controller's validator checks the
    rest, such as remote.log.disable.policy, which the broker reads only when tiering stops: too
    late to refuse the assignment, whose configs would already be replaced and persisted."""
    validate_topic_name(tp.topic)
    topic_config = TopicConfig.from_configs(configs)
    validate_topic_configs(configs)
    return topic_config


def _check_disable_partitions(entries: Iterable[tuple[uuid.UUID, int, int, str]]) -> None:
    """A negative partition makes a DisableRemoteTopic request malformed, as a topic id that is
    not 16 bytes does (and as it does an AssignPartitions request): ValueError, so the whole
    request is refused (INVALID_ARGUMENT) before anything is applied, rather than the entry
    acked as a partition not hosted here."""
    for topic_id, partition, _, _ in entries:
        if partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition} (topic id {topic_id})")


def _disable_entry_error(
    topic_id: uuid.UUID, partition: int, tiered_epoch: int, policy: str
) -> TieredError | None:
    """What is wrong with one DisableRemoteTopic entry, or None; it fails only that entry. Each
    disablement raises the topic's tiered epoch from 0, so a real one is at least 1: stopping
    at a lower epoch would stop copying for a disablement that never happened."""
    if tiered_epoch < 1:
        return TieredError(
            ErrorCode.INVALID_REQUEST,
            f"tiered epoch {tiered_epoch} of partition {partition} of topic id {topic_id} is "
            f"not valid; valid values: an integer >= 1 (a disablement raises the epoch from 0)",
        )
    try:
        RemoteLogDisablePolicy.parse(policy)
    except ValueError as e:
        return TieredError(ErrorCode.INVALID_REQUEST, str(e))
    return None


class BrokerAgent:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        config.log_dir.mkdir(parents=True, exist_ok=True)
        self.rlm: RemoteLogManager | None = None
        if config.remote_storage_enabled:
            self.rlm = RemoteLogManager(
                config.rlm, rlmm_factory.create(config.rlmm), rsm_factory.create(config.rsm)
            )
        self._partitions: dict[tuple[uuid.UUID, int], HostedPartition] = {}
        # (topic name, partition) -> its key: the local directory a partition owns
        self._by_name: dict[tuple[str, int], tuple[uuid.UUID, int]] = {}
        self._lock = threading.Lock()
        self._controller_epoch = 0
        self._assignments = AssignmentJournal(config.log_dir)
        # Partitions hosted, re-configured, stopped or removed since the last persist (guarded by
        # the state change lock).
        self._touched: set[tuple[uuid.UUID, int]] = set()
        self._persist_wanted = threading.Event()
        self._closed = threading.Event()
        self._persister: threading.Thread | None = None
        # Assignment and stop requests arrive from the controller's pushes and from the metadata
        # follower at once; they are applied one at a time (as Kafka's replicaStateChangeLock).
        self._state_change_lock = threading.RLock()
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
        restoring: bool = False,
        persist_now: bool = True,
    ) -> list[TieredError | None]:
        """Hosts (or re-configures) each partition and applies its tiering state: copying when
        ``remote.storage.enable`` is true, stopped for the given tiered epoch when it is false
        and the partition was tiered (the broker may learn a disablement here before
        DisableRemoteTopic arrives; both paths are idempotent), resumed after a re-enable. One
        partition's bad config fails only it.

        The assignments are persisted before this returns, unless ``persist_now`` is False: the
        metadata follower's changes, which a restarted broker replays from the log anyway (and
        which nobody is acked for), are persisted a moment later, together."""
        with self._state_change_lock:
            outcomes = self._assign(assignments, controller_epoch, restoring)
            if persist_now:
                self._persist_assignments()
            else:
                self._persist_soon()
            return outcomes

    def _assign(
        self,
        assignments: Iterable[tuple[TopicIdPartition, Mapping[str, str], int]],
        controller_epoch: int,
        restoring: bool,
    ) -> list[TieredError | None]:
        self.check_controller_epoch(controller_epoch)
        outcomes: list[TieredError | None] = []
        for tp, configs, tiered_epoch in assignments:
            try:
                hosted = self._host(tp, dict(configs), tiered_epoch)
                if self.rlm is not None:
                    self._apply_tiering(hosted, restoring)
                outcomes.append(None)
            except ValueError as e:
                outcomes.append(TieredError(ErrorCode.INVALID_CONFIG, str(e)))
            except TieredError as e:
                outcomes.append(e)
        return outcomes

    def _apply_tiering(self, hosted: HostedPartition, restoring: bool) -> None:
        """Copying runs when ``remote.storage.enable`` is true and Kafka 3.9's
        ``remote.log.copy.disable`` is not; otherwise a partition with remote data is led for
        expiry and remote reads only, stopped at its tiered epoch (a KIP-950 disable uses the
        topic's policy; a copy pause keeps everything, as retain)."""
        assert self.rlm is not None
        tp = hosted.topic_id_partition
        enabled = hosted.config.remote_storage_enable
        copying_wanted = enabled and not hosted.config.remote_log_copy_disable
        if copying_wanted and hosted.stopped_policy is not None and not restoring:
            log.info("Copying of %s resumes at tiered epoch %d", tp, hosted.tiered_epoch)
            hosted.stopped_policy = None
            if self.rlm.is_leading(tp):
                self.rlm.enable_partitions([tp], hosted.tiered_epoch)
                return
        stop: tuple[int, str] | None = None
        if hosted.stopped_policy is not None:
            stop = (hosted.tiered_epoch, hosted.stopped_policy)
        elif enabled and not copying_wanted:
            stop = (hosted.tiered_epoch, RemoteLogDisablePolicy.RETAIN.value)
        elif not enabled and (self.rlm.is_leading(tp) or hosted.tiered_epoch > 0):
            stop = (hosted.tiered_epoch, disable_policy(hosted.raw_configs).value)
        if not copying_wanted and stop is None:
            return  # never tiered: nothing remote to expire or serve
        if not self.rlm.is_leading(tp):
            partition = self._tiered(hosted)
            partition.copy_enabled = stop is None
            self.rlm.on_leadership_change([partition])
        else:
            self.rlm.update_retention(tp, hosted.config.retention)
        if stop is not None:
            error = self._stop(hosted, *stop)
            if error is not None:
                raise error

    def _stop(self, hosted: HostedPartition, tiered_epoch: int, policy: str) -> TieredError | None:
        assert self.rlm is not None
        parsed = RemoteLogDisablePolicy.parse(policy)
        error = self.rlm.stop_partitions([hosted.topic_id_partition], tiered_epoch, parsed)[
            hosted.topic_id_partition
        ]
        if error is not None:
            return TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(error))
        if hosted.stopped_policy is None or tiered_epoch >= hosted.tiered_epoch:
            hosted.tiered_epoch = max(hosted.tiered_epoch, tiered_epoch)
            hosted.stopped_policy = parsed.value
            self._touched.add(
                (hosted.topic_id_partition.topic_id, hosted.topic_id_partition.partition)
            )
        return None

    def disable_remote_topic(
        self, controller_epoch: int, entries: Iterable[tuple[uuid.UUID, int, int, str]]
    ) -> list[TieredError | None]:
        """KIP-950 DisableRemoteTopic: stops tiering of each (topic id, partition) for its tiered
        epoch and policy; returns once each stop returned (only then may the controller count the
        ack). A partition this broker does not host has nothing to stop and is acked."""
        with self._state_change_lock:
            return self._disable_remote_topic(controller_epoch, entries)

    def _disable_remote_topic(
        self, controller_epoch: int, entries: Iterable[tuple[uuid.UUID, int, int, str]]
    ) -> list[TieredError | None]:
        entries = list(entries)
        _check_disable_partitions(entries)  # before the epoch check: a malformed call sets nothing
        self.check_controller_epoch(controller_epoch)
        outcomes: list[TieredError | None] = []
        for topic_id, partition, tiered_epoch, policy in entries:
            invalid = _disable_entry_error(topic_id, partition, tiered_epoch, policy)
            if invalid is not None:
                outcomes.append(invalid)
                continue
            hosted = self._partitions.get((topic_id, partition))
            if hosted is None:
                log.info(
                    "DisableRemoteTopic for partition %d of topic id %s, not hosted here: "
                    "nothing to stop",
                    partition,
                    topic_id,
                )
                outcomes.append(None)
                continue
            if self.rlm is None:
                outcomes.append(None)
                continue
            if not self.rlm.is_leading(hosted.topic_id_partition):
                partition_ = self._tiered(hosted)
                partition_.copy_enabled = False
                self.rlm.on_leadership_change([partition_])
            outcomes.append(self._stop(hosted, tiered_epoch, policy))
        self._persist_assignments()
        if any(outcome is None for outcome in outcomes):
            failpoints.hit("broker.disable.stopped")
        return outcomes

    def _host(
        self, tp: TopicIdPartition, configs: dict[str, str], tiered_epoch: int
    ) -> HostedPartition:
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
            if hosted is None:
                directory = self.config.log_dir / f"{tp.topic}-{tp.partition}"
                hosted = HostedPartition(
                    tp, Log.open(directory, topic_config.log), topic_config, configs, tiered_epoch
                )
                self._partitions[key] = hosted
                self._by_name[(tp.topic, tp.partition)] = key
                log.info("Hosting %s (tiered epoch %d) in %s", tp, tiered_epoch, directory)
            else:
                hosted.config, hosted.raw_configs = topic_config, configs
                hosted.tiered_epoch = max(hosted.tiered_epoch, tiered_epoch)
        return hosted

    def _tiered(self, hosted: HostedPartition) -> TieredPartition:
        return TieredPartition(
            hosted.topic_id_partition,
            hosted.log,
            tiered_epoch=hosted.tiered_epoch,
            retention=hosted.config.retention,
        )

    def _persist_soon(self) -> None:
        """Called under the state change lock."""
        if self._persister is None:
            self._persister = threading.Thread(
                target=self._persist_later, name="broker-assignments-persister", daemon=True
            )
            self._persister.start()
        self._persist_wanted.set()

    def _persist_later(self) -> None:
        while True:
            self._persist_wanted.wait()
            if self._closed.wait(_PERSIST_DELAY_S):
                return  # close() persists what is owed
            self._persist_wanted.clear()
            try:
                self._persist_assignments()
                continue
            except OSError:
                log.exception("Could not persist the assignments; retrying in 1s")
                self._persist_wanted.set()
            self._closed.wait(1.0)

    def _persist_assignments(self) -> None:
        """Appends the entries of the partitions touched since the last call. One writer at a
        time: the controller's pushes and the metadata follower both persist, under the state
        change lock."""
        with self._state_change_lock:
            if not self._touched:
                return
            with self._lock:
                changes = {
                    key: None if hosted is None else hosted.assignment_json()
                    for key in self._touched
                    for hosted in (self._partitions.get(key),)
                }
            self._assignments.write(changes)  # what did not change is not written
            self._touched.clear()

    def _restore_assignments(self) -> None:
        entries = self._assignments.load()
        if not entries:
            return
        for e in entries:
            tp = TopicIdPartition(uuid.UUID(e["topic_id"]), e["topic"], int(e["partition"]))
            try:
                hosted = self._host(tp, dict(e["configs"]), int(e["tiered_epoch"]))
                hosted.stopped_policy = e.get("stopped_policy")  # stopped before the crash
                if self.rlm is not None:
                    self._apply_tiering(hosted, restoring=True)
            except (ValueError, TieredError) as error:
                log.error("Could not restore %s: %s", tp, error)
        self._touched.clear()  # as the journal holds them
        log.info("Restored %d partitions from %s", len(entries), self.config.log_dir)

    def _hosted_by_name(self, topic: str, partition: int) -> HostedPartition | None:
        with self._lock:
            key = self._by_name.get((topic, partition))
            return None if key is None else self._partitions.get(key)

    def remove_partitions(
        self, controller_epoch: int, partitions: Iterable[tuple[uuid.UUID, int]]
    ) -> list[TieredError | None]:
        """A deleted topic: stops tiering each partition and deletes its local log. Remote data
        stays for the delete job. Removing a partition that is not hosted is a no-op."""
        with self._state_change_lock:
            self.check_controller_epoch(controller_epoch)
            outcomes: list[TieredError | None] = []
            for key in partitions:
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
        self._touched.add((tp.topic_id, tp.partition))
        if self.rlm is not None and self.rlm.is_leading(tp):
            self.rlm.on_leadership_change([], {tp})
            self.rlm.rlmm.on_stop_partitions({tp})
        with hosted.lock:
            hosted.log.close()
        shutil.rmtree(hosted.log.directory, ignore_errors=False)
        with self._lock:  # listed until its log is gone, so a removal seen is a removal done
            self._partitions.pop((tp.topic_id, tp.partition), None)
            if self._by_name.get((tp.topic, tp.partition)) == (tp.topic_id, tp.partition):
                del self._by_name[(tp.topic, tp.partition)]
        log.info("Removed %s and its local log", tp)

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

    def produce(
        self,
        topic_id: uuid.UUID,
        partition: int,
        records: Iterable[tuple[bytes | None, bytes, int]],
    ) -> tuple[int, int]:
        """Appends ``(key, value, timestamp_ms)`` records; returns the first and last offsets.
        Each append is durable before this returns."""
        hosted = self.hosted(topic_id, partition)
        first = last = -1
        now_ms = int(time.time() * 1000)
        with hosted.lock:
            active_before = hosted.log.active_segment.base_offset
            for key, value, timestamp_ms in records:
                last = hosted.log.append(
                    key, value, timestamp_ms if timestamp_ms > 0 else now_ms, 0
                )
                first = last if first < 0 else first
            rolled = hosted.log.active_segment.base_offset != active_before
        if first < 0:
            raise TieredError(ErrorCode.INVALID_REQUEST, "a produce request needs records")
        if rolled and self.rlm is not None and hosted.config.remote_storage_enable:
            self.rlm.trigger_copy(hosted.topic_id_partition)  # a segment closed: copy it now
        return first, last

    def fetch(
        self, topic_id: uuid.UUID, partition: int, offset: int, max_bytes: int
    ) -> tuple[list[Record], bool]:
        """Records from ``offset`` and whether they came from remote storage."""
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
        except RemoteResourceNotFoundException as e:
            raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)) from e

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
                    state = getattr(self.rlm.rlmm, "remote_partition_delete_state", None)
                    deleting = state(tp) if state is not None else None
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

    # ----------------------------------------------------------------------------- tiering

    def stop_partitions(
        self, partitions: Iterable[tuple[uuid.UUID, int]], tiered_epoch: int, policy: str
    ) -> list[TieredError | None]:
        """KIP-950 stopPartitions for each partition; one partition's failure fails only it."""
        try:
            disable_policy = RemoteLogDisablePolicy.parse(policy)
        except ValueError as e:
            raise TieredError(ErrorCode.INVALID_REQUEST, str(e)) from None
        with self._state_change_lock:
            return self._stop_hosted(partitions, tiered_epoch, disable_policy)

    def _stop_hosted(
        self,
        partitions: Iterable[tuple[uuid.UUID, int]],
        tiered_epoch: int,
        disable_policy: RemoteLogDisablePolicy,
    ) -> list[TieredError | None]:
        outcomes: list[TieredError | None] = []
        for topic_id, partition in partitions:
            try:
                hosted = self.hosted(topic_id, partition)
            except TieredError as e:
                outcomes.append(e)
                continue
            outcomes.append(
                None if self.rlm is None else self._stop(hosted, tiered_epoch, disable_policy.value)
            )
        self._persist_assignments()
        return outcomes

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
