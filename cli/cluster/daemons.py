"""The files of a local cluster's processes (config, log, pid file under the data directory),
whether a recorded process still runs, and starting and stopping one as a daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from cli.launch.cgroups import in_own_cgroup


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (dead, not yet reaped by its parent) is not running.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def runs(pid: int, marker: str) -> bool:
    """Whether ``pid``'s command line contains ``marker`` (it is our process, not one that
    reused a stale pid); true where ``/proc`` cannot tell. A child just started reads as an
    empty command line for a moment (its parent resumes before the kernel has set up the new
    program's arguments): that cannot tell either."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return not cmdline or marker.encode() in cmdline


class ClusterFiles:
    """Where a local cluster keeps each process's files: ``DIR/config/NAME.properties``,
    ``DIR/logs/NAME.log`` and ``DIR/pids/NAME.pid``."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir.resolve()

    def config_file(self, name: str, suffix: str = "properties") -> Path:
        return self.dir / "config" / f"{name}.{suffix}"

    def log_file(self, name: str) -> Path:
        return self.dir / "logs" / f"{name}.log"

    def pid_file(self, name: str) -> Path:
        return self.dir / "pids" / f"{name}.pid"

    def recorded_pid(self, name: str) -> int | None:
        """The pid in the process's pid file, whether it runs or not."""
        try:
            text = self.pid_file(name).read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() and int(text) > 0 else None

    def running(self, name: str, marker: str | None = None) -> int | None:
        """The recorded pid if that process runs (and, given a ``marker``, is ours)."""
        pid = self.recorded_pid(name)
        if pid is None or not alive(pid):
            return None
        if marker is not None and not runs(pid, marker):
            return None
        return pid

    def recorded_names(self) -> list[str]:
        return sorted(p.stem for p in (self.dir / "pids").glob("*.pid"))

    def start_python_daemon(self, name: str, module: str, properties: Mapping[str, str]) -> None:
        """``python -m MODULE --config DIR/config/NAME.properties`` in its own session, its
        output appended to its log and its pid recorded."""
        config = self.config_file(name)
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        log_file = self.log_file(name)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with log_file.open("ab") as out:
            process = subprocess.Popen(
                in_own_cgroup([sys.executable, "-m", module, "--config", str(config)], name),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_file(name).parent.mkdir(parents=True, exist_ok=True)
        self.pid_file(name).write_text(f"{process.pid}\n")

    def stop(self, name: str, marker: str | None, timeout_s: float) -> bool:
        """SIGTERM the recorded process, SIGKILL it after ``timeout_s``, wait; forget its pid
        file. True if it was running."""
        pid = self.running(name, marker)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not _wait_gone(pid, timeout_s):
                os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, 5.0)
        self.pid_file(name).unlink(missing_ok=True)
        return pid is not None


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
