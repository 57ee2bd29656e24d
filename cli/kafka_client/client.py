"""A small Kafka protocol client for the tools, on kio: the cluster as the brokers' Kafka
listeners show it (Metadata), one connection per broker, a group's coordinator (FindCoordinator
key type 0) and partition leaders' offsets (ListOffsets). The group operations are in
``cli.kafka_client.group_admin``.

A request the coordinator cannot serve now (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE) is retried with ``tiered.retry.RetryPolicy``, finding the coordinator
again each time, as Kafka's AdminClient does; a partition whose leader moved
(NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE) likewise, with fresh metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode as KafkaErrorCode

from cli.kafka_client.client_security import KafkaClientSecurity
from cli.kafka_client.connection import KafkaConnection, kafka_error, open_connection
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.consumer_protocol import TopicPartition
from tiered.kafka.messages import build, nested
from tiered.retry import RetryPolicy
from tiered.retry_policies import kafka_client_retry

__all__ = [
    "COORDINATOR_ERRORS",
    "EARLIEST",
    "LATEST",
    "Broker",
    "KafkaClient",
    "OffsetResult",
    "by_topic",
    "parse_bootstrap",
]

LIST_OFFSETS, METADATA, FIND_COORDINATOR = 2, 3, 10
GROUP_KEY_TYPE = 0
EARLIEST, LATEST = -2, -1  # ListOffsets' timestamps for the log start and end
UNKNOWN_OFFSET = -1
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
    }
)
_LEADER_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE})
_R = TypeVar("_R")

OffsetResult = int | TieredError
"""An offset, or why a partition has none."""


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT]``; INVALID_REQUEST naming ``--bootstrap-server`` otherwise."""
    addresses = []
    for raw in text.split(","):
        host, _, port = raw.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"--bootstrap-server {text!r}: {raw.strip()!r} is not HOST:PORT "
                "(a comma list of the brokers' Kafka listeners)",
            )
        addresses.append((host.strip("[]"), int(port)))
    return addresses


class KafkaClient:
    """Connections to the brokers of one cluster, opened on first use and closed together."""

    def __init__(
        self,
        bootstrap: str,
        security: KafkaClientSecurity | None = None,
        *,
        timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.security = security or KafkaClientSecurity()
        self.timeout_s = timeout_s
        self.retry = retry or kafka_client_retry(timeout_s)
        self._connections: dict[tuple[str, int], KafkaConnection] = {}
        self._coordinators: dict[str, Broker] = {}

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------ connections

    def connection(self, host: str, port: int) -> KafkaConnection:
        connection = self._connections.get((host, port))
        if connection is None:
            connection = open_connection(host, port, self.security, timeout_s=self.timeout_s)
            self._connections[(host, port)] = connection
        return connection

    def forget(self, broker: Broker) -> None:
        """Drops the connection to ``broker`` (it failed; the next use opens a new one)."""
        connection = self._connections.pop((broker.host, broker.port), None)
        if connection is not None:
            connection.close()

    def any_connection(self) -> KafkaConnection:
        """A connection to the first bootstrap address that answers."""
        failures: list[TieredError] = []
        for host, port in self.bootstrap:
            try:
                return self.connection(host, port)
            except TieredError as e:
                if e.code is not ErrorCode.BROKER_NOT_AVAILABLE:
                    raise  # refused (a login, a version): another broker would say the same
                failures.append(e)
        raise TieredError(ErrorCode.BROKER_NOT_AVAILABLE, "; ".join(e.message for e in failures))

    # ------------------------------------------------------------------------ metadata

    def metadata(self, topics: Sequence[str] | None) -> Any:
        """A Metadata response for ``topics`` (None: every topic), never creating one."""
        connection = self.any_connection()
        request_type = connection.request_type(METADATA)
        requested = None
        if topics is not None:
            topic_type = nested(request_type, "MetadataRequestTopic")
            requested = tuple(build(topic_type, name=t, topic_id=None) for t in topics)
        return connection.request(
            METADATA,
            topics=requested,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    def brokers(self) -> list[Broker]:
        answer = self.metadata(())
        return sorted(
            (Broker(int(b.node_id), b.host, int(b.port)) for b in answer.brokers),
            key=lambda b: b.node_id,
        )

    def partitions(self, topics: Iterable[str]) -> dict[str, list[int] | TieredError]:
        """Each topic's partitions, or why it has none here (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
        names = sorted(set(topics))
        found: dict[str, list[int] | TieredError] = {}
        for topic in self.metadata(names).topics:
            if topic.error_code != KafkaErrorCode.none:
                found[topic.name] = kafka_error(
                    topic.error_code, f"topic {topic.name!r}: {topic.error_code.name.upper()}"
                )
            else:
                found[topic.name] = sorted(int(p.partition_index) for p in topic.partitions)
        return found

    def _leaders(self, topics: Iterable[str]) -> dict[TopicPartition, Broker]:
        answer = self.metadata(sorted(set(topics)))
        brokers = {
            int(b.node_id): Broker(int(b.node_id), b.host, int(b.port)) for b in answer.brokers
        }
        leaders = {}
        for topic in answer.topics:
            for partition in topic.partitions:
                broker = brokers.get(int(partition.leader_id))
                if broker is not None:
                    leaders[(topic.name, int(partition.partition_index))] = broker
        return leaders

    # ------------------------------------------------------------------------ coordinator

    def find_coordinator(self, group: str) -> Broker:
        connection = self.any_connection()
        version = connection.versions.get(FIND_COORDINATOR, -1)
        if version >= 4:
            answer = connection.request(
                FIND_COORDINATOR, key_type=GROUP_KEY_TYPE, coordinator_keys=(group,)
            )
            (found,) = answer.coordinators
        else:
            found = connection.request(FIND_COORDINATOR, key=group, key_type=GROUP_KEY_TYPE)
        if found.error_code != KafkaErrorCode.none:
            raise kafka_error(
                found.error_code,
                f"no coordinator for group {group!r}: "
                f"{found.error_message or found.error_code.name.upper()}",
            )
        return Broker(int(found.node_id), found.host, int(found.port))

    def with_coordinator(self, group: str, call: Callable[[KafkaConnection], _R]) -> _R:
        """``call`` on a connection to ``group``'s coordinator; it raises a TieredError of
        ``COORDINATOR_ERRORS`` to have the coordinator found again and the call retried."""

        def attempt() -> _R:
            coordinator = self._coordinators.get(group)
            if coordinator is None:
                coordinator = self._coordinators[group] = self.find_coordinator(group)
            try:
                return call(self.connection(coordinator.host, coordinator.port))
            except TieredError as e:
                if (
                    e.code not in COORDINATOR_ERRORS
                    and e.code is not ErrorCode.BROKER_NOT_AVAILABLE
                ):
                    raise
                self._coordinators.pop(group, None)
                self.forget(coordinator)
                if e.code is ErrorCode.BROKER_NOT_AVAILABLE:
                    # A coordinator that went away: another takes the group over, as Kafka's
                    # AdminClient waits for it to.
                    raise TieredError(
                        ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        f"the coordinator of group {group!r} ({coordinator}) is unreachable: "
                        f"{e.message}",
                    ) from None
                raise

        return self.retry(
            attempt,
            retry_on=TieredError,
            retry_if=lambda e: e.code in COORDINATOR_ERRORS,
        )

    def coordinator(self, group: str) -> Broker:
        """The broker coordinating ``group``: the one the last call went to, else found (again
        after a coordinator error)."""
        known = self._coordinators.get(group)
        if known is not None:
            return known
        found = self.retry(
            lambda: self.find_coordinator(group),
            retry_on=TieredError,
            retry_if=lambda e: e.code in COORDINATOR_ERRORS,
        )
        self._coordinators[group] = found
        return found

    # ------------------------------------------------------------------------ offsets

    def list_offsets(
        self, partitions: Iterable[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, OffsetResult]:
        """Each partition's offset at ``timestamp`` (EARLIEST, LATEST, or milliseconds: the first
        offset at or after it, UNKNOWN_OFFSET when there is none), asked of its leader."""
        wanted = sorted(set(partitions))
        found: dict[TopicPartition, OffsetResult] = {}

        def attempt() -> None:
            missing = [tp for tp in wanted if not isinstance(found.get(tp), int)]
            leaders = self._leaders(t for t, _ in missing)
            by_leader: dict[Broker, list[TopicPartition]] = {}
            for tp in missing:
                leader = leaders.get(tp)
                if leader is None:
                    found[tp] = TieredError(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp[0]}-{tp[1]} has no leader"
                    )
                else:
                    by_leader.setdefault(leader, []).append(tp)
            for leader, mine in by_leader.items():
                found.update(self._list_offsets_of(leader, mine, timestamp))
            moved = [
                r for r in found.values() if isinstance(r, TieredError) and r.code in _LEADER_ERRORS
            ]
            if moved:
                raise moved[0]

        try:
            self.retry(attempt, retry_on=TieredError, retry_if=lambda e: e.code in _LEADER_ERRORS)
        except TieredError as e:
            if e.code not in _LEADER_ERRORS:
                raise
        return found

    def _list_offsets_of(
        self, leader: Broker, partitions: Sequence[TopicPartition], timestamp: int
    ) -> dict[TopicPartition, OffsetResult]:
        connection = self.connection(leader.host, leader.port)
        request_type = connection.request_type(LIST_OFFSETS)
        topic_type = nested(request_type, "ListOffsetsTopic")
        partition_type = nested(request_type, "ListOffsetsPartition")
        answer = connection.request(
            LIST_OFFSETS,
            replica_id=-1,
            isolation_level=0,
            topics=tuple(
                build(
                    topic_type,
                    name=topic,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=i,
                            current_leader_epoch=-1,
                            timestamp=timestamp,
                        )
                        for i in indexes
                    ),
                )
                for topic, indexes in by_topic(partitions).items()
            ),
        )
        found: dict[TopicPartition, OffsetResult] = {}
        for topic in answer.topics:
            for partition in topic.partitions:
                tp = (topic.name, int(partition.partition_index))
                if partition.error_code != KafkaErrorCode.none:
                    found[tp] = kafka_error(
                        partition.error_code,
                        f"{tp[0]}-{tp[1]}: {partition.error_code.name.upper()} from {leader}",
                    )
                else:
                    found[tp] = int(partition.offset)
        return found


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition indexes by topic, both sorted."""
    grouped: dict[str, list[int]] = {}
    for topic, index in sorted(set(partitions)):
        grouped.setdefault(topic, []).append(index)
    return grouped
