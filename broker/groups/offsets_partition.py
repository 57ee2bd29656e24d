"""One partition of ``__consumer_offsets`` on its coordinator: the committed offsets and the
stored groups (``group_records``) of every group that maps to it, in memory, and the log they are
kept in.

A commit is one record batch (one record per partition committed, Kafka's ``OffsetCommitKey`` /
``OffsetCommitValue``), appended and fsynced before the offsets change in memory: once a commit
is answered it survives a crash. A group's record (Kafka's ``GroupMetadataKey`` /
``GroupMetadataValue``) is written the same way, and never replaced by one of an earlier
generation. Deletions are tombstones (a null value). Loading replays the log from its log start
offset; the latest record of a key wins.

Compaction keeps loading in proportion to the live records, not to the history of commits: once
the records from the log start outnumber twice the live ones (and ``compaction_min_records``),
every live offset and stored group is written again at the log end, the log start offset moves
to where that copy begins, and the segments wholly below it are deleted. Crash-safe at every
point: until the log start checkpoint is replaced (atomically) a load reads the old records and
then the copy, which holds the values the old records end with; afterwards it reads the copy and
what followed. A tombstone needs no copy: its key is simply not written again. Offsets keep
growing, as they do in a Kafka log that its cleaner compacted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping

from broker.groups.group_records import StoredGroup, decode_group_value, encode_group_value
from broker.groups.offset_records import (
    CommittedOffset,
    GroupKey,
    OffsetKey,
    RecordFormatError,
    decode_key,
    decode_value,
    encode_group_key,
    encode_offset_key,
    encode_value,
)
from broker.log import Log
from tiered.kafka.records import Record, build_batch, iter_records

__all__ = ["DEFAULT_COMPACTION_MIN_RECORDS", "OffsetsPartition", "TopicPartition"]

_log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DEFAULT_COMPACTION_MIN_RECORDS = 1000
_LEADER_EPOCH = 0  # replication factor 1: the partition's leader never changes
_READ_BYTES = 1024 * 1024
_RECORDS_PER_BATCH = 1000
# A record to append: an offset (or its tombstone), or a group's record (or its tombstone).
_Entry = tuple[OffsetKey | GroupKey, CommittedOffset | StoredGroup | None]


class OffsetsPartition:
    """Thread-safe. Construct, then :meth:`load` before serving."""

    def __init__(
        self,
        log: Log,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        compaction_min_records: int = DEFAULT_COMPACTION_MIN_RECORDS,
    ) -> None:
        self.log = log
        self._clock_ms = clock_ms
        self._compaction_min_records = compaction_min_records
        self._groups: dict[str, dict[TopicPartition, CommittedOffset]] = {}
        self._stored: dict[str, StoredGroup] = {}
        self._live = 0
        self._records = 0  # records from the log start: what a load reads
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------- loading

    def load(self) -> None:
        """Replays the log from its log start offset."""
        with self._lock:
            offset, end = self.log.log_start_offset, self.log.log_end_offset
            while offset < end:
                read = self.log.read(offset, _READ_BYTES)
                if read.next_offset <= offset:
                    break
                for consumed in iter_records(read.records):
                    if consumed.offset >= offset:
                        self._apply(consumed.record.key, consumed.record.value, consumed.offset)
                offset = read.next_offset

    def _apply(self, key_bytes: bytes | None, value: bytes | None, offset: int) -> None:
        self._records += 1
        try:
            if key_bytes is None:
                raise RecordFormatError("a record without a key")
            key = decode_key(key_bytes)
            if isinstance(key, GroupKey):
                self._group_record(key.group, None if value is None else decode_group_value(value))
            elif value is None:
                self._forget(key.group, (key.topic, key.partition))
            else:
                self._remember(key.group, (key.topic, key.partition), decode_value(value))
        except RecordFormatError as e:
            _log.warning("%s: record at offset %d skipped: %s", self.log.directory, offset, e)

    def _remember(self, group: str, tp: TopicPartition, committed: CommittedOffset) -> None:
        offsets = self._groups.setdefault(group, {})
        if tp not in offsets:
            self._live += 1
        offsets[tp] = committed

    def _group_record(self, group: str, stored: StoredGroup | None) -> None:
        if stored is None:
            self._stored.pop(group, None)
        else:
            self._stored[group] = stored

    def _forget(self, group: str, tp: TopicPartition) -> None:
        offsets = self._groups.get(group)
        if offsets is not None and offsets.pop(tp, None) is not None:
            self._live -= 1
            if not offsets:
                del self._groups[group]

    # ------------------------------------------------------------------------------- reading

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        with self._lock:
            return dict(self._groups.get(group, {}))

    def groups(self) -> list[str]:
        with self._lock:
            return list(self._groups)

    def has_group(self, group: str) -> bool:
        """Whether the group has offsets or a stored record here."""
        with self._lock:
            return group in self._groups or group in self._stored

    def stored_groups(self) -> dict[str, StoredGroup]:
        """Every group's latest record (a group without one is not here)."""
        with self._lock:
            return dict(self._stored)

    @property
    def live_offsets(self) -> int:
        with self._lock:
            return self._live

    @property
    def records_from_start(self) -> int:
        """Records a load reads now (live and overwritten ones)."""
        with self._lock:
            return self._records

    # ------------------------------------------------------------------------------- writing

    def commit(self, group: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> None:
        """Appends the offsets as one batch (a crash keeps all of them or none); they are
        durable, then visible, when this returns. Raises what the log raises (``OSError``;
        ``ValueError`` once the log is closed)."""
        if not offsets:
            return
        entries: list[_Entry] = [
            (OffsetKey(group, t, p), committed) for (t, p), committed in offsets.items()
        ]
        with self._lock:
            self._append(entries, records_per_batch=len(entries))

    def group_stored(self, group: str, stored: StoredGroup) -> bool:
        """Appends the group's record, durable when this returns (raises as :meth:`commit`);
        False, and nothing written, when the record kept is of a later generation (a write
        that lost a race with the group's next one)."""
        with self._lock:
            kept = self._stored.get(group)
            if kept is not None and kept.generation > stored.generation:
                return False
            self._append([(GroupKey(group), stored)], records_per_batch=1)
            return True

    def group_deleted(self, group: str) -> bool:
        """Tombstones for every offset of ``group`` and for its record (Kafka's
        ``GroupMetadataKey``); True if it had either."""
        with self._lock:
            offsets = self._groups.get(group, {})
            if not offsets and group not in self._stored:
                return False
            entries: list[_Entry] = [(OffsetKey(group, t, p), None) for t, p in offsets]
            entries.append((GroupKey(group), None))
            self._append(entries)
            return True

    def offsets_deleted(self, group: str, partitions: Iterable[TopicPartition]) -> None:
        """Tombstones for those of ``partitions`` the group has offsets for."""
        with self._lock:
            offsets = self._groups.get(group, {})
            self._append(
                [(OffsetKey(group, t, p), None) for t, p in partitions if (t, p) in offsets]
            )

    def expired(self, expires: Callable[[str, TopicPartition, CommittedOffset], bool]) -> int:
        """Tombstones for every offset ``expires(group, partition, committed)`` is true of;
        returns how many."""
        with self._lock:
            gone: list[_Entry] = [
                (OffsetKey(group, t, p), None)
                for group, offsets in self._groups.items()
                for (t, p), committed in offsets.items()
                if expires(group, (t, p), committed)
            ]
            self._append(gone)
            return len(gone)

    def _append(self, entries: list[_Entry], records_per_batch: int = _RECORDS_PER_BATCH) -> None:
        """Called under the lock: durable first, then applied in memory. Tombstones and
        compaction's copies may be split across batches (applying a part of them loses
        nothing); a commit is not."""
        if not entries:
            return
        now = self._clock_ms()
        for start in range(0, len(entries), records_per_batch):
            chunk = entries[start : start + records_per_batch]
            records = [_record(key, value, now) for key, value in chunk]
            self.log.append_batches(build_batch(records), _LEADER_EPOCH)
        for key, value in entries:
            self._records += 1
            if isinstance(key, GroupKey):
                self._group_record(key.group, value if isinstance(value, StoredGroup) else None)
                continue
            tp = (key.topic, key.partition)
            if isinstance(value, CommittedOffset):
                self._remember(key.group, tp, value)
            else:
                self._forget(key.group, tp)

    # ---------------------------------------------------------------------------- compaction

    def compaction_due(self) -> bool:
        with self._lock:
            live = self._live + len(self._stored)
            return self._records > max(2 * live, self._compaction_min_records)

    def compact(self) -> None:
        """Writes every live offset again at the log end, then moves the log start offset there
        and deletes the segments below it (see the module's docstring for why a crash at any
        point loses nothing)."""
        with self._lock:
            self.log.roll()  # the copy starts a segment: everything below can go whole
            copy_start = self.log.log_end_offset
            live: list[_Entry] = [
                (OffsetKey(group, t, p), committed)
                for group, offsets in self._groups.items()
                for (t, p), committed in offsets.items()
            ]
            live.extend((GroupKey(group), stored) for group, stored in self._stored.items())
            self._records = 0
            self._append(live)
            self._records = len(live)
            self.log.set_log_start_offset(copy_start)
            self.log.delete_local_segments_up_to(copy_start)
        _log.info(
            "%s compacted: %d live offsets and groups from offset %d",
            self.log.directory,
            len(live),
            copy_start,
        )


def _record(
    key: OffsetKey | GroupKey, value: CommittedOffset | StoredGroup | None, now: int
) -> Record:
    if isinstance(key, GroupKey):
        encoded = None if not isinstance(value, StoredGroup) else encode_group_value(value)
        return Record(encode_group_key(key), encoded, timestamp=now)
    if isinstance(value, CommittedOffset):
        return Record(
            encode_offset_key(key), encode_value(value), timestamp=value.commit_timestamp_ms
        )
    return Record(encode_offset_key(key), None, timestamp=now)
