"""Seeds controller metadata for N topics straight into the persistent form a controller loads,
without a controller: a KRaft metadata log directory, or ZooKeeper znodes. For the controller
benchmarks (``bench/controller_scale.py``, ``bench/failover.py``), where creating 100k topics
through a running controller (one fsync'd batch or one ZooKeeper multi per topic, one RPC each)
would take far longer than what is measured.

What is written (``make_topics``):

- topics ``{prefix}-{i:06d}`` with a deterministic topic id (uuid5 of the name), ``--partitions``
  partitions each (default 1), partition p of topic i on broker ``brokers[(i + p) % len(brokers)]``
  (default brokers 1, 2, 3: round robin, replication factor 1 as everywhere in this project);
- tiered: ``remote.storage.enable=true`` with ``retention.ms`` and ``local.retention.ms`` set,
  ENABLED, tiered epoch 0; a fraction ``--disabling-fraction`` of them, spread evenly over the
  names, is DISABLING with tiered epoch 1 and ``remote.storage.enable=false`` (policy retain):
  a disable persisted whose DisableRemoteTopic no broker has acked yet;
- no broker registrations (brokers register themselves when they start).

KRaft (``seed_kraft``): the batches are those a controller writes (``tiered.cluster.serde``:
``controller_epoch_record`` of an earlier controller 1 at epoch 1, then ``topic_to_records`` of
each topic, by default one batch per topic as ``writes.create_topic`` commits them), framed by
``kraft_log.encode_frame`` into segment files named and rolled as ``MetadataLog`` names and rolls
them, with one fsync per file instead of one per batch. The directory is then opened with
``MetadataLog`` (which validates every frame, as a controller's recovery does) and, unless
``snapshot=False``, a snapshot of the whole image is written with ``MetadataLog.write_snapshot``:
a controller snapshots every 20,000 records, so one that created these topics would have one
within 20,000 records of the end. DISABLING topics are written in their final state (a
TopicRecord with a DISABLING TieredStateRecord) rather than as a create followed by an update.
``update_kraft`` appends ``topic_update_records`` to an existing log through ``MetadataLog.append``
(one fsync'd batch per ``topics_per_batch`` topics), e.g. to turn seeded topics DISABLING.

ZooKeeper (``seed_zookeeper``): the znodes ``ZooKeeperMetadataStore.writes.create_topic`` writes
(``controller.store.zookeeper.topic_create_ops``: assignment, tieredstorage, tiered_epoch,
state, config; five creates a topic) in transactions of ``topics_per_txn`` topics, with
``in_flight`` transactions pipelined on one kazoo session. ``update_zookeeper`` sets
``topic_update_ops`` the same way. No ``/controller`` or ``/controller_epoch`` is written.

Timings on this 2-CPU machine (``bench/results/controller_scale.json``): 100k topics seed in
about 5 s in KRaft mode (1.7 s of writing, the rest the validating replay and the snapshot) and
about 14 s in ZooKeeper mode (500k znodes); up to 4x that while other jobs load the machine.

Usage::

    python bench/seed_metadata.py --mode kraft --dir DIR --topics 100000 [--partitions 1]
        [--brokers 1,2,3] [--disabling-fraction 0.1] [--topics-per-batch 1] [--no-snapshot]
    python bench/seed_metadata.py --mode zookeeper --zookeeper HOST:PORT/chroot --topics 100000 ...

A KRaft directory must be empty or absent; a ZooKeeper chroot must not hold topics yet.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.store.kraft_log import (
    DEFAULT_SEGMENT_BYTES,
    MetadataLog,
    encode_frame,
    segment_file_name,
)
from tiered.cluster import serde, zk_paths
from tiered.cluster.model import MetadataImage, TieredState, TopicMetadata
from tiered.durable import fsync_dir
from tiered.rpc.v1 import metadata_pb2

DEFAULT_BROKERS = (1, 2, 3)
TOPIC_ID_NAMESPACE = uuid.UUID("6f1d4a52-5b1e-4c83-9a57-0d7c2f3e9b10")
ENABLED_CONFIGS = {
    "remote.storage.enable": "true",
    "retention.ms": "604800000",
    "local.retention.ms": "3600000",
}
DISABLING_CONFIGS = {**ENABLED_CONFIGS, "remote.storage.enable": "false"}
PREVIOUS_CONTROLLER = (1, 1, "127.0.0.1:1")  # (id, epoch, endpoint) of the controller "before"
ZK_TOPICS_PER_TXN = 100  # 500 creates a multi
ZK_IN_FLIGHT = 16


def topic_name(prefix: str, index: int) -> str:
    return f"{prefix}-{index:06d}"


def topic_id_of(name: str) -> uuid.UUID:
    return uuid.uuid5(TOPIC_ID_NAMESPACE, name)


def is_disabling(index: int, fraction: float) -> bool:
    """Whether topic ``index`` is among the ``fraction`` that are DISABLING, spread evenly."""
    return int((index + 1) * fraction) > int(index * fraction)


def make_topic(
    index: int,
    *,
    prefix: str = "t",
    partitions: int = 1,
    brokers: Sequence[int] = DEFAULT_BROKERS,
    disabling: bool = False,
) -> TopicMetadata:
    name = topic_name(prefix, index)
    return TopicMetadata(
        name=name,
        topic_id=topic_id_of(name),
        replicas=tuple(brokers[(index + p) % len(brokers)] for p in range(partitions)),
        configs=DISABLING_CONFIGS if disabling else ENABLED_CONFIGS,
        tiered_state=TieredState.DISABLING if disabling else TieredState.ENABLED,
        tiered_epoch=1 if disabling else 0,
    )


def make_topics(
    count: int,
    *,
    prefix: str = "t",
    partitions: int = 1,
    brokers: Sequence[int] = DEFAULT_BROKERS,
    disabling_fraction: float = 0.0,
    start: int = 0,
) -> list[TopicMetadata]:
    """``count`` topics as described in the module docstring (indexes ``start`` on)."""
    if not 0.0 <= disabling_fraction <= 1.0:
        raise ValueError(f"disabling_fraction must be in [0, 1], not {disabling_fraction}")
    if partitions < 1 or not brokers:
        raise ValueError("a topic needs at least one partition and one broker")
    return [
        make_topic(
            i,
            prefix=prefix,
            partitions=partitions,
            brokers=brokers,
            disabling=is_disabling(i, disabling_fraction),
        )
        for i in range(start, start + count)
    ]


def disabled_version(topic: TopicMetadata) -> TopicMetadata:
    """The topic after a disable was persisted (DISABLING, tiered epoch + 1), as
    ``controller.tiered_state`` would make it, for ``update_kraft``/``update_zookeeper``."""
    return TopicMetadata(
        name=topic.name,
        topic_id=topic.topic_id,
        replicas=topic.replicas,
        configs={**topic.configs, "remote.storage.enable": "false"},
        tiered_state=TieredState.DISABLING,
        tiered_epoch=topic.tiered_epoch + 1,
    )


@dataclass
class SeedResult:
    topics: int
    seconds: float
    bytes_written: int  # KRaft: log + snapshot files; ZooKeeper: znode data
    details: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "topics": self.topics,
            "seconds": self.seconds,
            "bytes_written": self.bytes_written,
            **self.details,
        }


def _chunks(items: Sequence[TopicMetadata], size: int) -> Iterator[Sequence[TopicMetadata]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --------------------------------------------------------------------------------- KRaft


def _write_synced(path: Path, data: bytes | bytearray) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_locked(directory: Path, segment_bytes: int) -> tuple[MetadataLog, MetadataImage]:
    """The log opened for writing (its lock held, as a controller holds it) and the image its
    replay gives."""
    log = MetadataLog(directory, segment_bytes=segment_bytes)
    if not log.acquire_lock(threading.Event(), 0.1):
        raise RuntimeError(f"cannot lock {directory}")
    holder = [MetadataImage()]

    def on_snapshot(batch: metadata_pb2.MetadataRecordBatch) -> None:
        holder[0] = serde.image_from_snapshot(batch)

    def on_batch(batch: metadata_pb2.MetadataRecordBatch) -> None:
        serde.apply_batch(holder[0], batch)

    try:
        log.open(on_snapshot=on_snapshot, on_batch=on_batch)
    except BaseException:
        log.release_lock()
        raise
    holder[0].offset = log.end_offset - 1
    return log, holder[0]


def _close(log: MetadataLog) -> None:
    log.close()
    log.release_lock()


def seed_kraft(
    directory: Path | str,
    topics: Sequence[TopicMetadata],
    *,
    topics_per_batch: int = 1,
    snapshot: bool = True,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> SeedResult:
    """Writes a new metadata log holding ``topics`` into ``directory`` (empty or absent)."""
    if topics_per_batch < 1:
        raise ValueError("topics_per_batch must be >= 1")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise ValueError(f"{directory} is not empty")
    started = time.perf_counter()

    def batches() -> Iterator[list[metadata_pb2.MetadataRecord]]:
        yield [serde.controller_epoch_record(*PREVIOUS_CONTROLLER)]
        for chunk in _chunks(topics, topics_per_batch):
            records: list[metadata_pb2.MetadataRecord] = []
            for topic in chunk:
                records += serde.topic_to_records(topic)
            yield records

    base, offset, frames = 0, 0, bytearray()
    log_bytes = 0
    for records in batches():
        payload = metadata_pb2.MetadataRecordBatch(
            base_offset=offset, records=records
        ).SerializeToString()
        frame = encode_frame(payload)
        if frames and len(frames) + len(frame) > segment_bytes:  # rolled as MetadataLog rolls
            _write_synced(directory / segment_file_name(base), frames)
            log_bytes += len(frames)
            base, frames = offset, bytearray()
        frames += frame
        offset += len(records)
    _write_synced(directory / segment_file_name(base), frames)
    log_bytes += len(frames)
    fsync_dir(directory)
    written_s = time.perf_counter() - started

    # Open it as a controller would (every frame checked) and snapshot the image.
    log, image = _open_locked(directory, segment_bytes)
    try:
        if len(image.topics) != len(topics) or log.end_offset != offset:
            raise RuntimeError(
                f"{directory}: replay found {len(image.topics)} topics up to offset "
                f"{log.end_offset}, expected {len(topics)} up to {offset}"
            )
        snapshot_bytes = 0
        if snapshot:
            log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
            snapshot_bytes = sum(p.stat().st_size for p in directory.glob("*.snapshot"))
    finally:
        _close(log)
    return SeedResult(
        topics=len(topics),
        seconds=time.perf_counter() - started,
        bytes_written=log_bytes + snapshot_bytes,
        details={
            "mode": "kraft",
            "records": offset,
            "log_bytes": log_bytes,
            "snapshot_bytes": snapshot_bytes,
            "log_write_s": written_s,
            "topics_per_batch": topics_per_batch,
        },
    )


def update_kraft(
    directory: Path | str,
    topics: Sequence[TopicMetadata],
    *,
    topics_per_batch: int = 1000,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
) -> SeedResult:
    """Appends the configs and tiered state of ``topics`` (which the log must hold) through
    ``MetadataLog.append``, ``topics_per_batch`` topics a batch. No controller may hold the log."""
    started = time.perf_counter()
    log, image = _open_locked(Path(directory), segment_bytes)
    written = 0
    try:
        for topic in topics:
            known = image.topics.get(topic.name)
            if known is None or known.topic_id != topic.topic_id:
                raise ValueError(f"{directory} holds no topic {topic.name} ({topic.topic_id})")
        for chunk in _chunks(topics, topics_per_batch):
            records: list[metadata_pb2.MetadataRecord] = []
            for topic in chunk:
                records += serde.topic_update_records(topic)
            log.append(records)
            written += sum(r.ByteSize() for r in records)
    finally:
        _close(log)
    return SeedResult(
        len(topics), time.perf_counter() - started, written, {"mode": "kraft", "update": True}
    )


# --------------------------------------------------------------------------------- ZooKeeper


def _kazoo_client(connect: str) -> Any:
    from kazoo.client import KazooClient

    from tiered.zk_client import connection_retry, split_connect_string

    hosts, chroot = split_connect_string(connect)
    client = KazooClient(hosts=hosts, timeout=30.0, connection_retry=connection_retry(30.0))
    client.start(timeout=30.0)
    return client, chroot


def _run_transactions(
    client: Any,
    chroot: str,
    ops_per_txn: Iterable[Sequence[tuple[str, str, bytes]]],
    in_flight: int,
) -> int:
    """Commits each group of ops as one transaction, ``in_flight`` pipelined; returns the bytes
    of data written. Raises on the first failed transaction."""
    pending: deque[Any] = deque()
    written = 0

    def settle(result: Any) -> None:
        for item in result.get(timeout=60):
            if isinstance(item, Exception):
                raise RuntimeError(f"ZooKeeper transaction failed: {item!r}")

    for ops in ops_per_txn:
        txn = client.transaction()
        for kind, path, data in ops:
            if kind == "create":
                txn.create(chroot + path, data)
            elif kind == "set":
                txn.set_data(chroot + path, data)
            else:
                raise ValueError(f"unexpected op {kind}")
            written += len(data)
        if len(pending) >= in_flight:
            settle(pending.popleft())
        pending.append(txn.commit_async())
    while pending:
        settle(pending.popleft())
    return written


def seed_zookeeper(
    connect: str,
    topics: Sequence[TopicMetadata],
    *,
    topics_per_txn: int = ZK_TOPICS_PER_TXN,
    in_flight: int = ZK_IN_FLIGHT,
) -> SeedResult:
    """Creates the znodes of ``topics`` under ``connect``'s chroot (made if missing)."""
    from controller.store.zookeeper import topic_create_ops

    def make_parents(client: Any, chroot: str) -> None:
        for parent in (
            zk_paths.BROKER_IDS,
            zk_paths.BROKER_TOPICS,
            zk_paths.CONFIG_TOPICS,
            zk_paths.DELETE_JOBS,
        ):
            client.ensure_path(chroot + parent)
        if client.get_children(chroot + zk_paths.BROKER_TOPICS):
            raise ValueError(f"{connect} holds topics already")

    return _write_zookeeper(
        connect,
        topics,
        topic_create_ops,
        topics_per_txn,
        in_flight,
        {"mode": "zookeeper", "znodes": 5 * len(topics), "topics_per_txn": topics_per_txn},
        before=make_parents,
    )


def update_zookeeper(
    connect: str,
    topics: Sequence[TopicMetadata],
    *,
    topics_per_txn: int = ZK_TOPICS_PER_TXN,
    in_flight: int = ZK_IN_FLIGHT,
) -> SeedResult:
    """Sets the configs, tiered state and tiered epoch znodes of existing ``topics``."""
    from controller.store.zookeeper import topic_update_ops

    return _write_zookeeper(
        connect,
        topics,
        topic_update_ops,
        topics_per_txn,
        in_flight,
        {"mode": "zookeeper", "update": True},
    )


def _write_zookeeper(
    connect: str,
    topics: Sequence[TopicMetadata],
    ops_of: Callable[[TopicMetadata], Sequence[tuple[str, str, bytes]]],
    topics_per_txn: int,
    in_flight: int,
    details: dict[str, Any],
    *,
    before: Callable[[Any, str], None] | None = None,
) -> SeedResult:
    """Writes ``ops_of(topic)`` for every topic, ``topics_per_txn`` topics a transaction."""
    started = time.perf_counter()
    client, chroot = _kazoo_client(connect)
    try:
        if before is not None:
            before(client, chroot)
        written = _run_transactions(
            client,
            chroot,
            (
                [op for topic in chunk for op in ops_of(topic)]
                for chunk in _chunks(topics, topics_per_txn)
            ),
            in_flight,
        )
    finally:
        client.stop()
        client.close()
    return SeedResult(len(topics), time.perf_counter() - started, written, details)


# --------------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", choices=("kraft", "zookeeper"), required=True)
    parser.add_argument("--dir", type=Path, help="KRaft: the metadata.log.dir to create")
    parser.add_argument("--zookeeper", help="ZooKeeper: host:port/chroot")
    parser.add_argument("--topics", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--brokers", default=",".join(map(str, DEFAULT_BROKERS)))
    parser.add_argument("--prefix", default="t")
    parser.add_argument("--disabling-fraction", type=float, default=0.0)
    parser.add_argument(
        "--topics-per-batch",
        type=int,
        default=None,
        help="KRaft: topics per log batch (default 1, as the controller writes them); "
        f"ZooKeeper: topics per transaction (default {ZK_TOPICS_PER_TXN})",
    )
    parser.add_argument("--no-snapshot", action="store_true", help="KRaft: skip the snapshot")
    args = parser.parse_args(argv)
    brokers = [int(b) for b in args.brokers.split(",") if b.strip()]
    topics = make_topics(
        args.topics,
        prefix=args.prefix,
        partitions=args.partitions,
        brokers=brokers,
        disabling_fraction=args.disabling_fraction,
    )
    if args.mode == "kraft":
        if args.dir is None:
            parser.error("--mode kraft needs --dir")
        result = seed_kraft(
            args.dir,
            topics,
            topics_per_batch=args.topics_per_batch or 1,
            snapshot=not args.no_snapshot,
        )
    else:
        if not args.zookeeper:
            parser.error("--mode zookeeper needs --zookeeper host:port/chroot")
        result = seed_zookeeper(
            args.zookeeper, topics, topics_per_txn=args.topics_per_batch or ZK_TOPICS_PER_TXN
        )
    disabling = sum(1 for t in topics if t.tiered_state is TieredState.DISABLING)
    print(
        f"seeded {result.topics} topics ({disabling} DISABLING, {args.partitions} partitions "
        f"each on brokers {brokers}) in {result.seconds:.2f}s: {result.as_dict()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
