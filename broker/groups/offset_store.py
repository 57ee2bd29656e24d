"""The ``__consumer_offsets`` partitions this broker hosts, each loaded into an
``OffsetsPartition`` before its groups are served, and the upkeep of all of them.

A partition is served once loaded: on the broker's start, or when it becomes hosted here (or a
new incarnation of the topic replaces it), it is queued for loading, and until the load is done
its groups are answered COORDINATOR_LOAD_IN_PROGRESS; a partition not hosted here is
NOT_COORDINATOR. Load states move through one table (``_TRANSITIONS``).

One background thread ("group-offsets") loads partitions, compacts those whose log outgrew
their live offsets, and every ``offsets.retention.check.interval.ms`` removes the offsets of
deleted topics and those expired (``offsets.retention.minutes``, counted as Kafka does: from when
an Empty group emptied, from its commit for a standalone group's offset or a Stable consumer
group's offset of a topic it no longer subscribes to), then the records of groups left Empty
without offsets (Kafka's group expiry). Each step survives the failure of another.

A loaded partition's stored groups go to membership before its groups are served; membership
writes its groups' records through :meth:`OffsetStore.store_group`.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.groups.group_records import StoredGroup
from broker.groups.membership import GroupMembership, OffsetExpiry
from broker.groups.offset_records import CommittedOffset
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.offsets_partition import OffsetsPartition, TopicPartition
from broker.log import Log

__all__ = ["LoadState", "OffsetStore"]

_log = logging.getLogger(__name__)

# A log this short is loaded by the request that first needs it, in well under a millisecond.
_INLINE_LOAD_MAX_RECORDS = 1000


class LoadState(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"
    FAILED = "failed"  # retried at the next upkeep


_TRANSITIONS: dict[LoadState | None, frozenset[LoadState]] = {
    None: frozenset({LoadState.LOADING}),
    LoadState.LOADING: frozenset({LoadState.LOADED, LoadState.FAILED}),
    LoadState.FAILED: frozenset({LoadState.LOADING}),
    LoadState.LOADED: frozenset(),
}


@dataclass
class _Slot:
    log: Log
    partition: OffsetsPartition
    state: LoadState | None = None

    def moved_to(self, state: LoadState) -> None:
        if state not in _TRANSITIONS[self.state]:
            raise ValueError(f"offsets partition load state {self.state} -> {state} is invalid")
        self.state = state


class OffsetStore:
    """Thread-safe. ``start()`` the upkeep thread, ``close()`` when done.

    ``hosted_log(index)``: the log of ``__consumer_offsets`` partition ``index`` if hosted here;
    ``hosted_indexes()``: the ones hosted here; ``existing_topics()``: every topic's id by name,
    as listed after the call began (not a cached listing), or None when the controller cannot
    say (deleted topics' offsets then wait)."""

    def __init__(
        self,
        hosted_log: Callable[[int], Log | None],
        hosted_indexes: Callable[[], Iterable[int]],
        config: OffsetsConfig,
        membership: GroupMembership,
        existing_topics: Callable[[], Mapping[str, uuid.UUID] | None],
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        inline_load_max_records: int = _INLINE_LOAD_MAX_RECORDS,
        partition_of: Callable[[str], int | None] = lambda group_id: None,
    ) -> None:
        """``partition_of(group)``: the partition a group maps to (None while the topic does
        not exist)."""
        self._partition_of = partition_of
        self._inline_load_max_records = inline_load_max_records
        self._hosted_log = hosted_log
        self._hosted_indexes = hosted_indexes
        self._config = config
        self._membership = membership
        self._existing_topics = existing_topics
        self._clock_ms = clock_ms
        self._slots: dict[int, _Slot] = {}
        self._to_load: list[int] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closed = False
        self._compaction_wanted = False
        self._thread: threading.Thread | None = None

    # -------------------------------------------------------------------------------- serving

    def partition(self, index: int) -> OffsetsPartition | ErrorCode:
        """The loaded partition, or the error its groups get now (NOT_COORDINATOR,
        COORDINATOR_LOAD_IN_PROGRESS). A partition seen for the first time is loaded: here at
        once if its log is short (a partition just created: its first clients need not
        retry), else by the upkeep thread."""
        log = self._hosted_log(index)
        with self._lock:
            slot = self._slots.get(index)
            gone = log is None and slot is not None
            if gone:
                del self._slots[index]  # moved away or deleted
        if log is None:
            if gone:
                self._membership.partition_unloaded(index)
            return ErrorCode.not_coordinator
        with self._lock:
            slot = self._slots.get(index)
            if slot is not None and slot.log is log:
                if slot.state is LoadState.LOADED:
                    return slot.partition
                return ErrorCode.coordinator_load_in_progress
            slot = self._new_slot(index, log)
            inline = log.log_end_offset - log.log_start_offset <= self._inline_load_max_records
            if not inline:
                self._to_load.append(index)
                self._wake.notify()
                return ErrorCode.coordinator_load_in_progress
        self._load(index)
        with self._lock:
            return (
                slot.partition
                if slot.state is LoadState.LOADED
                else (ErrorCode.coordinator_load_in_progress)
            )

    def groups(self) -> list[str]:
        """Every group with committed offsets in a loaded partition."""
        with self._lock:
            loaded = [s.partition for s in self._slots.values() if s.state is LoadState.LOADED]
        return [group for partition in loaded for group in partition.groups()]

    def written(self, partition: OffsetsPartition) -> None:
        """After a write: wakes the upkeep if the partition is due for compaction."""
        if partition.compaction_due():
            with self._lock:
                self._compaction_wanted = True
                self._wake.notify()

    def store_group(self, group_id: str, stored: StoredGroup) -> ErrorCode:
        """Appends a group's record to its partition (durable when this returns): NONE, or the
        error its members get (Kafka's mapping of a failed append)."""
        index = self._partition_of(group_id)
        if index is None:
            return ErrorCode.coordinator_not_available
        found = self.partition(index)
        if isinstance(found, ErrorCode):
            return found
        try:
            found.group_stored(group_id, stored)
        except (OSError, ValueError) as e:
            _log.error("Could not append the record of group %r: %s", group_id, e)
            return ErrorCode.not_coordinator
        self.written(found)
        return ErrorCode.none

    def committed_at(
        self, offset: int, leader_epoch: int, metadata: str, topic_id: uuid.UUID | None = None
    ) -> CommittedOffset:
        return CommittedOffset(offset, leader_epoch, metadata, self._clock_ms(), topic_id)

    def _new_slot(self, index: int, log: Log) -> _Slot:
        """Called under the lock: the caller loads it, or queues it for the upkeep thread."""
        slot = _Slot(log, OffsetsPartition(log, self._clock_ms))
        slot.moved_to(LoadState.LOADING)
        self._slots[index] = slot
        return slot

    # -------------------------------------------------------------------------------- upkeep

    def start(self) -> None:
        """Queues every hosted partition for loading and starts the upkeep thread."""
        for index in self._hosted_indexes():
            self.partition(index)
        self._thread = threading.Thread(target=self._run, name="group-offsets", daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        interval_s = self._config.retention_check_interval_ms / 1000
        next_check = time.monotonic() + interval_s
        while True:
            with self._lock:
                while not (self._closed or self._to_load or self._compaction_wanted):
                    remaining = next_check - time.monotonic()
                    if remaining <= 0:
                        break
                    self._wake.wait(remaining)
                if self._closed:
                    return
                to_load, self._to_load = self._to_load, []
                self._compaction_wanted = False
            for index in to_load:
                self._load(index)
            self._compact_due()
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + interval_s
                self.remove_expired()

    def _load(self, index: int) -> None:
        """Loads a LOADING slot; one caller per slot (its creator, or the upkeep thread it was
        queued for)."""
        with self._lock:
            slot = self._slots.get(index)
        if slot is None or slot.state is not LoadState.LOADING:
            return
        started = time.monotonic()
        try:
            slot.partition.load()
            self._membership.groups_loaded(index, slot.partition.stored_groups())
        except Exception:
            _log.exception("Could not load __consumer_offsets partition %d; retrying", index)
            with self._lock:
                slot.moved_to(LoadState.FAILED)
            return
        with self._lock:
            slot.moved_to(LoadState.LOADED)
        _log.info(
            "Loaded __consumer_offsets partition %d: %d offsets, %d groups from %d records in %.3fs",
            index,
            slot.partition.live_offsets,
            len(slot.partition.stored_groups()),
            slot.partition.records_from_start,
            time.monotonic() - started,
        )

    def _loaded(self) -> list[tuple[int, _Slot]]:
        """The loaded partitions; failed loads are queued again, partitions no longer hosted
        (removed, or replaced by a new incarnation) are forgotten."""
        with self._lock:
            indexes = list(self._slots)
        hosted = {index: self._hosted_log(index) for index in indexes}
        gone = []
        with self._lock:
            for index, log in hosted.items():
                slot = self._slots.get(index)
                if slot is not None and slot.log is not log:
                    del self._slots[index]
                    gone.append(index)
            failed = [(i, s) for i, s in self._slots.items() if s.state is LoadState.FAILED]
            for index, slot in failed:  # retried
                slot.moved_to(LoadState.LOADING)
                self._to_load.append(index)
            loaded = [(i, s) for i, s in self._slots.items() if s.state is LoadState.LOADED]
        for index in gone:
            self._membership.partition_unloaded(index)
        return loaded

    def _compact_due(self) -> None:
        for index, slot in self._loaded():
            if not slot.partition.compaction_due():
                continue
            try:
                slot.partition.compact()
            except Exception:
                _log.exception("Could not compact __consumer_offsets partition %d", index)

    def remove_expired(self) -> int:
        """Removes the offsets of deleted topics (committed before the listing of the topics
        that exist, so that a topic created meanwhile keeps its offsets, or committed for an
        earlier topic of the same name, as far as this coordinator knows) and the offsets that
        expired as their group's ``OffsetExpiry`` says (Kafka's ``cleanupExpiredOffsets``);
        returns how many."""
        listed_at = self._clock_ms()
        try:
            existing = self._existing_topics()
        except Exception:
            _log.exception("Could not list the topics; offsets of deleted topics wait")
            existing = None
        now = self._clock_ms()
        retention_ms = self._config.retention_ms
        expiries: dict[str, OffsetExpiry | None] = {}

        def expires(group: str, tp: TopicPartition, committed: CommittedOffset) -> bool:
            if existing is not None:
                if tp[0] not in existing:
                    return committed.commit_timestamp_ms < listed_at
                if committed.of_another_topic(existing[tp[0]]):
                    return True  # the topic was deleted and a new one has its name
            if group not in expiries:
                expiries[group] = self._membership.offset_expiry(group)
            expiry = expiries[group]
            return expiry is not None and expiry.expired(
                tp[0], committed.commit_timestamp_ms, now, retention_ms
            )

        removed = 0
        for index, slot in self._loaded():
            try:
                removed += slot.partition.expired(expires)
            except Exception:
                _log.exception("Could not expire offsets of __consumer_offsets partition %d", index)
            try:
                self._remove_empty_groups(slot.partition)
            except Exception:
                _log.exception("Could not expire groups of __consumer_offsets partition %d", index)
        if removed:
            _log.info("Removed %d expired offsets or offsets of deleted topics", removed)
        return removed

    def _remove_empty_groups(self, partition: OffsetsPartition) -> None:
        """Kafka's group expiry: a stored group without offsets is removed (a tombstone) once
        membership lets it go, which it does when the group is Empty."""
        for group in partition.stored_groups():
            if partition.committed(group):
                continue
            if self._membership.delete_group_error(group) is ErrorCode.none:
                partition.group_deleted(group)
                _log.info("Group %s expired: Empty, without offsets", group)
