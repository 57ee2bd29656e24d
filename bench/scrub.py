"""Scrub of remote storage (docs/design.md, "Scrub") on an S3 endpoint against a floor of listing
the same bucket, in one run.

The world: ``--topics`` live topics of ``--partitions`` partitions, each partition ``--segments``
segments of tiered epoch 0 with their metadata at COPY_SEGMENT_FINISHED in a sqlite RLMM, four
objects a segment (:data:`tiered.rsm.layout.WRITTEN_BY_EVERY_COPY`); and 1% of the objects orphans
(``--orphan-share``), half of them the objects of segments no RLMM record names, spread over the
live topics' partitions, half those of a topic the cluster no longer has (a deleted topic, its
records gone). The defaults make 100 topics x 10 partitions x 99 segments x 4 = 396,000 claimed
objects and 4,000 orphans: 400,000 objects under 1,010 partition prefixes.

The S3 endpoint is moto's server in a process of its own, seeded in its backend before it serves
(``bench/moto_seeded.py``), its listings answered from a sorted index of the keys
(``--index-listings`` there; ``--moto-scan`` keeps moto's own listing, which reads every key of
the bucket for each page, so that the endpoint's CPU and not the client's sets both figures).
The RLMM's records are written through its API (add at COPY_SEGMENT_STARTED, update to
COPY_SEGMENT_FINISHED) for the first topic's partitions, which times that path; the rest, at
about 2 ms a segment through the API, are written as the RLMM's own commits write them, a
partition's segments a few hundred to a commit (``bench.bulk_delete_world``). Setup is untimed
and reported.

Methods, alternating for ``--rounds`` rounds after an untimed warm-up of each (median reported):

- *floor*: ListObjectsV2 from a pool of ``--parallelism`` threads (boto3, one client, as many
  pooled connections): the root's topic prefixes by delimiter, each topic's partition prefixes
  by delimiter, then each partition prefix whole, paginating; the keys counted.
- *scrub*: ``RemoteObjectScrubber(rlmm, FsspecRemoteStorageManager("s3://..."), engine).scrub(0,
  False, claims)`` with the same parallelism: the listing through the plugin's
  :class:`~tiered.api.RemoteStorageScanner`, the RLMM read per partition, the classification.
  Its report must count every object listed and exactly the planted orphans, each under its
  reason (exit 1 otherwise).

The goal reported (timings are never asserted): scrub at most 1.5x the floor.

Usage: ``python bench/scrub.py [--quick] [--topics 100] [--partitions 10] [--segments 99]
[--orphan-share 0.01] [--parallelism 32] [--rounds 3] [--moto-scan] [--profile PATH]
[--workdir DIR] [--out PATH]`` (results default to ``bench/results/scrub.json``).
"""

from __future__ import annotations

import argparse
import cProfile
import random
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bulk_delete_world import SeededS3, _metadata, _seed_partition, log, segment_keys
from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    format_seconds,
    load_average,
    machine_info,
    summary_row,
    utc_now,
    write_json,
)
from controller.jobs.runner import DeleteEngine
from controller.jobs.spark_delete import EngineChoice
from controller.remote_scrub import SCAN_PARALLELISM, ClaimsOfJobs, RemoteObjectScrubber
from tiered import rlmm
from tiered.api import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteObjectDeleter,
    TopicIdPartition,
)
from tiered.cluster.model import OrphanReason, RemoteStorageScrub
from tiered.rlmm.manager import StoreRemoteLogMetadataManager
from tiered.rsm import layout
from tiered.rsm.fsspec_rsm import FsspecRemoteStorageManager
from tiered.rsm.s3 import S3Credentials, S3Settings

DEFAULT_OUT = RESULTS_DIR / "scrub.json"
BUCKET = "bench-scrub"
PREFIX = "cluster/remote"
SUFFIXES = layout.WRITTEN_BY_EVERY_COPY
CREDENTIALS = S3Credentials("bench", "bench", source="the bench")  # moto takes any
GOAL = 1.5
QUICK = {"topics": 4, "partitions": 4, "segments": 24, "rounds": 1}  # 1,552 objects


class VerificationError(Exception):
    pass


# ============================================================================= the world


@dataclass(frozen=True)
class World:
    """The bucket's segments: those with records, by partition, and the orphans' keys."""

    live_topics: tuple[uuid.UUID, ...]
    recorded: tuple[tuple[RemoteLogSegmentMetadata, ...], ...]  # by live partition
    unknown_segment_keys: tuple[str, ...]  # live topics, segments without records
    deleted_topic_keys: tuple[str, ...]  # a topic the cluster does not have

    @classmethod
    def build(
        cls, topics: int, partitions: int, segments: int, orphan_share: float, seed: int = 7
    ) -> World:
        rng = random.Random(seed)
        topic_ids = tuple(uuid.UUID(int=rng.getrandbits(128)) for _ in range(topics))
        tps = [
            TopicIdPartition(topic_id, f"topic{t:03d}", p)
            for t, topic_id in enumerate(topic_ids)
            for p in range(partitions)
        ]
        recorded = tuple(
            tuple(_metadata(rng, tp, n * 1000, 0) for n in range(segments)) for tp in tps
        )
        claimed = len(tps) * segments * len(SUFFIXES)
        # orphans / (claimed + orphans) = share; half unknown segments, half a deleted topic
        orphan_segments = round(claimed * orphan_share / (1 - orphan_share) / len(SUFFIXES))
        unknown = max(1, orphan_segments // 2)
        deleted = max(1, orphan_segments - unknown)
        unknown_keys = [
            key
            for i in range(unknown)
            for key in segment_keys(_metadata(rng, tps[i % len(tps)], (segments + i) * 1000, 0))
        ]
        gone = uuid.UUID(int=rng.getrandbits(128))
        gone_tps = [TopicIdPartition(gone, "deleted", p) for p in range(partitions)]
        deleted_keys = [
            key
            for i in range(deleted)
            for key in segment_keys(_metadata(rng, gone_tps[i % partitions], i * 1000, 0))
        ]
        return cls(topic_ids, recorded, tuple(unknown_keys), tuple(deleted_keys))

    @property
    def orphans(self) -> set[str]:
        return {*self.unknown_segment_keys, *self.deleted_topic_keys}

    def keys(self) -> list[str]:
        return [
            *(k for segments in self.recorded for m in segments for k in segment_keys(m)),
            *self.unknown_segment_keys,
            *self.deleted_topic_keys,
        ]

    def partition_prefixes(self) -> int:
        deleted_partitions = {k.split("/", 2)[1] for k in self.deleted_topic_keys}
        return len(self.recorded) + len(deleted_partitions)


def seed_rlmm(manager: StoreRemoteLogMetadataManager, world: World, partitions: int) -> float:
    """Writes the records: the first topic's through the RLMM's API (add, then update to
    COPY_SEGMENT_FINISHED); returns the API's seconds a segment. The others as its commits
    write them (see the module docstring)."""
    started = time.perf_counter()
    through_api = 0
    for segments in world.recorded[:partitions]:
        for m in segments:
            manager.add_remote_log_segment_metadata(m)
            manager.update_remote_log_segment_metadata(
                RemoteLogSegmentMetadataUpdate(
                    m.remote_log_segment_id,
                    2,
                    None,
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                    0,
                )
            )
            through_api += 1
    per_segment = (time.perf_counter() - started) / max(1, through_api)
    for segments in world.recorded[partitions:]:
        if segments:
            _seed_partition(manager.backend, segments)
    return per_segment


# ============================================================================= the methods


class _NoDeletes:
    """The scrub's delete engine: a dry run never deletes."""

    def choose(self, object_count: int) -> EngineChoice:
        raise AssertionError("a dry-run scrub chose a delete engine")

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        handles: Sequence[str],
        engine: EngineChoice,
        on_progress: Callable[[Sequence[str]], None] | None = None,
    ) -> Any:
        raise AssertionError("a dry-run scrub deleted")


def boto3_client(url: str, parallelism: int) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=CREDENTIALS.access_key_id,
        aws_secret_access_key=CREDENTIALS.secret_access_key,
        region_name="us-east-1",
        config=Config(max_pool_connections=parallelism, retries={"mode": "standard"}),
    )


def list_floor(client: Any, pool: ThreadPoolExecutor) -> int:
    """The keys under the root, listed as the module docstring says; returns how many."""

    def level(prefix: str) -> tuple[list[str], int]:
        below: list[str] = []
        keys = 0
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=BUCKET, Prefix=prefix, Delimiter="/"
        )
        for page in pages:
            below.extend(p["Prefix"] for p in page.get("CommonPrefixes", ()))
            keys += len(page.get("Contents", ()))
        return below, keys

    def whole(prefix: str) -> int:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sum(len(page.get("Contents", ())) for page in pages)

    prefixes = [PREFIX + "/"]
    count = 0
    for _ in range(2):  # topics, then partitions
        below: list[str] = []
        for found, keys in pool.map(level, prefixes):
            below.extend(found)
            count += keys
        prefixes = below
    return count + sum(pool.map(whole, prefixes))


def check_report(report: RemoteStorageScrub, world: World, objects: int) -> None:
    problems = []
    if report.scanned_objects != objects:
        problems.append(f"{report.scanned_objects} objects listed, not {objects}")
    if report.orphan_objects != len(world.orphans):
        problems.append(f"{report.orphan_objects} orphans, not {len(world.orphans)}")
    expected = {
        OrphanReason.DELETED_TOPIC: len(world.deleted_topic_keys),
        OrphanReason.UNKNOWN_SEGMENT: len(world.unknown_segment_keys),
        OrphanReason.DELETED_SEGMENT: 0,
    }
    if dict(report.by_reason) != expected:
        problems.append(f"by reason {dict(report.by_reason)}, not {expected}")
    if strays := set(report.examples) - world.orphans:
        problems.append(f"examples that are no orphans: {sorted(strays)[:3]}")
    if problems:
        raise VerificationError("scrub: " + "; ".join(problems))


# ============================================================================= main


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    setup: dict[str, Any] = {}
    started = time.perf_counter()
    world = World.build(args.topics, args.partitions, args.segments, args.orphan_share)
    keys = world.keys()
    keys_file = workdir / "keys.txt"
    keys_file.write_text("".join(f"{PREFIX}/{k}\n" for k in keys), encoding="utf-8")
    setup["world_s"] = time.perf_counter() - started
    log(
        f"{len(keys):,} objects ({len(world.orphans):,} orphans) under "
        f"{world.partition_prefixes():,} partition prefixes"
    )

    started = time.perf_counter()
    manager = rlmm.create({"rlmm.backend": "sqlite", "rlmm.sqlite.path": str(workdir / "r.db")})
    setup["rlmm_api_s_per_segment"] = seed_rlmm(manager, world, args.partitions)
    setup["rlmm_seed_s"] = time.perf_counter() - started
    setup["rlmm_segments_through_api"] = sum(len(s) for s in world.recorded[: args.partitions])
    log(
        f"  RLMM: {sum(len(s) for s in world.recorded):,} segments in "
        f"{format_seconds(setup['rlmm_seed_s'])} (through the API: "
        f"{setup['rlmm_api_s_per_segment'] * 1000:.2f} ms a segment)"
    )
    s3 = SeededS3(keys_file, BUCKET, index_listings=not args.moto_scan)
    try:
        if s3.objects != len(keys):
            raise VerificationError(f"the endpoint holds {s3.objects} objects, not {len(keys)}")
        setup["s3_seed_s"], setup["s3_start_s"] = s3.seed_s, s3.start_s
        log(f"  S3: {s3.objects:,} objects seeded in moto in {format_seconds(s3.seed_s)}")
        client = boto3_client(s3.url, args.parallelism)
        storage = FsspecRemoteStorageManager(
            f"s3://{BUCKET}/{PREFIX}",
            s3=S3Settings(BUCKET, PREFIX, s3.url, "us-east-1", CREDENTIALS),
        )
        engine: DeleteEngine = _NoDeletes()
        scrubber = RemoteObjectScrubber(manager, storage, engine, args.parallelism)
        claims = ClaimsOfJobs(live=frozenset(world.live_topics))
        times: dict[str, list[float]] = {"floor": [], "scrub": []}
        warmup: dict[str, float] = {}
        profiler = cProfile.Profile() if args.profile else None
        with ThreadPoolExecutor(args.parallelism, thread_name_prefix="floor") as pool:
            for round_ in range(args.rounds + 1):
                t0 = time.perf_counter()
                counted = list_floor(client, pool)
                floor_s = time.perf_counter() - t0
                if counted != len(keys):
                    raise VerificationError(f"floor: {counted} keys listed, not {len(keys)}")
                if profiler is not None and round_ == args.rounds:
                    profiler.enable()
                t0 = time.perf_counter()
                report = scrubber.scrub(0, False, lambda: claims)
                scrub_s = time.perf_counter() - t0
                if profiler is not None:
                    profiler.disable()
                check_report(report, world, len(keys))
                if round_ == 0:
                    warmup = {"floor": floor_s, "scrub": scrub_s}
                else:
                    times["floor"].append(floor_s)
                    times["scrub"].append(scrub_s)
                log(
                    f"  {'warm-up' if round_ == 0 else f'round {round_}'}: floor "
                    f"{format_seconds(floor_s)}, scrub {format_seconds(scrub_s)}"
                )
        if profiler is not None:
            profiler.dump_stats(args.profile)
        storage.close()
    finally:
        s3.close()
        manager.close()
    floor = statistics.median(times["floor"])
    scrub = statistics.median(times["scrub"])
    return {
        "objects": len(keys),
        "orphan_objects": len(world.orphans),
        "orphans_by_reason": {
            OrphanReason.UNKNOWN_SEGMENT.value: len(world.unknown_segment_keys),
            OrphanReason.DELETED_TOPIC.value: len(world.deleted_topic_keys),
        },
        "topics": args.topics,
        "partition_prefixes": world.partition_prefixes(),
        "segments_recorded": sum(len(s) for s in world.recorded),
        "setup": setup,
        "warmup_s": warmup,
        "rounds_s": times,
        "floor_s": floor,
        "scrub_s": scrub,
        "ratio": scrub / floor,
        "goal": GOAL,
        "met": scrub / floor <= GOAL,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--segments", type=int, default=99, help="with records, a partition")
    parser.add_argument("--orphan-share", type=float, default=0.01)
    parser.add_argument("--parallelism", type=int, default=SCAN_PARALLELISM)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--moto-scan", action="store_true", help="moto's own listing (every key, every page)"
    )
    parser.add_argument("--profile", default=None, help="cProfile the last scrub into PATH")
    parser.add_argument("--quick", action="store_true", help=f"small: {QUICK}")
    parser.add_argument("--workdir", default=None, help="where the temporary files go")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    if min(args.topics, args.partitions, args.segments, args.rounds, args.parallelism) < 1:
        parser.error("--topics, --partitions, --segments, --rounds, --parallelism: at least 1")
    if not 0 < args.orphan_share < 1:
        parser.error("--orphan-share: between 0 and 1")

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {"tiered": code_fingerprint("tiered"), "controller": code_fingerprint("controller")}
    result: dict[str, Any] | None = None
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-scrub-", dir=args.workdir) as tmp:
        try:
            result = run(args, Path(tmp))
        except VerificationError as e:
            failures.append(f"verification: {e}")
            log(f"VERIFICATION FAILED: {e}")
        except Exception:
            failures.append(f"crashed:\n{traceback.format_exc()}")
            log(f"CRASHED:\n{traceback.format_exc()}")
    runtime_s = time.perf_counter() - started
    listing = "sorted index (bench/moto_seeded.py --index-listings)" * (not args.moto_scan)
    summary = []
    if result is not None:
        summary.append(
            summary_row(
                f"{result['objects']:,} objects ({result['orphan_objects']:,} orphans), "
                f"{result['partition_prefixes']:,} partitions, S3 (moto)",
                f"scrub, dry run (list, RLMM read per partition, classify), "
                f"{args.parallelism} listings at once",
                result["scrub_s"],
                "s",
                f"ListObjectsV2 by prefix from a pool of {args.parallelism} threads (boto3)",
                result["floor_s"],
            )
        )
    document = {
        "benchmark": "scrub",
        "description": __doc__.split("\n\n")[0].replace("\n", " "),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "summary": summary,
        "settings": {
            "topics": args.topics,
            "partitions": args.partitions,
            "segments": args.segments,
            "orphan_share": args.orphan_share,
            "objects_per_segment": len(SUFFIXES),
            "parallelism": args.parallelism,
            "rounds": args.rounds,
            "quick": args.quick,
            "s3": "moto 5 server (bench/moto_seeded.py), its own process, over HTTP on loopback; "
            f"listings: {listing or 'moto own (every key of the bucket for each page)'}",
            "rlmm": "sqlite backend; the first topic's records through the API, the others as "
            "its commits write them",
            "floor": "boto3 ListObjectsV2 from a thread pool: topics and partitions by "
            "delimiter, then each partition prefix whole, paginating",
        },
        "result": result,
        "failures": failures,
        "ok": not failures and result is not None,
    }
    out = write_json(args.out, document)
    if result is not None:
        log(
            f"floor {format_seconds(result['floor_s'])}, scrub {format_seconds(result['scrub_s'])}"
            f": ratio {result['ratio']:.2f} (goal <= {GOAL})"
        )
    log(f"runtime {runtime_s:.0f} s; results in {out}")
    if failures:
        for failure in failures:
            log(f"  - {failure}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
