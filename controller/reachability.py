"""When the active controller last reached each broker: the figure behind ``tiered-cluster
status``'s ``reachable`` and the metric ``kafka_controller_kafkacontroller_timesincelastreachedms``.

A broker is *reached* at a moment when

- a call from this controller to it is answered (DisableRemoteTopic, AssignPartitions,
  RemovePartitions; any answer, errors included: the broker got the call). A call that fails with
  gRPC ``UNAVAILABLE`` or ``DEADLINE_EXCEEDED`` (nothing came back within
  ``controller.request.timeout.ms``) is unanswered;
- or the broker's RegisterBroker or BrokerHeartbeat reaches this controller (KRaft mode), or its
  ZooKeeper session holds its registration (ZooKeeper mode: the session is the broker's heartbeat,
  and the controller hears of its loss when ZooKeeper expires it). Neither counts while this
  controller's last call to the broker went unanswered and it still has something to send it: a
  broker that calls in but cannot be called (a one-way cut) still cannot be sent what it owes, so
  only an answered call reaches it again (the controller's sender keeps retrying what the broker
  owes). Once nothing is owed to the broker, being heard counts again.

The time since a broker was last reached is now minus the latest such moment; a broker this
controller has not reached in its term counts from the term's start. Thread-safe: the channels
record calls from their own threads, the registry records heartbeats under the term's lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Reach:
    """One broker as DescribeCluster reports it: seconds since it was last reached, and whether
    that is within ``controller.request.timeout.ms`` (beyond it, it is *unreachable*: what it
    owes waits)."""

    since_reached_s: float
    reachable: bool


class BrokerReachability:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._term_began = clock()
        self._reached: dict[int, float] = {}  # broker -> when last reached
        self._unanswered: set[int] = set()  # brokers whose last call went unanswered
        self._held: set[int] = set()  # brokers whose ZooKeeper session holds their registration

    def begin_term(self) -> None:
        """A term begins: nothing is known of its brokers yet."""
        with self._lock:
            self._term_began = self._clock()
            self._reached.clear()
            self._unanswered.clear()
            self._held.clear()

    def answered(self, broker_id: int) -> None:
        """A call from this controller to the broker was answered."""
        with self._lock:
            self._reached[broker_id] = self._clock()
            self._unanswered.discard(broker_id)

    def unanswered(self, broker_id: int) -> None:
        """A call from this controller to the broker got no answer (unavailable, timed out)."""
        with self._lock:
            if broker_id in self._held and broker_id not in self._unanswered:
                self._reached[broker_id] = self._clock()  # its session held it until now
            self._unanswered.add(broker_id)

    def nothing_owed(self, broker_id: int) -> None:
        """This controller has nothing to send the broker (or it is not live): its last
        unanswered call no longer stops what it says from counting."""
        with self._lock:
            self._unanswered.discard(broker_id)

    def heard(self, broker_id: int) -> None:
        """The broker's RegisterBroker or BrokerHeartbeat reached this controller."""
        with self._lock:
            if broker_id not in self._unanswered:
                self._reached[broker_id] = self._clock()

    def hold(self, broker_ids: Iterable[int]) -> None:
        """ZooKeeper mode: exactly these brokers' sessions hold their registrations now. One that
        drops out was last heard now."""
        held = set(broker_ids)
        with self._lock:
            now = self._clock()
            for broker_id in self._held - held:
                if broker_id not in self._unanswered:
                    self._reached[broker_id] = now
            self._held = held

    def since_reached_s(self, broker_id: int) -> float:
        """Seconds since the broker was last reached (since the term began if it was not)."""
        with self._lock:
            now = self._clock()
            if broker_id in self._held and broker_id not in self._unanswered:
                return 0.0
            return max(0.0, now - self._reached.get(broker_id, self._term_began))

    def reach(self, broker_id: int, request_timeout_s: float) -> Reach:
        since = self.since_reached_s(broker_id)
        return Reach(since, since <= request_timeout_s)
