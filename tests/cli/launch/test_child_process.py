"""cli.launch.child_process.ChildProcess, the one way every local server (ZooKeeper, Spark, the S3
endpoint) is spawned, waited for and stopped: small Python children stand in for the servers."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.launch.child_process import ChildProcess
from tests.support.polling import poll_until
from tests.support.processes import process_gone

pytestmark = pytest.mark.processes

# Forks a grandchild (in the child's process group), says its pid, then idles.
_FORKS_A_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "forked = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print('grandchild', forked.pid, flush=True)\n"
    "time.sleep(600)\n"
)
_IDLES = "import time; print('idling', flush=True); time.sleep(600)"
_IGNORES_SIGTERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ignoring SIGTERM', flush=True)\n"
    "time.sleep(600)\n"
)


class StartupError(RuntimeError):
    pass


@pytest.fixture
def children() -> Iterator[list[ChildProcess]]:
    """Children a test spawns, killed at its end whatever happened."""
    spawned: list[ChildProcess] = []
    yield spawned
    for child in spawned:
        child.kill()


def spawn(
    children: list[ChildProcess], tmp_path: Path, script: str, *, kill_group: bool = False
) -> ChildProcess:
    child = ChildProcess(
        [sys.executable, "-c", script],
        log_path=tmp_path / "child.log",
        pid_file=tmp_path / "child.pid",
        kill_group=kill_group,
    )
    children.append(child)
    return child


def logged(child: ChildProcess, word: str) -> list[str]:
    """The words after ``word`` on the first line of this run's log starting with it."""
    poll_until(
        lambda: any(line.startswith(word) for line in child.log_of_this_run().splitlines()),
        timeout=60,
        what=f"the child to log {word!r}",
    )
    line = next(line for line in child.log_of_this_run().splitlines() if line.startswith(word))
    return line.split()[1:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("kill_group", [True, False])
def test_a_group_kill_leaves_no_grandchild(
    children: list[ChildProcess], tmp_path: Path, kill_group: bool
) -> None:
    child = spawn(children, tmp_path, _FORKS_A_GRANDCHILD, kill_group=kill_group)
    [grandchild_text] = logged(child, "grandchild")
    grandchild = int(grandchild_text)
    try:
        assert os.getpgid(grandchild) == child.pid  # the child's session is its group
        child.kill()
        assert not child.is_running and not (tmp_path / "child.pid").exists()
        if kill_group:
            poll_until(lambda: process_gone(grandchild), timeout=30, what="the grandchild to die")
        else:  # the child alone dies: its grandchild is orphaned, still running
            assert not process_gone(grandchild)
    finally:
        if not process_gone(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_child_exiting_during_the_wait_fails_it_at_once_with_its_log(
    children: list[ChildProcess], tmp_path: Path
) -> None:
    script = "import sys; print('cannot bind: Address already in use', flush=True); sys.exit(3)"
    child = spawn(children, tmp_path, script)
    probes: list[None] = []

    def serving() -> bool:
        probes.append(None)
        return False

    # A deadline far away: only the child's exit can end the wait with this message.
    with pytest.raises(StartupError) as failure:
        child.wait_until_serving(serving, what="the toy server", timeout_s=600, error=StartupError)
    message = str(failure.value)
    assert message.startswith("the toy server exited with code 3 during startup; ")
    assert f"log {tmp_path / 'child.log'}:" in message
    assert "cannot bind: Address already in use" in message  # the log's tail
    assert "not serving after" not in message
    assert child.exit_code() == 3


def test_the_wait_returns_once_serving_and_times_out_with_the_probe_detail(
    children: list[ChildProcess], tmp_path: Path
) -> None:
    child = spawn(children, tmp_path, _IDLES)
    seconds = child.wait_until_serving(
        lambda: "idling" in child.log_of_this_run().splitlines(),
        what="the toy server",
        timeout_s=60,
        error=StartupError,
    )
    assert seconds >= 0

    with pytest.raises(StartupError) as failure:
        child.wait_until_serving(
            lambda: False,
            what="the toy server",
            timeout_s=0.2,
            error=StartupError,
            detail=lambda: " (last answer: nothing)",
        )
    message = str(failure.value)
    assert "the toy server not serving after 0.2s (last answer: nothing); log " in message
    assert "\nidling" in message  # the log's tail
    assert child.is_running  # left as it was: the caller decides


def test_stop_kills_a_child_that_ignores_sigterm_and_detach_keeps_the_pid_file(
    children: list[ChildProcess], tmp_path: Path
) -> None:
    stubborn = spawn(children, tmp_path, _IGNORES_SIGTERM)
    logged(stubborn, "ignoring")
    pid_file = tmp_path / "child.pid"
    assert pid_file.read_text(encoding="utf-8").strip() == str(stubborn.pid)
    stubborn.stop(timeout_s=0.2)
    assert not stubborn.is_running and process_gone(stubborn.pid) and not pid_file.exists()

    daemon = spawn(children, tmp_path, _IDLES)
    assert daemon.detach() == daemon.pid
    try:
        daemon.kill()  # forgotten: no effect
        assert not process_gone(daemon.pid) and pid_file.exists()
        assert not daemon.is_running  # no longer this handle's
    finally:
        os.kill(daemon.pid, signal.SIGKILL)
        os.waitpid(daemon.pid, 0)  # our child still: reap it


_SAYS_ITS_DEATH_SIGNAL = (
    "import ctypes, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "signal_number = ctypes.c_int(-1)\n"
    "libc.prctl(2, ctypes.byref(signal_number), 0, 0, 0)  # PR_GET_PDEATHSIG\n"
    "print('death signal %d' % signal_number.value, flush=True)\n"
    "time.sleep(600)\n"
)
_forks_seen: list[int] = []
_counting_forks: list[bool] = []


def _count_a_fork() -> None:
    if _counting_forks:
        _forks_seen.append(os.getpid())


os.register_at_fork(before=_count_a_fork)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_the_death_signal_is_set_without_forking_the_parent_interpreter(
    children: list[ChildProcess], tmp_path: Path
) -> None:
    """A fork that runs the parent's atfork handlers would restart gRPC's threads in the child,
    which then abort when the child closes their descriptors before exec."""
    _counting_forks.append(True)
    try:
        child = spawn(children, tmp_path, _SAYS_ITS_DEATH_SIGNAL)
    finally:
        _counting_forks.clear()
    assert _forks_seen == []
    poll_until(lambda: "\ndeath signal " in child.log_tail(5), timeout=30, what="its answer")
    assert child.log_tail(1) == f"death signal {int(signal.SIGTERM)}"
