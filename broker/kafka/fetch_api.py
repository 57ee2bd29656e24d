"""Fetch: whole stored record batches, unchanged, from either tier (``DataPlane.fetch``: the
local log at or above its local start offset, remote storage below it; OFFSET_OUT_OF_RANGE below
the log start offset or past the log end).

Sizes as Kafka's ReplicaManager: each partition gets at most its ``partition_max_bytes`` and
what is left of the request's ``max_bytes``; the first batch of the first partition with data
is returned even if larger than both (KIP-74), so a consumer always progresses; a later
partition whose next batch does not fit what is left answers no records this time.

Long poll: a Fetch that found fewer than ``min_bytes`` and no error waits in ``FetchWaits``
until appends to its partitions bring enough, or ``max_wait_ms`` passes, then reads again.

Sessionless (KIP-227 with no session): every answer has session_id 0, so clients send full
fetches (librdkafka never opens a session; kafka-python and the Java client go on with full
fetches when the broker answers session 0). A request naming a session is answered
FETCH_SESSION_ID_NOT_FOUND. The replication factor is 1: the high watermark and the last
stable offset are the log end offset.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.hosted import HostedPartition, PartitionKey
from broker.kafka.convert import NO_THROTTLE, KafkaError
from broker.kafka.fetch_waits import FetchWaits
from broker.kafka.partitions import PartitionLookup, Resolved, guarded, leader_epoch_error
from broker.listener.handler import HandlerResult, RequestContext
from broker.log import BatchRead
from tiered.kafka.messages import build, nested, response_type_for
from tiered.security.acl import AclOperation

__all__ = ["FetchApi"]

_NO_SESSION = 0
_SESSIONLESS_EPOCHS = (-1, 0)  # FINAL (no session) and INITIAL (asks for one: none is made)
_READ_COMMITTED = 1
_INT32_MAX = 2**31 - 1


class Reader(Protocol):
    def fetch(
        self, topic_id: uuid.UUID, partition: int, offset: int, max_bytes: int
    ) -> tuple[BatchRead, bool]: ...


@dataclass
class _Partition:
    index: int
    error: KafkaError | None = None
    records: bytes | memoryview = b""
    high_watermark: int = -1
    log_start_offset: int = -1


@dataclass
class _Read:
    """One pass over a request's partitions."""

    topics: list[tuple[str, list[_Partition]]] = field(default_factory=list)
    size_bytes: int = 0
    failed: bool = False
    # Log end offset seen by each partition read: a change means an append this pass missed.
    log_ends: dict[PartitionKey, tuple[HostedPartition, int]] = field(default_factory=dict)

    def log_end_moved(self) -> bool:
        return any(h.log.log_end_offset != end for h, end in self.log_ends.values())


class FetchApi:
    def __init__(
        self,
        records: Reader,
        partitions: PartitionLookup,
        waits: FetchWaits[ResponsePayload | None],
    ) -> None:
        self._records = records
        self._partitions = partitions
        self._waits = waits

    def fetch(self, request: Any, context: RequestContext) -> HandlerResult:
        response_type = response_type_for(request)
        session_error = _session_error(request)
        if session_error is not None:
            return build(
                response_type,
                throttle_time=NO_THROTTLE,
                error_code=session_error,
                session_id=_NO_SESSION,
                responses=(),
            )
        resolved = self._partitions.resolve(
            ((t.topic, int(p.partition)) for t in request.topics for p in t.partitions),
            context.requester,
            AclOperation.READ,
        )
        first = self._read(request, resolved)
        wait_s = request.max_wait.total_seconds()
        min_bytes = int(request.min_bytes)
        if wait_s <= 0 or first.failed or first.size_bytes >= min_bytes or not first.log_ends:
            return _response(response_type, request, first)

        def complete() -> ResponsePayload:
            return _response(response_type, request, self._read(request, resolved))

        return self._waits.park(
            first.log_ends.keys(),
            min_bytes - first.size_bytes,
            wait_s,
            complete,
            first.log_end_moved,
        )

    def _read(self, request: Any, resolved: dict[tuple[str, int], Resolved]) -> _Read:
        read = _Read()
        budget = int(getattr(request, "max_bytes", _INT32_MAX))
        for topic in request.topics:
            partitions: list[_Partition] = []
            for asked in topic.partitions:
                found = resolved[(topic.topic, int(asked.partition))]
                answer = self._read_partition(read, found, asked, budget)
                budget -= len(answer.records)
                read.size_bytes += len(answer.records)
                read.failed = read.failed or answer.error is not None
                partitions.append(answer)
            read.topics.append((topic.topic, partitions))
        return read

    def _read_partition(self, read: _Read, found: Resolved, asked: Any, budget: int) -> _Partition:
        answer = _Partition(int(asked.partition))
        if isinstance(found, tuple):
            answer.error = found
            return answer
        answer.error = leader_epoch_error(int(getattr(asked, "current_leader_epoch", -1)))
        if answer.error is not None:
            return answer
        log = found.log
        offset, start, end = int(asked.fetch_offset), log.log_start_offset, log.log_end_offset
        read.log_ends[found.key] = (found, end)
        if not start <= offset <= end:
            answer.error = (
                KafkaErrorCode.offset_out_of_range,
                f"offset {offset} is outside [{start}, {end}] of partition {answer.index} of "
                f"{found.topic_id_partition.topic!r}",
            )
            return answer
        answer.high_watermark, answer.log_start_offset = end, start
        min_one = read.size_bytes == 0
        max_bytes = min(int(asked.partition_max_bytes), budget)
        if offset == end or (max_bytes <= 0 and not min_one):
            return answer
        tp = found.topic_id_partition
        got = guarded(
            lambda: self._records.fetch(tp.topic_id, tp.partition, offset, max(max_bytes, 0))[0]
        )
        if isinstance(got, tuple):
            answer.error = got
            answer.high_watermark = answer.log_start_offset = -1
        elif min_one or len(got.records) <= max_bytes:
            answer.records = got.records
        return answer


def _session_error(request: Any) -> KafkaErrorCode | None:
    if int(getattr(request, "session_id", _NO_SESSION)) != _NO_SESSION:
        return KafkaErrorCode.fetch_session_id_not_found
    if int(getattr(request, "session_epoch", -1)) not in _SESSIONLESS_EPOCHS:
        return KafkaErrorCode.invalid_fetch_session_epoch
    return None


def _response(response_type: type[Any], request: Any, read: _Read) -> ResponsePayload:
    partition_type = nested(response_type, "PartitionData")
    committed = int(getattr(request, "isolation_level", 0)) == _READ_COMMITTED

    def partition(p: _Partition) -> Any:
        return build(
            partition_type,
            partition_index=p.index,
            error_code=KafkaErrorCode.none if p.error is None else p.error[0],
            high_watermark=p.high_watermark,
            last_stable_offset=p.high_watermark,
            log_start_offset=p.log_start_offset,
            aborted_transactions=() if committed else None,  # no transactions: none aborted
            preferred_read_replica=-1,
            records=p.records,
        )

    response: ResponsePayload = build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=KafkaErrorCode.none,
        session_id=_NO_SESSION,
        responses=tuple(
            build(
                nested(response_type, "FetchableTopicResponse"),
                topic=name,
                partitions=tuple(partition(p) for p in partitions),
            )
            for name, partitions in read.topics
        ),
    )
    return response
