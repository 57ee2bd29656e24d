"""The brokers as the active controller sees them: who is alive, and a channel to each.

Liveness comes from RegisterBroker and heartbeats, or, for a store whose brokers register
themselves (``MetadataStore.watch_live_brokers``), from the store's live set. Each registered
broker gets a ``BrokerChannel``, which pulls what the broker is owed from ``BrokerWork``; this
wakes the channels when there may be something to send (a broker registered or came back, work
was owed) and tells ``BrokerWork`` of a broker's new incarnation. When each broker was last reached
is kept by ``BrokerReachability``: the channels record their calls, this records what the brokers
say (registrations, heartbeats, the store's live set). Every method takes the term's lock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping

from controller.broker_channel import BrokerChannel
from controller.broker_work import BrokerWork
from controller.brokers import BrokerLiveness
from controller.config import ControllerConfig
from controller.leadership import Term
from controller.metrics import ControllerMetrics
from controller.reachability import BrokerReachability, Reach
from controller.store import MetadataStore
from tiered.cluster.model import BrokerRegistration, MetadataImage
from tiered.errors import ErrorCode, TieredError

log = logging.getLogger(__name__)


class BrokerRegistry:
    def __init__(
        self,
        config: ControllerConfig,
        store: MetadataStore,
        term: Term,
        work: BrokerWork,
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._store = store
        self._term = term
        self.liveness = BrokerLiveness(config.broker_session_timeout_s)
        self.reachability = BrokerReachability()
        self._channels: dict[int, BrokerChannel] = {}
        # Whether the store's brokers register themselves: learnt once, from the watch it sets.
        self._self_registering: bool | None = None
        self._store_live: dict[int, BrokerRegistration] = {}  # kept while standing by too
        self._work = work

    # ----------------------------------------------------------------------------- terms

    def take_over(self, image: MetadataImage) -> None:
        """As a term begins (under the lock): every registered broker is presumed alive for a
        session (or, where brokers register themselves, the store's live set will say)."""
        self.reachability.begin_term()
        if self._self_registering is None:
            # The store's watch calls back from a thread of its own, which waits for the lock.
            self._self_registering = self._store.watch_live_brokers(self._on_live_brokers)
        if self._self_registering:
            self.liveness = BrokerLiveness(self._config.broker_session_timeout_s)
        else:
            self.liveness.adopt(image.brokers)

    def serve(self) -> None:
        """Once the term's epoch is published: starts a channel to every registered broker."""
        with self._term.lock:
            if self._self_registering:
                self._on_live_brokers(self._store_live)
            for broker_id in self.liveness.registrations:
                self._channel(broker_id).wake()

    def stand_down(self) -> None:
        """As a term ends: closes every channel (outside the lock: their threads take it)."""
        with self._term.lock:
            channels, self._channels = self._channels, {}
        for channel in channels.values():
            channel.close()

    # ----------------------------------------------------------------------------- liveness

    def register(self, registration: BrokerRegistration) -> int:
        """A broker (re)registers over ControllerService. Returns the controller epoch."""
        endpoints = [(registration.host, registration.port)] + [
            (e.host, e.port) for e in registration.kafka_endpoints
        ]
        if not all(host and 0 < port < 65536 for host, port in endpoints):
            raise ValueError(
                "a broker registration needs a host and a port in 1..65535, and so does each of "
                "its Kafka endpoints"
            )
        with self._term.lock:
            epoch = self._term.require_active()
            image = self._term.image
            if image.brokers.get(registration.broker_id) != registration:
                self._term.persist(lambda: self._store.register_broker(registration))
                image.brokers[registration.broker_id] = registration
            self.reachability.heard(registration.broker_id)
            if self.liveness.register(registration):
                log.info(
                    "Broker %d registered at %s (incarnation %s)",
                    registration.broker_id,
                    registration.endpoint,
                    registration.incarnation_id,
                )
            self._came_back(registration.broker_id)
            return epoch

    def heartbeat(self, broker_id: int, incarnation_id: uuid.UUID) -> int:
        """Returns the controller epoch; STALE_BROKER_EPOCH when the broker must register."""
        with self._term.lock:
            epoch = self._term.require_active()
            was_live = self.liveness.is_live(broker_id)
            if not self.liveness.heartbeat(broker_id, incarnation_id):
                raise TieredError(
                    ErrorCode.STALE_BROKER_EPOCH,
                    f"broker {broker_id} incarnation {incarnation_id} is not registered; register",
                )
            self.reachability.heard(broker_id)
            if not was_live:
                log.info("Broker %d is alive again (unfenced)", broker_id)
                self._channel(broker_id).wake()
            return epoch

    def _on_live_brokers(self, live: Mapping[int, BrokerRegistration]) -> None:
        """The store's live registrations changed (brokers that register themselves)."""
        with self._term.lock:
            self._store_live = dict(live)
            if self._term.active_epoch is None:
                return
            changed = self.liveness.replace_live(live)
            self.reachability.hold(live)
            self._term.image.brokers = dict(live)
            for broker_id in changed:
                log.info("Broker %d is registered at %s", broker_id, live[broker_id].endpoint)
                self._came_back(broker_id)

    def _came_back(self, broker_id: int) -> None:
        """A new broker incarnation: everything it hosts is owed again, from a fresh backoff."""
        self._work.broker_came_back(broker_id)
        channel = self._channel(broker_id)
        channel.reset_backoff()
        channel.wake()

    def live_ids(self) -> list[int]:
        """Ids of the live (unfenced) brokers, in order."""
        with self._term.lock:
            return sorted(self.liveness.live())

    def endpoints(self) -> dict[int, str]:
        """Every registered broker's endpoint, fenced ones included."""
        with self._term.lock:
            return {b: r.endpoint for b, r in self.liveness.registrations.items()}

    def registrations(self) -> list[tuple[BrokerRegistration, bool]]:
        """(registration, fenced) of every registered broker, by id."""
        with self._term.lock:
            live = self.liveness.live()
            return [(r, b not in live) for b, r in sorted(self.liveness.registrations.items())]

    def reach(self) -> dict[int, Reach]:
        """When each registered broker was last reached, and whether it is reachable: reached
        within ``controller.request.timeout.ms`` (``BrokerReachability``)."""
        with self._term.lock:
            timeout_s = self._config.request_timeout_s
            return {b: self.reachability.reach(b, timeout_s) for b in self.liveness.registrations}

    def live_endpoint(self, broker_id: int) -> str | None:
        """Where a live broker is reached; None for one that is fenced or unknown."""
        with self._term.lock:
            registration = self.liveness.registrations.get(broker_id)
            if registration is None or not self.liveness.is_live(broker_id):
                return None
            return registration.endpoint

    def wake(self, brokers: Iterable[int]) -> None:
        """The channels of these brokers look for work again."""
        with self._term.lock:
            self._wake(set(brokers))

    def _wake(self, brokers: set[int]) -> None:
        for broker_id in brokers:
            if broker_id in self.liveness.registrations:
                self._channel(broker_id).wake()

    def _channel(self, broker_id: int) -> BrokerChannel:
        channel = self._channels.get(broker_id)
        if channel is None:
            channel = BrokerChannel(
                broker_id,
                self._work,
                self._config.backoff,
                self._config.request_timeout_s,
                self._metrics,
                credentials=self._config.grpc_security.channel_credentials,
                reachability=self.reachability,
            )
            self._channels[broker_id] = channel
        return channel
