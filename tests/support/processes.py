"""Real daemon processes for tests: ``tiered-controller`` and ``tiered-broker`` started from
generated ``.properties`` files, with their output captured (and shown when a start fails),
kill -9, SIGTERM and SIGSTOP/SIGCONT, and fail points armed through the environment. With
``TIERED_CGROUP_ROOT`` set (a partition test), each runs in the cgroup named after its config
file (``broker-1``), which is what ``tests.support.network`` cuts by."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from cli.launch.cgroups import in_own_cgroup
from tests.support.polling import poll_until
from tiered import failpoints

REPO = Path(__file__).resolve().parents[2]


def process_state(pid: int) -> str | None:
    """The one-letter state in ``/proc/PID/stat`` (``T``: stopped), None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (an unreaped zombie is dead as well)."""
    return process_state(pid) in (None, "Z")


class DaemonProcess:
    def __init__(self, module: str, config: Path, properties: Mapping[str, str]) -> None:
        self.module = module
        self.config = config
        self.properties = dict(properties)
        self.failpoints: dict[str, str] = {}  # armed at the next start only
        self.process: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []

    @property
    def name(self) -> str:
        """The process's name in its cluster (``controller-0``, ``broker-1``): its config's."""
        return self.config.stem

    def write_config(self) -> None:
        self.config.parent.mkdir(parents=True, exist_ok=True)
        self.config.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))

    def start(self, ready: str = "serving on", timeout_s: float = 30.0) -> None:
        self.write_config()
        self.output.append(f"---- start {self.module} {self.config.name}\n")
        self.lines = queue.Queue()
        env = dict(os.environ)
        env.pop(failpoints.ENVIRONMENT_VARIABLE, None)
        if self.failpoints:
            env[failpoints.ENVIRONMENT_VARIABLE] = ";".join(
                f"{k}={v}" for k, v in self.failpoints.items()
            )
            self.failpoints = {}
        self.process = subprocess.Popen(
            in_own_cgroup(
                [sys.executable, "-m", self.module, "--config", str(self.config)], self.name
            ),
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, args=(self.process, self.lines), daemon=True).start()
        self.wait_for_line(ready, timeout_s)

    def _pump(self, process: subprocess.Popen[str], lines: queue.Queue[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line)
            lines.put(line)

    def wait_for_line(self, text: str, timeout_s: float = 30.0) -> str:
        """Waits for an output line containing ``text`` since the last start (lines seen before
        this call count)."""
        deadline = time.monotonic() + timeout_s
        for line in self.output_since_start():
            if text in line:
                return line
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"{self.module} printed no line with {text!r} in {timeout_s}s:\n"
                    + "".join(self.output[-80:])
                ) from None
            if text in line:
                return line

    def output_since_start(self) -> list[str]:
        output = list(self.output)
        starts = [i for i, line in enumerate(output) if line.startswith("---- start ")]
        return output[starts[-1] :] if starts else output

    def wait_stopped_at(self, point: str, timeout_s: float = 60.0) -> None:
        """Waits until a ``pause`` fail point froze this process at ``point``."""

        def frozen() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.module} exited ({self.process.returncode}) before fail point {point}:\n"
                    + "".join(self.output[-60:])
                )
            return process_state(self.process.pid) == "T" and any(
                f"Fail point {point}" in line for line in self.output_since_start()
            )

        poll_until(frozen, timeout=timeout_s, what=f"{self.config.name} to stop at {point}")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9."""
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def terminate(self, timeout_s: float = 30.0) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def pause(self) -> None:
        """SIGSTOP, and wait until the process is stopped (a stop is not instantaneous)."""
        process = self.process
        assert process is not None
        process.send_signal(signal.SIGSTOP)
        poll_until(
            lambda: process_state(process.pid) in ("T", None),
            timeout=10,
            what=f"{self.config.name} to stop",
        )

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
