"""The benchmarks' CPU-time readers (bench/common.py): precise enough for a phase of a few
milliseconds, every thread of another process counted, and 0 for a process that is gone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.common import process_cpu_seconds, thread_cpu_seconds

pytestmark = pytest.mark.processes

BURN = "import time\nend = time.process_time() + 0.05\nwhile time.process_time() < end: pass\n"


def test_a_child_that_burns_a_few_milliseconds_reads_above_zero_and_not_above_its_own_count() -> (
    None
):
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            BURN + "import sys\nprint(time.process_time(), flush=True)\nsys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        own_count = float(child.stdout.readline())
        read = process_cpu_seconds(child.pid)
        # scheduler ticks would read 0.04 or 0.05 here (or 0 for shorter work); the CPU clock
        # reads what the child itself counts, interpreter start-up included
        assert read >= own_count >= 0.05
        threads = thread_cpu_seconds(child.pid)
        assert str(child.pid) in threads
        assert sum(threads.values()) <= read + 1e-6
    finally:
        child.kill()
        child.wait()
    assert process_cpu_seconds(child.pid) == 0.0
    assert thread_cpu_seconds(child.pid) == {}
    assert process_cpu_seconds(None) == 0.0


def test_this_process_reads_like_its_own_clock() -> None:
    before = process_cpu_seconds(os.getpid())
    mine = os.times()
    assert before > 0
    assert abs(before - (mine.user + mine.system)) < 0.05
