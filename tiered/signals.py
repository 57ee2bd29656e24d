"""Signals a daemon waits for (SIGTERM and SIGINT to stop, SIGCONT to end a fail point's pause),
delivered as ``threading.Event``\\ s that any thread can wait on.

Why not a Python handler that sets the Event: the kernel delivers a signal sent to the process to
any of its threads. CPython runs Python handlers on the main thread only, and when the kernel
picked another thread, a main thread blocked in ``Event.wait()`` (a futex, not interrupted) never
gets to run the handler: the process ignores the SIGTERM for good. A handler running on the main
thread inside ``Event.wait()`` could also deadlock on the Event's own lock. Instead, CPython's
C-level handler writes the signal's number to a pipe (``signal.set_wakeup_fd``) from whichever
thread received it, and one thread of ours reads the pipe and sets the Events.

One pipe per process (``set_wakeup_fd`` takes one): every caller goes through ``notify_on``.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterable

__all__ = ["notify_on"]

log = logging.getLogger(__name__)

_lock = threading.Lock()
_waiters: dict[int, list[threading.Event]] = {}
_reader: threading.Thread | None = None


def notify_on(signums: Iterable[int], event: threading.Event) -> None:
    """Sets ``event`` whenever one of ``signums`` arrives, instead of the signal's default action.
    Call from the main thread (``signal.signal`` refuses others: ValueError), before announcing
    readiness, so that a signal sent right after the announcement is not lost."""
    global _reader  # noqa: PLW0603 - one pipe per process
    wanted = list(signums)
    with _lock:
        if _reader is None:
            read_fd, write_fd = os.pipe()
            os.set_blocking(write_fd, False)  # the C handler must never block
            signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
            _reader = threading.Thread(
                target=_dispatch, args=(read_fd,), name="signal-wakeups", daemon=True
            )
            _reader.start()
        for signum in wanted:
            _waiters.setdefault(signum, []).append(event)
    for signum in wanted:
        # A Python handler is what makes the C handler write the wakeup byte; the work is
        # done by the reader thread.
        signal.signal(signum, _noted)


def _noted(signum: int, frame: object) -> None:
    pass


def _dispatch(read_fd: int) -> None:
    while True:
        try:
            data = os.read(read_fd, 512)
        except OSError:
            log.exception("Reading the signal wakeup pipe failed; signals are no longer seen")
            return
        if not data:
            return
        with _lock:
            events = [e for signum in data for e in _waiters.get(signum, ())]
        for event in events:
            event.set()
