"""Idempotent producers' state of one partition, as Kafka's ``ProducerStateManager``,
``ProducerStateEntry`` and the checks of ``ProducerAppendInfo`` keep it.

Per producer id: its epoch and the metadata of its last five batches (first and last sequence,
first and last offset, max timestamp). Before an append, :meth:`ProducerStateManager.check_append`
answers a retried batch with the offsets it was first written at (a duplicate is not written
again), and refuses a stale epoch (INVALID_PRODUCER_EPOCH) or a sequence that does not follow on
(OUT_OF_ORDER_SEQUENCE_NUMBER). After the append, :meth:`ProducerStateManager.update` records it.

The state survives restarts without reading records: ``{offset:020d}.snapshot`` files hold it as
of an offset (written when a segment rolls and when the log closes), and opening the log replays
the batch headers after the newest snapshot. Producers idle for longer than the expiration
(Kafka's ``producer.id.expiration.ms``) are forgotten when a snapshot is taken or loaded.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from crc32c import crc32c

from broker.log.errors import CorruptCheckpointError
from tiered.durable import atomic_write
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.record_batch import BatchHeader

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 24 * 3600 * 1000

_INT32_MAX = 2**31 - 1
_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">HI")  # version, crc32c of everything after it
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhqB")  # producer id, epoch, last timestamp, retained batches
_BATCH = struct.Struct(">iiqqq")  # first seq, last seq, first offset, last offset, max timestamp


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer (Kafka's ``BatchMetadata``)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class ProducerState:
    """A producer's state as of the last append: its epoch and its last batches, oldest first."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1


class _Entry:
    __slots__ = ("batches", "last_timestamp", "producer_epoch")

    def __init__(self, producer_epoch: int = NO_PRODUCER_EPOCH) -> None:
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=BATCHES_TO_RETAIN)
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def add(self, epoch: int, batch: BatchMetadata) -> None:
        if epoch != self.producer_epoch:  # a new epoch starts its sequences afresh
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(batch)
        self.last_timestamp = batch.max_timestamp

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


def last_sequence(header: BatchHeader) -> int:
    """The batch's last sequence number; sequences wrap from int32 max to 0, as Kafka's."""
    if header.base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if header.base_sequence > _INT32_MAX - header.last_offset_delta:
        return header.last_offset_delta - (_INT32_MAX - header.base_sequence) - 1
    return header.base_sequence + header.last_offset_delta


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """The producers of one partition, and their snapshot files in its directory. Not
    thread-safe: the log serializes calls under its lock."""

    def __init__(
        self, directory: Path, expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        self._dir = directory
        self._expiration_ms = expiration_ms
        self._entries: dict[int, _Entry] = {}
        self.map_end_offset = 0
        """The state reflects every batch below this offset."""

    def producer(self, producer_id: int) -> ProducerState | None:
        entry = self._entries.get(producer_id)
        if entry is None:
            return None
        return ProducerState(producer_id, entry.producer_epoch, tuple(entry.batches))

    @property
    def producer_ids(self) -> list[int]:
        return sorted(self._entries)

    # ----------------------------------------------------------------------------- appends

    def check_append(self, headers: Sequence[BatchHeader]) -> BatchMetadata | None:
        """Checks the producer batches among ``headers`` (about to be appended, in order) against
        the state, as Kafka checks a client's append. Returns the metadata of the first batch
        that is a duplicate of one of its producer's last five (same epoch and sequence range):
        then nothing must be appended, and the append answers with these offsets. Raises
        ``TieredError`` INVALID_PRODUCER_EPOCH for an epoch older than the producer's, and
        OUT_OF_ORDER_SEQUENCE_NUMBER for a sequence that does not follow the producer's last
        (or a new epoch not starting at 0); a producer not known here may start anywhere."""
        staged: dict[int, _Entry] = {}
        for header in headers:
            if not header.is_idempotent:
                continue
            pid = header.producer_id
            current = self._entries.get(pid)
            last_seq = last_sequence(header)
            if current is not None:
                duplicate = current.duplicate_of(
                    header.producer_epoch, header.base_sequence, last_seq
                )
                if duplicate is not None:
                    return duplicate
            updated = staged.get(pid)
            if updated is None:
                updated = staged[pid] = _Entry(
                    NO_PRODUCER_EPOCH if current is None else current.producer_epoch
                )
            _check_epoch_and_sequence(pid, current, updated, header)
            updated.add(
                header.producer_epoch,
                BatchMetadata(header.base_sequence, last_seq, -1, -1, header.max_timestamp),
            )
        return None

    def update(self, headers: Iterable[BatchHeader]) -> None:
        """Records appended batches (``headers`` with their final offsets), unchecked: after
        :meth:`check_append`, and when replaying the log on open."""
        for header in headers:
            if header.is_idempotent and not header.is_control:
                entry = self._entries.get(header.producer_id)
                if entry is None:
                    entry = self._entries[header.producer_id] = _Entry()
                entry.add(
                    header.producer_epoch,
                    BatchMetadata(
                        header.base_sequence,
                        last_sequence(header),
                        header.base_offset,
                        header.last_offset,
                        header.max_timestamp,
                    ),
                )
            self.map_end_offset = header.last_offset + 1

    def remove_expired(self, now_ms: int) -> None:
        """Forgets producers whose last batch is older than the expiration, as Kafka does for
        ``producer.id.expiration.ms``."""
        expired = [
            pid
            for pid, entry in self._entries.items()
            if now_ms - entry.last_timestamp >= self._expiration_ms
        ]
        for pid in expired:
            del self._entries[pid]

    # ----------------------------------------------------------------------------- snapshots

    def take_snapshot(self) -> Path:
        """Writes the state as of :attr:`map_end_offset` to its snapshot file (atomically,
        fsynced) and returns the path."""
        path = snapshot_path(self._dir, self.map_end_offset)
        atomic_write(path, encode_snapshot(self._entries))
        return path

    def load(self, log_end_offset: int) -> int | None:
        """Loads the newest readable snapshot at or below ``log_end_offset`` and returns its
        offset: the caller replays the batches from there (all of them if None). Snapshots past
        the log end (of batches lost in a crash) and unreadable ones are deleted."""
        self._entries.clear()
        for offset in reversed(self.snapshot_offsets()):
            path = snapshot_path(self._dir, offset)
            if offset > log_end_offset:
                path.unlink()
                continue
            try:
                self._entries = decode_snapshot(path.read_bytes())
            except CorruptCheckpointError:
                path.unlink()
                continue
            self.map_end_offset = offset
            return offset
        return None

    def delete_snapshots_below(self, offset: int) -> None:
        """Deletes the snapshots of offsets below ``offset`` (their segments are gone)."""
        for found in self.snapshot_offsets():
            if found < offset:
                snapshot_path(self._dir, found).unlink(missing_ok=True)

    def snapshot_offsets(self) -> list[int]:
        return sorted(
            int(p.stem) for p in self._dir.glob(f"*{SNAPSHOT_SUFFIX}") if p.stem.isdigit()
        )


def _check_epoch_and_sequence(
    pid: int, current: _Entry | None, updated: _Entry, header: BatchHeader
) -> None:
    """Kafka's ``ProducerAppendInfo.checkProducerEpoch`` and ``checkSequence``: ``current`` is
    the stored state, ``updated`` this append's batches of the producer so far."""
    epoch, first_seq = header.producer_epoch, header.base_sequence
    if epoch < updated.producer_epoch:
        raise TieredError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"epoch {epoch} of producer {pid} is older than its last epoch "
            f"{updated.producer_epoch}",
        )
    if epoch != updated.producer_epoch:
        if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
            raise TieredError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid} starts epoch {epoch} at sequence {first_seq}; a new epoch "
                f"starts at 0",
            )
        return
    if current is None or current.producer_epoch == NO_PRODUCER_EPOCH:
        return  # no state (never seen, or expired): any sequence is accepted, as Kafka's
    if updated.batches:
        last_seq = updated.last_seq
    else:
        last_seq = current.last_seq if epoch == current.producer_epoch else NO_SEQUENCE
    if not _in_sequence(last_seq, first_seq):
        raise TieredError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"sequence {first_seq} of producer {pid} (epoch {epoch}) does not follow its last "
            f"sequence {last_seq}",
        )


def encode_snapshot(entries: dict[int, _Entry]) -> bytes:
    body = bytearray(_COUNT.pack(len(entries)))
    for pid, entry in sorted(entries.items()):
        body += _ENTRY.pack(pid, entry.producer_epoch, entry.last_timestamp, len(entry.batches))
        for b in entry.batches:
            body += _BATCH.pack(
                b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp
            )
    return _SNAPSHOT_HEADER.pack(_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> dict[int, _Entry]:
    """Parses :func:`encode_snapshot` output; ``CorruptCheckpointError`` if it does not."""
    try:
        version, crc = _SNAPSHOT_HEADER.unpack_from(data, 0)
        body = memoryview(data)[_SNAPSHOT_HEADER.size :]
        if version != _VERSION or crc32c(body) != crc:
            raise CorruptCheckpointError(f"producer snapshot version {version} or CRC mismatch")
        (count,) = _COUNT.unpack_from(body, 0)
        at = _COUNT.size
        entries: dict[int, _Entry] = {}
        for _ in range(count):
            pid, epoch, last_timestamp, batches = _ENTRY.unpack_from(body, at)
            at += _ENTRY.size
            entry = entries[pid] = _Entry(epoch)
            for _ in range(batches):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, at)))
                at += _BATCH.size
            entry.last_timestamp = last_timestamp
    except struct.error as e:
        raise CorruptCheckpointError(f"producer snapshot truncated: {e}") from e
    if at != len(body):
        raise CorruptCheckpointError(f"producer snapshot has {len(body) - at} bytes left over")
    return entries
