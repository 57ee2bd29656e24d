"""Named fail points: places in the daemons where a system test can crash or freeze a real process.

A process reads ``TIERED_FAILPOINTS`` once, at start-up (``configure_from_environment``)::

    TIERED_FAILPOINTS="controller.disable.persisted=crash;broker.disable.stopped=pause"

Actions:

``crash``
    SIGKILL this process at that line: exactly what ``kill -9`` would do if it landed there.
``pause``
    SIGSTOP this process at that line, and hold the thread that hit it there until a SIGCONT.
    The harness sees the process stopped (``/proc`` state ``T``), so it knows *where* it
    stopped, and then kills it or resumes it (a zombie). Arming a pause installs a SIGCONT
    handler, so ``configure`` must then run on the main thread.
``fail``
    ``hit`` returns True, and the caller fails there as its I/O would (a store write raises
    its store's error): what a full disk or a lost connection does at that line.

Each point fires the first time it is reached and never again in that process; ``NAME=ACTION*N``
fires it the first N times (e.g. a pause at the same step of N jobs in turn). Without the
variable, ``hit`` is one dict lookup in an empty dict: the points cost nothing in production.
The same idea as TiKV's ``fail-rs`` and FreeBSD's ``fail(9)``; the point names are listed in
``POINTS`` so that a typo in a test fails loudly instead of never firing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from tiered import signals

__all__ = [
    "ENVIRONMENT_VARIABLE",
    "POINTS",
    "configure",
    "configure_from_environment",
    "hit",
]

ENVIRONMENT_VARIABLE = "TIERED_FAILPOINTS"

POINTS: dict[str, str] = {
    "controller.disable.persisted": "DISABLING is persisted; no DisableRemoteTopic sent yet",
    "controller.disable.some_acked": "some brokers acked a disable; the topic still owes acks",
    "controller.disable.all_acked": "every broker acked; DISABLED is not persisted yet",
    "controller.delete_job.listed": (
        "a delete job named its first partition's objects, deleted none yet"
    ),
    "controller.delete_job.known_objects_deleted": (
        "a delete job deleted the objects its metadata named; the sweep has not listed yet"
    ),
    "controller.delete_job.objects_deleted": (
        "a delete job deleted its objects; its partitions are not finished yet"
    ),
    "broker.disable.stopped": "a broker stopped tiering for a disable; the ack is not sent yet",
    "controller.topic_writes.flush": "a group commit's write of topic changes is about to start",
}
ACTIONS = ("crash", "pause", "fail")

log = logging.getLogger(__name__)
_armed: dict[str, str] = {}
_times_left: dict[str, int] = {}  # fires left of each armed point
_lock = threading.Lock()
_continued = threading.Event()


def configure(spec: str) -> dict[str, str]:
    """Arms the points of ``spec`` (``name=action[*times];...``), replacing any armed before.
    Raises ``ValueError`` naming the bad entry and the valid names, actions or times; arms
    nothing then."""
    armed: dict[str, str] = {}
    times_left: dict[str, int] = {}
    for entry in filter(None, (part.strip() for part in spec.split(";"))):
        name, sep, action = (text.strip() for text in entry.partition("="))
        action, star, times = (text.strip() for text in action.partition("*"))
        if not sep or name not in POINTS:
            raise ValueError(
                f"{ENVIRONMENT_VARIABLE}: bad entry {entry!r}; expected NAME=ACTION with NAME one "
                f"of {', '.join(sorted(POINTS))}"
            )
        if action not in ACTIONS:
            raise ValueError(
                f"{ENVIRONMENT_VARIABLE}: bad action {action!r} for {name}; valid actions: "
                f"{', '.join(ACTIONS)}"
            )
        if star and not (times.isdigit() and int(times) >= 1):
            raise ValueError(
                f"{ENVIRONMENT_VARIABLE}: bad times {times!r} for {name}; expected ACTION*N with "
                "N a whole number >= 1"
            )
        armed[name] = action
        times_left[name] = int(times) if star else 1
    with _lock:
        _armed.clear()
        _armed.update(armed)
        _times_left.clear()
        _times_left.update(times_left)
    if "pause" in armed.values():
        signals.notify_on([signal.SIGCONT], _continued)
    return armed


def configure_from_environment() -> dict[str, str]:
    """Arms what ``TIERED_FAILPOINTS`` names (nothing when it is unset or empty)."""
    armed = configure(os.environ.get(ENVIRONMENT_VARIABLE, ""))
    if armed:
        with _lock:
            times = dict(_times_left)
        described = (
            f"{k}={v}" + (f"*{times[k]}" if times.get(k, 1) > 1 else "") for k, v in armed.items()
        )
        log.warning("Fail points armed: %s", ", ".join(described))
    return armed


def hit(name: str) -> bool:
    """Fires the point ``name`` if it is armed (the times it was armed for); True when its
    action is ``fail`` (the
    caller then fails as its I/O would). The daemon's log says so first, flushed, so that a
    test can tell which point fired."""
    if not _armed:
        return False
    with _lock:
        action = _armed.get(name)
        if action is not None:
            _times_left[name] -= 1
            if _times_left[name] == 0:
                del _armed[name], _times_left[name]
    if action is None:
        return False
    log.warning("Fail point %s: %s (%s)", name, action, POINTS[name])
    if action == "fail":
        return True
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    _continued.clear()
    os.kill(os.getpid(), signal.SIGSTOP)
    # A process-directed stop is not synchronous for the thread that sends it: it may run on
    # long enough to send the very ack a test meant to hold back. Wait for the SIGCONT that
    # ends the stop (a kill -9 ends the wait all the same).
    _continued.wait()
    return False
