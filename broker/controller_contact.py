"""Whether a KRaft-mode broker still hears from the active controller, said in its log.

The broker *hears* from the active controller when a RegisterBroker or BrokerHeartbeat is answered
without error, or a FetchMetadata batch arrives. Once it has heard nothing for
``SILENCE_HEARTBEATS`` heartbeat intervals (``broker.heartbeat.interval.ms``), it logs a WARNING,
once per loss: the controller fences a broker whose heartbeats lapse for its
``broker.session.timeout.ms``, and sends a fenced broker nothing, so what it owes this broker
(DisableRemoteTopic, assignments) waits. When it hears again, it logs at INFO how long the silence
lasted. Thread-safe: the heartbeat and metadata threads both report.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

__all__ = ["SILENCE_HEARTBEATS", "ControllerContact"]

log = logging.getLogger(__name__)

SILENCE_HEARTBEATS = 3
"""Heartbeat intervals without an answer after which the broker says it lost the controller: one
heartbeat timed out (its timeout is two intervals) and the next is due."""


class ControllerContact:
    def __init__(self, heartbeat_interval_s: float, clock: Callable[[], float] = time.monotonic):
        self._silence_s = SILENCE_HEARTBEATS * heartbeat_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_heard = clock()  # the silence of a broker that never heard counts from start
        self._lost = False

    def heard(self, endpoint: str) -> None:
        """The active controller at ``endpoint`` answered."""
        with self._lock:
            now = self._clock()
            if self._lost:
                log.info(
                    "Hearing from the active controller at %s again, after %.1fs without an answer",
                    endpoint,
                    now - self._last_heard,
                )
                self._lost = False
            self._last_heard = now

    def check(self) -> None:
        """Logs the loss once the silence has lasted ``SILENCE_HEARTBEATS`` heartbeat intervals."""
        with self._lock:
            silence_s = self._clock() - self._last_heard
            if self._lost or silence_s <= self._silence_s:
                return
            self._lost = True
        log.warning(
            "No answer from the active controller for %.1fs (no heartbeat answered, no metadata "
            "fetched): the controller fences this broker once its broker.session.timeout.ms "
            "passes without a heartbeat, and what it owes this broker (DisableRemoteTopic, "
            "assignments) waits until they hear each other again",
            silence_s,
        )
