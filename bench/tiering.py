"""Copier throughput: the RemoteLogManager tiering closed segments against a plain file copy of the
same bytes, measured in one run.

Setup: ``--partitions`` local logs (``broker.log.Log``) hold ``--gib`` GiB of closed segments in
total (``--segment-mib`` MiB segments, records with ``--value-kib`` KiB values, written without an
fsync per append; every segment is fsynced when it is rolled). Remote storage is the fsspec
RemoteStorageManager on a local directory of the same disk; the RLMM is sqlite in the same
temporary directory.

Measured:

- *baseline*: ``shutil.copyfile`` of every closed segment's ``.log``, ``.index`` and ``.timeindex``
  into a fresh directory (the bytes the RSM uploads; it also writes a few bytes of leader-epoch
  checkpoint per segment): serially, and on a ThreadPoolExecutor as large as the copier pool;
- *rlm*: a ``RemoteLogManager`` (``copier_threads`` = ``--copier-threads``, ``task_interval_s``
  3600) is made leader of every partition, which schedules each partition's copy task at once;
  ``trigger_copy`` is called for each too, and the RLMM is polled (with a deadline) until every
  closed segment is COPY_SEGMENT_FINISHED. The time is from the leadership call to that moment.

The baselines run both before and after the RLM copy so that ordering effects are visible (on a
2-CPU virtual machine the first phase to write 1 GiB, the serial baseline, was 3-6 times slower than
the same copy after the RLM run, and the serial figures vary most from run to run; ``--warmup`` runs
one untimed serial copy first). Before every timed phase the bench calls ``sync()`` (untimed), so
that the writeback of one phase's output does not land in the next one's timing; no phase fsyncs
what it writes (nor does the RSM on a local disk), and each phase's output is deleted before the
next phase, so most of it may never reach the disk: the figures are copy throughput through the page
cache, not disk write throughput. The source files were written moments before and are most likely
in the page cache for every phase: the share of source bytes resident before each phase is measured
(``mincore``) and reported. ``--evict-cache`` asks the kernel to drop the source files' pages before
each phase (``posix_fadvise(DONTNEED)``, after the sync), to see colder figures.

Afterwards the remote storage is checked: for each partition the finished segments are exactly the
local closed segments (same offsets), the RSM's object keys are exactly those of the finished
segments (data, offset index, time index, epochs; no leftovers), every object backed by a local file
has that file's size, and so the stored bytes of those objects equal the local segment files'
total. Any mismatch exits 1. Timings are never asserted.

MB/s is 10^6 bytes per second of the local segment files' bytes. ratio = rlm seconds / baseline
seconds (1.0: the RLM copies as fast as a plain copy; above: slower).

Usage: ``python bench/tiering.py [--quick] [--gib 1.0] [--partitions 4] [--segment-mib 64]
[--copier-threads 4] [--out PATH]`` (results default to ``bench/results/tiering.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import mmap
import os
import shutil
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
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
    summary_row,
    timed,
    utc_now,
    write_json,
)
from broker.log import Log, LogConfig, LogSegment
from broker.rlm.manager import RemoteLogManager, RemoteLogManagerConfig, TieredPartition
from tiered import rlmm, rsm
from tiered.api import IndexType, RemoteLogSegmentMetadata, RemoteLogSegmentState, TopicIdPartition
from tiered.kafka.records import Record, build_batch
from tiered.rsm import decode_custom_metadata, layout

DEFAULT_OUT = RESULTS_DIR / "tiering.json"
MIB = 1024 * 1024
GIB = 1024 * MIB
MB = 1_000_000
FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
LEADER_EPOCH = 0
BROKER_ID = 0
POLL_INTERVAL_S = 0.005
QUICK_TOTAL_BYTES = 32 * MIB
QUICK_SEGMENT_BYTES = 4 * MIB
# Objects the RSM writes from a local file, by the local file's suffix.
FILE_OBJECTS = {".log": layout.LOG_SUFFIX, ".index": "index", ".timeindex": "timeindex"}
EPOCHS_SUFFIX = IndexType.LEADER_EPOCH.value
PAGE_CACHE_NOTE = (
    "the source segment files may be in the page cache in every phase (they were written just "
    "before); 'resident' is the share of their bytes in the page cache just before the phase"
)


class VerificationError(Exception):
    pass


@dataclass(frozen=True)
class Settings:
    total_bytes: int
    partitions: int
    segment_bytes: int
    value_bytes: int
    copier_threads: int
    deadline_s: float
    evict_cache: bool


@dataclass
class Partition:
    tp: TopicIdPartition
    log: Log

    def closed(self) -> list[LogSegment]:
        return [s for s in self.log.closed_segments() if not s.is_empty]


@dataclass
class Setup:
    partitions: list[Partition]
    seconds: float
    records: int
    file_bytes: dict[str, int] = field(default_factory=dict)  # by suffix

    @property
    def segments(self) -> int:
        return sum(len(p.closed()) for p in self.partitions)

    @property
    def total_bytes(self) -> int:
        return sum(self.file_bytes.values())

    def source_files(self) -> list[tuple[Partition, Path]]:
        return [
            (p, path)
            for p in self.partitions
            for s in p.closed()
            for path in (s.log_path, s.offset_index_path, s.time_index_path)
        ]


# ============================================================================= page cache


_libc: Any = None


def _mincore() -> Any:
    global _libc  # noqa: PLW0603 - loaded once
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        _libc.mincore.restype = ctypes.c_int
    return _libc.mincore


def resident_bytes(path: Path) -> int | None:
    """How many bytes of ``path`` are in the page cache (``mincore``), or None where unknown."""
    size = path.stat().st_size
    if size == 0:
        return 0
    try:
        mincore = _mincore()
        # A private (copy-on-write) mapping is writable for ctypes and is never written: its
        # pages are the page cache's, and mapping them reads nothing.
        with open(path, "rb") as f, mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) as mm:
            pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
            vec = (ctypes.c_ubyte * pages)()
            buf = (ctypes.c_char * size).from_buffer(mm)
            try:
                if mincore(ctypes.addressof(buf), size, vec) != 0:
                    return None
            finally:
                del buf
            resident_pages = sum(1 for v in vec if v & 1)
    except (OSError, AttributeError, ValueError, TypeError):
        return None
    return min(size, resident_pages * mmap.PAGESIZE)


def resident_share(paths: Iterable[Path]) -> float | None:
    total = resident = 0
    for path in paths:
        found = resident_bytes(path)
        if found is None:
            return None
        resident += found
        total += path.stat().st_size
    return resident / total if total else None


def evict(paths: Iterable[Path]) -> None:
    """Asks the kernel to drop the (clean) cached pages of ``paths``."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def prepare_phase(setup: Setup, settings: Settings) -> dict[str, Any]:
    """Untimed, before every timed phase: sync, optionally evict, then measure residency."""
    sync_s, _ = timed(os.sync)
    paths = [path for _, path in setup.source_files()]
    if settings.evict_cache:
        evict(paths)
    return {"sync_before_s": sync_s, "source_resident_share": resident_share(paths)}


# ============================================================================= setup


def build_logs(root: Path, settings: Settings, log: Callable[[str], None]) -> Setup:
    """``settings.partitions`` logs whose closed segments hold ``settings.total_bytes`` in total
    (each within one record of its share), the active segment empty."""
    values = [os.urandom(settings.value_bytes) for _ in range(16)]
    config = LogConfig(segment_bytes=settings.segment_bytes, flush_every_append=False)
    share, extra = divmod(settings.total_bytes, settings.partitions)
    partitions: list[Partition] = []
    records = 0
    started = time.perf_counter()
    try:
        for i in range(settings.partitions):
            tp = TopicIdPartition(uuid.uuid4(), "bench-tiering", i)
            plog = Log.open(root / f"bench-tiering-{i}", config)
            partitions.append(Partition(tp, plog))
            target = share + (1 if i < extra else 0)
            written = 0  # bytes of the partition's .log files
            n = 0
            while True:
                record = Record(f"k{n}".encode(), values[n % len(values)], timestamp=1_000_000 + n)
                batch = build_batch([record])  # one record a batch, stored as it is
                if written + len(batch) > target:
                    break
                plog.append_batches(batch, LEADER_EPOCH)
                written += len(batch)
                n += 1
            plog.roll()
            plog.flush()
            records += n
    except BaseException:
        for p in partitions:
            p.log.close()
        raise
    seconds = time.perf_counter() - started
    setup = Setup(partitions, seconds, records)
    for suffix in FILE_OBJECTS:
        setup.file_bytes[suffix] = 0
    for _, path in setup.source_files():
        setup.file_bytes[path.suffix] += path.stat().st_size
    log(
        f"setup: {settings.partitions} partitions, {setup.segments} closed segments, "
        f"{records:,} records, {format_bytes(setup.total_bytes)} of segment files "
        f"({format_bytes(setup.file_bytes['.log'])} .log) in {format_seconds(seconds)}"
    )
    return setup


# ============================================================================= baseline


def baseline_copy(setup: Setup, dest: Path, threads: int) -> float:
    """Copies every source file into ``dest/{partition}/`` (threads 1: serially); returns the
    seconds taken, directory creation included (the RSM creates its directories too)."""
    jobs = [(dest / str(p.tp.partition) / path.name, path) for p, path in setup.source_files()]

    def copy(job: tuple[Path, Path]) -> None:
        shutil.copyfile(job[1], job[0])

    if threads == 1:
        start = time.perf_counter()
        for d in {j[0].parent for j in jobs}:
            d.mkdir(parents=True, exist_ok=True)
        for job in jobs:
            copy(job)
        return time.perf_counter() - start
    with ThreadPoolExecutor(threads, thread_name_prefix="baseline-copy") as pool:
        start = time.perf_counter()
        for d in {j[0].parent for j in jobs}:
            d.mkdir(parents=True, exist_ok=True)
        list(pool.map(copy, jobs))  # re-raises the first failure
        return time.perf_counter() - start


def check_baseline_copy(setup: Setup, dest: Path) -> None:
    for p, path in setup.source_files():
        copied = dest / str(p.tp.partition) / path.name
        if copied.stat().st_size != path.stat().st_size:
            raise VerificationError(f"baseline copy {copied} differs in size from {path}")


def run_baselines(
    setup: Setup, settings: Settings, workdir: Path, label: str, log: Callable[[str], None]
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, threads in (("serial", 1), ("parallel", settings.copier_threads)):
        dest = workdir / f"baseline-{label}-{name}"
        phase = prepare_phase(setup, settings)
        seconds = baseline_copy(setup, dest, threads)
        check_baseline_copy(setup, dest)
        shutil.rmtree(dest)
        figures[name] = {
            "threads": threads,
            "seconds": seconds,
            "mb_per_s": setup.total_bytes / seconds / MB,
            **phase,
        }
        log(
            f"  baseline {label:6s} {name:8s} ({threads} thread{'s' if threads > 1 else ''}): "
            f"{format_seconds(seconds)}, {figures[name]['mb_per_s']:,.0f} MB/s, "
            f"source resident {_share(phase['source_resident_share'])}"
        )
    return figures


# ============================================================================= rlm


def finished_segments(manager: Any, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
    return [m for m in manager.list_remote_log_segments(tp) if m.state is FINISHED]


def run_rlm(
    setup: Setup, settings: Settings, workdir: Path, log: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tiers every partition; returns (figures, verification)."""
    metadata_manager = rlmm.create(
        {"rlmm.sqlite.path": str(workdir / "rlmm.db"), "broker.id": str(BROKER_ID)}
    )
    storage = rsm.create({"remote.storage.root": str(workdir / "remote")})
    manager = RemoteLogManager(
        RemoteLogManagerConfig(
            broker_id=BROKER_ID, copier_threads=settings.copier_threads, task_interval_s=3600
        ),
        metadata_manager,
        storage,
    )
    expected = {p.tp: len(p.closed()) for p in setup.partitions}
    try:
        phase = prepare_phase(setup, settings)
        start = time.perf_counter()
        manager.on_leadership_change([TieredPartition(p.tp, p.log) for p in setup.partitions])
        leadership_s = time.perf_counter() - start
        for p in setup.partitions:
            manager.trigger_copy(p.tp)
        deadline = start + settings.deadline_s
        pending = dict(expected)
        polls = 0
        while pending:
            polls += 1
            for tp in list(pending):
                if len(finished_segments(metadata_manager, tp)) >= pending[tp]:
                    del pending[tp]
            if not pending:
                break
            if time.perf_counter() > deadline:
                raise VerificationError(
                    f"after {settings.deadline_s:.0f} s, {len(pending)} partition(s) still had "
                    f"segments not COPY_SEGMENT_FINISHED: "
                    + ", ".join(
                        f"{tp.partition}: {len(finished_segments(metadata_manager, tp))}/{n}"
                        for tp, n in pending.items()
                    )
                )
            time.sleep(POLL_INTERVAL_S)
        seconds = time.perf_counter() - start
        tasks = [manager.copy_task(p.tp) for p in setup.partitions]
        figures = {
            "copier_threads": settings.copier_threads,
            "seconds": seconds,
            "mb_per_s": setup.total_bytes / seconds / MB,
            "leadership_call_s": leadership_s,
            "polls": polls,
            "poll_interval_s": POLL_INTERVAL_S,
            "copy_task_failures": sum(t.failures for t in tasks if t is not None),
            "copy_errors": sum(manager.metrics.copy_errors.values()),
            "copy_requests": sum(manager.metrics.copy_requests.values()),
            **phase,
        }
        log(
            f"  rlm copy ({settings.copier_threads} copier threads): {format_seconds(seconds)}, "
            f"{figures['mb_per_s']:,.0f} MB/s (leadership call {format_seconds(leadership_s)}), "
            f"source resident {_share(phase['source_resident_share'])}"
        )
        manager.close()  # no copy in flight any more: every segment is finished
        verification = verify_remote(setup, metadata_manager, storage, workdir / "remote")
    finally:
        manager.close()
        metadata_manager.close()
        storage.close()
    return figures, verification


def verify_remote(setup: Setup, metadata_manager: Any, storage: Any, root: Path) -> dict[str, Any]:
    """The finished segments are the local closed segments, the object keys exactly theirs, and
    the file-backed objects as large as the local files; ``ok`` False lists the problems."""
    problems: list[str] = []
    stored_file_bytes = 0
    stored_epochs_bytes = 0
    objects = 0
    for p in setup.partitions:
        tp = p.tp
        finished = sorted(finished_segments(metadata_manager, tp), key=lambda m: m.start_offset)
        others = [
            m for m in metadata_manager.list_remote_log_segments(tp) if m.state is not FINISHED
        ]
        if others:
            problems.append(f"partition {tp.partition}: {len(others)} segments not finished")
        closed = p.closed()
        local_ranges = [(s.base_offset, s.next_offset - 1) for s in closed]
        remote_ranges = [(m.start_offset, m.end_offset) for m in finished]
        if local_ranges != remote_ranges:
            problems.append(
                f"partition {tp.partition}: finished segments {remote_ranges} are not the local "
                f"closed segments {local_ranges}"
            )
            continue
        expected_keys: set[str] = set()
        for segment, m in zip(closed, finished, strict=True):
            prefix = layout.segment_prefix(m)
            sizes = {}
            for local_suffix, object_suffix in FILE_OBJECTS.items():
                key = layout.object_key(prefix, object_suffix)
                expected_keys.add(key)
                local = segment.log_path.with_suffix(local_suffix).stat().st_size
                try:
                    remote = (root / key).stat().st_size
                except FileNotFoundError:
                    problems.append(f"partition {tp.partition}: {key} is missing")
                    continue
                sizes[object_suffix] = remote
                stored_file_bytes += remote
                if remote != local:
                    problems.append(f"{key}: {remote} bytes stored, the local file has {local}")
            epochs_key = layout.object_key(prefix, EPOCHS_SUFFIX)
            expected_keys.add(epochs_key)
            epochs = p.log.segment_data(segment).leader_epoch_index
            try:
                epochs_stored = (root / epochs_key).stat().st_size
            except FileNotFoundError:
                problems.append(f"partition {tp.partition}: {epochs_key} is missing")
                epochs_stored = -1
            else:
                stored_epochs_bytes += epochs_stored
                if epochs_stored != len(epochs):
                    problems.append(f"{epochs_key}: {epochs_stored} bytes, expected {len(epochs)}")
            if m.segment_size_in_bytes != segment.size_bytes:
                problems.append(
                    f"segment {m.remote_log_segment_id.id}: segment_size_in_bytes "
                    f"{m.segment_size_in_bytes}, the local .log holds {segment.size_bytes}"
                )
            if m.custom_metadata is None:
                problems.append(f"segment {m.remote_log_segment_id.id}: no custom metadata")
            else:
                location = decode_custom_metadata(m.custom_metadata, tp)
                total = sum(sizes.values()) + epochs_stored
                if location.prefix != prefix or location.total_bytes != total:
                    problems.append(
                        f"segment {m.remote_log_segment_id.id}: custom metadata says "
                        f"{location.total_bytes} bytes at {location.prefix}, stored {total} at "
                        f"{prefix}"
                    )
        keys = set(storage.object_keys(tp))
        objects += len(keys)
        if keys != expected_keys:
            missing, extra = sorted(expected_keys - keys), sorted(keys - expected_keys)
            problems.append(
                f"partition {tp.partition}: object keys differ from the finished segments' "
                f"(missing {missing[:3]}{'...' if len(missing) > 3 else ''}, unexpected "
                f"{extra[:3]}{'...' if len(extra) > 3 else ''})"
            )
    if stored_file_bytes != setup.total_bytes:
        problems.append(
            f"stored {stored_file_bytes} bytes of .log/.index/.timeindex objects, the local "
            f"segment files hold {setup.total_bytes}"
        )
    return {
        "ok": not problems,
        "segments": setup.segments,
        "objects": objects,
        "local_segment_file_bytes": setup.total_bytes,
        "stored_file_object_bytes": stored_file_bytes,
        "stored_epochs_object_bytes": stored_epochs_bytes,
        "stored_total_bytes": stored_file_bytes + stored_epochs_bytes,
        "problems": problems,
        "checked": (
            "per partition: finished segments == local closed segments (offsets); RSM object keys "
            "== {log,index,timeindex,epochs} of each finished segment; each log/index/timeindex "
            "object as large as its local file and their total == the local segment files' total; "
            "epochs objects == the leader-epoch bytes; segment_size_in_bytes and the custom "
            "metadata's total bytes and prefix"
        ),
    }


# ============================================================================= output


def _share(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0%}"


def ratios(rlm: dict[str, Any], baselines: dict[str, dict[str, Any]]) -> dict[str, float]:
    return {
        f"{when}_{name}": rlm["seconds"] / figures[name]["seconds"]
        for when, figures in baselines.items()
        for name in ("serial", "parallel")
    }


def summary(results: dict[str, Any], setup: dict[str, Any]) -> list[dict[str, Any]]:
    """The row for bench/RESULTS.md: the RLM copy against the faster of the threaded copies run
    before and after it (the phases vary most with ordering and other load on the machine)."""
    if "rlm" not in results or "after" not in results["baseline"]:
        return []
    rlm = results["rlm"]
    baseline = min(
        (results["baseline"][when]["parallel"] for when in ("before", "after")),
        key=lambda figures: figures["seconds"],
    )
    return [
        summary_row(
            f"{format_bytes(setup['segment_file_bytes'])} of segment files, "
            f"{setup['closed_segments']} segments, {setup['partitions']} partitions",
            f"RLM tiers every closed segment ({rlm['copier_threads']} copier threads)",
            rlm["seconds"],
            "s",
            f"shutil.copyfile on {baseline['threads']} threads (faster of before/after)",
            baseline["seconds"],
        )
    ]


def report_table(document: dict[str, Any]) -> str:
    results = document["results"]
    rlm = results["rlm"]
    rows = []
    for when in ("before", "after"):
        for name in ("serial", "parallel"):
            f = results["baseline"][when][name]
            rows.append(
                [
                    f"baseline {name} ({when} rlm)",
                    f["threads"],
                    format_seconds(f["seconds"]),
                    f"{f['mb_per_s']:,.0f}",
                    _share(f["source_resident_share"]),
                    f"{rlm['seconds'] / f['seconds']:.2f}x",
                ]
            )
    rows.insert(
        2,
        [
            "rlm copy",
            rlm["copier_threads"],
            format_seconds(rlm["seconds"]),
            f"{rlm['mb_per_s']:,.0f}",
            _share(rlm["source_resident_share"]),
            "",
        ],
    )
    headers = ["phase", "threads", "time", "MB/s", "resident", "rlm/baseline"]
    setup = document["setup"]
    lines = [
        format_table(headers, rows),
        f"{setup['partitions']} partitions, {setup['closed_segments']} closed segments "
        f"(segment.bytes {format_bytes(setup['segment_bytes'])}), "
        f"{format_bytes(setup['segment_file_bytes'])} of segment files; MB = 10^6 bytes",
        f"page cache: {PAGE_CACHE_NOTE}"
        + (" (evicted before each phase)" if document["settings"]["evict_cache"] else ""),
    ]
    v = results.get("verification")
    if v is not None:
        lines.append(
            f"verification: {'OK' if v['ok'] else 'FAILED'}: {v['segments']} segments, "
            f"{v['objects']} objects, {v['stored_file_object_bytes']:,} bytes of file-backed "
            f"objects (local files {v['local_segment_file_bytes']:,}) + "
            f"{v['stored_epochs_object_bytes']:,} bytes of epochs objects"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0, help="GiB of closed segments in total")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--segment-mib", type=float, default=64.0, help="segment.bytes in MiB")
    parser.add_argument("--value-kib", type=int, default=64, help="record value size in KiB")
    parser.add_argument("--copier-threads", type=int, default=4)
    parser.add_argument(
        "--deadline-s", type=float, default=900.0, help="give up waiting for the RLM copy after"
    )
    parser.add_argument(
        "--evict-cache",
        action="store_true",
        help="drop the source files' cached pages before each phase (posix_fadvise DONTNEED)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="32 MiB in 4 MiB segments (smoke test)"
    )
    parser.add_argument(
        "--warmup", action="store_true", help="one untimed serial copy before the timed phases"
    )
    parser.add_argument("--workdir", type=Path, help="where the temporary directory goes")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    if args.partitions < 1 or args.copier_threads < 1 or args.value_kib < 1:
        parser.error("--partitions, --copier-threads and --value-kib want at least 1")
    total = QUICK_TOTAL_BYTES if args.quick else int(args.gib * GIB)
    segment_bytes = QUICK_SEGMENT_BYTES if args.quick else int(args.segment_mib * MIB)
    value_bytes = args.value_kib * 1024
    if segment_bytes < 2 * value_bytes or total < args.partitions * segment_bytes:
        parser.error("each partition needs at least one segment, and a segment at least two values")
    settings = Settings(
        total_bytes=total,
        partitions=args.partitions,
        segment_bytes=segment_bytes,
        value_bytes=value_bytes,
        copier_threads=args.copier_threads,
        deadline_s=args.deadline_s,
        evict_cache=args.evict_cache,
    )

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {"tiered": code_fingerprint("tiered"), "broker": code_fingerprint("broker")}
    results: dict[str, Any] = {"baseline": {}}
    failures: list[str] = []
    setup_doc: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tiering-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        setup: Setup | None = None
        try:
            setup = build_logs(workdir / "logs", settings, log)
            setup_doc = {
                "partitions": settings.partitions,
                "segment_bytes": segment_bytes,
                "value_bytes": value_bytes,
                "records": setup.records,
                "closed_segments": setup.segments,
                "segment_file_bytes": setup.total_bytes,
                "segment_file_bytes_by_suffix": setup.file_bytes,
                "seconds": setup.seconds,
                "workdir_filesystem": _filesystem(workdir),
            }
            if args.warmup:
                warmup_s = baseline_copy(setup, workdir / "warmup", 1)
                shutil.rmtree(workdir / "warmup")
                log(f"  warm-up copy (untimed phase): {format_seconds(warmup_s)}")
                results["warmup_s"] = warmup_s
            results["baseline"]["before"] = run_baselines(setup, settings, workdir, "before", log)
            try:
                results["rlm"], results["verification"] = run_rlm(setup, settings, workdir, log)
            except VerificationError as e:
                failures.append(f"rlm: {e}")
                log(f"  FAILED: {e}")
            else:
                problems = results["verification"]["problems"]
                failures += [f"verification: {p}" for p in problems]
                for problem in problems[:10]:
                    log(f"  VERIFICATION FAILED: {problem}")
            shutil.rmtree(workdir / "remote", ignore_errors=True)
            results["baseline"]["after"] = run_baselines(setup, settings, workdir, "after", log)
            if "rlm" in results:
                results["ratios"] = ratios(results["rlm"], results["baseline"])
        except Exception:
            failures.append(f"crashed:\n{traceback.format_exc()}")
            log(f"CRASHED:\n{traceback.format_exc()}")
        finally:
            if setup is not None:
                for p in setup.partitions:
                    with contextlib.suppress(Exception):
                        p.log.close()
    runtime_s = time.perf_counter() - started
    verified = results.get("verification", {}).get("ok") is True
    if not verified and not failures:
        failures.append("remote storage was not verified")
    document = {
        "benchmark": "tiering",
        "description": (
            "RemoteLogManager copier throughput for closed segments versus shutil.copyfile of "
            "the same segment files (serial, and on as many threads as the copier pool), both on "
            "the same disk, baselines measured before and after the RLM copy in the same run. "
            "ratio = rlm seconds / baseline seconds; MB/s = 10^6 bytes of local segment files "
            "per second."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "summary": summary(results, setup_doc),
        "settings": {
            "total_bytes_requested": total,
            "partitions": settings.partitions,
            "segment_bytes": segment_bytes,
            "value_bytes": value_bytes,
            "copier_threads": settings.copier_threads,
            "task_interval_s": 3600,
            "deadline_s": settings.deadline_s,
            "quick": args.quick,
            "evict_cache": settings.evict_cache,
            "warmup": args.warmup,
            "setup_log_config": "flush_every_append=False; each segment fsynced on roll",
            "rlm_timing": (
                "from on_leadership_change (which schedules every copy task at once; "
                "trigger_copy follows) until the RLMM lists every closed segment as "
                f"COPY_SEGMENT_FINISHED, polled every {POLL_INTERVAL_S} s"
            ),
            "between_phases": (
                "os.sync() before every timed phase (untimed)"
                + (", then posix_fadvise(DONTNEED) on the source files" if args.evict_cache else "")
                + "; no phase fsyncs its own writes and each phase's output is deleted before the "
                "next, so most of it may never reach the disk (page-cache copy throughput)"
            ),
            "page_cache": PAGE_CACHE_NOTE,
        },
        "setup": setup_doc,
        "results": results,
        "verified": verified,
        "failures": failures,
        "ok": not failures,
    }
    out = write_json(args.out, document)
    log("")
    if "rlm" in results and len(results["baseline"]) == 2:
        log(report_table(document))
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


def _filesystem(path: Path) -> dict[str, Any]:
    stat = os.statvfs(path)
    return {
        "path": str(path),
        "free_bytes": stat.f_bavail * stat.f_frsize,
        "st_dev": path.stat().st_dev,
    }


if __name__ == "__main__":
    sys.exit(main())
