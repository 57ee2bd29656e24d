"""Writes groups' records to ``__consumer_offsets`` for the group coordinator, off its lock: the
coordinator hands a record over under its lock, one thread ("group-writes") appends the records
in the order they were handed over (a group's records land in the order of its generations) and
then calls each one's ``written`` with the outcome, as Kafka's ``storeGroup`` calls back after
the append. A failing append or callback is logged and the thread goes on. Tests run it by hand
instead (``start=False`` and :meth:`run_pending`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.groups.group_records import StoredGroup

__all__ = ["GroupWriter", "StoreGroup"]

log = logging.getLogger(__name__)

StoreGroup = Callable[[str, StoredGroup], ErrorCode]
"""Appends a group's record durably: NONE, or the error the group's members get."""

Written = Callable[[ErrorCode], None]


class GroupWriter:
    """Thread-safe."""

    def __init__(self, store: StoreGroup, start: bool = True) -> None:
        self._store = store
        self._queue: deque[tuple[str, StoredGroup, Written | None]] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self._writing = threading.Lock()  # one writer at a time keeps the order
        self._thread: threading.Thread | None = None
        if start:
            self._thread = threading.Thread(target=self._run, name="group-writes", daemon=True)
            self._thread.start()

    def submit(self, group_id: str, record: StoredGroup, written: Written | None = None) -> None:
        """Queues the record; ``written(error)`` runs once it is durable or failed (with
        COORDINATOR_NOT_AVAILABLE if the writer closes first)."""
        with self._wake:
            if self._closed:
                closed = True
            else:
                closed = False
                self._queue.append((group_id, record, written))
                self._wake.notify()
        if closed and written is not None:
            _call(written, ErrorCode.coordinator_not_available)

    def run_pending(self) -> int:
        """Writes everything queued now; how many records."""
        ran = 0
        with self._writing:
            while True:
                with self._wake:
                    if not self._queue:
                        return ran
                    group_id, record, written = self._queue.popleft()
                self._write(group_id, record, written)
                ran += 1

    def close(self) -> None:
        """Stops the thread; what is still queued is answered COORDINATOR_NOT_AVAILABLE."""
        with self._wake:
            self._closed = True
            left, self._queue = list(self._queue), deque()
            self._wake.notify()
        for _, _, written in left:
            if written is not None:
                _call(written, ErrorCode.coordinator_not_available)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _write(self, group_id: str, record: StoredGroup, written: Written | None) -> None:
        try:
            error = self._store(group_id, record)
        except Exception:
            log.exception("Could not write the record of group %s", group_id)
            error = ErrorCode.unknown_server_error
        if written is not None:
            _call(written, error)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not (self._closed or self._queue):
                    self._wake.wait()
                if self._closed:
                    return
            self.run_pending()


def _call(written: Written, error: ErrorCode) -> None:
    try:
        written(error)
    except Exception:
        log.exception("A group record's callback failed")
