"""Which brokers are alive, as the active controller sees them.

A broker registers over ControllerService and heartbeats; one whose heartbeats lapse for the
session timeout is fenced (no requests are sent to it; what it owes stays owed) until it
heartbeats or registers again. Where brokers register themselves in the store (ZooKeeper's
ephemeral ``/brokers/ids`` znodes), the store's live set is the truth and ``replace_live``
mirrors it. Not thread-safe: the broker registry calls it under the term's lock.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping

from tiered.cluster.model import BrokerRegistration


class BrokerLiveness:
    def __init__(self, session_timeout_s: float, clock: Callable[[], float] = time.monotonic):
        self._session_timeout_s = session_timeout_s
        self._clock = clock
        self.registrations: dict[int, BrokerRegistration] = {}
        self._deadline: dict[int, float] = {}  # broker -> when it is fenced without a heartbeat

    def adopt(self, registrations: Mapping[int, BrokerRegistration]) -> None:
        """A newly active controller's starting view: every registered broker is presumed alive
        for one session timeout, so that outstanding work is re-sent at once."""
        now = self._clock()
        self.registrations = dict(registrations)
        self._deadline = dict.fromkeys(registrations, now + self._session_timeout_s)

    def register(self, registration: BrokerRegistration) -> bool:
        """Returns True for a new incarnation (a restarted broker: everything it hosts must be
        re-sent)."""
        previous = self.registrations.get(registration.broker_id)
        self.registrations[registration.broker_id] = registration
        self._deadline[registration.broker_id] = self._clock() + self._session_timeout_s
        return previous is None or previous.incarnation_id != registration.incarnation_id

    def heartbeat(self, broker_id: int, incarnation_id: uuid.UUID) -> bool:
        """False when the broker is unknown or this is an old incarnation: it must register."""
        registration = self.registrations.get(broker_id)
        if registration is None or registration.incarnation_id != incarnation_id:
            return False
        self._deadline[broker_id] = self._clock() + self._session_timeout_s
        return True

    def replace_live(self, live: Mapping[int, BrokerRegistration]) -> set[int]:
        """ZooKeeper mode: the live set is exactly ``live``. Returns the brokers that are new or
        have a new incarnation."""
        changed = {
            b
            for b, r in live.items()
            if b not in self.registrations
            or self.registrations[b].incarnation_id != r.incarnation_id
        }
        self.registrations = dict(live)
        self._deadline = dict.fromkeys(live, float("inf"))
        return changed

    def is_live(self, broker_id: int) -> bool:
        return self._deadline.get(broker_id, 0.0) > self._clock()

    def live(self) -> dict[int, BrokerRegistration]:
        now = self._clock()
        return {b: r for b, r in self.registrations.items() if self._deadline.get(b, 0.0) > now}

    def fenced(self) -> set[int]:
        return set(self.registrations) - set(self.live())
