"""A server process started by a test or by ``tiered-cluster up``: spawned in its own session with
its output appended to a log file, its pid written to a pid file, waited for until it serves
(failing at once, with the log's tail, if it exits first), stopped (SIGTERM, then SIGKILL) or
killed, or detached to run on as a daemon.

``die_with_parent`` asks the kernel to SIGTERM the child when the thread that started it dies
(``PR_SET_PDEATHSIG``, set by util-linux's ``setpriv``; Linux), so a killed test run leaves no
server behind. The signal follows the starting *thread*, not the process: start such children
from a long-lived thread. A daemon that must outlive its starter turns it off and calls
``detach()``.

``kill_group`` has SIGKILL take the child's whole process group (the child leads its own
session, so the group's id is its pid): what it forked dies with it, as on the loss of its
machine (a Spark worker's executors and their Python workers).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from cli.launch.cgroups import in_own_cgroup
from tiered.daemon_logging import log_tail

__all__ = ["LOG_TAIL_LINES", "ChildProcess", "with_death_signal"]

LOG_TAIL_LINES = 40
"""How much of its log an error about a child shows."""


def with_death_signal(command: Sequence[str]) -> list[str]:
    """``command`` run through util-linux's ``setpriv --pdeathsig TERM``: the kernel SIGTERMs it
    when the thread that spawned it dies (unchanged where setpriv is missing).

    Not a ``preexec_fn``: that forces a plain ``fork()``, whose atfork handlers restart gRPC's
    poller threads in the child, and the child's ``close_fds`` then pulls their epoll descriptor
    from under them, an abort before ``exec``. Without it, Popen uses ``vfork()``."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is None:
        return list(command)
    return [setpriv, "--pdeathsig", "TERM", "--", *command]


def _nothing_to_add() -> str:
    return ""


class ChildProcess:
    """One spawned server process; see the module docstring."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_path: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        pid_file: Path | None = None,
        die_with_parent: bool = True,
        kill_group: bool = False,
    ) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log: IO[bytes] = open(log_path, "ab")  # noqa: SIM115 - kept open while the child runs
        self.log_path = log_path
        self.log_offset = log.tell()
        """Where this run's output starts in the log file."""
        self.kill_group = kill_group
        log.write(f"---- starting: {' '.join(command)}\n".encode())
        log.flush()
        self.started_at = time.monotonic()
        """When it was spawned (``time.monotonic()``)."""
        try:
            command = in_own_cgroup(command, log_path.stem)
            self._process: subprocess.Popen[bytes] | None = subprocess.Popen(
                with_death_signal(command) if die_with_parent else list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=None if env is None else dict(env),
                start_new_session=True,
            )
        except BaseException:
            log.close()
            raise
        self._log: IO[bytes] | None = log
        self.pid: int = self._process.pid
        self.pid_file = pid_file
        if pid_file is not None:
            try:
                pid_file.parent.mkdir(parents=True, exist_ok=True)
                pid_file.write_text(f"{self.pid}\n", encoding="utf-8")
            except BaseException:
                self.kill()
                raise

    def exit_code(self) -> int | None:
        """The exit code once the child has exited (None while it runs or once forgotten)."""
        return None if self._process is None else self._process.poll()

    @property
    def is_running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def wait_until_serving(
        self,
        serving: Callable[[], bool],
        *,
        what: str,
        timeout_s: float,
        error: Callable[[str], Exception],
        deadline: float | None = None,
        detail: Callable[[], str] = _nothing_to_add,
        poll_interval_s: float = 0.05,
        tail_lines: int = LOG_TAIL_LINES,
    ) -> float:
        """Poll ``serving()`` until it says yes; return the seconds since the spawn.

        Raises ``error(message)`` at once if the child exits meanwhile, or once ``deadline``
        (``time.monotonic()``; by default ``timeout_s`` after the spawn) passes; the message
        starts with ``what`` (the server), ends with the log's tail, and on a timeout carries
        ``detail()`` (say, the probe's last answer). The child is left as it is."""
        deadline = self.started_at + timeout_s if deadline is None else deadline
        while True:
            process = self._process
            if process is None:
                raise error(f"{what} was stopped or detached before it served")
            # Exited first: something else answering on its port must not pass for it.
            code = process.poll()
            if code is not None:
                raise error(
                    f"{what} exited with code {code} during startup; "
                    f"log {self.log_path}:\n{self.log_tail(tail_lines)}"
                )
            if serving():
                return time.monotonic() - self.started_at
            if time.monotonic() >= deadline:
                raise error(
                    f"{what} not serving after {timeout_s:g}s{detail()}; "
                    f"log {self.log_path}:\n{self.log_tail(tail_lines)}"
                )
            time.sleep(poll_interval_s)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    def log_of_this_run(self) -> str:
        """What the log file holds from this run's start on (also once the child is gone)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                return log.read().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def request_stop(self) -> None:
        """SIGTERM without waiting (``stop()`` waits): stops many children at once."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    def stop(self, timeout_s: float) -> None:
        """SIGTERM, SIGKILL (see ``kill_group``) after ``timeout_s``; reaped either way; the pid
        file removed."""
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._kill(process)
        self._forget(remove_pid_file=True)

    def kill(self) -> None:
        """SIGKILL (a crash; its whole process group with ``kill_group``) and reap; the pid file
        removed."""
        process = self._process
        if process is not None and process.poll() is None:
            self._kill(process)
        self._forget(remove_pid_file=True)

    def detach(self) -> int:
        """Leave the child running on its own (pid file kept); return its pid."""
        self._forget(remove_pid_file=False)
        return self.pid

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        if self.kill_group:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        process.wait()

    def _forget(self, *, remove_pid_file: bool) -> None:
        if remove_pid_file and self.pid_file is not None and self._process is not None:
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
        self._process = None
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
