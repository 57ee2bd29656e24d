"""What the console producer and consumer share: a client of one topic's partition leaders.

The leader of a partition comes from the controller (``AdminClient.describe_topic``), the broker's
endpoint from ``describe_cluster``; each broker endpoint gets one gRPC channel. A request that fails
with an error that a new leader or a little patience may cure (NOT_LEADER_OR_FOLLOWER, a broker
that does not host the partition yet, an unreachable broker, no leader) is retried under the
client's ``RetryPolicy`` (capped exponential backoff), describing the topic and the cluster afresh
before each new attempt; other errors, and the last one when the attempts run out, raise
``TieredError``.

A Produce whose answer did not arrive in time is not retried: it may have been appended, and a
retry could write the records twice. A Produce that failed to reach the broker at all
(UNAVAILABLE) is retried, as Kafka's producer does (at least once, not exactly once).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import Message

from tiered.admin import AdminClient, TopicDescription
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.records import Record, build_batch, iter_records
from tiered.retry import RetryPolicy
from tiered.retry_policies import PARTITION_CLIENT_RETRY
from tiered.rpc.channels import ChannelCache
from tiered.rpc.status import error_from_proto, error_from_rpc
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import records_pb2

__all__ = [
    "RETRIABLE",
    "ConsumedRecord",
    "FetchResult",
    "Offsets",
    "PartitionClient",
    "ProduceResult",
    "decode_records",
    "warn_on_retry",
]

# Errors worth another attempt after re-describing the leader. REQUEST_TIMED_OUT only for reads.
RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # from a broker: not (or no longer) hosted there
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


@dataclass(frozen=True)
class Offsets:
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class ConsumedRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None  # None: a null value (a tombstone), which Kafka clients can produce


@dataclass(frozen=True)
class FetchResult:
    records: list[ConsumedRecord]
    offsets: Offsets
    from_remote: bool


@dataclass(frozen=True)
class ProduceResult:
    base_offset: int
    last_offset: int


class _BrokerError(Exception):
    """Internal: a broker (or the way to it) failed; ``error`` is what the caller sees."""

    def __init__(self, error: TieredError) -> None:
        super().__init__(str(error))
        self.error = error


def _offsets(message: pb.PartitionOffsets) -> Offsets:
    return Offsets(
        log_start_offset=message.log_start_offset,
        local_log_start_offset=message.local_log_start_offset,
        log_end_offset=message.log_end_offset,
    )


def decode_records(records: bytes) -> list[ConsumedRecord]:
    """The records of a fetched blob of record batches v2 (a partial batch at its end is
    ignored, as Kafka clients do). Records below the offset asked for come first: the batch
    holding it starts earlier."""
    return [
        ConsumedRecord(c.offset, c.record.timestamp, c.record.key, c.record.value)
        for c in iter_records(records)
    ]


def _gave_up(failed: _BrokerError, tries: int) -> TieredError:
    error = failed.error
    if tries == 1:
        return error
    return TieredError(error.code, f"{error.message} (gave up after {tries} attempts)")


def warn_on_retry(error: TieredError, attempt: int, delay_s: float) -> None:
    """An ``on_retry`` for the CLIs: one warning line on stderr."""
    print(
        f"WARN: {error.code.name}: {error.message} (attempt {attempt} failed; retrying in "
        f"{delay_s:.2f}s)",
        file=sys.stderr,
        flush=True,
    )


class PartitionClient:
    """Produce, Fetch and ListOffsets on partition leaders, found through the controller.
    Not thread-safe for concurrent requests on one topic's cache; ``close()`` when done (or use it
    as a context manager)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout_s: float = 30.0,
        retry: RetryPolicy = PARTITION_CLIENT_RETRY,
        on_retry: Callable[[TieredError, int, float], None] | None = None,
        credentials: grpc.ChannelCredentials | None = None,  # TLS (--command-config)
    ) -> None:
        """``on_retry(error, attempt, delay_s)`` hears of each failed attempt that is retried
        (``attempt`` counts from 1), e.g. to warn on stderr as Kafka's producer logs."""
        self.admin = AdminClient(bootstrap, timeout_s=timeout_s, credentials=credentials)
        self.timeout_s = timeout_s
        self._retry = retry
        self._on_retry = on_retry
        self._topics: dict[str, TopicDescription] = {}
        self._brokers: dict[int, str] = {}
        self._stubs = ChannelCache(pb_grpc.BrokerServiceStub, credentials=credentials)

    def __enter__(self) -> PartitionClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._stubs.close()
        self.admin.close()

    # -- metadata

    def topic(self, name: str, *, refresh: bool = False) -> TopicDescription:
        """The topic as the controller describes it (cached). UNKNOWN_TOPIC_OR_PARTITION if it
        does not exist, or no longer is the topic first seen under that name."""
        known = self._topics.get(name)
        if known is not None and not refresh:
            return known
        found = self.admin.describe_topic(name, include_partition_state=False)
        if known is not None and found.topic_id != known.topic_id:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {name!r} was deleted and created again while in use "
                f"(topic id {known.topic_id} is now {found.topic_id})",
            )
        self._topics[name] = found
        return found

    def check_partition(self, name: str, partition: int) -> TopicDescription:
        """The topic, after checking that ``partition`` is one of it (else
        UNKNOWN_TOPIC_OR_PARTITION naming the valid range)."""
        topic = self.topic(name)
        count = len(topic.partitions)
        if not 0 <= partition < count:
            valid = "0" if count == 1 else f"0 to {count - 1}"
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {name!r} has no partition {partition}: it has {count} "
                f"partition{'s' if count != 1 else ''} (valid: {valid})",
            )
        return topic

    def _broker_address(self, broker_id: int, *, refresh: bool) -> str | None:
        if refresh or broker_id not in self._brokers:
            cluster = self.admin.describe_cluster()
            self._brokers = {b.broker_id: f"{b.host}:{b.port}" for b in cluster.brokers}
        return self._brokers.get(broker_id)

    # -- data path

    def produce(
        self, topic: str, partition: int, records: Sequence[tuple[bytes | None, bytes, int]]
    ) -> ProduceResult:
        """Appends ``(key, value, timestamp_ms)`` records (timestamp 0: now) to the partition's
        leader, as one record batch v2, as a Kafka producer sends them."""
        now_ms = int(time.time() * 1000)
        batch = build_batch(
            [Record(key, value, timestamp=ts or now_ms) for key, value, ts in records]
        )

        def request(tp: records_pb2.TopicIdPartition) -> Message:
            return pb.ProduceRequest(partition=tp, records=batch)

        response = self._call(topic, partition, "Produce", request, idempotent=False)
        return ProduceResult(response.base_offset, response.last_offset)

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> FetchResult:
        """The records of the batches from the one holding ``offset`` on (from either tier; the
        broker decides; the first ones may be below ``offset``) and the partition's offsets.
        OFFSET_OUT_OF_RANGE outside [log start, log end]."""

        def request(tp: records_pb2.TopicIdPartition) -> Message:
            return pb.FetchRequest(partition=tp, offset=offset, max_bytes=max_bytes)

        response = self._call(topic, partition, "Fetch", request, idempotent=True)
        return FetchResult(
            records=decode_records(response.records),
            offsets=_offsets(response.offsets),
            from_remote=response.from_remote,
        )

    def list_offsets(self, topic: str, partition: int) -> Offsets:
        def request(tp: records_pb2.TopicIdPartition) -> Message:
            return pb.ListOffsetsRequest(partition=tp)

        response = self._call(topic, partition, "ListOffsets", request, idempotent=True)
        return _offsets(response.offsets)

    # -- plumbing

    def _call(
        self,
        topic: str,
        partition: int,
        method: str,
        request: Callable[[records_pb2.TopicIdPartition], Message],
        *,
        idempotent: bool,
    ) -> Any:
        retried = False

        def attempt() -> Any:
            # Controller errors (the topic is gone, no controller) are final: the AdminClient
            # has its own retry for a moving controller.
            if retried:
                self.topic(topic, refresh=True)
            described = self.check_partition(topic, partition)
            return self._attempt(described, partition, method, request, refresh=retried)

        def retriable(failed: _BrokerError) -> bool:
            code = failed.error.code
            return code in RETRIABLE and (idempotent or code is not ErrorCode.REQUEST_TIMED_OUT)

        def on_retry(failed: _BrokerError, tries: int, delay_s: float) -> None:
            nonlocal retried
            retried = True
            if self._on_retry is not None:
                self._on_retry(failed.error, tries, delay_s)

        return self._retry(
            attempt,
            retry_on=_BrokerError,
            retry_if=retriable,
            on_retry=on_retry,
            give_up=_gave_up,
        )

    def _attempt(
        self,
        topic: TopicDescription,
        partition: int,
        method: str,
        request: Callable[[records_pb2.TopicIdPartition], Message],
        *,
        refresh: bool,
    ) -> Any:
        what = f"{method} on {topic.name}-{partition}"
        leader = topic.partitions[partition].leader
        if leader < 0:
            raise _BrokerError(
                TieredError(ErrorCode.BROKER_NOT_AVAILABLE, f"{what}: the partition has no leader")
            )
        address = self._broker_address(leader, refresh=refresh)
        if address is None:
            raise _BrokerError(
                TieredError(
                    ErrorCode.BROKER_NOT_AVAILABLE,
                    f"{what}: leader broker {leader} is not registered with the controller",
                )
            )
        what = f"{what} at broker {leader} ({address})"
        tp = records_pb2.TopicIdPartition(
            topic_id=topic.topic_id.bytes, topic=topic.name, partition=partition
        )
        try:
            response = getattr(self._stubs.get(address), method)(
                request(tp), timeout=self.timeout_s
            )
        except grpc.RpcError as e:
            failure = error_from_rpc(e, what, self.timeout_s)
            if failure.code is ErrorCode.BROKER_NOT_AVAILABLE:
                # A fresh channel for the next attempt: a failed one waits out gRPC's own
                # reconnect backoff (up to minutes) even after the broker is back.
                self._stubs.forget(address)
            raise _BrokerError(failure) from None
        error = error_from_proto(response.error)
        if error is not None:
            if error.code is ErrorCode.OFFSET_OUT_OF_RANGE:
                raise error  # the caller words this one for its user
            raise _BrokerError(TieredError(error.code, f"{what}: {error.message}"))
        return response
