"""The cluster as the Kafka APIs of a broker see it: live brokers with their Kafka endpoints and
topics with their placement, read from the active controller's image (AdminService
DescribeMetadata, which asks no broker: cheap with 100k topics).

A listing of every topic is kept for ``max_age_s`` and shared by every request meanwhile (many
clients refreshing metadata at once cost the controller one call); requests for named topics use
a fresh listing when it has every name, else ask for those names alone, so that a topic created
through another broker is known by name as soon as its creation was answered (kcat, say, gives
up on a topic it is told does not exist). A topic created or deleted through this broker drops
the listing (``invalidate``), so its own clients see the change at once; others see a deletion
and the full listing within ``max_age_s``, as Kafka brokers learn metadata a moment late. A name
the controller said does not exist is answered so again for ``unknown_max_age_s`` (0.25 s)
without asking, so that a client retrying a missing topic in a loop does not become a loop of
controller calls.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from broker.admin_forwarder import ControllerAdmin
from tiered.cluster.serde import broker_endpoints_from_proto, uuid_from_bytes
from tiered.errors import ErrorCode, TieredError
from tiered.net import Listener
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = ["ClusterView", "KafkaCluster", "TopicPlacement", "controller_id"]


@dataclass(frozen=True, slots=True)
class TopicPlacement:
    name: str
    topic_id: uuid.UUID
    replicas: tuple[int, ...]  # replicas[p]: the broker hosting (leading) partition p


@dataclass(frozen=True)
class KafkaCluster:
    """One answer of the controller: the live brokers that have a Kafka listener (each with its
    endpoints, as advertised), and topics."""

    cluster_id: str
    endpoints: Mapping[int, tuple[Listener, ...]]
    topics: Mapping[str, TopicPlacement | TieredError]  # by name; an asked-for name may fail

    def brokers(self, listener: str) -> dict[int, Listener]:
        """The live brokers as clients reach them on ``listener``, by id: Kafka answers with the
        endpoints of the listener a request came in on, leaving out brokers without one."""
        found: dict[int, Listener] = {}
        for broker_id, endpoints in self.endpoints.items():
            endpoint = next((e for e in endpoints if e.name == listener), None)
            if endpoint is not None:
                found[broker_id] = endpoint
        return found

    def by_id(self, topic_id: uuid.UUID) -> TopicPlacement | None:
        return next(
            (
                t
                for t in self.topics.values()
                if isinstance(t, TopicPlacement) and t.topic_id == topic_id
            ),
            None,
        )


def controller_id(brokers: Mapping[int, Listener]) -> int:
    """The live broker Kafka clients send admin requests to, of those they are told about: the
    lowest id (any broker forwards them to the active controller); -1 when none is live."""
    return min(brokers, default=-1)


def _cluster_from_proto(response: pb.DescribeMetadataResponse) -> KafkaCluster:
    endpoints: dict[int, tuple[Listener, ...]] = {}
    for broker in response.brokers:
        found = broker_endpoints_from_proto(broker.kafka_endpoints)
        if found:
            endpoints[broker.broker_id] = tuple(found)
    topics: dict[str, TopicPlacement | TieredError] = {}
    for topic in response.topics:
        error = error_from_proto(topic.error)
        topics[topic.name] = error or TopicPlacement(
            topic.name, uuid_from_bytes(topic.topic_id, "topic_id"), tuple(topic.replicas)
        )
    return KafkaCluster(response.cluster_id, endpoints, topics)


_MAX_UNKNOWN_NAMES = 10_000


class ClusterView:
    """Metadata for the Kafka APIs, through ``controller``. Thread-safe."""

    def __init__(
        self,
        controller: ControllerAdmin,
        max_age_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        unknown_max_age_s: float = 0.25,
    ) -> None:
        self._controller = controller
        self._max_age_s = max_age_s
        self._unknown_max_age_s = unknown_max_age_s
        # name -> (when, error): names the controller said do not exist. A client asking for
        # one in a loop (a deleted topic, a typo) costs the controller one call per name per
        # ``unknown_max_age_s`` rather than one per request; short, so that a topic created
        # through another broker right after is soon known here.
        self._unknown: dict[str, tuple[float, TieredError]] = {}
        self._clock = clock
        self._lock = threading.Lock()
        self._listing_lock = threading.Lock()  # one listing call at a time
        self._listing: tuple[float, KafkaCluster] | None = None
        self._generation = 0  # raised by invalidate

    def everything(self) -> KafkaCluster:
        """Every topic. Raises ``TieredError`` when the controller cannot say."""
        fresh = self._fresh_listing()
        if fresh is not None:
            return fresh
        with self._listing_lock:
            fresh = self._fresh_listing()  # another thread may have listed meanwhile
            if fresh is not None:
                return fresh
            with self._lock:
                started, generation = self._clock(), self._generation
            cluster = self._describe(pb.DescribeMetadataRequest(all_topics=True))
            with self._lock:
                if generation == self._generation:  # else it may predate a change: not kept
                    self._listing = (started, cluster)
            return cluster

    def topics(self, names: Sequence[str]) -> KafkaCluster:
        """The named topics (each a placement or its error, such as UNKNOWN_TOPIC_OR_PARTITION)
        and the live brokers. Raises ``TieredError`` when the controller cannot say."""
        fresh = self._fresh_listing()
        if fresh is not None:
            known = {n: fresh.topics[n] for n in names if n in fresh.topics}
            known.update(self._recently_unknown([n for n in names if n not in known]))
            if len(known) == len(set(names)):
                return KafkaCluster(fresh.cluster_id, fresh.endpoints, known)
        with self._lock:
            started = self._clock()
        cluster = self._describe(pb.DescribeMetadataRequest(topics=list(dict.fromkeys(names))))
        with self._lock:
            if len(self._unknown) > _MAX_UNKNOWN_NAMES:  # names asked once each, e.g. typos
                self._unknown = {
                    n: e
                    for n, e in self._unknown.items()
                    if started - e[0] <= self._unknown_max_age_s
                }
            for name, topic in cluster.topics.items():
                if (
                    isinstance(topic, TieredError)
                    and topic.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                ):
                    self._unknown[name] = (started, topic)
                else:
                    self._unknown.pop(name, None)
        return cluster

    def invalidate(self) -> None:
        """Forget the listing (a topic was created or deleted through this broker)."""
        with self._lock:
            self._listing = None
            self._unknown.clear()
            self._generation += 1

    def _recently_unknown(self, names: Sequence[str]) -> dict[str, TieredError]:
        """Those of ``names`` the controller said do not exist within ``unknown_max_age_s``."""
        now, found = self._clock(), {}
        with self._lock:
            for name in names:
                entry = self._unknown.get(name)
                if entry is None:
                    continue
                if now - entry[0] > self._unknown_max_age_s:
                    del self._unknown[name]  # expired entries go when next asked for
                else:
                    found[name] = entry[1]
        return found

    def _fresh_listing(self) -> KafkaCluster | None:
        with self._lock:
            listing = self._listing
        if listing is None or self._clock() - listing[0] > self._max_age_s:
            return None
        return listing[1]

    def _describe(self, request: pb.DescribeMetadataRequest) -> KafkaCluster:
        response = self._controller.call("DescribeMetadata", request, pb.DescribeMetadataResponse)
        error = error_from_proto(response.error)
        if error is not None:
            raise error
        return _cluster_from_proto(response)
