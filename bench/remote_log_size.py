"""KIP-852: ``remote_log_size(tp, leader_epoch)`` in O(1) against list-and-sum, measured in one run.

The baseline is what Kafka's RemoteLogManager did before KIP-852::

    sum(m.segment_size_in_bytes for m in rlmm.list_remote_log_segments(tp, leader_epoch))

Both are timed on one partition with one leader epoch holding 10^3 .. 10^6 segments, through two
read paths of :class:`tiered.rlmm.StoreRemoteLogMetadataManager`:

- *leader*: a manager that called ``on_partition_leadership_changes({tp}, set())`` and serves reads
  from the partition it loaded into memory (the load is timed too, with the RSS it costs);
- *store*: a second manager that does not lead the partition and reads the backend on every call.

Populating a million segments through the API would take far too long, so the records are written in
bulk, straight into the backend, in the layout of ``tiered/rlmm/keys.py`` and
``tiered/rlmm/partition_state.py`` (sqlite: one ``executemany`` transaction on a connection of our
own; ZooKeeper: asynchronous multi-op transactions of creates, parents first). The bulk loader is
proven against the real layout: a smaller partition is populated both through the API and in bulk
and the two backends' contents must be identical (keys and values; the event timestamps are fixed
by the scenario, so nothing is excluded). Each bulk-loaded partition is then checked through the API
(sizes, totals, full listings, lookups by offset) before and while it is timed. The process exits 1
if any check fails, never because of a timing.

ZooKeeper runs as a private server in a temporary directory, each store in a chroot of its own. With
more than one backend, each backend runs in a process of its own (``--in-process`` to not), so the
RSS figures of one are not inflated by the heap the other left behind.

The scenario, per partition of ``n`` segments (offsets grow with the segment index ``i``): segments
``0 .. n-2`` were copied (COPY_SEGMENT_STARTED then COPY_SEGMENT_FINISHED, in order), segment ``n-1``
is being copied (COPY_SEGMENT_STARTED) and segment 0 is being deleted by retention
(DELETE_SEGMENT_STARTED). So the index, the unreferenced set and both aggregates are all exercised.

The JSON's ``ratio`` is list-and-sum / remote_log_size; its ``summary`` rows (bench/RESULTS.md:
each backend's largest partition) give the inverse, remote_log_size / list-and-sum.

Usage: ``python bench/remote_log_size.py [--quick] [--sizes 1000,10000] [--backends sqlite,zookeeper]
[--out PATH]`` (results default to ``bench/results/remote_log_size.json``).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    format_bytes,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    peak_rss_bytes,
    release_free_memory,
    rss_bytes,
    sample,
    summarize,
    summary_row,
    timed,
    utc_now,
    write_json,
)
from tiered import rlmm
from tiered.api import (
    CustomMetadata,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteLogTotals,
    TopicIdPartition,
)
from tiered.rlmm import keys, serde
from tiered.rlmm.backend import parent_of
from tiered.rlmm.offset_index import CHUNK_CAPACITY
from tiered.rpc.v1 import rlmm_store_pb2 as store_pb

DEFAULT_SIZES = {
    "sqlite": [1_000, 10_000, 100_000, 1_000_000],
    "zookeeper": [1_000, 10_000, 100_000],
}
QUICK_SIZES = [1_000, 10_000]
DEFAULT_OUT = RESULTS_DIR / "remote_log_size.json"

# 2 * CHUNK_CAPACITY + 100 segments: the offset index then has a first chunk whose head was removed,
# a full chunk and a partial last chunk.
DEFAULT_COMPARE_SEGMENTS = 2 * CHUNK_CAPACITY + 100
MIN_SEGMENTS = 3

LEADER_EPOCH = 0
OFFSETS_PER_SEGMENT = 100_000
BASE_TIME_MS = 1_700_000_000_000
SEGMENT_INTERVAL_MS = 60_000
GIB = 1 << 30
BROKER_ID = 1  # the broker named in the events, and the API-populating manager's id
LEADER_BROKER_ID = 1  # the measured leader manager
STORE_BROKER_ID = 2  # the measured non-leader manager

_MASK128 = (1 << 128) - 1
_ID_MULTIPLIER = 0x9E3779B97F4A7C15F39CC0605CEDC835  # odd: i -> id is a bijection
_ZK_BATCH = 2_000  # reads in flight at once
_ZK_TXN_OPS = 500  # creates per bulk-load transaction
_ZK_TXN_BYTES = 512 * 1024  # and their paths and values, far below ZooKeeper's 1 MB

_COPY_STARTED = RemoteLogSegmentState.COPY_SEGMENT_STARTED
_COPY_FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
_DELETE_STARTED = RemoteLogSegmentState.DELETE_SEGMENT_STARTED


# ============================================================================= the scenario


@dataclass(frozen=True)
class Scenario:
    """One partition of ``segments`` segments in one leader epoch; every value is a function of the
    segment index, so records can be generated, regenerated and checked without being stored."""

    tp: TopicIdPartition
    segments: int
    leader_epoch: int = LEADER_EPOCH

    def __post_init__(self) -> None:
        if self.segments < MIN_SEGMENTS:
            raise ValueError(f"a scenario needs at least {MIN_SEGMENTS} segments")

    # ------------------------------------------------------------------ per segment

    def segment_id(self, i: int) -> uuid.UUID:
        return uuid.UUID(int=(self.tp.topic_id.int + (i + 1) * _ID_MULTIPLIER) & _MASK128)

    @staticmethod
    def start_offset(i: int) -> int:
        return i * OFFSETS_PER_SEGMENT

    @staticmethod
    def end_offset(i: int) -> int:
        return (i + 1) * OFFSETS_PER_SEGMENT - 1

    @staticmethod
    def size(i: int) -> int:
        return GIB - (i * 7_919) % (1 << 20)

    @staticmethod
    def max_timestamp_ms(i: int) -> int:
        return BASE_TIME_MS + (i + 1) * SEGMENT_INTERVAL_MS - 1

    @staticmethod
    def add_time_ms(i: int) -> int:
        return BASE_TIME_MS + (i + 1) * SEGMENT_INTERVAL_MS + 10

    @staticmethod
    def finish_time_ms(i: int) -> int:
        return Scenario.add_time_ms(i) + 500

    def delete_time_ms(self) -> int:
        return BASE_TIME_MS + (self.segments + 2) * SEGMENT_INTERVAL_MS

    @staticmethod
    def custom_metadata(i: int) -> CustomMetadata:
        return CustomMetadata(b"bucket-%d" % (i % 8))

    def final_state(self, i: int) -> RemoteLogSegmentState:
        if i == 0:
            return _DELETE_STARTED
        return _COPY_STARTED if i == self.segments - 1 else _COPY_FINISHED

    def started(self, i: int) -> RemoteLogSegmentMetadata:
        """The metadata added when the copy of segment ``i`` starts."""
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId(self.tp, self.segment_id(i)),
            start_offset=self.start_offset(i),
            end_offset=self.end_offset(i),
            max_timestamp_ms=self.max_timestamp_ms(i),
            broker_id=BROKER_ID,
            event_timestamp_ms=self.add_time_ms(i),
            segment_size_in_bytes=self.size(i),
            segment_leader_epochs={self.leader_epoch: self.start_offset(i)},
        )

    def update(self, i: int, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
        finished = state is _COPY_FINISHED
        return RemoteLogSegmentMetadataUpdate(
            remote_log_segment_id=RemoteLogSegmentId(self.tp, self.segment_id(i)),
            event_timestamp_ms=self.finish_time_ms(i) if finished else self.delete_time_ms(),
            custom_metadata=self.custom_metadata(i) if finished else None,
            state=state,
            broker_id=BROKER_ID,
        )

    def metadata(self, i: int) -> RemoteLogSegmentMetadata:
        """Segment ``i`` as the manager holds it once the scenario has been played: the added
        metadata with the last update's state, time and broker, and the custom metadata of the
        COPY_SEGMENT_FINISHED update (a later update without any keeps it). Built in one go, as
        it is needed a million times; the layout check compares it with what the API stores."""
        state = self.final_state(i)
        start = self.start_offset(i)
        if state is _COPY_STARTED:
            event_ms, custom = self.add_time_ms(i), None
        elif state is _COPY_FINISHED:
            event_ms, custom = self.finish_time_ms(i), self.custom_metadata(i)
        else:
            event_ms, custom = self.delete_time_ms(), self.custom_metadata(i)
        return RemoteLogSegmentMetadata(
            remote_log_segment_id=RemoteLogSegmentId(self.tp, self.segment_id(i)),
            start_offset=start,
            end_offset=self.end_offset(i),
            max_timestamp_ms=self.max_timestamp_ms(i),
            broker_id=BROKER_ID,
            event_timestamp_ms=event_ms,
            segment_size_in_bytes=self.size(i),
            segment_leader_epochs={self.leader_epoch: start},
            state=state,
            custom_metadata=custom,
        )

    # ------------------------------------------------------------------ aggregates

    def indexed(self) -> range:
        """The COPY_SEGMENT_FINISHED segments: those in the offset index."""
        return range(1, self.segments - 1)

    def totals(self) -> RemoteLogTotals:
        everything = sum(self.size(i) for i in range(self.segments))
        finished = sum(self.size(i) for i in self.indexed())
        return RemoteLogTotals(everything, self.segments, finished, len(self.indexed()))

    def highest_offset(self) -> int:
        return self.end_offset(self.segments - 2)

    # ------------------------------------------------------------------ playing it through the API

    def play(self, manager: rlmm.StoreRemoteLogMetadataManager) -> None:
        """Populates through the RLMM API, one event at a time."""
        for i in range(self.segments - 1):
            manager.add_remote_log_segment_metadata(self.started(i))
            manager.update_remote_log_segment_metadata(self.update(i, _COPY_FINISHED))
        manager.add_remote_log_segment_metadata(self.started(self.segments - 1))
        manager.update_remote_log_segment_metadata(self.update(0, _DELETE_STARTED))


def bench_partition(segments: int) -> Scenario:
    topic_id = uuid.uuid5(uuid.NAMESPACE_URL, "tiered:bench:remote_log_size")
    return Scenario(TopicIdPartition(topic_id, "bench-remote-log-size", 0), segments)


# ============================================================================= the bulk layout


def layout_records(scenario: Scenario) -> Iterator[tuple[str, bytes]]:
    """The backend records (key, value) that the manager writes for ``scenario``, without their
    empty ancestors. The partition was never claimed by a leader (claim 0, broker 0)."""
    tp, epoch, n = scenario.tp, scenario.leader_epoch, scenario.segments
    totals = scenario.totals()
    partition = store_pb.PartitionStateRecord(
        topic_id_partition=serde.topic_id_partition_to_proto(tp),
        size_bytes=totals.size_bytes,
        segment_count=totals.segment_count,
        copy_finished_size_bytes=totals.copy_finished_size_bytes,
        copy_finished_segment_count=totals.copy_finished_segment_count,
        # every segment is of the default tiered epoch (0): its totals are the partition's
        copy_finished_by_tiered_epoch=[
            store_pb.TieredEpochAggregates(
                size_bytes=totals.copy_finished_size_bytes,
                segment_count=totals.copy_finished_segment_count,
            )
        ],
    )
    yield keys.partition_key(tp), partition.SerializeToString()
    # One epoch: its aggregates are the partition's.
    epoch_record = store_pb.LeaderEpochStateRecord(
        highest_log_offset=scenario.highest_offset(),
        size_bytes=totals.size_bytes,
        segment_count=totals.segment_count,
        copy_finished_size_bytes=totals.copy_finished_size_bytes,
        copy_finished_segment_count=totals.copy_finished_segment_count,
    )
    yield keys.epoch_key(tp, epoch), epoch_record.SerializeToString()
    for i in range(n):
        yield (
            keys.segment_key(tp, scenario.segment_id(i)),
            serde.encode_segment_metadata(scenario.metadata(i)),
        )
    # Offsets were indexed in order, so chunk k was started by segment k * CHUNK_CAPACITY (a full
    # chunk spills its last entry into a new one) and is named by that segment's start offset;
    # removing segment 0 later leaves the first chunk's name alone.
    indexed = scenario.indexed()
    for first in range(0, indexed.stop, CHUNK_CAPACITY):
        members = range(max(first, indexed.start), min(first + CHUNK_CAPACITY, indexed.stop))
        chunk = store_pb.OffsetIndexChunkRecord(
            start_offsets=[scenario.start_offset(i) for i in members],
            segment_ids=[scenario.segment_id(i).bytes for i in members],
        )
        yield keys.chunk_key(tp, epoch, scenario.start_offset(first)), chunk.SerializeToString()
    for i in (0, n - 1):  # deleting and copying: listed, but not in the index
        yield keys.unreferenced_segment_key(tp, epoch, scenario.segment_id(i)), b""


def new_ancestors(key: str, known: set[str]) -> list[str]:
    """The ancestors of ``key`` not in ``known`` (which this adds them to), nearest first."""
    found: list[str] = []
    ancestor = parent_of(key)
    while ancestor and ancestor not in known:
        known.add(ancestor)
        found.append(ancestor)
        ancestor = parent_of(ancestor)
    return found


# ============================================================================= backends


class Store:
    """A fresh, empty metadata store of one backend for one partition."""

    name: str

    def config(self, broker_id: int) -> dict[str, str]:
        raise NotImplementedError

    def bulk_load(self, records: Iterable[tuple[str, bytes]]) -> int:
        """Writes the records and their missing ancestors (empty); returns the rows written."""
        raise NotImplementedError

    def dump(self) -> dict[str, bytes]:
        """Every key the store holds, with its value."""
        raise NotImplementedError

    def drop(self) -> None:
        """Frees what the store holds."""


class SqliteStore(Store):
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def config(self, broker_id: int) -> dict[str, str]:
        return {
            "rlmm.backend": "sqlite",
            "rlmm.sqlite.path": str(self.path),
            "broker.id": str(broker_id),
        }

    def bulk_load(self, records: Iterable[tuple[str, bytes]]) -> int:
        # A connection of our own on the file a SqliteBackend created (schema and WAL mode).
        db = sqlite3.connect(self.path, isolation_level=None)
        try:
            db.execute("PRAGMA cache_size=-1048576")  # 1 GiB: keep the B-trees in memory
            ancestors: list[str] = []
            known: set[str] = set()
            count = 0

            def rows() -> Iterator[tuple[str, str, bytes]]:
                nonlocal count
                for key, value in records:
                    ancestors.extend(new_ancestors(key, known))
                    count += 1
                    yield key, parent_of(key), value

            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT INTO kv (key, parent, value, version) VALUES (?, ?, ?, 0)", rows()
            )
            # Ancestors that are records themselves (the partition and epoch records) are kept.
            cursor = db.executemany(
                "INSERT OR IGNORE INTO kv (key, parent, value, version) VALUES (?, ?, x'', 0)",
                [(a, parent_of(a)) for a in ancestors],
            )
            count += cursor.rowcount
            db.execute("COMMIT")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            db.close()
        return count

    def dump(self) -> dict[str, bytes]:
        db = sqlite3.connect(self.path)
        try:
            rows = db.execute("SELECT key, parent, value FROM kv ORDER BY key").fetchall()
        finally:
            db.close()
        for key, parent, _ in rows:
            if parent != parent_of(key):
                raise AssertionError(f"sqlite row {key!r} has parent {parent!r}")
        return {key: bytes(value) for key, _, value in rows}

    def drop(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


class ZooKeeperStore(Store):
    name = "zookeeper"

    def __init__(self, hosts: str, chroot: str) -> None:
        self.hosts = hosts
        self.chroot = chroot

    def config(self, broker_id: int) -> dict[str, str]:
        return {
            "rlmm.backend": "zookeeper",
            "rlmm.zookeeper.connect": f"{self.hosts}{self.chroot}",
            "broker.id": str(broker_id),
        }

    def _client(self) -> Any:
        from tests.support.zookeeper import start_kazoo_client

        return start_kazoo_client(self.hosts)

    def bulk_load(self, records: Iterable[tuple[str, bytes]]) -> int:
        nodes = dict(records)
        known: set[str] = set()
        for key in list(nodes):
            for ancestor in new_ancestors(key, known):
                nodes.setdefault(ancestor, b"")
        by_depth: dict[int, list[str]] = defaultdict(list)
        for key in nodes:
            by_depth[key.count("/")].append(key)
        client = self._client()
        try:
            for depth in sorted(by_depth):  # every parent exists before its children are sent
                pending = [
                    self._create_async(client, batch)
                    for batch in _batches(by_depth[depth], nodes, self.chroot)
                ]
                for keys_sent, result in pending:
                    _raise_failures(keys_sent, result.get())
        finally:
            client.stop()
            client.close()
        return len(nodes)

    def _create_async(self, client: Any, batch: list[tuple[str, bytes]]) -> tuple[list[str], Any]:
        """Sends the creates of ``batch`` as one multi-op transaction, without waiting: one
        transaction per create (plain ``create_async``) is about 15 times slower."""
        transaction = client.transaction()
        for path, value in batch:
            transaction.create(path, value)
        return [path for path, _ in batch], transaction.commit_async()

    def dump(self) -> dict[str, bytes]:
        client = self._client()
        found: dict[str, bytes] = {}
        try:
            level = [""]
            while level:
                listed = [
                    (key, client.get_children_async(f"{self.chroot}/{key}".rstrip("/")))
                    for key in level
                ]
                below = [
                    f"{key}/{child}" if key else child
                    for key, result in listed
                    for child in result.get()
                ]
                for start in range(0, len(below), _ZK_BATCH):
                    batch = below[start : start + _ZK_BATCH]
                    pending = [client.get_async(f"{self.chroot}/{k}") for k in batch]
                    for key, result in zip(batch, pending, strict=True):
                        found[key] = bytes(result.get()[0])
                level = below
        finally:
            client.stop()
            client.close()
        return found

    def drop(self) -> None:
        client = self._client()
        try:
            client.delete(self.chroot, recursive=True)
        finally:
            client.stop()
            client.close()


def _batches(
    level: list[str], nodes: dict[str, bytes], chroot: str
) -> Iterator[list[tuple[str, bytes]]]:
    """(path, value) batches of the keys of ``level``, each well below ZooKeeper's 1 MB request."""
    batch: list[tuple[str, bytes]] = []
    size = 0
    for key in level:
        path, value = f"{chroot}/{key}", nodes[key]
        if batch and (len(batch) == _ZK_TXN_OPS or size + len(path) + len(value) > _ZK_TXN_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((path, value))
        size += len(path) + len(value) + 64  # and some framing per op
    if batch:
        yield batch


def _raise_failures(paths: list[str], results: list[object]) -> None:
    failed = [(p, r) for p, r in zip(paths, results, strict=True) if isinstance(r, Exception)]
    failed.sort(key=lambda f: type(f[1]).__name__ == "RolledBackError")  # the cause first
    if failed:
        raise RuntimeError(f"bulk create of {failed[0][0]} failed: {failed[0][1]!r}")


# ============================================================================= checks


class VerificationError(AssertionError):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise VerificationError(message)


def compare_dumps(api: dict[str, bytes], bulk: dict[str, bytes]) -> list[str]:
    """Differences between two store dumps, at most 20."""
    problems: list[str] = []
    for key in sorted(api.keys() - bulk.keys())[:10]:
        problems.append(f"only written by the API: {key}")
    for key in sorted(bulk.keys() - api.keys())[:10]:
        problems.append(f"only written by the bulk loader: {key}")
    for key in sorted(api.keys() & bulk.keys()):
        if api[key] != bulk[key] and len(problems) < 20:
            problems.append(f"value differs: {key}: API {api[key]!r} != bulk {bulk[key]!r}")
    return problems


def lookup_cases(scenario: Scenario) -> list[tuple[int, int | None]]:
    """(offset, index of the segment expected, or None) for remote_log_segment_metadata."""
    n = scenario.segments
    picks = {1, 2, n // 2, n - 3, n - 2}
    chunks = n // CHUNK_CAPACITY
    for k in {1, 2, 3, chunks // 2, chunks - 1, chunks} - {0}:  # around chunk boundaries
        picks |= {k * CHUNK_CAPACITY - 1, k * CHUNK_CAPACITY, k * CHUNK_CAPACITY + 1}
    picks |= {1 + (j * 7_777_777) % (n - 2) for j in range(20)}
    cases: list[tuple[int, int | None]] = []
    for i in sorted(p for p in picks if 1 <= p <= n - 2):
        start = scenario.start_offset(i)
        cases += [(start, i), (start + OFFSETS_PER_SEGMENT // 2, i), (scenario.end_offset(i), i)]
    # Segment 0 is being deleted and segment n-1 copied: neither is found by offset.
    cases += [(0, None), (OFFSETS_PER_SEGMENT // 2, None), (scenario.start_offset(n - 1), None)]
    cases += [(scenario.end_offset(n - 1), None), (scenario.end_offset(n - 1) + 10**9, None)]
    return cases


def verify_reads(manager: rlmm.StoreRemoteLogMetadataManager, scenario: Scenario, path: str) -> int:
    """The O(1) figures and lookups through the API; returns the number of lookups checked."""
    tp, epoch = scenario.tp, scenario.leader_epoch
    totals = scenario.totals()
    size = manager.remote_log_size(tp, epoch)
    check(size == totals.size_bytes, f"{path}: remote_log_size {size} != {totals.size_bytes}")
    got_totals = manager.remote_log_totals(tp)
    check(got_totals == totals, f"{path}: remote_log_totals {got_totals} != {totals}")
    highest = manager.highest_offset_for_epoch(tp, epoch)
    check(highest == scenario.highest_offset(), f"{path}: highest offset {highest}")
    other = manager.remote_log_size(tp, epoch + 1)
    check(other == 0, f"{path}: remote_log_size of an epoch without segments is {other}")
    cases = lookup_cases(scenario)
    for offset, index in cases:
        found = manager.remote_log_segment_metadata(tp, epoch, offset)
        expected = None if index is None else scenario.metadata(index)
        check(
            found == expected,
            f"{path}: remote_log_segment_metadata(epoch {epoch}, offset {offset}) returned "
            f"{found}, expected {expected}",
        )
    return len(cases)


def verify_listing(listing: list[RemoteLogSegmentMetadata], scenario: Scenario, path: str) -> None:
    check(
        len(listing) == scenario.segments,
        f"{path}: listed {len(listing)} segments, expected {scenario.segments}",
    )
    for i, found in enumerate(listing):
        if found != scenario.metadata(i):
            raise VerificationError(
                f"{path}: listing position {i} is {found}, expected {scenario.metadata(i)}"
            )


# ============================================================================= measuring


@dataclass
class Settings:
    size_repeat: int = 300
    size_warmup: int = 20
    compare_segments: int = DEFAULT_COMPARE_SEGMENTS


@dataclass
class Outcome:
    results: list[dict[str, Any]] = field(default_factory=list)
    layout_checks: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def list_and_sum_runs(first_seconds: float) -> int:
    """How many more list-and-sum runs after the first, by how long the first took."""
    if first_seconds < 1.0:
        return 4
    if first_seconds < 10.0:
        return 2
    return 0


def measure_path(
    manager: rlmm.StoreRemoteLogMetadataManager,
    scenario: Scenario,
    settings: Settings,
    path: str,
) -> dict[str, Any]:
    tp, epoch = scenario.tp, scenario.leader_epoch
    size_samples, size = sample(
        lambda: manager.remote_log_size(tp, epoch),
        repeat=settings.size_repeat,
        warmup=settings.size_warmup,
    )
    listing: list[RemoteLogSegmentMetadata] = []

    def list_and_sum() -> int:
        nonlocal listing
        listing = []  # drop the previous listing before making the next one
        listing = list(manager.list_remote_log_segments(tp, epoch))
        return sum(m.segment_size_in_bytes for m in listing)

    first, summed = timed(list_and_sum)
    more = list_and_sum_runs(first)
    list_samples = [first]
    if more:
        extra, summed_again = sample(list_and_sum, repeat=more)
        check(summed_again == summed, f"{path}: list-and-sum changed between runs")
        list_samples += extra
    check(
        summed == size,
        f"{path}: remote_log_size {size} != list-and-sum {summed} ({scenario.segments} segments)",
    )
    check(
        size == scenario.totals().size_bytes,
        f"{path}: remote_log_size {size} != expected {scenario.totals().size_bytes}",
    )
    verify_listing(listing, scenario, path)
    del listing
    size_stats = summarize(size_samples)
    list_stats = summarize(list_samples)
    return {
        "remote_log_size_bytes": size,
        "list_and_sum_bytes": summed,
        "remote_log_size": size_stats,
        "list_and_sum": list_stats,
        "ratio": list_stats["median_s"] / size_stats["median_s"],
    }


def measure(
    store: Store, scenario: Scenario, settings: Settings, log: Callable[[str], None]
) -> dict[str, Any]:
    tp = scenario.tp
    result: dict[str, Any] = {
        "backend": store.name,
        "segments": scenario.segments,
        "chunk_capacity": CHUNK_CAPACITY,
        "code": code_fingerprint(),
    }
    follower = rlmm.create(store.config(STORE_BROKER_ID))  # creates the schema or chroot
    leader: rlmm.StoreRemoteLogMetadataManager | None = None
    try:
        load_s, rows = timed(lambda: store.bulk_load(layout_records(scenario)))
        result["populate"] = {"method": "bulk", "seconds": load_s, "rows": rows}
        log(f"  bulk-loaded {rows:,} rows in {format_seconds(load_s)}")
        lookups = verify_reads(follower, scenario, "store path")

        release_free_memory()
        rss_before = rss_bytes()
        leader = rlmm.create(store.config(LEADER_BROKER_ID))
        leader_load_s, _ = timed(lambda: leader.on_partition_leadership_changes({tp}, set()))
        release_free_memory()
        rss_after = rss_bytes()
        check(leader.is_leader_cache(tp), "the leader manager does not serve from its cache")
        log(f"  leader loaded the partition in {format_seconds(leader_load_s)}")
        lookups += verify_reads(leader, scenario, "leader path")
        result["verification"] = {"lookups_checked": lookups, "listings_checked": 2}

        result["leader"] = {
            "load_s": leader_load_s,
            "rss_before_load_bytes": rss_before,
            "rss_after_load_bytes": rss_after,
            "rss_load_delta_bytes": (
                None if rss_before is None or rss_after is None else rss_after - rss_before
            ),
            **measure_path(leader, scenario, settings, "leader path"),
        }
        log(_progress("leader", result["leader"]))
        result["store"] = measure_path(follower, scenario, settings, "store path")
        log(_progress("store", result["store"]))
        result["peak_rss_bytes"] = peak_rss_bytes()
    finally:
        if leader is not None:
            leader.close()
        follower.close()
    return result


def _progress(path: str, figures: dict[str, Any]) -> str:
    return (
        f"  {path:6s} remote_log_size {format_seconds(figures['remote_log_size']['median_s'])}, "
        f"list-and-sum {format_seconds(figures['list_and_sum']['median_s'])} "
        f"(n={figures['list_and_sum']['n']}), ratio {figures['ratio']:,.0f}"
    )


def layout_check(
    make_store: Callable[[str], Store], settings: Settings, log: Callable[[str], None]
) -> dict[str, Any]:
    """Populates one partition through the API and another in bulk; their contents must match.

    The API is played through a manager that does not lead the partition, so that every write
    goes through the store path (read, apply, conditional multi) and the partition record says
    what a never-claimed partition says."""
    scenario = bench_partition(settings.compare_segments)
    api_store, bulk_store = make_store("api"), make_store("bulk")
    manager = rlmm.create(api_store.config(BROKER_ID))
    try:
        api_s, _ = timed(lambda: scenario.play(manager))
    finally:
        manager.close()
    rlmm.create(bulk_store.config(BROKER_ID)).close()  # the schema or chroot, as in measure()
    bulk_s, rows = timed(lambda: bulk_store.bulk_load(layout_records(scenario)))
    api_dump, bulk_dump = api_store.dump(), bulk_store.dump()
    problems = compare_dumps(api_dump, bulk_dump)
    for store in (api_store, bulk_store):
        store.drop()
    log(
        f"  layout check, {scenario.segments:,} segments: API {format_seconds(api_s)}, bulk "
        f"{format_seconds(bulk_s)}, {len(api_dump):,} keys, "
        + ("identical" if not problems else f"{len(problems)} differences")
    )
    return {
        "backend": api_store.name,
        "segments": scenario.segments,
        "api_populate_s": api_s,
        "bulk_populate_s": bulk_s,
        "keys": len(api_dump),
        "bulk_rows": rows,
        "identical": not problems,
        "compared": "every key and value (versions are not compared: the API rewrites records)",
        "differences": problems,
    }


def run_backend(
    backend: str,
    sizes: list[int],
    settings: Settings,
    workdir: Path,
    outcome: Outcome,
    log: Callable[[str], None],
) -> None:
    server = None
    try:
        if backend == "sqlite":

            def make_store(label: str) -> Store:
                return SqliteStore(workdir / f"rlmm-{label}.db")

        else:
            from tests.support.zookeeper import ZooKeeperServer

            server = ZooKeeperServer(workdir / "zookeeper")
            server.start()
            hosts = server.connect_string
            run_id = uuid.uuid4().hex[:12]
            log(f"  ZooKeeper serving at {hosts}")

            def make_store(label: str) -> Store:
                return ZooKeeperStore(hosts, f"/bench-remote-log-size-{run_id}-{label}")

        if settings.compare_segments:
            try:
                check_result = layout_check(make_store, settings, log)
                outcome.layout_checks.append(check_result)
                if not check_result["identical"]:
                    outcome.failures += [
                        f"{backend}: bulk layout differs from the API's: {p}"
                        for p in check_result["differences"]
                    ]
            except Exception:
                outcome.failures.append(
                    f"{backend} layout check crashed:\n{traceback.format_exc()}"
                )
        for n in sizes:
            log(f"{backend}, {n:,} segments")
            store = make_store(f"{n}")
            try:
                outcome.results.append(measure(store, bench_partition(n), settings, log))
            except VerificationError as e:
                outcome.failures.append(f"{backend}, {n} segments: {e}")
                log(f"  VERIFICATION FAILED: {e}")
            except Exception:
                outcome.failures.append(
                    f"{backend}, {n} segments crashed:\n{traceback.format_exc()}"
                )
                log(f"  CRASHED:\n{traceback.format_exc()}")
            finally:
                if isinstance(store, SqliteStore):
                    store.drop()  # a million segments take ~0.5 GB of disk
    finally:
        if server is not None:
            server.stop()


# ============================================================================= output


def report_table(outcome: Outcome) -> str:
    rows = []
    for r in outcome.results:
        for path in ("leader", "store"):
            figures = r[path]
            rows.append(
                [
                    r["backend"],
                    f"{r['segments']:,}",
                    path,
                    format_seconds(r["populate"]["seconds"]) if path == "leader" else "",
                    format_seconds(figures["load_s"]) if path == "leader" else "",
                    format_seconds(figures["remote_log_size"]["median_s"]),
                    f"{format_seconds(figures['list_and_sum']['median_s'])} "
                    f"(n={figures['list_and_sum']['n']})",
                    f"{figures['ratio']:,.0f}x",
                ]
            )
    headers = [
        "backend",
        "segments",
        "path",
        "bulk load",
        "leader load",
        "remote_log_size",
        "list-and-sum",
        "ratio",
    ]
    lines = [format_table(headers, rows)]
    largest: dict[str, dict[str, Any]] = {}
    for r in outcome.results:
        if r["segments"] >= largest.get(r["backend"], {}).get("segments", 0):
            largest[r["backend"]] = r
    for backend, r in largest.items():
        leader = r["leader"]
        if leader["rss_after_load_bytes"] is not None:
            delta = leader["rss_load_delta_bytes"]
            lines.append(
                f"{backend}: RSS after the leader load of {r['segments']:,} segments: "
                f"{format_bytes(leader['rss_after_load_bytes'])} "
                f"({'+' if delta >= 0 else '-'}{format_bytes(abs(delta))} over the RSS before it)"
            )
    fingerprints = {r["code"]["tiered_sources_sha256"] for r in outcome.results}
    if len(fingerprints) > 1:
        lines.append(
            "WARNING: tiered/ changed during the run; each result names the code it measured"
        )
    for c in outcome.layout_checks:
        lines.append(
            f"{c['backend']}: API vs bulk layout, {c['segments']:,} segments, {c['keys']:,} keys: "
            + ("identical" if c["identical"] else "DIFFERENT")
        )
    return "\n".join(lines)


def summary(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows for bench/RESULTS.md: each backend's largest partition, on both read paths."""
    largest: dict[str, dict[str, Any]] = {}
    for r in results:
        if r["segments"] >= largest.get(r["backend"], {}).get("segments", 0):
            largest[r["backend"]] = r
    return [
        summary_row(
            f"{backend}, {r['segments']:,} segments, {path} path",
            "remote_log_size (median)",
            r[path]["remote_log_size"]["median_s"],
            "s",
            "list-and-sum (median)",
            r[path]["list_and_sum"]["median_s"],
        )
        for backend, r in largest.items()
        for path in ("leader", "store")
    ]


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--sizes wants integers like 1000,10000: {text!r}"
        ) from None
    if not sizes or min(sizes) < MIN_SEGMENTS:
        raise argparse.ArgumentTypeError(f"--sizes wants integers >= {MIN_SEGMENTS}")
    return sizes


def parse_backends(text: str) -> list[str]:
    backends = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [b for b in backends if b not in DEFAULT_SIZES]
    if not backends or unknown:
        raise argparse.ArgumentTypeError(f"--backends wants some of {', '.join(DEFAULT_SIZES)}")
    return backends


def run_in_process(
    plan: dict[str, list[int]], settings: Settings, log: Callable[[str], None]
) -> Outcome:
    outcome = Outcome()
    with tempfile.TemporaryDirectory(prefix="bench-remote-log-size-") as tmp:
        for backend, sizes in plan.items():
            log(f"== {backend}: {', '.join(f'{n:,}' for n in sizes)} segments")
            try:
                run_backend(backend, sizes, settings, Path(tmp), outcome, log)
            except Exception:
                outcome.failures.append(f"{backend} crashed:\n{traceback.format_exc()}")
                log(f"  CRASHED:\n{traceback.format_exc()}")
    return outcome


def run_isolated(
    plan: dict[str, list[int]], settings: Settings, log: Callable[[str], None]
) -> Outcome:
    """Each backend in a process of its own, so that one backend's heap (the RSS figures) and
    garbage do not carry over into the next; their JSON documents are merged."""
    outcome = Outcome()
    with tempfile.TemporaryDirectory(prefix="bench-remote-log-size-") as tmp:
        for backend, sizes in plan.items():
            child_out = Path(tmp) / f"{backend}.json"
            command = [
                sys.executable,
                str(Path(__file__).resolve()),
                "--backends",
                backend,
                "--sizes",
                ",".join(str(n) for n in sizes),
                "--repeat",
                str(settings.size_repeat),
                "--compare-segments",
                str(settings.compare_segments),
                "--out",
                str(child_out),
                "--child",
            ]
            code = subprocess.run(command, check=False).returncode
            if not child_out.exists():
                outcome.failures.append(f"{backend}: the benchmark process exited with {code}")
                continue
            child = json.loads(child_out.read_text(encoding="utf-8"))
            outcome.results += child["results"]
            outcome.layout_checks += child["layout_checks"]
            outcome.failures += child["verification_failures"]
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, help="segment counts, e.g. 1000,10000")
    parser.add_argument(
        "--backends", type=parse_backends, default=list(DEFAULT_SIZES), help="sqlite,zookeeper"
    )
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK_SIZES} segments")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    parser.add_argument(
        "--repeat", type=int, default=Settings.size_repeat, help="remote_log_size calls timed"
    )
    parser.add_argument(
        "--compare-segments",
        type=int,
        default=DEFAULT_COMPARE_SEGMENTS,
        help="segments populated both through the API and in bulk to compare layouts (0: skip)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run every backend in this process (by default each gets a process of its own)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compare_segments and args.compare_segments < MIN_SEGMENTS:
        parser.error(f"--compare-segments wants 0 or at least {MIN_SEGMENTS}")
    if args.repeat < 1:
        parser.error("--repeat wants at least 1")
    settings = Settings(size_repeat=args.repeat, compare_segments=args.compare_segments)

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = code_fingerprint()  # each result also names the code its process measured
    plan = {
        backend: args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES[backend])
        for backend in args.backends
    }
    isolated = len(plan) > 1 and not args.in_process
    outcome = run_isolated(plan, settings, log) if isolated else run_in_process(plan, settings, log)
    runtime_s = time.perf_counter() - started

    document = {
        "benchmark": "remote_log_size",
        "kip": "KIP-852",
        "description": (
            "remote_log_size(tp, leader_epoch), O(1) from aggregates, versus the same run's "
            "baseline sum(m.segment_size_in_bytes for m in list_remote_log_segments(tp, "
            "leader_epoch)); one partition, one leader epoch. ratio = median list-and-sum / "
            "median remote_log_size."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "code": code,
        "load_average_at_end": load_average(),
        "summary": summary(outcome.results),
        "settings": {
            "plan": plan,
            "process_per_backend": isolated,
            "remote_log_size_repeat": settings.size_repeat,
            "remote_log_size_warmup": settings.size_warmup,
            "list_and_sum_runs": "5 if the first run takes < 1 s, 3 if < 10 s, else 1",
            "chunk_capacity": CHUNK_CAPACITY,
            "leader_epoch": LEADER_EPOCH,
            "scenario": (
                "segments 0..n-2 copied (COPY_SEGMENT_FINISHED), n-1 being copied "
                "(COPY_SEGMENT_STARTED), 0 being deleted (DELETE_SEGMENT_STARTED)"
            ),
            "populate": (
                "bulk writes of the RLMM layout (sqlite: one executemany transaction; "
                "ZooKeeper: asynchronous multi-op transactions of creates, parents first), "
                "checked against an API-populated store"
            ),
        },
        "layout_checks": outcome.layout_checks,
        "results": outcome.results,
        "verification_failures": outcome.failures,
        "ok": not outcome.failures,
    }
    out = write_json(args.out, document)
    if args.child:
        return 1 if outcome.failures else 0
    log("")
    log(report_table(outcome))
    log(
        f"runtime {runtime_s:.1f} s; load average {machine['load_average']} at the start, "
        f"{document['load_average_at_end']} at the end ({machine['nproc']} CPUs); results in {out}"
    )
    if outcome.failures:
        log(f"{len(outcome.failures)} verification failure(s):")
        for failure in outcome.failures:
            log(f"  - {failure}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
