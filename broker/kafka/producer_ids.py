"""InitProducerId for idempotent producers: a producer id no other producer of the cluster ever
had, at epoch 0. Transactions are not served.

Uniqueness without a round trip to the controller: an id is the broker's node id in the high 32
bits and a per-broker counter in the low 32, so brokers never collide; the counter survives
restarts because it is handed out in blocks, and the end of a block is persisted (fsynced, by
``tiered.durable.atomic_write``) before any id of it is given to a client. A restart skips the
rest of the block it crashed in, as Kafka's ProducerIdManager does with the controller's blocks.

A producer that asks again (librdkafka does after a fatal sequence error, KIP-360, sending its
current id and epoch) gets a new id, as Kafka answers InitProducerId without a transactional id.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.kafka.convert import NO_THROTTLE
from broker.listener.handler import RequestContext
from tiered.durable import atomic_write
from tiered.kafka.messages import build, response_type_for
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType

__all__ = ["BLOCK_FILE", "InitProducerIdApi", "ProducerIdBlocks", "ProducerIdsExhaustedError"]

BLOCK_FILE = "producer-id-block"
DEFAULT_BLOCK_SIZE = 1000
_COUNTER_BITS = 32
_NODE_ID_LIMIT = 2**31  # Kafka's node ids are int32: the id stays a positive int64

log = logging.getLogger(__name__)


class ProducerIdsExhaustedError(Exception):
    """Every counter value of this node id was handed out (2**32 of them)."""


class ProducerIdBlocks:
    """Producer ids of one broker. Thread-safe.

    ``next_id`` raises OSError if the block file cannot be written (no id is handed out then),
    ValueError if it holds something other than a counter (never guessed: reusing an id would
    let a new producer's batches pass as an old one's retries), ProducerIdsExhaustedError when
    the counter is spent."""

    def __init__(self, node_id: int, log_dir: Path, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if not 0 <= node_id < _NODE_ID_LIMIT:
            raise ValueError(f"node id {node_id} is outside 0..{_NODE_ID_LIMIT - 1}")
        if block_size < 1:
            raise ValueError(f"block size must be >= 1, got {block_size}")
        self._node_bits = node_id << _COUNTER_BITS
        self._path = log_dir / BLOCK_FILE
        self._block_size = block_size
        self._lock = threading.Lock()
        self._next = 0
        self._block_end = 0  # nothing reserved yet: the first call reads the file

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                self._reserve_block()
            counter = self._next
            self._next += 1
            return self._node_bits | counter

    def _reserve_block(self) -> None:
        start = max(self._block_end, self._persisted_end())
        end = start + self._block_size
        if end > 2**_COUNTER_BITS:
            raise ProducerIdsExhaustedError(
                f"every producer id of node {self._node_bits >> _COUNTER_BITS} is used"
            )
        atomic_write(self._path, f"{end}\n".encode("ascii"))
        self._next, self._block_end = start, end

    def _persisted_end(self) -> int:
        try:
            text = self._path.read_text("ascii")
        except FileNotFoundError:
            return 0
        try:
            end = int(text.strip())
        except ValueError:
            raise ValueError(f"{self._path} holds {text!r}, not a producer id counter") from None
        if end < 0:
            raise ValueError(f"{self._path} holds a negative producer id counter {end}")
        return end


class InitProducerIdApi:
    """InitProducerId for idempotent producers. As Kafka, it needs IdempotentWrite on the cluster
    or Write on some topic: a producer id is of no use to a client that may write nowhere."""

    def __init__(self, ids: ProducerIdBlocks, access: AccessControl) -> None:
        self._ids = ids
        self._access = access

    def init_producer_id(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        if request.transactional_id is not None:
            # FindCoordinator already says no transaction coordinator exists; a client that
            # asks anyway gets a non-retriable answer instead of waiting for one.
            log.info(
                "InitProducerId from %s for transactional id %r refused: transactions are not "
                "served",
                context.client_address,
                request.transactional_id,
            )
            return _answer(response_type, KafkaErrorCode.invalid_request)
        requester = context.requester
        if not (
            self._access.allowed(requester, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER)
            or self._access.allowed_on_some(requester, AclOperation.WRITE, ResourceType.TOPIC)
        ):
            log.info(
                "InitProducerId from %s refused: %s may not write to any topic",
                context.client_address,
                requester.principal,
            )
            return _answer(response_type, KafkaErrorCode.cluster_authorization_failed)
        try:
            producer_id = self._ids.next_id()
        except (OSError, ValueError, ProducerIdsExhaustedError) as e:
            log.error("cannot hand out a producer id: %s", e)
            return _answer(response_type, KafkaErrorCode.kafka_storage_error)
        return _answer(response_type, KafkaErrorCode.none, producer_id, 0)


def _answer(
    response_type: type[Any], code: KafkaErrorCode, producer_id: int = -1, epoch: int = -1
) -> ResponsePayload:
    response: ResponsePayload = build(
        response_type,
        throttle_time=NO_THROTTLE,
        error_code=code,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
    return response
