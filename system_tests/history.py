"""The history of a randomized run: every client operation and every fault, one JSON object a
line, as the run sees them happen.

An operation is recorded twice, when it starts (``invoke``) and when it ends: ``ok`` (it took
effect, with its ``result``), ``fail`` (it certainly did not: a refusal) or ``info`` (unknown: a
timeout, a lost connection; it may have taken effect). Both lines carry the operation's ``id``,
``process`` (``client``, ``nemesis``), ``op`` and ``args``, and ``time``: seconds since the run
began. ``system_tests.history_checker`` reads them back.

The operations and their fields (``args`` -> ``result``):

- ``produce``: topic, topic_id, partition, value -> offset (one record, idempotent, acks=all);
- ``commit``: group, topic, topic_id, partition, offset;
- ``disable``: topic, topic_id, policy (``retain`` | ``delete``); ``enable``: topic, topic_id;
- ``delete``: topic, topic_id; ``create``: topic, partitions -> topic_id;
- the nemesis's ``cut`` (sender, receiver, both_ways), ``heal``, ``kill``, ``restart``,
  ``pause``, ``resume`` (process).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = ["FAIL", "INFO", "INVOKE", "OK", "Event", "History", "Operation", "read_history"]

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)


@dataclass(frozen=True)
class Event:
    """One line of the history."""

    id: int
    type: str  # INVOKE or one of COMPLETIONS
    process: str
    op: str
    time: float
    args: dict[str, Any]
    result: dict[str, Any] = field(default_factory=dict)
    error: str = ""


class Operation:
    """An invoked operation, to be completed exactly once by ``ok``, ``fail`` or ``info``."""

    def __init__(self, history: History, invoked: Event) -> None:
        self._history = history
        self.invoked = invoked
        self.completion: Event | None = None

    def ok(self, **result: Any) -> None:
        self._complete(OK, result, "")

    def fail(self, error: object) -> None:
        self._complete(FAIL, {}, str(error))

    def info(self, error: object) -> None:
        self._complete(INFO, {}, str(error))

    def _complete(self, kind: str, result: dict[str, Any], error: str) -> None:
        if self.completion is not None:
            raise RuntimeError(f"operation {self.invoked.id} completed twice")
        invoked = self.invoked
        self.completion = self._history.append(
            kind, invoked.process, invoked.op, invoked.args, result, error, invoked.id
        )


class History:
    """Appends events to a JSONL file as they happen (flushed each line, so a run that dies
    leaves what it did); thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._next_id = 0
        self._began = time.monotonic()

    def now(self) -> float:
        """Seconds since the run began, the clock of every event."""
        return time.monotonic() - self._began

    def invoke(self, process: str, op: str, /, **args: Any) -> Operation:
        with self._lock:
            self._next_id += 1
            op_id = self._next_id
        return Operation(self, self.append(INVOKE, process, op, args, {}, "", op_id))

    def append(
        self,
        kind: str,
        process: str,
        op: str,
        args: Mapping[str, Any],
        result: Mapping[str, Any],
        error: str,
        op_id: int,
    ) -> Event:
        with self._lock:
            event = Event(op_id, kind, process, op, self.now(), dict(args), dict(result), error)
            self._file.write(json.dumps(asdict(event), sort_keys=True) + "\n")
            self._file.flush()
        return event

    def close(self) -> None:
        self._file.close()


def read_history(path: Path) -> list[Event]:
    """The events of a history file, in the order they were written."""
    events = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(Event(**json.loads(line)))
        except (ValueError, TypeError) as e:
            raise ValueError(f"{path}:{number}: not a history event: {e}") from None
    return events
