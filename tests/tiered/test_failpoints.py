"""Fail points: parsing is strict and all-or-nothing, an unarmed point does nothing, and an armed
one crashes or freezes a real process exactly once."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.polling import poll_until
from tests.support.processes import process_state
from tiered import failpoints

pytestmark = pytest.mark.processes


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    failpoints.configure("")


def test_bad_specs_name_the_entry_and_valid_values_and_arm_nothing() -> None:
    failpoints.configure("controller.disable.persisted=pause")
    with pytest.raises(ValueError, match=r"bad entry 'nosuch=crash'.*controller\.disable"):
        failpoints.configure("controller.disable.all_acked=crash; nosuch=crash")
    with pytest.raises(ValueError, match=r"bad action 'explode'.*crash, pause"):
        failpoints.configure("controller.disable.all_acked=explode")
    with pytest.raises(ValueError, match="expected NAME=ACTION"):
        failpoints.configure("controller.disable.all_acked")
    # The rejected specs left the earlier arming alone.
    assert failpoints._armed == {"controller.disable.persisted": "pause"}


def test_a_point_armed_n_times_fires_the_first_n_times_only() -> None:
    failpoints.configure("controller.delete_job.listed=fail*2; controller.disable.persisted=fail")
    assert [failpoints.hit("controller.delete_job.listed") for _ in range(3)] == [True, True, False]
    assert [failpoints.hit("controller.disable.persisted") for _ in range(2)] == [True, False]
    assert failpoints._armed == {}


@pytest.mark.parametrize("times", ["0", "-1", "two", ""])
def test_bad_times_name_the_point_and_arm_nothing(times: str) -> None:
    failpoints.configure("controller.disable.persisted=pause")
    with pytest.raises(
        ValueError, match=rf"bad times '{times}' for controller\.delete_job\.listed"
    ):
        failpoints.configure(f"controller.delete_job.listed=fail*{times}")
    assert failpoints._armed == {"controller.disable.persisted": "pause"}


def test_an_unarmed_point_returns() -> None:
    failpoints.configure("controller.disable.persisted=crash")
    failpoints.hit("controller.disable.all_acked")  # armed elsewhere: not this one
    assert failpoints._armed == {"controller.disable.persisted": "crash"}


def _child(action: str, marker: Path) -> subprocess.Popen[str]:
    """A daemon-shaped child: the main thread waits on an event while a worker hits the point
    twice and then writes ``marker``."""
    script = textwrap.dedent(
        f"""
        import pathlib, threading
        from tiered import failpoints
        failpoints.configure_from_environment()
        done = threading.Event()

        def work():
            print("before", flush=True)
            failpoints.hit("broker.disable.stopped")
            failpoints.hit("broker.disable.stopped")  # once only: a resumed process goes on
            pathlib.Path({str(marker)!r}).write_text("after")
            print("after", flush=True)
            done.set()

        threading.Thread(target=work).start()
        done.wait()
        """
    )
    env = {**os.environ, failpoints.ENVIRONMENT_VARIABLE: f"broker.disable.stopped={action}"}
    return subprocess.Popen(
        [sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True
    )


def test_crash_is_a_kill_9_at_that_line(tmp_path: Path) -> None:
    child = _child("crash", tmp_path / "marker")
    out, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert out == "before\n"
    assert not (tmp_path / "marker").exists()


def test_pause_holds_the_thread_there_until_resumed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    child = _child("pause", marker)
    try:
        poll_until(lambda: process_state(child.pid) == "T", timeout=30, what="a stopped child")
        assert not marker.exists()  # held at the point, not just stopped a little later
        os.kill(child.pid, signal.SIGCONT)
        out, _ = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == 0
    assert out == "before\nafter\n"
    assert marker.read_text() == "after"


_BUSY_CHILD = textwrap.dedent(
    """
    import threading, time
    from tiered import failpoints
    failpoints.configure_from_environment()
    done = threading.Event()
    for _ in range(6):  # other threads the kernel may deliver the SIGCONT to
        threading.Thread(target=lambda: time.sleep(60), daemon=True).start()
    def work():
        failpoints.hit("broker.disable.stopped")
        done.set()
    threading.Thread(target=work).start()
    done.wait()  # no timeout: the main thread runs no Python signal handler meanwhile
    """
)


def _stopped(pid: int) -> bool:
    return process_state(pid) == "T"


def test_a_resumed_pause_goes_on_whichever_thread_gets_the_sigcont() -> None:
    """The SIGCONT may reach any thread, while the main thread waits without a timeout and so
    never runs the Python handler. Before the wakeup-fd pipe, 4 of 60 such resumes hung; 60 here
    make a pass by luck unlikely (~2%)."""
    env = {**os.environ, failpoints.ENVIRONMENT_VARIABLE: "broker.disable.stopped=pause"}
    hung = 0
    for _ in range(60):
        child = subprocess.Popen(
            [sys.executable, "-c", _BUSY_CHILD], env=env, stderr=subprocess.DEVNULL
        )
        try:
            poll_until(functools.partial(_stopped, child.pid), timeout=30, what="a stop")
            os.kill(child.pid, signal.SIGCONT)
            try:
                assert child.wait(10) == 0
            except subprocess.TimeoutExpired:
                hung += 1
        finally:
            child.kill()
            child.wait()
    assert hung == 0
