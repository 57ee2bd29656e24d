"""Which partitions a broker hosts, with which configs, as the controller says: AssignPartitions
and the KRaft metadata log host and re-configure partitions, DisableRemoteTopic stops their
tiering, RemovePartitions (or a topic removed from the metadata log) deletes their local logs.
Each call of a controller is fenced by its controller epoch first (``ControllerEpochFence``);
each tiering event goes to the ``TieringDriver`` (the rules are ``broker.tiering``'s); what
changed is persisted (``AssignmentPersister``) before a controller's call returns. A broker
restarted hosts again what the journal holds (:meth:`Hosting.restore`).
"""

from __future__ import annotations

import functools
import logging
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from broker.assignment_persister import AssignmentPersister
from broker.controller_epoch import ControllerEpochFence
from broker.hosted import HostedPartition, PartitionKey, PartitionStop, entry_from_journal
from broker.hosted_partitions import HostedPartitions
from broker.log import Log, LogConfig
from broker.rlm.partition_tiering import PartitionTiering
from broker.tiering import TieringDriver
from tiered import failpoints
from tiered.api import TopicIdPartition
from tiered.config import TopicConfig, validate_topic_name
from tiered.errors import ErrorCode, TieredError

__all__ = ["Hosting"]

log = logging.getLogger(__name__)


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


class Hosting:
    """Thread-safe: every change runs under the partitions' state change lock. ``tiering`` is
    None when remote storage is off (``remote.log.storage.system.enable=false``)."""

    def __init__(
        self,
        log_dir: Path,
        partitions: HostedPartitions,
        fence: ControllerEpochFence,
        tiering: TieringDriver | None,
        persister: AssignmentPersister,
    ) -> None:
        self._log_dir = log_dir
        self._partitions = partitions
        self._fence = fence
        self._tiering = tiering
        self._persister = persister
        self._hosting_listeners: list[Callable[[TopicIdPartition], None]] = []

    def on_hosting(self, listener: Callable[[TopicIdPartition], None]) -> None:
        """Calls ``listener(partition)`` once a partition is hosted here for the first time
        (the group coordinator loads a ``__consumer_offsets`` partition it now leads); it must
        not block."""
        self._hosting_listeners.append(listener)

    def restore(self) -> None:
        """Hosts again what the assignment journal holds, each partition's tiering as recorded;
        an entry that cannot be restored is logged and skipped."""
        entries = self._persister.load()
        for e in entries:
            try:
                restored = entry_from_journal(e)
            except (KeyError, TypeError, ValueError) as error:
                log.error("Could not restore %s: %s", e, error)
                continue
            if isinstance(restored, PartitionStop):
                self._partitions.stops_before_hosting[restored.key] = restored
                continue
            tp = restored.topic_id_partition
            try:
                hosted, _ = self._host(tp, restored.configs, restored.tiered_epoch)
                restored.restore(hosted)  # as persisted before the crash
                if self._tiering is not None:
                    self._tiering.restore(hosted)
            except (ValueError, TieredError) as error:
                log.error("Could not restore %s: %s", tp, error)
        self._persister.loaded()
        if entries:
            log.info("Restored %d partitions from %s", len(entries), self._log_dir)

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
        with self._partitions.state_change_lock:
            self._fence.check(controller_epoch)
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
                self._persister.persist()
            else:
                self._persister.persist_soon()
            return outcomes

    def _assign(self, tp: TopicIdPartition, configs: dict[str, str], tiered_epoch: int) -> None:
        hosted, new = self._host(tp, configs, tiered_epoch)
        if self._tiering is None:
            return
        if new:
            stop = self._partitions.stops_before_hosting.pop(hosted.key, None)
            self._tiering.start(hosted, stop)
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
        with self._partitions.state_change_lock:
            stops = list(stops)
            self._fence.check(controller_epoch)
            outcomes: list[TieredError | None] = []
            hosted_stops: dict[int, tuple[HostedPartition, PartitionStop]] = {}
            for index, stop in enumerate(stops):
                hosted = self._partitions.get(stop.key)
                if hosted is not None and self._tiering is not None and _stop_error(stop) is None:
                    self._persister.touched(stop.key)
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
            self._persister.persist()
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
        known = self._partitions.stops_before_hosting.get(stop.key)
        if keep and (known is None or known.tiered_epoch <= stop.tiered_epoch):
            self._partitions.stops_before_hosting[stop.key] = stop
            self._persister.touched(stop.key)
        return None

    def remove_partitions(
        self, controller_epoch: int, partitions: Iterable[PartitionKey]
    ) -> list[TieredError | None]:
        """A deleted topic: stops tiering each partition and deletes its local log. Remote data
        stays for the delete job. Removing a partition that is not hosted is a no-op."""
        with self._partitions.state_change_lock:
            self._fence.check(controller_epoch)
            outcomes: list[TieredError | None] = []
            for key in partitions:
                if self._partitions.stops_before_hosting.pop(key, None) is not None:
                    self._persister.touched(key)
                hosted = self._partitions.get(key)
                try:
                    if hosted is not None:
                        self._remove(hosted)
                    outcomes.append(None)
                except OSError as e:
                    outcomes.append(TieredError(ErrorCode.KAFKA_STORAGE_ERROR, str(e)))
            self._persister.persist()
            return outcomes

    def _host(
        self, tp: TopicIdPartition, configs: dict[str, str], tiered_epoch: int
    ) -> tuple[HostedPartition, bool]:
        """The partition, hosted with these configs; True if it was not hosted before (then at
        ``tiered_epoch``; a hosted partition keeps its own)."""
        topic_config = _checked_topic_config(tp, configs)  # before touching anything
        key = (tp.topic_id, tp.partition)
        self._persister.touched(key)
        previous = self._partitions.hosted_by_name(tp.topic, tp.partition)
        if previous is not None and previous.topic_id_partition.topic_id != tp.topic_id:
            # A topic of the same name was deleted and created again while this broker missed
            # the removal: the old incarnation's log must not become the new topic's.
            log.warning("%s replaces %s: removing the old one", tp, previous.topic_id_partition)
            self._remove(previous)
        hosted = self._partitions.get(key)
        if hosted is not None:
            hosted.config, hosted.raw_configs = topic_config, configs
            return hosted, False
        directory = self._log_dir / f"{tp.topic}-{tp.partition}"
        hosted = HostedPartition(
            tp,
            Log.open(directory, LogConfig.of(topic_config)),
            topic_config,
            configs,
            PartitionTiering(tp, tiered_epoch),
        )
        self._partitions.add(hosted)
        log.info("Hosting %s (tiered epoch %d) in %s", tp, tiered_epoch, directory)
        for listener in self._hosting_listeners:
            listener(tp)
        return hosted, True

    def _remove(self, hosted: HostedPartition) -> None:
        tp = hosted.topic_id_partition
        self._persister.touched(hosted.key)
        if self._tiering is not None:
            self._tiering.drop(hosted)
        with hosted.lock:
            hosted.log.close()
        shutil.rmtree(hosted.log.directory, ignore_errors=False)
        # Listed until its log is gone, so that a removal seen is a removal done.
        self._partitions.discard(hosted)
        log.info("Removed %s and its local log", tp)
