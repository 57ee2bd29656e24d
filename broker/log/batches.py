"""Kafka record batches v2 as the log holds them: checking a produce payload, and walking the
batches of a segment's bytes (a local file or a remote object) by their headers.

A segment's ``.log`` is a concatenation of v2 batches, each stored as the producer sent it but
for its baseOffset and partitionLeaderEpoch, rewritten in place at append (both precede the CRC
range, so the CRC stays valid). Walks read fixed header fields (offsets, sizes, the max
timestamp), never records; only the timestamp search decodes the records of the one batch it
stops in, as Kafka's ``FileRecords.searchForTimestamp`` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tiered.kafka.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    InvalidRecordError,
    parse_batch_header,
    validate_produce_records,
    verify_crc,
)
from tiered.kafka.records import decode_batch

__all__ = [
    "DEFAULT_WINDOW_BYTES",
    "BatchRead",
    "BatchWalker",
    "ReadAt",
    "prepare_produce",
]

DEFAULT_WINDOW_BYTES = 64 * 1024

ReadAt = Callable[[int, int], bytes]
"""``read_at(position, size)``: up to ``size`` bytes of a segment from ``position``."""


@dataclass(frozen=True, slots=True)
class BatchRead:
    """Whole batches read from a log: ``records`` starts with the batch holding the offset asked
    for (so it may begin below it) and ends with a whole batch. A read-only view into the bytes
    read, so that a fetch sends them without copying; ``bytes(records)`` where bytes are needed."""

    records: memoryview
    first_offset: int
    """Base offset of the first batch in ``records``."""
    next_offset: int
    """One past the last offset in ``records``: where the next read continues."""


def prepare_produce(records: Buffer) -> tuple[memoryview, list[BatchHeader]]:
    """Checks a produce payload of one or more v2 batches, each by Kafka's produce rules
    (``validate_produce_records``; a producer's batch must also carry a sequence number), and
    returns a view of it with each batch's header (positions in it). Nothing is copied: the
    log writes each batch as ``assigned_offsets_pieces``.

    Raises ``RecordBatchError`` (its ``error_code`` CORRUPT_MESSAGE or INVALID_RECORD) for the
    first batch that breaks a rule, before anything is written.
    """
    view = memoryview(records)
    if not view:
        raise InvalidRecordError("a produce request needs at least one record batch")
    headers: list[BatchHeader] = []
    position = 0
    while position < len(view):
        end = parse_batch_header(view, position).end
        header = validate_produce_records(view[position:end])
        if header.is_idempotent and header.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence number {header.base_sequence} in a record batch of "
                f"producer {header.producer_id}"
            )
        headers.append(dataclasses.replace(header, position=position))
        position = end
    return view, headers


class BatchWalker:
    """Reads the batches of a segment's bytes ``[0, limit)`` through ``read_at``, a window at a
    time, so that walking consecutive headers costs one read per window rather than one each.

    Positions handed in must be batch boundaries (the start, an offset index entry, a header's
    end). A header that does not frame a v2 batch within the limit raises ``CorruptRecordError``
    or ``InvalidRecordError``.
    """

    def __init__(
        self, read_at: ReadAt, limit: int, window_bytes: int = DEFAULT_WINDOW_BYTES
    ) -> None:
        self._read_at = read_at
        self._limit = limit
        self._window = max(window_bytes, BATCH_HEADER_SIZE)
        self._data = b""
        self._start = 0

    @property
    def limit(self) -> int:
        return self._limit

    def header(self, position: int) -> BatchHeader:
        """The header of the batch at ``position``, checked to frame a v2 batch that ends within
        the limit (its CRC is not checked: see :meth:`verified`)."""
        if position + BATCH_HEADER_SIZE > self._limit:
            raise CorruptRecordError(
                f"{self._limit - position} bytes at position {position} cannot hold a record "
                f"batch header"
            )
        self._load(position, BATCH_HEADER_SIZE)
        return parse_batch_header(self._data, position, self._limit, self._start)

    def verified(self, position: int, expected_offset: int) -> BatchHeader:
        """The batch at ``position`` after checking all of it: framing, CRC, and that it starts
        at ``expected_offset`` with a sane offset range. What recovery keeps."""
        header = self.header(position)
        at = self._load(position, header.size)
        verify_crc(self._data, dataclasses.replace(header, position=at))
        if header.base_offset != expected_offset or header.last_offset_delta < 0:
            raise CorruptRecordError(
                f"record batch at position {position} holds offsets {header.base_offset}.."
                f"{header.last_offset} where {expected_offset} was expected"
            )
        return header

    def headers(self, position: int) -> Iterator[BatchHeader]:
        """The header of every batch from ``position`` to the limit."""
        while position < self._limit:
            header = self.header(position)
            yield header
            position = header.end

    def find(self, position: int, offset: int) -> BatchHeader | None:
        """From ``position`` (at or before the batch holding ``offset``), the first batch whose
        last offset is at least ``offset``; None if none before the limit."""
        for header in self.headers(position):
            if header.last_offset >= offset:
                return header
        return None

    def read(self, first: BatchHeader, max_bytes: int, *, min_one: bool) -> BatchRead | None:
        """Whole batches from ``first`` while they fit in ``max_bytes``; with ``min_one`` the
        first one even if it alone is larger (KIP-74). None if nothing fits."""
        # Everything that may be returned, plus the header that would not fit: one read.
        self._load(first.position, max(max_bytes, first.size) + BATCH_HEADER_SIZE)
        end, last = first.position, None
        while end < self._limit and (last is None or end - first.position < max_bytes):
            header = first if last is None else self.header(end)
            if header.end - first.position > max_bytes and (last is not None or not min_one):
                break
            end, last = header.end, header
        if last is None:
            return None
        at = self._load(first.position, end - first.position)
        records = memoryview(self._data)[at : at + end - first.position]
        return BatchRead(records, first.base_offset, last.last_offset + 1)

    def search_timestamp(
        self, position: int, timestamp_ms: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """From ``position``, the first record with a timestamp at least ``timestamp_ms`` and an
        offset at least ``starting_offset``, as ``(timestamp, offset)``; None if none. Batches
        whose max timestamp is lower are skipped by their header."""
        for header in self.headers(position):
            if header.max_timestamp < timestamp_ms or header.last_offset < starting_offset:
                continue
            at = self._load(header.position, header.size)
            batch = self._data[at : at + header.size]
            for consumed in decode_batch(batch, dataclasses.replace(header, position=0)):
                if consumed.record.timestamp >= timestamp_ms and consumed.offset >= starting_offset:
                    return consumed.record.timestamp, consumed.offset
        return None

    def _load(self, position: int, size: int) -> int:
        """Makes the window hold ``[position, position + size)`` (cut at the limit); returns
        where ``position`` is in it."""
        end = min(position + size, self._limit)
        at = position - self._start
        if at < 0 or end > self._start + len(self._data):
            want = min(max(end - position, self._window), self._limit - position)
            data = self._read_at(position, want)
            if len(data) < end - position:
                raise CorruptRecordError(
                    f"only {len(data)} bytes at position {position}, {end - position} expected "
                    f"before {self._limit}"
                )
            self._data, self._start, at = data, position, 0
        return at
