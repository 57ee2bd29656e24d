"""The world ``bench/bulk_delete.py`` deletes in: a topic's remote segments on an S3 endpoint (or a
local directory), their metadata in a ZooKeeper RLMM, and a Spark standalone cluster.

- :class:`Tree`: ``segments`` segments of tiered epoch 0 spread over the partitions of topic
  ``bench``, each the four objects every copy writes (:data:`tiered.rsm.layout.
  WRITTEN_BY_EVERY_COPY`) with its metadata at COPY_SEGMENT_FINISHED; per partition, the objects
  of a copy that died before its metadata (no metadata: only the sweep finds them) and one segment
  of epoch E = 1 that must survive; and another topic's segments of epoch 0 that must survive.
  Ids come from a seeded random generator, so a tree is the same in every process.
- :class:`SeededS3`: ``bench/moto_seeded.py`` in its own process, holding the tree's objects.
- :class:`MetadataImage`: the tree's metadata written once into a ZooKeeper server's data
  directory (the RLMM's own records, written as its commits write them); each run starts a real
  ZooKeeper server on a fresh copy of that directory, so every run finds the same metadata.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from bench.controller_scale import BenchZooKeeper
from tiered import rlmm
from tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tiered.rlmm.partition_state import PartitionMetadataState
from tiered.rsm import layout

TOPIC = "bench"
OTHER_TOPIC = "bystander"
E = 1  # the job deletes tiered epochs < E
SUFFIXES = layout.WRITTEN_BY_EVERY_COPY
ORPHAN_SUFFIXES = (layout.LOG_SUFFIX, "index")  # what a copy that died before its metadata left
OTHER_SEGMENTS = 50
BUCKET = "bench-bulk-delete"
PREFIX = "cluster/remote"
ZK_CHROOT = "/bench-rlmm"
SEED_CHUNK = 500  # segments a commit while seeding the metadata
OBJECT_BYTES = 32


def log(message: str) -> None:
    print(message, flush=True)


def _metadata(
    rng: random.Random, tp: TopicIdPartition, start: int, tiered_epoch: int
) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId(tp, uuid.UUID(int=rng.getrandbits(128))),
        start_offset=start,
        end_offset=start + 999,
        max_timestamp_ms=start,
        broker_id=0,
        event_timestamp_ms=1,
        segment_size_in_bytes=len(SUFFIXES) * OBJECT_BYTES,
        segment_leader_epochs={0: start},
        tiered_epoch=tiered_epoch,
    )


def segment_keys(metadata: RemoteLogSegmentMetadata) -> list[str]:
    prefix = layout.segment_prefix(metadata)
    return [layout.object_key(prefix, suffix) for suffix in SUFFIXES]


@dataclass(frozen=True)
class Tree:
    topic_id: uuid.UUID
    segments: tuple[tuple[RemoteLogSegmentMetadata, ...], ...]  # epoch 0, by partition
    orphans: tuple[tuple[str, ...], ...]  # keys without metadata, by partition
    survivors: tuple[RemoteLogSegmentMetadata, ...]  # epoch E, one a partition
    other: tuple[RemoteLogSegmentMetadata, ...]  # another topic's, epoch 0

    @classmethod
    def build(cls, segments: int, partitions: int, seed: int) -> Tree:
        rng = random.Random(seed)
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        tps = [TopicIdPartition(topic_id, TOPIC, p) for p in range(partitions)]
        by_partition: list[tuple[RemoteLogSegmentMetadata, ...]] = []
        orphans: list[tuple[str, ...]] = []
        survivors: list[RemoteLogSegmentMetadata] = []
        for p, tp in enumerate(tps):
            count = segments // partitions + (1 if p < segments % partitions else 0)
            by_partition.append(tuple(_metadata(rng, tp, n * 1000, 0) for n in range(count)))
            dead = layout.segment_prefix_of(
                tp, 0, count * 1000, uuid.UUID(int=rng.getrandbits(128))
            )
            orphans.append(tuple(layout.object_key(dead, s) for s in ORPHAN_SUFFIXES))
            survivors.append(_metadata(rng, tp, (count + 1) * 1000, E))
        other_tp = TopicIdPartition(uuid.UUID(int=rng.getrandbits(128)), OTHER_TOPIC, 0)
        other = tuple(_metadata(rng, other_tp, n * 1000, 0) for n in range(OTHER_SEGMENTS))
        return cls(topic_id, tuple(by_partition), tuple(orphans), tuple(survivors), other)

    @property
    def tps(self) -> list[TopicIdPartition]:
        return [TopicIdPartition(self.topic_id, TOPIC, p) for p in range(len(self.segments))]

    def segment_count(self, partitions: Sequence[int] | None = None) -> int:
        return sum(len(self.segments[p]) for p in self._partitions(partitions))

    def _partitions(self, partitions: Sequence[int] | None) -> Sequence[int]:
        return range(len(self.segments)) if partitions is None else partitions

    def doomed_keys(self, partitions: Sequence[int] | None = None) -> list[str]:
        """Every key below E of the partitions: the segments' and the orphans'."""
        return [
            key
            for p in self._partitions(partitions)
            for key in [*(k for m in self.segments[p] for k in segment_keys(m)), *self.orphans[p]]
        ]

    def kept_keys(self, partitions: Sequence[int] | None = None) -> list[str]:
        """The keys that must survive: the partitions' epoch-E segments, the other topic's."""
        survivors = [self.survivors[p] for p in self._partitions(partitions)]
        return [k for m in (*survivors, *self.other) for k in segment_keys(m)]

    def metadata_of(
        self, partitions: Sequence[int] | None = None
    ) -> list[RemoteLogSegmentMetadata]:
        """The segments with metadata, as the RLMM holds them: the partitions' and the other
        topic's."""
        ps = self._partitions(partitions)
        return [
            *(m for p in ps for m in self.segments[p]),
            *(self.survivors[p] for p in ps),
            *self.other,
        ]

    def write_keys(self, path: Path, partitions: Sequence[int] | None = None) -> Path:
        """The bucket's keys (``PREFIX/...``), one a line, for ``bench/moto_seeded.py``."""
        keys = [*self.doomed_keys(partitions), *self.kept_keys(partitions)]
        path.write_text("".join(f"{PREFIX}/{k}\n" for k in keys), encoding="utf-8")
        return path

    def write_local(self, root: Path, partitions: Sequence[int] | None = None) -> None:
        """The objects as files under a local root."""
        data = b"x" * OBJECT_BYTES
        made: set[Path] = set()
        for key in [*self.doomed_keys(partitions), *self.kept_keys(partitions)]:
            path = root / key
            if path.parent not in made:
                path.parent.mkdir(parents=True, exist_ok=True)
                made.add(path.parent)
            path.write_bytes(data)


# ============================================================================= S3


class SeededS3:
    """``bench/moto_seeded.py`` serving ``bucket`` (default :data:`BUCKET`) with the keys of
    ``keys_file``; with ``index_listings``, its listings answered from a sorted index (see
    ``--index-listings`` there)."""

    def __init__(
        self, keys_file: Path, bucket: str = BUCKET, *, index_listings: bool = False
    ) -> None:
        started = time.perf_counter()
        self.bucket = bucket
        self._process = subprocess.Popen(
            [
                *(sys.executable, str(Path(__file__).with_name("moto_seeded.py"))),
                *("--bucket", bucket, "--keys-file", str(keys_file)),
                *("--object-bytes", str(OBJECT_BYTES)),
                *(("--index-listings",) if index_listings else ()),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().split()
        if not line or line[0] != "ready":
            self.close()
            raise RuntimeError(f"bench/moto_seeded.py did not start (said {line!r})")
        self.url = f"http://127.0.0.1:{line[1]}"
        self.objects = int(line[2])
        self.seed_s = float(line[3])
        self.start_s = time.perf_counter() - started

    @cached_property
    def client(self) -> Any:
        """A boto3 client straight to the endpoint (never through a fault proxy)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            region_name="us-east-1",
            config=Config(max_pool_connections=32, retries={"mode": "standard"}),
        )

    def keys(self) -> set[str]:
        """Every key of the bucket, relative to :data:`PREFIX`."""
        found: set[str] = set()
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket):
            found.update(o["Key"][len(PREFIX) + 1 :] for o in page.get("Contents", ()))
        return found

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()  # the server stops when its input closes
        try:
            self._process.wait(30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


# ============================================================================= metadata


def _seed_partition(
    backend: Any, segments: Sequence[RemoteLogSegmentMetadata], chunk: int = SEED_CHUNK
) -> None:
    """Writes the segments (one partition's) as added and COPY_SEGMENT_FINISHED, ``chunk`` to a
    commit: the records the RLMM's own commits write, without a commit per event."""
    tp = segments[0].topic_id_partition
    for start in range(0, len(segments), chunk):
        state = PartitionMetadataState.open(backend, tp) or PartitionMetadataState.create(
            backend, tp
        )
        for metadata in segments[start : start + chunk]:
            state.handle_remote_log_segment_metadata(metadata)
            state.handle_remote_log_segment_metadata_update(
                RemoteLogSegmentMetadataUpdate(
                    metadata.remote_log_segment_id,
                    2,
                    None,
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                    0,
                )
            )
        backend.multi(state.pending_ops())
        state.mark_committed()


def rlmm_config(connect: str, broker_id: int | None = None) -> dict[str, str]:
    """The ZooKeeper RLMM's settings (a controller's carry no ``broker.id``: its node id is)."""
    config = {"rlmm.backend": "zookeeper", "rlmm.zookeeper.connect": connect + ZK_CHROOT}
    if broker_id is not None:
        config["broker.id"] = str(broker_id)
    return config


class MetadataImage:
    """A ZooKeeper data directory holding a tree's metadata (see the module docstring)."""

    def __init__(
        self, root: Path, tree: Tree, partitions: Sequence[int] | None = None, threads: int = 4
    ) -> None:
        self.root = root
        started = time.perf_counter()
        with BenchZooKeeper(root / "image") as zookeeper:
            manager = rlmm.create(rlmm_config(zookeeper.connect_string, -1))
            try:
                by_partition: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]] = {}
                for m in tree.metadata_of(partitions):
                    by_partition.setdefault(m.topic_id_partition, []).append(m)
                first, *rest = by_partition.values()
                _seed_partition(manager.backend, first)  # creates the common parents
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(lambda s: _seed_partition(manager.backend, s), rest))
            finally:
                manager.close()
            zookeeper.stop()
        self.seed_s = time.perf_counter() - started
        self.data_dir = root / "image" / "data"

    def start(self, base_dir: Path) -> BenchZooKeeper:
        """A ZooKeeper server on a fresh copy of the image, serving."""
        shutil.copytree(self.data_dir, base_dir / "data")
        zookeeper = BenchZooKeeper(base_dir)
        zookeeper.start()
        return zookeeper


# ============================================================================= Spark


def spark_settings(master: str, repo_root: Path) -> dict[str, str]:
    """The controller's ``spark.*`` settings (executors import this checkout's ``tiered``)."""
    return {
        "spark.master": master,
        "spark.cores.max": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.executorEnv.PYTHONPATH": str(repo_root),
    }


def chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
