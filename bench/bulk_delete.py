"""Bulk delete of a topic's remote data (DESIGN.md section 8): the PySpark job against the Kafka
way (one segment at a time through the RLMM) and against ``rm -rf``, measured in one run.

Setup: a template remote tree on a local disk holds ``--segments`` segments of tiered epoch 0,
spread evenly over ``--partitions`` partitions of one topic, each segment as the four small objects
the RSM writes (``log``, ``index``, ``timeindex``, ``epochs``; 32 bytes each) named as
:mod:`tiered.rsm.layout` says, plus one segment per partition at tiered epoch 1 that must survive
(the job deletes epochs < E = 1). Every method runs on its own fresh copy of the template
(``cp -a``, untimed), and ``os.sync()`` runs (untimed) before every timed phase.

Methods (no added latency):

- *kafka*: what a broker's RemoteLogManager does when it expires segments: for each segment, in
  offset order, partition after partition, ``DELETE_SEGMENT_STARTED`` through the RLMM, delete its
  four objects, ``DELETE_SEGMENT_FINISHED``. The RLMM is the sqlite one
  (``tiered.rlmm.create({"rlmm.sqlite.path": ...})``), used as the partition's leader (as the
  broker that expires segments is); each segment was added and moved to ``COPY_SEGMENT_FINISHED``
  through the same API beforehand (untimed). Objects are removed with the same primitive as the
  other methods (the fsspec local filesystem's ``rm_file``). The cost of an RLMM write grows with
  the number of segments of the partition, so when ``--segments`` exceeds
  ``--kafka-max-segments``, *kafka* is measured on as many whole partitions as fit (at least one;
  each at full size) and extrapolated linearly by segment count: the JSON says so.
- *spark*: the fsspec RSM's ``list_objects_below_epoch`` for every partition, then
  ``delete_with_spark`` (``controller.jobs.spark_delete``) with the RSM's object deleter (a pool
  of ``--threads`` threads in each Spark partition). The session start and a first, empty-handed
  job (the first job of a session starts the Python workers) are timed separately and excluded.
- *local_pool*: the same listing, then the RSM's object deleter in this process (the job's fast
  path: one thread pool of ``--threads``).
- *serial*: the same listing, then one delete at a time (the object deleter with one thread).
- *rm_rf*: ``rm -rf`` of every partition's ``te=0`` directory (subprocess): the floor.

Then the same with ``--latency-s`` (5 ms) slept before every object delete, a model of an object
store's round trip, on ``--latency-segments`` segments: *kafka*, *spark*, *local_pool* and
*serial* (``rm -rf`` has no latency to model). *kafka* and *serial* are measured on whole
partitions up to ``--latency-max-serial-segments`` and extrapolated the same way.

Every method is checked afterwards: no object of epoch 0 left, every epoch-1 object intact, and
the counts equal the objects deleted. Any mismatch exits 1. Timings are never asserted.

ratio ``x/y`` = seconds of x / seconds of y for the whole tree (extrapolated where noted).

Usage: ``python bench/bulk_delete.py [--quick] [--segments 100000] [--partitions 8]
[--kafka-max-segments 15000] [--latency-segments 2500] [--latency-s 0.005] [--threads 16]
[--slices N] [--master local[*]] [--out PATH]`` (results default to
``bench/results/bulk_delete.json``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    summary_row,
    timed,
    utc_now,
    write_json,
)
from controller.jobs.spark_delete import SparkSessionProvider, default_slices, delete_with_spark
from tiered import rlmm
from tiered.api import (
    DeleteOutcome,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteObjectDeleter,
    TopicIdPartition,
)
from tiered.rsm import FsspecObjectDeleter, FsspecRemoteStorageManager, layout

DEFAULT_OUT = RESULTS_DIR / "bulk_delete.json"
TOPIC = "bench"
SUFFIXES = (layout.LOG_SUFFIX, "index", "timeindex", "epochs")
OBJECT_BYTES = b"0123456789abcdef0123456789abcdef"
DELETE_EPOCH = 0
SURVIVOR_EPOCH = 1
E = SURVIVOR_EPOCH  # the job deletes epochs < E
BROKER_ID = 0
QUICK = {"segments": 2000, "partitions": 4, "latency_segments": 200}


class VerificationError(Exception):
    pass


@dataclass(frozen=True)
class Segment:
    tp: TopicIdPartition
    start_offset: int
    segment_id: uuid.UUID

    @property
    def prefix(self) -> str:
        return layout.segment_prefix_of(self.tp, DELETE_EPOCH, self.start_offset, self.segment_id)

    def object_keys(self) -> list[str]:
        return [layout.object_key(self.prefix, s) for s in SUFFIXES]


@dataclass
class Tree:
    """A template remote tree: ``segments[p]`` are partition p's epoch-0 segments."""

    root: Path
    topic_id: uuid.UUID
    segments: list[list[Segment]]
    survivors: list[str]  # keys of epoch 1

    @property
    def partitions(self) -> list[TopicIdPartition]:
        return [TopicIdPartition(self.topic_id, TOPIC, p) for p in range(len(self.segments))]

    @property
    def segment_count(self) -> int:
        return sum(len(s) for s in self.segments)

    @property
    def object_count(self) -> int:
        return self.segment_count * len(SUFFIXES)


def log(message: str) -> None:
    print(message, flush=True)


# ============================================================================= the tree


def _write(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, OBJECT_BYTES)
    finally:
        os.close(fd)


def build_template(root: Path, segments: int, partitions: int) -> Tree:
    topic_id = uuid.uuid4()
    tree = Tree(root, topic_id, [[] for _ in range(partitions)], [])
    for p, tp in enumerate(tree.partitions):
        count = segments // partitions + (1 if p < segments % partitions else 0)
        (root / layout.tiered_epoch_prefix(tp, DELETE_EPOCH)).mkdir(parents=True)
        for n in range(count):
            segment = Segment(tp, n * 1000, uuid.uuid4())
            tree.segments[p].append(segment)
            for key in segment.object_keys():
                _write(f"{root}/{key}")
        survivor = layout.segment_prefix_of(tp, SURVIVOR_EPOCH, count * 1000, uuid.uuid4())
        (root / layout.tiered_epoch_prefix(tp, SURVIVOR_EPOCH)).mkdir(parents=True)
        for suffix in SUFFIXES:
            key = layout.object_key(survivor, suffix)
            _write(f"{root}/{key}")
            tree.survivors.append(key)
    return tree


def fresh_copy(tree: Tree, target: Path, partitions: Sequence[int] | None = None) -> float:
    """Copies the template (or only some partitions of it) to ``target``; returns seconds."""
    started = time.perf_counter()
    if partitions is None:
        subprocess.run(["cp", "-a", str(tree.root), str(target)], check=True)
    else:
        for p in partitions:
            source = tree.root / layout.partition_prefix(tree.partitions[p])
            (target / source.parent.name).mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", str(source), str(target / source.parent.name)], check=True)
    return time.perf_counter() - started


def verify(
    tree: Tree,
    root: Path,
    partitions: Sequence[int],
    counts: DeleteOutcome | None,
) -> None:
    """No epoch-0 object is left in ``partitions``, every survivor there is intact, and the counts
    (when given) say every object was deleted."""
    problems: list[str] = []
    for p in partitions:
        tp = tree.partitions[p]
        epoch_dir = root / layout.tiered_epoch_prefix(tp, DELETE_EPOCH)
        left = [f for f in epoch_dir.rglob("*") if f.is_file()] if epoch_dir.exists() else []
        if left:
            problems.append(f"partition {p}: {len(left)} epoch-0 objects left, e.g. {left[0]}")
        prefix = layout.partition_prefix(tp) + "/"
        for key in (k for k in tree.survivors if k.startswith(prefix)):
            path = root / key
            if not path.is_file() or path.read_bytes() != OBJECT_BYTES:
                problems.append(f"partition {p}: epoch-1 object {key} was touched")
    expected = sum(len(tree.segments[p]) for p in partitions) * len(SUFFIXES)
    if counts is not None and counts != DeleteOutcome(expected):
        problems.append(f"counts {counts} != {expected} deleted")
    if problems:
        raise VerificationError("; ".join(problems))


def sync() -> None:
    os.sync()


# ============================================================================= the methods


def whole_partitions_within(tree: Tree, budget: int) -> list[int]:
    """The first partitions whose segments total at most ``budget`` (at least one)."""
    chosen: list[int] = []
    total = 0
    for p, segments in enumerate(tree.segments):
        if chosen and total + len(segments) > budget:
            break
        chosen.append(p)
        total += len(segments)
    return chosen


def _metadata(segment: Segment) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=RemoteLogSegmentId(segment.tp, segment.segment_id),
        start_offset=segment.start_offset,
        end_offset=segment.start_offset + 999,
        max_timestamp_ms=-1,
        broker_id=BROKER_ID,
        event_timestamp_ms=int(time.time() * 1000),
        segment_size_in_bytes=len(OBJECT_BYTES),
        segment_leader_epochs={0: segment.start_offset},
        tiered_epoch=DELETE_EPOCH,
    )


def _update(
    metadata: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(
        remote_log_segment_id=metadata.remote_log_segment_id,
        event_timestamp_ms=int(time.time() * 1000),
        custom_metadata=None,
        state=state,
        broker_id=BROKER_ID,
    )


def run_kafka(
    tree: Tree, workdir: Path, partitions: Sequence[int], latency_s: float
) -> dict[str, Any]:
    """One segment at a time: DELETE_SEGMENT_STARTED, its four objects, DELETE_SEGMENT_FINISHED."""
    import fsspec.core

    root = workdir / "kafka"
    copy_s = fresh_copy(tree, root, partitions)
    manager = rlmm.create(
        {"rlmm.sqlite.path": str(workdir / f"kafka-{uuid.uuid4().hex}.db"), "broker.id": "0"}
    )
    try:
        tps = {tree.partitions[p] for p in partitions}
        manager.on_partition_leadership_changes(tps, set())
        setup_started = time.perf_counter()
        metadata: list[RemoteLogSegmentMetadata] = []
        for p in partitions:
            for segment in tree.segments[p]:
                md = _metadata(segment)
                manager.add_remote_log_segment_metadata(md)
                finished = _update(md, RemoteLogSegmentState.COPY_SEGMENT_FINISHED)
                manager.update_remote_log_segment_metadata(finished)
                metadata.append(md.create_with_updates(finished))
        rlmm_setup_s = time.perf_counter() - setup_started
        fs, base = fsspec.core.url_to_fs(str(root))
        sync()
        rlmm_s = objects_s = 0.0
        started = time.perf_counter()
        for md in metadata:
            t0 = time.perf_counter()
            deleting = _update(md, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
            manager.update_remote_log_segment_metadata(deleting)
            t1 = time.perf_counter()
            prefix = layout.segment_prefix(md)
            for suffix in SUFFIXES:
                if latency_s > 0:
                    time.sleep(latency_s)
                fs.rm_file(f"{base}/{layout.object_key(prefix, suffix)}")
            t2 = time.perf_counter()
            manager.update_remote_log_segment_metadata(
                _update(md, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
            )
            rlmm_s += (time.perf_counter() - t2) + (t1 - t0)
            objects_s += t2 - t1
        seconds = time.perf_counter() - started
        for tp in tps:  # every segment is DELETE_SEGMENT_FINISHED
            states = {s.state for s in manager.list_remote_log_segments(tp)}
            if states - {RemoteLogSegmentState.DELETE_SEGMENT_FINISHED}:
                raise VerificationError(f"kafka: {tp} has segments in states {states}")
    finally:
        manager.close()
    verify(tree, root, partitions, None)
    shutil.rmtree(root)
    return _scaled(
        tree,
        partitions,
        seconds,
        {
            "rlmm_s": rlmm_s,
            "object_deletes_s": objects_s,
            "untimed_rlmm_setup_s": rlmm_setup_s,
            "untimed_copy_s": copy_s,
        },
    )


def _scaled(
    tree: Tree, partitions: Sequence[int], seconds: float, extra: dict[str, Any]
) -> dict[str, Any]:
    measured = sum(len(tree.segments[p]) for p in partitions)
    extrapolated = measured != tree.segment_count
    return {
        "seconds": seconds * tree.segment_count / measured,
        "extrapolated": extrapolated,
        "measured_seconds": seconds,
        "measured_segments": measured,
        "measured_objects": measured * len(SUFFIXES),
        "measured_partitions": len(partitions),
        "per_segment_s": seconds / measured,
        **(
            {
                "extrapolation": (
                    f"measured on {len(partitions)} whole partition(s) of {len(tree.segments)} "
                    f"({measured} of {tree.segment_count} segments), scaled linearly by segment "
                    "count"
                )
            }
            if extrapolated
            else {}
        ),
        **extra,
    }


def list_all(
    tree: Tree, storage: FsspecRemoteStorageManager, partitions: Sequence[int]
) -> list[str]:
    return [
        key
        for p in partitions
        for batch in storage.list_objects_below_epoch(tree.partitions[p], E)
        for key in batch
    ]


def run_listed(
    name: str,
    tree: Tree,
    workdir: Path,
    partitions: Sequence[int],
    storage_settings: tuple[int, float],
    delete: Callable[[RemoteObjectDeleter, list[str]], DeleteOutcome],
) -> dict[str, Any]:
    """Copies, lists epochs < E of ``partitions`` through the fsspec RSM (``storage_settings``:
    its delete threads and simulated latency) and deletes the keys with ``delete`` and the RSM's
    object deleter."""
    root = workdir / name
    copy_s = fresh_copy(tree, root, None if len(partitions) == len(tree.segments) else partitions)
    threads, latency_s = storage_settings
    storage = FsspecRemoteStorageManager(
        str(root), delete_threads=threads, simulated_delete_latency_s=latency_s
    )
    sync()
    list_s, keys = timed(lambda: list_all(tree, storage, partitions))
    delete_s, counts = timed(lambda: delete(storage.object_deleter(), keys))
    verify(tree, root, partitions, counts)
    shutil.rmtree(root)
    return _scaled(
        tree,
        partitions,
        list_s + delete_s,
        {"list_s": list_s, "delete_s": delete_s, "objects": len(keys), "untimed_copy_s": copy_s},
    )


def run_rm_rf(tree: Tree, workdir: Path) -> dict[str, Any]:
    root = workdir / "rm_rf"
    copy_s = fresh_copy(tree, root)
    doomed = [str(root / layout.tiered_epoch_prefix(tp, DELETE_EPOCH)) for tp in tree.partitions]
    sync()
    seconds, _ = timed(lambda: subprocess.run(["rm", "-rf", *doomed], check=True))
    verify(tree, root, range(len(tree.segments)), None)
    shutil.rmtree(root)
    return _scaled(tree, range(len(tree.segments)), seconds, {"untimed_copy_s": copy_s})


# ============================================================================= phases


def run_phase(
    label: str,
    tree: Tree,
    workdir: Path,
    spark: Any,
    args: argparse.Namespace,
    latency_s: float,
    serial_budget: int,
) -> dict[str, Any]:
    everything = list(range(len(tree.segments)))
    subset = whole_partitions_within(tree, serial_budget)
    methods: dict[str, Any] = {}

    def spark_delete(deleter: RemoteObjectDeleter, keys: list[str]) -> DeleteOutcome:
        return delete_with_spark(spark, deleter, keys, slices=args.slices)

    def in_process(deleter: RemoteObjectDeleter, keys: list[str]) -> DeleteOutcome:
        return deleter.delete_objects(keys)

    pool = (args.threads, latency_s)
    serial = (1, latency_s)
    steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("kafka", lambda: run_kafka(tree, workdir, subset, latency_s)),
        ("spark", lambda: run_listed("spark", tree, workdir, everything, pool, spark_delete)),
        (
            "local_pool",
            lambda: run_listed("local_pool", tree, workdir, everything, pool, in_process),
        ),
        (
            "serial",
            lambda: run_listed(
                "serial", tree, workdir, subset if latency_s > 0 else everything, serial, in_process
            ),
        ),
    ]
    if latency_s == 0:
        steps.append(("rm_rf", lambda: run_rm_rf(tree, workdir)))
    for name, step in steps:
        methods[name] = step()
        m = methods[name]
        note = f" (measured {m['measured_segments']} segments, extrapolated)" * m["extrapolated"]
        log(f"  [{label}] {name}: {format_seconds(m['seconds'])}{note}")
    spark_s = methods["spark"]["seconds"]
    ratios = {
        "kafka/spark": methods["kafka"]["seconds"] / spark_s,
        "serial/spark": methods["serial"]["seconds"] / spark_s,
        "local_pool/spark": methods["local_pool"]["seconds"] / spark_s,
        "kafka/serial": methods["kafka"]["seconds"] / methods["serial"]["seconds"],
    }
    if "rm_rf" in methods:
        rm_s = methods["rm_rf"]["seconds"]
        ratios |= {
            "spark/rm_rf": spark_s / rm_s,
            "kafka/rm_rf": methods["kafka"]["seconds"] / rm_s,
            "local_pool/rm_rf": methods["local_pool"]["seconds"] / rm_s,
            "serial/rm_rf": methods["serial"]["seconds"] / rm_s,
        }
    return {
        "latency_s": latency_s,
        "segments": tree.segment_count,
        "objects": tree.object_count,
        "partitions": len(tree.segments),
        "methods": methods,
        "ratios": ratios,
    }


def report_table(document: dict[str, Any]) -> str:
    rows: list[list[object]] = []
    for phase in ("no_latency", "latency"):
        result = document["results"].get(phase)
        if result is None:
            continue
        spark_s = result["methods"]["spark"]["seconds"]
        for name, m in result["methods"].items():
            per_object = m["seconds"] / result["objects"]
            rows.append(
                [
                    f"{phase} ({result['latency_s'] * 1000:g} ms/object)",
                    name,
                    result["objects"],
                    format_seconds(m["seconds"]) + (" *" if m["extrapolated"] else ""),
                    format_seconds(per_object),
                    f"{m['seconds'] / spark_s:.2f}",
                ]
            )
    table = format_table(["phase", "method", "objects", "seconds", "per object", "x spark"], rows)
    return table + "\n* extrapolated from whole partitions (see the JSON)"


BASELINES = {
    "rm_rf": "rm -rf of the te=0 directories",
    "kafka": "Kafka: one segment at a time through the RLMM",
    "serial": "listed, then one delete at a time",
}


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows for bench/RESULTS.md: the Spark job against rm -rf and the Kafka way on the local
    disk, and against a serial delete and the Kafka way with a latency per object delete."""
    rows = []
    for phase, baselines in (("no_latency", ("rm_rf", "kafka")), ("latency", ("serial", "kafka"))):
        result = results.get(phase)
        if result is None:
            continue
        scenario = f"{result['objects']:,} objects, {result['partitions']} partitions, " + (
            f"{result['latency_s'] * 1000:g} ms per object delete"
            if result["latency_s"]
            else "local disk"
        )
        for name in baselines:
            baseline = result["methods"][name]
            rows.append(
                summary_row(
                    scenario,
                    "Spark job (list + delete)",
                    result["methods"]["spark"]["seconds"],
                    "s",
                    BASELINES[name] + (" (extrapolated)" if baseline["extrapolated"] else ""),
                    baseline["seconds"],
                )
            )
    return rows


# ============================================================================= main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--kafka-max-segments", type=int, default=15_000)
    parser.add_argument("--latency-segments", type=int, default=2500)
    parser.add_argument("--latency-max-serial-segments", type=int, default=2500)
    parser.add_argument("--latency-s", type=float, default=0.005)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--slices", type=int, default=None)
    parser.add_argument("--master", default=None, help="Spark master (default local[*])")
    parser.add_argument("--quick", action="store_true", help=f"small sizes: {QUICK}")
    parser.add_argument("--workdir", default=None, help="where the temporary trees go")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    if args.quick:
        args.segments = QUICK["segments"]
        args.partitions = QUICK["partitions"]
        args.latency_segments = QUICK["latency_segments"]
    if min(args.segments, args.latency_segments) < args.partitions or args.partitions < 1:
        parser.error("every partition needs at least one segment")

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {"tiered": code_fingerprint("tiered"), "controller": code_fingerprint("controller")}
    results: dict[str, Any] = {}
    failures: list[str] = []
    setup: dict[str, Any] = {}
    spark_doc: dict[str, Any] = {}
    provider = SparkSessionProvider(master=args.master)
    with tempfile.TemporaryDirectory(prefix="bench-bulk-delete-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        try:
            log(f"building {args.segments} segments x {len(SUFFIXES)} objects ...")
            build_s, tree = timed(
                lambda: build_template(workdir / "template", args.segments, args.partitions)
            )
            log(f"  template built in {format_seconds(build_s)}")
            build_latency_s, latency_tree = timed(
                lambda: build_template(
                    workdir / "template-latency", args.latency_segments, args.partitions
                )
            )
            setup = {
                "template_build_s": build_s,
                "latency_template_build_s": build_latency_s,
                "object_bytes": len(OBJECT_BYTES),
                "suffixes": list(SUFFIXES),
                "survivor_objects_per_partition": len(SUFFIXES),
            }
            start_s, spark = timed(provider.get)
            sc = spark.sparkContext
            nowhere = FsspecObjectDeleter(str(workdir / "nowhere"))
            warmup_s, _ = timed(
                lambda: delete_with_spark(spark, nowhere, ["a", "b"], slices=sc.defaultParallelism)
            )
            spark_doc = {
                "master": sc.master,
                "default_parallelism": sc.defaultParallelism,
                "session_start_s": start_s,
                "first_job_s": warmup_s,
                "threads_per_slice": args.threads,
                "slices": args.slices
                or default_slices(tree.object_count, int(sc.defaultParallelism)),
                "latency_slices": args.slices
                or default_slices(latency_tree.object_count, int(sc.defaultParallelism)),
            }
            log(
                f"  Spark session {format_seconds(start_s)}, first job "
                f"{format_seconds(warmup_s)} (master {sc.master}; not in the timings)"
            )
            results["no_latency"] = run_phase(
                "no latency", tree, workdir, spark, args, 0.0, args.kafka_max_segments
            )
            shutil.rmtree(tree.root)
            results["latency"] = run_phase(
                f"{args.latency_s * 1000:g} ms/object",
                latency_tree,
                workdir,
                spark,
                args,
                args.latency_s,
                args.latency_max_serial_segments,
            )
        except VerificationError as e:
            failures.append(f"verification: {e}")
            log(f"VERIFICATION FAILED: {e}")
        except Exception:
            failures.append(f"crashed:\n{traceback.format_exc()}")
            log(f"CRASHED:\n{traceback.format_exc()}")
        finally:
            provider.stop()
    runtime_s = time.perf_counter() - started
    document = {
        "benchmark": "bulk_delete",
        "description": (
            "Deleting a topic's remote objects of tiered epochs < E: the PySpark job "
            "(controller.jobs.spark_delete with the fsspec RSM's bulk delete capability: list by "
            "te= prefix, delete with a thread pool inside each Spark partition) against the Kafka "
            "way (one segment at a time through the sqlite RLMM: DELETE_SEGMENT_STARTED, its 4 "
            "objects, DELETE_SEGMENT_FINISHED), the in-process thread pool (the job's fast path), "
            "a serial loop and rm -rf (the floor), on identical fresh copies of one local tree; "
            "then with a sleep per object delete modelling an object store. ratio x/y = seconds "
            "of x / seconds of y for the whole tree (extrapolated from whole partitions where "
            "'extrapolated' is true)."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "summary": summary(results),
        "settings": {
            "segments": args.segments,
            "partitions": args.partitions,
            "objects": args.segments * len(SUFFIXES),
            "kafka_max_segments": args.kafka_max_segments,
            "latency_segments": args.latency_segments,
            "latency_objects": args.latency_segments * len(SUFFIXES),
            "latency_max_serial_segments": args.latency_max_serial_segments,
            "latency_s": args.latency_s,
            "threads": args.threads,
            "quick": args.quick,
            "rlmm": "sqlite, the deleting broker leads the partitions (cached state)",
            "object_delete": (
                "fsspec LocalFileSystem.rm_file for every method but rm_rf (spark, local_pool, "
                "serial: through tiered.rsm.FsspecObjectDeleter)"
            ),
            "latency_model": "time.sleep(latency_s) before each object delete (all methods)",
            "timing": (
                "os.sync() before every timed phase; copies of the template, RLMM setup, "
                "Spark session start and its first job are untimed (reported separately); "
                "spark/local_pool/serial include listing the te= prefixes"
            ),
        },
        "setup": setup,
        "spark": spark_doc,
        "results": results,
        "failures": failures,
        "ok": not failures and "latency" in results,
    }
    out = write_json(args.out, document)
    log("")
    if "latency" in results:
        log(report_table(document))
        for phase, result in results.items():
            log(
                f"{phase} ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in result["ratios"].items())
            )
    log(
        f"runtime {runtime_s:.1f} s; load average {machine['load_average']} at the start, "
        f"{document['load_average_at_end']} at the end ({machine['nproc']} CPUs); results in {out}"
    )
    if failures:
        log(f"{len(failures)} failure(s):")
        for failure in failures:
            log(f"  - {failure}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
