"""``tiered.signals``: a SIGTERM the kernel hands to a thread other than the main one still wakes a
main thread blocked in ``Event.wait()`` (a Python handler alone leaves it blocked for good), and
each signal sets only its own Events."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes

# The main thread waits without a timeout-driven wake-up; another thread waits until the main
# one sleeps in that wait, then sends SIGTERM to itself (pthread_kill), as the kernel may choose
# to deliver a kill(pid, SIGTERM).
CHILD = """
import os, signal, sys, threading, time
from tiered import signals

stopping, continued = threading.Event(), threading.Event()
signals.notify_on((signal.SIGTERM, signal.SIGINT), stopping)
signals.notify_on((signal.SIGCONT,), continued)
main_tid, waiting = threading.get_native_id(), threading.Event()

def main_state():
    with open(f"/proc/self/task/{main_tid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]

def send_from_another_thread(signum):
    deadline = time.monotonic() + 10
    while not (waiting.is_set() and main_state() == "S") and time.monotonic() < deadline:
        time.sleep(0.01)
    signal.pthread_kill(threading.get_ident(), signum)

threading.Thread(target=send_from_another_thread, args=(signal.SIGCONT,)).start()
waiting.set()
print("SIGCONT:", continued.wait(20), "stopping:", stopping.is_set(), flush=True)
waiting.clear()
threading.Thread(target=send_from_another_thread, args=(signal.SIGTERM,)).start()
waiting.set()
print("SIGTERM:", stopping.wait(20), flush=True)
"""


def test_a_signal_delivered_to_another_thread_wakes_the_main_threads_wait() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["SIGCONT: True stopping: False", "SIGTERM: True"]
