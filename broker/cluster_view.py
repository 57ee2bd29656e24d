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

The controller is given ``answer_deadline_s`` (``CONTROLLER_ANSWER_DEADLINE_S``) to answer; past
it, or when it fails, a request is answered from the last view this broker knows, as Kafka's
brokers answer from their metadata cache: a broker cut off from the active controller goes on
serving its clients, stale but answering. The call goes on in the background and its answer,
when it comes, is kept. While the controller is silent no request waits: each is answered from
the last view at once, and the controller is asked again in the background (a call at most every
``answer_deadline_s``, at most ``_SILENT_CALLS`` of them unanswered at a time). A name the last
view has no placement for is LEADER_NOT_AVAILABLE (retriable, and nothing is auto-created on it),
and with no view at all the request fails as when the controller cannot be reached. The broker
logs once when it starts answering from the last view and once when the controller answers again.
Callers that must see the controller's present answer (the offsets' upkeep, which removes the
offsets of topics a listing lacks) ask with ``stale_ok=False``: they wait for the controller.

What is made durable from a topic's id (a committed offset is stamped with it) must not predate
what the request's client could have seen: a client told a delete and re-create succeeded, then
committing, must not have its offset stamped with the deleted topic's id, which OffsetFetch and
the offsets' upkeep treat as gone. Such callers ask ``current``: a lookup by name sent after
their call began, shared by the callers that arrive while another is under way (one lookup in
flight, the next gathering every name asked meanwhile), falling back to the last view known, as
``topics`` does, only when the controller does not answer within the deadline.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.admin_forwarder import ControllerAdmin
from tiered.cluster.serde import broker_endpoints_from_proto, uuid_from_bytes
from tiered.errors import ErrorCode, TieredError
from tiered.net import Listener
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb

__all__ = [
    "CONTROLLER_ANSWER_DEADLINE_S",
    "ClusterView",
    "KafkaCluster",
    "TopicPlacement",
    "controller_id",
]

log = logging.getLogger(__name__)

CONTROLLER_ANSWER_DEADLINE_S = 2.0
"""How long a Kafka request waits for the active controller's DescribeMetadata answer before it
is answered from the last view this broker knows: well above a healthy controller's answer, and
well below clients' request timeouts (30 s in librdkafka and the Java clients), so that a broker
cut off from the controller answers its clients before they give up on it."""


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
_SILENT_CALLS = 4  # unanswered calls at most while the controller is silent (each a thread)
_NOT_FRESH = -math.inf  # the time of a kept answer that may predate an ``invalidate``

_Answer = KafkaCluster | TieredError
_CallKey = tuple[str, ...] | None  # the names asked for; None for the listing
_Names = list[str] | None  # the names a lookup asked for; None for the listing


@dataclass
class _Lookup:
    """One DescribeMetadata by name for ``current``, not sent until the one under way is
    answered: the callers arriving meanwhile add their names and wait for it together."""

    names: set[str] = field(default_factory=set)
    done: threading.Event = field(default_factory=threading.Event)
    answer: _Answer | None = None


@dataclass
class _Call:
    """One DescribeMetadata call to the controller, made in the background; requests asking the
    same wait for it together."""

    started: float
    generation: int  # the view's when it started: a later ``invalidate`` makes it out of date
    done: threading.Event = field(default_factory=threading.Event)
    answer: _Answer | None = None


class ClusterView:
    """Metadata for the Kafka APIs, through ``controller``. Thread-safe."""

    def __init__(
        self,
        controller: ControllerAdmin,
        max_age_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        unknown_max_age_s: float = 0.25,
        answer_deadline_s: float = CONTROLLER_ANSWER_DEADLINE_S,
    ) -> None:
        self._controller = controller
        self._max_age_s = max_age_s
        self._unknown_max_age_s = unknown_max_age_s
        self._answer_deadline_s = answer_deadline_s
        self._clock = clock
        self._lock = threading.Lock()
        self._listing: tuple[float, KafkaCluster] | None = None
        # name -> (when, answer) from lookups by name: a placement is fresh ``max_age_s``, a
        # does-not-exist ``unknown_max_age_s``, any other error is not kept; stale placements
        # stay as the last view known
        self._named: dict[str, tuple[float, TopicPlacement | TieredError]] = {}
        # (when, answer) of the last lookup by name: the brokers that go with kept answers
        self._named_brokers: tuple[float, KafkaCluster] | None = None
        self._generation = 0  # raised by invalidate
        self._calls: dict[_CallKey, _Call] = {}  # unanswered calls, by what they ask
        self._last_call_started = _NOT_FRESH
        self._stale_since: float | None = None  # while requests are answered from the last view
        self._next_lookup: _Lookup | None = None  # for ``current``: callers join it until sent
        self._looking_up = False  # a lookup for ``current`` is under way

    def everything(self, *, stale_ok: bool = True) -> KafkaCluster:
        """Every topic: fresh, else the controller's answer within the deadline, else (when
        ``stale_ok``) the last view known. Raises ``TieredError`` when none of them can say."""
        fresh = self._fresh_listing()
        if fresh is not None:
            return fresh
        request = pb.DescribeMetadataRequest(all_topics=True)
        if not stale_ok:
            return self._ask_and_wait(request, None)
        answer = self._ask(None, request)
        if isinstance(answer, KafkaCluster):
            return answer
        return self._last_known(None, answer)

    def topics(self, names: Sequence[str], *, stale_ok: bool = True) -> KafkaCluster:
        """The named topics (each a placement or its error, such as UNKNOWN_TOPIC_OR_PARTITION)
        and the live brokers: fresh, else the controller's answer within the deadline, else
        (when ``stale_ok``) the last view known, where a name without a placement is
        LEADER_NOT_AVAILABLE. Raises ``TieredError`` when none of them can say."""
        wanted = list(dict.fromkeys(names))
        kept = self._kept(wanted)
        if kept is not None:
            return kept
        request = pb.DescribeMetadataRequest(topics=wanted)
        if not stale_ok:
            return self._ask_and_wait(request, wanted)
        answer = self._ask(tuple(wanted), request)
        if isinstance(answer, KafkaCluster):
            return answer
        return self._last_known(wanted, answer)

    def current(self, names: Sequence[str]) -> KafkaCluster:
        """The named topics as in ``topics``, from a lookup the controller is sent after this call
        began (so no older than anything a client saw answered before its request), shared with
        the callers of the moment. When the controller fails or does not answer within the
        deadline (while it is silent: at once), the last view known, as ``topics``. Raises
        ``TieredError`` when there is no view at all."""
        wanted = list(dict.fromkeys(names))
        with self._lock:
            lookup = self._next_lookup
            if lookup is None:
                lookup = self._next_lookup = _Lookup()
            lookup.names.update(wanted)
            start, self._looking_up = not self._looking_up, True
            silent = self._stale_since is not None
        if start:
            threading.Thread(target=self._look_up, name="cluster-view-current", daemon=True).start()
        lookup.done.wait(0 if silent else self._answer_deadline_s)
        answer = lookup.answer
        if isinstance(answer, KafkaCluster):
            topics = {n: answer.topics[n] for n in wanted if n in answer.topics}
            return KafkaCluster(answer.cluster_id, answer.endpoints, topics)
        return self._last_known(wanted, answer)

    def invalidate(self) -> None:
        """Nothing kept is fresh any more (a topic was created or deleted through this broker);
        it stays the last view known."""
        with self._lock:
            if self._listing is not None:
                self._listing = (_NOT_FRESH, self._listing[1])
            self._named = {
                n: (_NOT_FRESH, a)
                for n, (_, a) in self._named.items()
                if isinstance(a, TopicPlacement)
            }
            if self._named_brokers is not None:
                self._named_brokers = (_NOT_FRESH, self._named_brokers[1])
            self._generation += 1

    # ------------------------------------------------------------------------- the controller

    def _ask_and_wait(self, request: pb.DescribeMetadataRequest, names: _Names) -> KafkaCluster:
        """The controller's answer now, however long it takes (kept)."""
        with self._lock:
            started, generation = self._clock(), self._generation
        cluster = self._describe(request)
        with self._lock:
            self._keep(started, generation, names, cluster)
            self._answered()
        return cluster

    def _ask(self, key: _CallKey, request: pb.DescribeMetadataRequest) -> _Answer | None:
        """The controller's answer (kept) or its failure, if it comes within the deadline; else
        None, the call going on in the background (its answer kept when it comes). While the
        controller is silent, None at once, a call started only if one may be."""
        with self._lock:
            call = self._calls.get(key)
            if call is not None and call.generation != self._generation:
                call = None  # it may predate a change made here: not joined
            now = self._clock()
            if call is None and self._may_call(now):
                call = self._calls[key] = _Call(now, self._generation)
                self._last_call_started = now
                threading.Thread(
                    target=self._run, args=(key, call, request), name="cluster-view", daemon=True
                ).start()
            if call is None or self._stale_since is not None:
                return None
        if call.done.wait(self._answer_deadline_s):
            return call.answer
        return None

    def _may_call(self, now: float) -> bool:
        """While the controller is silent, a call at most every deadline, and few unanswered
        (each holds a thread until the controller answers or the call times out)."""
        if self._stale_since is None:
            return True
        return (
            len(self._calls) < _SILENT_CALLS
            and now - self._last_call_started >= self._answer_deadline_s
        )

    def _look_up(self) -> None:
        """Sends ``current``'s lookups one at a time until none is waiting to be sent."""
        while True:
            with self._lock:
                lookup = self._next_lookup
                if lookup is None:
                    self._looking_up = False
                    return
                self._next_lookup = None
                started, generation = self._clock(), self._generation
            names = sorted(lookup.names)
            answer = self._answer(pb.DescribeMetadataRequest(topics=names))
            if isinstance(answer, KafkaCluster):
                with self._lock:
                    self._keep(started, generation, names, answer)
                    self._answered()
            lookup.answer = answer
            lookup.done.set()

    def _run(self, key: _CallKey, call: _Call, request: pb.DescribeMetadataRequest) -> None:
        answer = self._answer(request)
        with self._lock:
            if self._calls.get(key) is call:
                del self._calls[key]
            if isinstance(answer, KafkaCluster):
                names = None if key is None else list(key)
                self._keep(call.started, call.generation, names, answer)
                self._answered()
        call.answer = answer
        call.done.set()

    def _answer(self, request: pb.DescribeMetadataRequest) -> _Answer:
        """The controller's answer, or its failure."""
        try:
            return self._describe(request)
        except TieredError as e:
            return e
        except Exception as e:  # a closed channel at shutdown: a failure like any other
            return TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, f"DescribeMetadata: {e!r}")

    def _answered(self) -> None:
        """The controller answered (under ``_lock``): fresh views from now on."""
        if self._stale_since is not None:
            log.info(
                "The active controller answers DescribeMetadata again: Kafka requests are "
                "answered from its view again, after %.1fs from the last view known",
                self._clock() - self._stale_since,
            )
            self._stale_since = None

    def _describe(self, request: pb.DescribeMetadataRequest) -> KafkaCluster:
        response = self._controller.call("DescribeMetadata", request, pb.DescribeMetadataResponse)
        error = error_from_proto(response.error)
        if error is not None:
            raise error
        return _cluster_from_proto(response)

    # ----------------------------------------------------------------------- what is kept

    def _keep(self, started: float, generation: int, names: _Names, cluster: KafkaCluster) -> None:
        """Keeps an answer (under ``_lock``): fresh from ``started``, unless an ``invalidate``
        came since the call began (it may predate the change: only the last view known)."""
        when = started if generation == self._generation else _NOT_FRESH
        if names is None:
            if self._listing is None or when >= self._listing[0]:
                self._listing = (when, cluster)
        else:
            self._remember(when, cluster)

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
                    return None
                found[name] = answer
        if brokers is None:
            return None
        return KafkaCluster(brokers.cluster_id, brokers.endpoints, found)

    def _remember(self, when: float, cluster: KafkaCluster) -> None:
        """Keeps a lookup by name's answers (under ``_lock``)."""
        if len(self._named) > _MAX_NAMED_ANSWERS:
            horizon = max(self._max_age_s, self._unknown_max_age_s)
            self._named = {n: e for n, e in self._named.items() if when - e[0] <= horizon}
        for name, topic in cluster.topics.items():
            if _awaits_hosting(topic):
                self._named.pop(name, None)
            elif isinstance(topic, TopicPlacement) or (
                topic.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ):
                self._named[name] = (when, topic)
            else:
                self._named.pop(name, None)
        if self._named_brokers is None or when >= self._named_brokers[0]:
            self._named_brokers = (when, cluster)

    def _fresh_listing(self) -> KafkaCluster | None:
        with self._lock:
            listing = self._listing
        if listing is None or self._clock() - listing[0] > self._max_age_s:
            return None
        return listing[1]

    def _last_known(self, names: _Names, failure: TieredError | None) -> KafkaCluster:
        """``names`` (every topic when None) as the last view known has them, a name without a
        placement there LEADER_NOT_AVAILABLE; logged once until the controller answers again.
        Raises ``failure`` (or a timeout) when there is no view at all."""
        with self._lock:
            listing, named_brokers = self._listing, self._named_brokers
            newest = max(
                (kept for kept in (listing, named_brokers) if kept is not None),
                key=lambda kept: kept[0],
                default=None,
            )
            if newest is None:
                raise failure or TieredError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"the active controller did not answer within {self._answer_deadline_s}s, "
                    "and this broker has no view of the cluster yet",
                )
            topics: dict[str, TopicPlacement | TieredError] = {}
            for name in self._known_names(listing) if names is None else names:
                found = self._last_placement(name, listing)
                if found is not None:
                    topics[name] = found
                elif names is not None:
                    topics[name] = _not_in_last_view(name)
            if self._stale_since is None:
                self._stale_since = self._clock()
                log.warning(
                    "The active controller did not answer DescribeMetadata within %.1fs (%s): "
                    "Kafka requests are answered from the last view known until it does",
                    self._answer_deadline_s,
                    failure or "no answer yet",
                )
        cluster = newest[1]
        return KafkaCluster(cluster.cluster_id, cluster.endpoints, topics)

    def _known_names(self, listing: tuple[float, KafkaCluster] | None) -> set[str]:
        """Every name the listing or a lookup by name told of (under ``_lock``)."""
        return {*(() if listing is None else listing[1].topics), *self._named}

    def _last_placement(
        self, name: str, listing: tuple[float, KafkaCluster] | None
    ) -> TopicPlacement | None:
        """The placement of ``name`` in the newer of the listing and the lookup by name that
        told of it, if that says it exists (under ``_lock``)."""
        listed_at, listed = _NOT_FRESH, None
        if listing is not None:
            listed_at, listed = listing[0], listing[1].topics.get(name)
        entry = self._named.get(name)
        found = entry[1] if entry is not None and entry[0] >= listed_at else listed
        return found if isinstance(found, TopicPlacement) else None


def _not_in_last_view(name: str) -> TieredError:
    return TieredError(
        ErrorCode.LEADER_NOT_AVAILABLE,
        f"the active controller does not answer, and the last view this broker knows has no "
        f"placement of topic {name!r}",
    )
