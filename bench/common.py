"""Small helpers shared by the benchmarks: timing, machine description, memory, tables, the
summary rows of ``bench/RESULTS.md`` and JSON.

Benchmarks are run as scripts (``python bench/x.py``); :func:`ensure_repo_on_path` makes ``tiered``,
``bench`` and ``tests.support`` importable from a checkout. Running this module does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime as _dt
import functools
import gc
import hashlib
import json
import os
import platform
import resource
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"


def ensure_repo_on_path() -> None:
    root = str(REPO_ROOT)
    if root not in sys.path:
        sys.path.insert(0, root)


def utc_now() -> str:
    """The current time as an ISO 8601 UTC timestamp (seconds precision)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- timing


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Runs ``fn`` once; returns (seconds, result)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def sample(fn: Callable[[], T], repeat: int, warmup: int = 0) -> tuple[list[float], T]:
    """Times ``repeat`` calls of ``fn`` (after ``warmup`` untimed ones); returns the per-call
    seconds and the result of the last call."""
    if repeat < 1:
        raise ValueError("repeat must be >= 1")
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    result: T
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return samples, result


def summarize(samples: Sequence[float]) -> dict[str, float | int]:
    """Median (the figure to compare), spread and count of timing samples, in seconds."""
    ordered = sorted(samples)
    n = len(ordered)
    return {
        "n": n,
        "median_s": statistics.median(ordered),
        "min_s": ordered[0],
        "max_s": ordered[-1],
        "mean_s": statistics.fmean(ordered),
        "p90_s": ordered[min(n - 1, int(0.9 * n))],
    }


def format_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def format_bytes(count: float) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


# ----------------------------------------------------------------------------- memory


def _proc_status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except OSError:
        return None
    return None


def release_free_memory() -> None:
    """Collects garbage and hands free heap pages back to the OS (glibc ``malloc_trim``), so that
    an RSS reading reflects live data rather than what earlier work left in malloc's free lists."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # AttributeError: not glibc
            ctypes.CDLL(None).malloc_trim(0)


def rss_bytes() -> int | None:
    """The current resident set size of this process (Linux), or None where unknown."""
    return _proc_status_bytes("VmRSS")


def peak_rss_bytes() -> int:
    """The peak resident set size of this process so far."""
    found = _proc_status_bytes("VmHWM")
    if found is not None:
        return found
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


# ----------------------------------------------------------------------------- CPU time

# Linux's CPU-time clock of another process (MAKE_PROCESS_CPUCLOCK in the kernel's
# posix-timers.h): nanosecond precision, where /proc's utime and stime count
# scheduler ticks, too coarse for a short phase, and lose the ticks of threads that have exited.
_CPUCLOCK_SCHED = 2


def process_cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds a process used so far, every thread's (0 once it is gone)."""
    if pid is None:
        return 0.0
    try:
        return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_SCHED)
    except OSError:
        return 0.0


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds each live thread of a process has run, by thread id (the kernel's per-thread
    clock only answers for the caller's own threads; ``schedstat`` counts nanoseconds too)."""
    found = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                found[task.name] = int((task / "schedstat").read_text().split()[0]) / 1e9
    return found


# ----------------------------------------------------------------------------- machine


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _memory_total_bytes() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        usable = os.cpu_count()
    return {
        "nproc": usable,
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_total_bytes": _memory_total_bytes(),
        "python_version": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "sqlite_version": sqlite3.sqlite_version,
        "hostname": platform.node(),
        "load_average": load_average(),
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: other work on the machine skews timings."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ----------------------------------------------------------------------------- code


@functools.cache
def code_fingerprint(package: str = "tiered") -> dict[str, Any]:
    """Which code was measured: the git commit, whether the checkout differs from it, and a hash of
    the package's Python sources (taken once per process, so call it near the imports)."""
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        digest.update(str(path.relative_to(REPO_ROOT)).encode())
        digest.update(path.read_bytes())

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=False
            )
        except OSError:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    status = git("status", "--porcelain", "--", package)
    return {
        "git_commit": git("rev-parse", "HEAD"),
        "uncommitted_changes": None if status is None else bool(status),
        f"{package}_sources_sha256": digest.hexdigest(),
    }


# ----------------------------------------------------------------------------- output


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain-text table; numbers and other cells are right-aligned, the first column left."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def summary_row(
    scenario: str, figure: str, value: float, unit: str, baseline: str, baseline_value: float
) -> dict[str, Any]:
    """One headline figure of a benchmark, for its results JSON's top-level ``"summary"`` list (which
    ``bench/report.py`` turns into ``bench/RESULTS.md``).

    ``value`` is what was measured for ``figure`` in ``scenario`` and ``baseline_value`` what the
    ``baseline`` measured in the same run, both in ``unit`` (``"s"`` for seconds, ``"B"`` for bytes,
    or any other unit name). ``ratio`` = ``value / baseline_value``: below 1 the figure is
    faster/smaller than the baseline, above 1 it is slower/bigger (for times: 0.25 is four times as
    fast as the baseline). It is None when the baseline measured 0."""
    return {
        "scenario": scenario,
        "figure": figure,
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "baseline_value": baseline_value,
        "ratio": value / baseline_value if baseline_value else None,
    }


def write_json(path: Path | str, document: object) -> Path:
    """Writes ``document`` as indented JSON (creating directories); returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target


def finish_run(
    out_path: Path | str,
    document: object,
    runtime_s: float,
    failures: Sequence[str],
    print_table: Callable[[], None],
    log: Callable[[str], None],
) -> int:
    """The end every cluster benchmark shares: writes the results JSON, prints the table, the
    runtime and the first failures; returns the exit code (1 only when a check failed)."""
    out = write_json(out_path, document)
    log("")
    print_table()
    log(f"runtime {runtime_s:.0f} s; {'ok' if not failures else 'FAILED'}; results in {out}")
    for failure in failures[:20]:
        log(f"  {failure}")
    return 0 if not failures else 1
