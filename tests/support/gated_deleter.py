"""An object deleter whose Spark tasks wait at a gate, so a test can act while a bulk delete job
runs (let some slices finish, kill a worker under a running task) without timing.

Each call of :meth:`GatedObjectDeleter.delete_objects` (one Spark task's slice) first writes a
marker file in ``gate_dir`` naming the executor's working directory (under its worker's work
dir) and Python, then waits until it can pass: by taking one ``pass-*`` token (atomically, so
each token lets exactly one slice through) or once ``gate_dir/open`` exists. The deleter is
shipped to executors by value (they cannot import the tests)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tiered.api import DeleteOutcome, RemoteObjectDeleter
from tiered.rsm import FsspecRemoteStorageManager

WAIT_LIMIT_S = 300.0  # a stuck test fails its own timeout first; this only bounds a leaked task


@dataclass(frozen=True)
class GatedObjectDeleter(RemoteObjectDeleter):
    inner: RemoteObjectDeleter
    gate_dir: str

    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        gate = Path(self.gate_dir)
        marker = {"cwd": str(Path.cwd()), "python": sys.executable, "first": handles[0]}
        (gate / f"started-{uuid.uuid4()}").write_text(json.dumps(marker))
        deadline = time.monotonic() + WAIT_LIMIT_S
        while not self._may_pass(gate) and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.inner.delete_objects(handles)

    @staticmethod
    def _may_pass(gate: Path) -> bool:
        if (gate / "open").exists():
            return True
        for token in sorted(gate.glob("pass-*")):
            with contextlib.suppress(FileNotFoundError):
                token.unlink()
                return True
        return False


def started(gate_dir: Path) -> list[dict[str, str]]:
    """The markers of the slices that reached the gate (a rerun slice shows twice)."""
    found = []
    for path in gate_dir.glob("started-*"):
        with contextlib.suppress(ValueError):  # a marker being written
            found.append(json.loads(path.read_text()))
    return found


class GatedStorage(FsspecRemoteStorageManager):
    """The fsspec storage plugin whose bulk deleter waits at ``gate_dir``."""

    def __init__(self, root: str, gate_dir: Path) -> None:
        super().__init__(root)
        self.gate_dir = gate_dir

    def object_deleter(self) -> GatedObjectDeleter:  # type: ignore[override]
        return GatedObjectDeleter(super().object_deleter(), str(self.gate_dir))
