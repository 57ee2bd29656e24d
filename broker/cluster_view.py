"""The cluster as the Kafka APIs of a broker see it: live brokers with their Kafka endpoints and
topics with their placement, read from the active controller's image (AdminService
DescribeMetadata, which asks no broker: cheap with 100k topics).

A listing of every topic is kept for ``max_age_s`` and shared by every request meanwhile (many
clients refreshing metadata at once cost the controller one call). Requests for named topics use
a fresh listing or a fresh answer by name (also kept ``max_age_s``: a consumer committing offsets
names its topics in every OffsetCommit, and a controller round trip each time would be most of
the commit's latency); names neither has are asked for alone, so that a topic created through
another broker is known by name as soon as its creation was answered (kcat, say, gives up on a
topic it is told does not exist). A topic created or deleted through this broker drops what is
kept (``invalidate``), so its own clients see the change at once; others see a deletion and the
full listing within ``max_age_s``, as Kafka brokers learn metadata a moment late. A name the
controller said does not exist is answered so again for ``unknown_max_age_s`` (0.25 s) without
asking, so that a client retrying a missing topic in a loop does not become a loop of controller
calls.
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
    # partitions whose leader does not host them yet: told without a leader, and never kept
    # (a client waiting for them asks again, and must learn the leader as soon as it hosts)
    unhosted: frozenset[int] = frozenset()


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

    def topic_ids(self) -> dict[str, uuid.UUID]:
        """The id of each topic found, by name (names that failed are left out)."""
        return {n: t.topic_id for n, t in self.topics.items() if isinstance(t, TopicPlacement)}

    def missing_topics(self) -> set[str]:
        """The names the controller said do not exist."""
        return {
            n
            for n, t in self.topics.items()
            if isinstance(t, TieredError) and t.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }

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
            topic.name,
            uuid_from_bytes(topic.topic_id, "topic_id"),
            tuple(topic.replicas),
            frozenset(topic.unhosted_partitions),
        )
    return KafkaCluster(response.cluster_id, endpoints, topics)


def _awaits_hosting(topic: TopicPlacement | TieredError) -> bool:
    return isinstance(topic, TopicPlacement) and bool(topic.unhosted)


_MAX_NAMED_ANSWERS = 100_000  # beyond it, expired answers are dropped (names asked once, typos)


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
        self._clock = clock
        self._lock = threading.Lock()
        self._listing_lock = threading.Lock()  # one listing call at a time
        self._listing: tuple[float, KafkaCluster] | None = None
        # name -> (when, answer) from lookups by name: a placement is kept ``max_age_s``, a
        # does-not-exist ``unknown_max_age_s``, any other error not at all
        self._named: dict[str, tuple[float, TopicPlacement | TieredError]] = {}
        # (when, answer) of the last lookup by name: the brokers that go with kept answers
        self._named_brokers: tuple[float, KafkaCluster] | None = None
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
        wanted = list(dict.fromkeys(names))
        kept = self._kept(wanted)
        if kept is not None:
            return kept
        with self._lock:
            started, generation = self._clock(), self._generation
        cluster = self._describe(pb.DescribeMetadataRequest(topics=wanted))
        with self._lock:
            if generation == self._generation:  # else it may predate a change: not kept
                self._remember(started, cluster)
        return cluster

    def invalidate(self) -> None:
        """Forget what is kept (a topic was created or deleted through this broker)."""
        with self._lock:
            self._listing = None
            self._named.clear()
            self._named_brokers = None
            self._generation += 1

    def _kept(self, names: Sequence[str]) -> KafkaCluster | None:
        """The answer for ``names`` from a fresh listing and fresh answers by name, or None
        when some name has neither."""
        now = self._clock()
        with self._lock:
            listing, named = self._listing, self._named_brokers
            listed: Mapping[str, TopicPlacement | TieredError] = {}
            brokers: KafkaCluster | None = None
            if listing is not None and now - listing[0] <= self._max_age_s:
                listed, brokers = listing[1].topics, listing[1]
            elif named is not None and now - named[0] <= self._max_age_s:
                brokers = named[1]
            found: dict[str, TopicPlacement | TieredError] = {}
            for name in names:
                if name in listed and not _awaits_hosting(listed[name]):
                    found[name] = listed[name]
                    continue
                entry = self._named.get(name)
                if entry is None:
                    return None
                when, answer = entry
                max_age = (
                    self._max_age_s
                    if isinstance(answer, TopicPlacement)
                    else self._unknown_max_age_s
                )
                if now - when > max_age:
                    del self._named[name]  # expired entries go when next asked for
                    return None
                found[name] = answer
        if brokers is None:
            return None
        return KafkaCluster(brokers.cluster_id, brokers.endpoints, found)

    def _remember(self, started: float, cluster: KafkaCluster) -> None:
        """Keeps a lookup by name's answers (under ``_lock``)."""
        if len(self._named) > _MAX_NAMED_ANSWERS:
            horizon = max(self._max_age_s, self._unknown_max_age_s)
            self._named = {n: e for n, e in self._named.items() if started - e[0] <= horizon}
        for name, topic in cluster.topics.items():
            if _awaits_hosting(topic):
                self._named.pop(name, None)
            elif isinstance(topic, TopicPlacement) or (
                topic.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ):
                self._named[name] = (started, topic)
            else:
                self._named.pop(name, None)
        self._named_brokers = (started, cluster)

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
