"""Bulk delete of a topic's remote data below a tiered epoch (docs/internals/bulk-delete.md) on an
S3 endpoint: the product's delete job against Kafka's own path and against a floor, in one run.

The world (:mod:`bench.bulk_delete_world`): at each size, ``segments`` segments of tiered epoch 0
over ``--partitions`` partitions of one topic, four objects each (400,000 objects at 100,000
segments), with their metadata at COPY_SEGMENT_FINISHED in the ZooKeeper RLMM (a real ZooKeeper
server, as the distributed profile runs it); per partition the objects of a copy that died before
its metadata and one segment of epoch E = 1 that must survive; and another topic's segments that
must survive. The S3 endpoint is moto's server in a process of its own, seeded in its backend
before it serves (``bench/moto_seeded.py``: seeding over HTTP would take most of an hour). Every
method runs on a fresh endpoint and a fresh ZooKeeper server holding the same metadata; setup is
untimed and reported.

Methods:

- *product*: the delete job as the controller builds it (``controller.jobs.wiring.create``: the
  fsspec RSM on ``s3://``, the ZooKeeper RLMM, the bulk deleter on a Spark standalone master with
  two one-core workers started by the bench; ``--master local[2]`` in ``--quick``), run by
  ``DeleteJobRunner.run_job``. *product* is timed from building the controller's bulk-delete
  machinery, so it includes the Spark session's start, every RLMM write of the job and each save
  of its progress in the controller's metadata store (ZooKeeper's, elected as a controller is:
  a fenced multi a save); *product_session_up* is the same job run again by the same machinery,
  its session up (what a job costs on a controller active for a while: the session is started in
  the background when it becomes active). The job chooses its engine as in production, from the
  RLMM's counts against the default ``bulk.delete.fast.path.max.objects``; each row names it.
- *kafka*: ``RemoteLogManager.deleteRemoteLogPartition`` as in Kafka's source
  (core/src/main/java/kafka/log/remote/RemoteLogManager.java): partition after partition, list the
  partition's segments from the RLMM, publish DELETE_SEGMENT_STARTED for all of them and wait
  (the RLMM's batched update, as the broker leading the partition), ``deleteLogSegmentData`` for
  each segment one after another (one DeleteObjects request of the segment's four keys, as an S3
  RSM does; on the local root its four files one after another), then DELETE_SEGMENT_FINISHED for
  all. Kafka has no tiered epochs: the segments below E are its partition's segments here. It
  leaves the orphans (it deletes what the metadata knows). Above ``--kafka-max-segments`` it is
  measured on whole partitions and extrapolated linearly by segment count (the JSON says so).
- *floor*: an in-process pool of ``--threads`` threads issuing DeleteObjects requests of 1,000
  keys for the same objects, the keys known (no listing, no metadata); on the local root, the
  RSM's object deleter (a pool of single deletes) on the known keys.

Scenarios: *s3* (all four), *s3_faults* (*product* and *kafka* through the fault-injecting proxy of
tests/support/s3_fault_proxy.py: ``--fault-latency-ms`` added to every request and
``--fault-slowdown`` of the requests answered 503 SlowDown; the RSM's retry policy, jittered
backoff from 100 ms, retries them), *local* (*product*, *kafka*, *floor* on a local-directory root).

After every method: no object below E of the measured partitions is left (but the orphans after
*kafka*), every object that must survive is intact, and the RLMM lists only the survivors (and the
other topic's segments). Any mismatch exits 1. Timings are never asserted; the goals are reported:
product at least 20x faster than Kafka's path (also under faults), product with its session up
at most 1.5x the floor.

Usage: ``python bench/bulk_delete.py [--quick] [--sizes 1000,10000,100000] [--partitions 8]
[--kafka-max-segments 25000] [--faults-kafka-max-segments 5000] [--threads 16] [--master URL]
[--scenarios s3,s3_faults,local] [--workdir DIR] [--out PATH]`` (results default to
``bench/results/bulk_delete.json``).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bulk_delete_world import (
    BUCKET,
    PREFIX,
    TOPIC,
    E,
    MetadataImage,
    SeededS3,
    Tree,
    chunks,
    log,
    rlmm_config,
    spark_settings,
)
from bench.common import (
    REPO_ROOT,
    RESULTS_DIR,
    code_fingerprint,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    summary_row,
    utc_now,
    write_json,
)
from cli.launch.s3_endpoint import ENDPOINT_CREDENTIALS, write_credentials_file
from cli.launch.spark_standalone import SparkStandaloneCluster
from controller.jobs import runner as runner_module
from controller.jobs import wiring
from controller.store.zookeeper.store import ZooKeeperMetadataStore
from tests.support.s3_fault_proxy import FaultPlan, S3FaultProxy
from tiered import rlmm, rsm
from tiered.api import (
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteStorageBulkDeleter,
)
from tiered.cluster.model import DeleteJob, DeleteJobState
from tiered.rsm import FsspecObjectDeleter

DEFAULT_OUT = RESULTS_DIR / "bulk_delete.json"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
SCENARIOS = ("s3", "s3_faults", "local")
QUICK = {
    "sizes": (520,),  # 2,088 objects
    "partitions": 8,
    "master": "local[2]",
    "kafka_max_segments": 1,  # one partition (extrapolated, as at the largest size)
    "one_session": True,
}
DELETE_OBJECTS_MAX_KEYS = 1000
CONTROLLER_NODE_ID = 100
KAFKA_BROKER_ID = 0


class VerificationError(Exception):
    pass


@dataclass
class Store:
    """Where one method's objects are, and the metadata: one run's world."""

    config: dict[str, str]  # the remote storage and RLMM settings, as the controller has them
    zk_connect: str
    keys: Callable[[], set[str]]  # every object left, relative to the root
    s3: SeededS3 | None = None
    local_root: Path | None = None


@contextmanager
def store(
    workdir: Path,
    scenario: str,
    tree: Tree,
    image: MetadataImage,
    keys_file: Path,
    partitions: Sequence[int] | None,
    faults: FaultPlan,
    setup: dict[str, float],
) -> Iterator[Store]:
    """A fresh store for one method (see the module docstring); ``setup`` gets its timings."""
    base = Path(tempfile.mkdtemp(prefix=f"{scenario}-", dir=workdir))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, base, True)
        started = time.perf_counter()
        zookeeper = image.start(base / "zookeeper")
        stack.callback(zookeeper.close)
        setup["zookeeper_start_s"] = time.perf_counter() - started
        rlmm_settings = rlmm_config(zookeeper.connect_string)
        if scenario == "local":
            root = base / "remote"
            started = time.perf_counter()
            tree.write_local(root, partitions)
            setup["objects_write_s"] = time.perf_counter() - started
            yield Store(
                {"remote.storage.root": str(root), **rlmm_settings},
                zookeeper.connect_string,
                lambda: {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()},
                local_root=root,
            )
            return
        s3 = SeededS3(keys_file)
        stack.callback(s3.close)
        setup["s3_seed_s"], setup["s3_start_s"] = s3.seed_s, s3.start_s
        endpoint = s3.url
        if scenario == "s3_faults":
            proxy = S3FaultProxy(s3.url, seed=7, plan=faults)
            stack.callback(proxy.close)
            endpoint = proxy.url
        credentials = write_credentials_file(base / "credentials", ENDPOINT_CREDENTIALS)
        yield Store(
            {
                "remote.storage.root": f"s3://{BUCKET}/{PREFIX}",
                "remote.storage.s3.endpoint.url": endpoint,
                "remote.storage.s3.credentials.file": str(credentials),
                **rlmm_settings,
            },
            zookeeper.connect_string,
            s3.keys,
            s3=s3,
        )


def verify(
    where: Store,
    tree: Tree,
    partitions: Sequence[int],
    method: str,
    *,
    orphans_stay: bool = False,
    metadata: bool = True,
) -> None:
    """Below E of ``partitions``: nothing left (but the orphans if ``orphans_stay``); every
    survivor intact; with ``metadata``, the RLMM lists only the survivors and the other topic's
    segments."""
    left = where.keys()
    doomed = set(tree.doomed_keys(partitions))
    orphans = {k for p in partitions for k in tree.orphans[p]}
    problems = []
    expected_gone = doomed - orphans if orphans_stay else doomed
    if still := sorted(expected_gone & left):
        problems.append(f"{len(still)} objects below E left, e.g. {still[0]}")
    if orphans_stay and (gone := orphans - left):
        problems.append(f"{len(gone)} orphans deleted by a path that can not know them")
    if missing := sorted(set(tree.kept_keys(partitions)) - left):
        problems.append(f"{len(missing)} objects that must survive are gone, e.g. {missing[0]}")
    if metadata:
        problems += metadata_problems(where, tree, partitions)
    if problems:
        raise VerificationError(f"{method}: " + "; ".join(problems))


def metadata_problems(where: Store, tree: Tree, partitions: Sequence[int]) -> list[str]:
    problems = []
    manager = rlmm.create(rlmm_config(where.zk_connect, -2))
    try:
        for p in partitions:
            listed = {
                m.remote_log_segment_id for m in manager.list_remote_log_segments(tree.tps[p])
            }
            if listed != {tree.survivors[p].remote_log_segment_id}:
                problems.append(f"partition {p}: the RLMM lists {len(listed)} segments, not 1")
        other_tp = tree.other[0].topic_id_partition
        if len(list(manager.list_remote_log_segments(other_tp))) != len(tree.other):
            problems.append("the other topic's metadata was touched")
    finally:
        manager.close()
    return problems


# ============================================================================= the methods


def controller_bulk_delete(
    where: Store, spark: dict[str, str], session_from: wiring.BulkDelete | None = None
) -> wiring.BulkDelete:
    """What a controller builds for delete jobs, with the product's engine threshold; with
    ``session_from``, that one's Spark session (the same controller process, its session up)
    serves the new store."""
    bulk = wiring.create(CONTROLLER_NODE_ID, where.config, spark)
    assert bulk is not None
    if session_from is not None:
        bulk.spark, bulk.engine = session_from.spark, session_from.engine
    return bulk


def run_product(
    where: Store, tree: Tree, spark: dict[str, str], session_from: wiring.BulkDelete | None
) -> tuple[dict[str, Any], wiring.BulkDelete]:
    saved_at: list[float] = []  # when the job persisted its progress: the steps' ends
    # The job's progress goes where an active controller writes it: its metadata store (here
    # ZooKeeper's, elected as the controller is), one fenced multi a save.
    controller_store = ZooKeeperMetadataStore.from_config({"zookeeper.connect": where.zk_connect})
    if controller_store.elect(CONTROLLER_NODE_ID, "bench:0", threading.Event()) is None:
        raise VerificationError("product: the bench's controller store was not elected")

    def persist(job: DeleteJob) -> None:
        controller_store.writes.put_delete_job(job)
        saved_at.append(time.perf_counter())

    engine_lines = _EngineLines()
    runner_log = logging.getLogger(runner_module.__name__)
    runner_log.addHandler(engine_lines)
    level = runner_log.level
    runner_log.setLevel(logging.INFO)
    try:
        started = time.perf_counter()
        bulk = controller_bulk_delete(where, spark, session_from)
        job = bulk.runner(persist).run_job(DeleteJob(TOPIC, tree.topic_id, E, len(tree.tps)))
        seconds = time.perf_counter() - started
    finally:
        runner_log.removeHandler(engine_lines)
        runner_log.setLevel(level)
        controller_store.close()
    if job.state is not DeleteJobState.DONE:
        raise VerificationError(f"product: the job ended {job.state.name}: {job.last_error}")
    objects = sum(p.objects_deleted for p in job.progress)
    if objects != len(tree.doomed_keys()) or objects != sum(p.objects_total for p in job.progress):
        raise VerificationError(f"product: progress says {job.progress}")
    verify(where, tree, range(len(tree.tps)), "product")
    return {
        "seconds": seconds,
        "session_start_s": None if session_from else bulk.spark.start_seconds,
        "objects_deleted": objects,
        "segments_deleted": sum(p.segments_deleted for p in job.progress),
        "progress_writes": len(saved_at),
        "progress_store": "ZooKeeper (the controller's metadata store, fenced multis)",
        "engine": engine_lines.engine(),
        # the first save (the job started); then marking, deleting and finishing overlap
        "steps_s": {"start": saved_at[0] - started, "job": started + seconds - saved_at[0]},
        "extrapolated": False,
    }, bulk


class _EngineLines(logging.Handler):
    """Keeps the delete job's one line that names its engine and the threshold in force."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Bulk delete of topic"):
            self.lines.append(message)

    def engine(self) -> str:
        """``engine ... since N > bulk.delete.fast.path.max.objects=M`` (or <=), as logged."""
        if not self.lines:
            raise VerificationError("product: the job logged no engine choice")
        return self.lines[-1].split(": ", 1)[1].split(", ", 1)[1]


def _updates(
    segments: Sequence[Any], state: RemoteLogSegmentState
) -> list[RemoteLogSegmentMetadataUpdate]:
    now = int(time.time() * 1000)
    return [
        RemoteLogSegmentMetadataUpdate(m.remote_log_segment_id, now, None, state, KAFKA_BROKER_ID)
        for m in segments
    ]


def run_kafka(where: Store, tree: Tree, partitions: Sequence[int]) -> dict[str, Any]:
    """``deleteRemoteLogPartition`` for each partition, one after another."""
    tps = [tree.tps[p] for p in partitions]
    manager = rlmm.create(rlmm_config(where.zk_connect, KAFKA_BROKER_ID))
    storage = rsm.create(where.config)
    assert isinstance(storage, RemoteStorageBulkDeleter)
    deleter = (
        FsspecObjectDeleter(str(where.local_root), threads=1)  # one file after another
        if where.local_root is not None
        else storage.object_deleter()  # one DeleteObjects request of the segment's keys
    )
    try:
        manager.on_partition_leadership_changes(set(tps), set())  # the broker leads them
        rlmm_s = objects_s = 0.0
        started = time.perf_counter()
        for tp in tps:
            t0 = time.perf_counter()
            segments = [m for m in manager.list_remote_log_segments(tp) if m.tiered_epoch < E]
            manager.update_remote_log_segment_metadata_batch(
                _updates(segments, RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
            )
            t1 = time.perf_counter()
            for m in segments:
                outcome = deleter.delete_objects(storage.object_handles_of([m]))
                if outcome.failed:
                    raise VerificationError(f"kafka: {outcome.first_error}")
            t2 = time.perf_counter()
            manager.update_remote_log_segment_metadata_batch(
                _updates(segments, RemoteLogSegmentState.DELETE_SEGMENT_FINISHED)
            )
            rlmm_s += (t1 - t0) + (time.perf_counter() - t2)
            objects_s += t2 - t1
        seconds = time.perf_counter() - started
    finally:
        manager.close()
        storage.close()
    verify(where, tree, partitions, "kafka", orphans_stay=True)
    return _scaled(tree, partitions, seconds, {"rlmm_s": rlmm_s, "object_deletes_s": objects_s})


def _scaled(
    tree: Tree, partitions: Sequence[int], seconds: float, extra: dict[str, Any]
) -> dict[str, Any]:
    measured, total = tree.segment_count(partitions), tree.segment_count()
    extrapolated = measured != total
    return {
        "seconds": seconds * total / measured,
        "extrapolated": extrapolated,
        "measured_seconds": seconds,
        "measured_segments": measured,
        "measured_partitions": len(partitions),
        "per_segment_s": seconds / measured,
        **(
            {
                "extrapolation": (
                    f"measured on {len(partitions)} whole partition(s) of {len(tree.tps)} "
                    f"({measured} of {total} segments), scaled linearly by segment count"
                )
            }
            if extrapolated
            else {}
        ),
        **extra,
    }


def run_floor(where: Store, tree: Tree, threads: int) -> dict[str, Any]:
    keys = tree.doomed_keys()
    started = time.perf_counter()
    if where.s3 is None:
        outcome = FsspecObjectDeleter(str(where.local_root), threads=threads).delete_objects(keys)
        if outcome.failed:
            raise VerificationError(f"floor: {outcome.first_error}")
    else:
        client = where.s3.client

        def delete(batch: Sequence[str]) -> int:
            answer = client.delete_objects(
                Bucket=BUCKET,
                Delete={"Objects": [{"Key": f"{PREFIX}/{k}"} for k in batch], "Quiet": True},
            )
            return len(answer.get("Errors") or ())

        with ThreadPoolExecutor(threads) as pool:
            errors = sum(pool.map(delete, chunks(keys, DELETE_OBJECTS_MAX_KEYS)))
        if errors:
            raise VerificationError(f"floor: {errors} keys answered with errors")
    seconds = time.perf_counter() - started
    verify(where, tree, range(len(tree.tps)), "floor", metadata=False)
    return {"seconds": seconds, "objects": len(keys), "extrapolated": False}


# ============================================================================= one size


def whole_partitions_within(tree: Tree, budget: int) -> list[int]:
    """The first partitions whose segments total at most ``budget`` (at least one)."""
    chosen: list[int] = []
    for p in range(len(tree.tps)):
        if chosen and tree.segment_count([*chosen, p]) > budget:
            break
        chosen.append(p)
    return chosen


def fault_plan(args: argparse.Namespace) -> FaultPlan:
    return FaultPlan(slow_down_rate=args.fault_slowdown, latency_s=args.fault_latency_ms / 1000)


def run_size(
    size: int,
    args: argparse.Namespace,
    workdir: Path,
    spark: dict[str, str],
    sessions: list[wiring.BulkDelete],
) -> dict[str, Any]:
    """The three scenarios at one size. Each scenario's first *product* starts a Spark session
    and the scenario's later ones use it; with ``--one-session`` every scenario uses the first
    one (``sessions`` keeps it)."""
    faults = fault_plan(args)
    tree = Tree.build(size, args.partitions, seed=size)
    log(f"{size:,} segments ({len(tree.doomed_keys()):,} objects below E) ...")
    image = MetadataImage(workdir / f"image-{size}", tree)
    log(f"  metadata image seeded in {format_seconds(image.seed_s)}")
    kafka_parts = {
        "s3": whole_partitions_within(tree, args.kafka_max_segments),
        "s3_faults": whole_partitions_within(tree, args.faults_kafka_max_segments),
        "local": whole_partitions_within(tree, args.kafka_max_segments),
    }
    keys_files = {
        "all": tree.write_keys(workdir / f"keys-{size}.txt"),
        **{
            scenario: tree.write_keys(workdir / f"keys-{size}-{scenario}.txt", parts)
            for scenario, parts in kafka_parts.items()
        },
    }
    result: dict[str, Any] = {
        "segments": size,
        "objects": len(tree.doomed_keys()),
        "orphan_objects": sum(len(o) for o in tree.orphans),
        "surviving_objects": len(tree.kept_keys()),
        "partitions": len(tree.tps),
        "metadata_seed_s": image.seed_s,
        "scenarios": {},
    }
    for scenario in args.scenarios:
        methods: dict[str, Any] = {}
        result["scenarios"][scenario] = {"methods": methods}
        first: wiring.BulkDelete | None = sessions[0] if sessions else None
        try:
            steps: list[tuple[str, Sequence[int] | None]] = [("product", None)]
            if scenario == "s3":
                steps.append(("product_session_up", None))
            steps.append(("kafka", kafka_parts[scenario]))
            if scenario != "s3_faults":
                steps.append(("floor", None))
            for method, parts in steps:
                setup: dict[str, float] = {}
                keys_file = keys_files["all" if parts is None else scenario]
                with store(
                    workdir, scenario, tree, image, keys_file, parts, faults, setup
                ) as where:
                    if method.startswith("product"):
                        figures, bulk = run_product(where, tree, spark, first)
                        first = first or bulk  # its Spark session serves the next run
                        if args.one_session and not sessions:
                            sessions.append(bulk)
                        bulk.rlmm.close()  # its ZooKeeper server stops with the store
                        bulk.storage.close()
                    elif method == "kafka":
                        assert parts is not None
                        figures = run_kafka(where, tree, parts)
                    else:
                        figures = run_floor(where, tree, args.threads)
                figures["untimed_setup"] = setup
                methods[method] = figures
                note = " (extrapolated)" * bool(figures.get("extrapolated"))
                log(f"  [{scenario}] {method}: {format_seconds(figures['seconds'])}{note}")
        finally:
            if first is not None and not sessions:
                first.spark.stop()
    return result


# ============================================================================= report


def ratios(result: dict[str, Any]) -> dict[str, float]:
    """Speed-ups and ratios the goals are about (x/y = seconds of x / seconds of y)."""
    out: dict[str, float] = {}
    for scenario, data in result["scenarios"].items():
        m = {name: figures["seconds"] for name, figures in data["methods"].items()}
        if "product" in m and "kafka" in m:
            out[f"{scenario}: kafka/product"] = m["kafka"] / m["product"]
        if "product_session_up" in m and "floor" in m:
            out[f"{scenario}: product_session_up/floor"] = m["product_session_up"] / m["floor"]
        elif "product" in m and "floor" in m:
            out[f"{scenario}: product/floor"] = m["product"] / m["floor"]
    return out


BASELINES = {
    "kafka": "Kafka deleteRemoteLogPartition, partition after partition",
    "floor": "DeleteObjects of 1,000 known keys from a pool of threads (no metadata, no listing)",
}
FIGURES = {
    "product": "delete job (Spark session start, RLMM and controller-store writes included)",
    "product_session_up": "delete job, Spark session up (RLMM and controller-store writes included)",
}
LOCAL_FLOOR = "the RSM's object deleter on the known keys (no metadata, no listing)"


def summary(results: Sequence[dict[str, Any]], faults: FaultPlan) -> list[dict[str, Any]]:
    rows = []
    pairs = {
        "s3": (("product", "kafka"), ("product_session_up", "floor")),
        "s3_faults": (("product", "kafka"),),
        "local": (("product", "kafka"), ("product", "floor")),
    }
    where = {
        "s3": "S3 (moto)",
        "s3_faults": f"S3 (moto) + {faults.latency_s * 1000:g} ms a request, "
        f"{faults.slow_down_rate:.0%} SlowDown",
        "local": "local disk",
    }
    for result in results:
        for scenario, wanted in pairs.items():
            methods = result["scenarios"].get(scenario, {}).get("methods", {})
            for figure, baseline in wanted:
                if figure not in methods or baseline not in methods:
                    continue
                base = methods[baseline]
                label = LOCAL_FLOOR if (scenario, baseline) == ("local", "floor") else None
                rows.append(
                    summary_row(
                        f"{result['objects']:,} objects, {result['partitions']} partitions, "
                        + where[scenario],
                        FIGURES[figure]
                        + (f"; {methods[figure]['engine']}" if "engine" in methods[figure] else ""),
                        methods[figure]["seconds"],
                        "s",
                        (label or BASELINES[baseline])
                        + (" (extrapolated)" if base.get("extrapolated") else ""),
                        base["seconds"],
                    )
                )
    return rows


def report_table(results: Sequence[dict[str, Any]]) -> str:
    rows: list[list[object]] = []
    for result in results:
        for scenario, data in result["scenarios"].items():
            for name, m in data["methods"].items():
                rows.append(
                    [
                        f"{result['segments']:,} segments, {scenario}",
                        name,
                        result["objects"],
                        format_seconds(m["seconds"]) + (" *" if m.get("extrapolated") else ""),
                        f"{result['objects'] / m['seconds']:,.0f}",
                    ]
                )
    table = format_table(["size, scenario", "method", "objects", "seconds", "objects/s"], rows)
    return table + "\n* extrapolated from whole partitions (see the JSON)"


# ============================================================================= main


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--kafka-max-segments", type=int, default=25_000)
    parser.add_argument("--faults-kafka-max-segments", type=int, default=5_000)
    parser.add_argument("--fault-latency-ms", type=float, default=5.0)
    parser.add_argument("--fault-slowdown", type=float, default=0.2)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--master", default=None, help="a Spark master instead of the bench's")
    parser.add_argument(
        "--one-session",
        action="store_true",
        help="one Spark session for every scenario and size (only the first product is cold)",
    )
    parser.add_argument(
        "--scenarios",
        type=lambda s: [name for name in s.split(",") if name],
        default=list(SCENARIOS),
        help=f"a comma-separated subset of {','.join(SCENARIOS)} (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help=f"small: {QUICK}")
    parser.add_argument("--workdir", default=None, help="where the temporary files go")
    parser.add_argument("--out", default=str(DEFAULT_OUT))
    args = parser.parse_args(argv)
    sizes = [int(s) for s in str(args.sizes).split(",")]
    if args.quick:
        sizes = list(QUICK["sizes"])  # type: ignore[call-overload]
        args.partitions = QUICK["partitions"]
        args.master = args.master or QUICK["master"]
        args.kafka_max_segments = args.faults_kafka_max_segments = QUICK["kafka_max_segments"]
        args.one_session = True
    unknown = [name for name in args.scenarios if name not in SCENARIOS]
    if unknown or not args.scenarios:
        parser.error(f"--scenarios: {unknown or 'none'}; valid: {','.join(SCENARIOS)}")
    if min(sizes) < args.partitions or args.partitions < 1:
        parser.error("every partition needs at least one segment")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])
    )  # Spark's Python workers import this checkout

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {"tiered": code_fingerprint("tiered"), "controller": code_fingerprint("controller")}
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    spark_doc: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-bulk-delete-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        cluster: SparkStandaloneCluster | None = None
        try:
            if args.master is None:
                cluster = SparkStandaloneCluster(workdir / "spark")
                spark_doc["cluster_start_s"] = cluster.start()
                master = cluster.master.url
                log(f"Spark master and 2 workers up in {spark_doc['cluster_start_s']:.1f} s")
            else:
                master = args.master
            spark = spark_settings(master, REPO_ROOT)
            spark_doc["settings"] = spark
            sessions: list[wiring.BulkDelete] = []
            try:
                for size in sizes:
                    results.append(run_size(size, args, workdir, spark, sessions))
                    log(f"  load average {load_average()}")
            finally:
                for bulk in sessions:
                    bulk.spark.stop()
        except VerificationError as e:
            failures.append(f"verification: {e}")
            log(f"VERIFICATION FAILED: {e}")
        except Exception:
            failures.append(f"crashed:\n{traceback.format_exc()}")
            log(f"CRASHED:\n{traceback.format_exc()}")
        finally:
            if cluster is not None:
                cluster.stop()
    runtime_s = time.perf_counter() - started
    document = {
        "benchmark": "bulk_delete",
        "description": __doc__.split("\n\n")[0].replace("\n", " "),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "summary": summary(results, fault_plan(args)),
        "settings": {
            "sizes": sizes,
            "partitions": args.partitions,
            "objects_per_segment": 4,
            "kafka_max_segments": args.kafka_max_segments,
            "faults_kafka_max_segments": args.faults_kafka_max_segments,
            "faults": {
                "latency_ms_per_request": args.fault_latency_ms,
                "slow_down_rate": args.fault_slowdown,
            },
            "threads": args.threads,
            "scenarios": args.scenarios,
            "quick": args.quick,
            "one_session": args.one_session,
            "sessions": (
                "each scenario's first product starts a SparkSession (the first of the process "
                "also launches the driver's JVM; later ones reuse it, as a controller does)"
            ),
            "s3": "moto 5 server (bench/moto_seeded.py), its own process, over HTTP on loopback",
            "rlmm": "ZooKeeper backend on a real ZooKeeper server (one per method, same data)",
            "job_progress": "persisted to the controller's metadata store (ZooKeeper, a fenced "
            "multi a save), timed with the job",
            "engine": "chosen by the job from the RLMM's counts against the product's default "
            "bulk.delete.fast.path.max.objects; each product result names it",
            "kafka_model": (
                "per partition: list segments from the RLMM, DELETE_SEGMENT_STARTED for all "
                "(batched update as the partition's leader), one DeleteObjects of each "
                "segment's 4 keys one after another, DELETE_SEGMENT_FINISHED for all"
            ),
            "floor": "DeleteObjects of 1,000 known keys from a thread pool, no listing",
        },
        "spark": spark_doc,
        "results": results,
        "ratios": [ratios(r) for r in results],
        "failures": failures,
        "ok": not failures and len(results) == len(sizes),
    }
    out = write_json(args.out, document)
    log("")
    if results:
        log(report_table(results))
        for result in results:
            rs = ratios(result)
            log(
                f"{result['segments']:,} segments: "
                + ", ".join(f"{k} {v:.2f}" for k, v in rs.items())
            )
    log(
        f"runtime {runtime_s:.0f} s; load average {machine['load_average']} at the start, "
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
