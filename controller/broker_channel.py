"""One sender per broker, like Kafka's ControllerChannelManager: a thread that asks its owner
(the controller's broker registry) what the broker is owed, sends it, and reports the outcome;
failures back off (capped exponential with jitter) and retry. Protobuf conversion happens here,
at the edge, and so does recording whether each call got through (``BrokerReachability``)."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc

from controller.disablements import DisableEntry
from controller.metrics import ControllerMetrics
from controller.reachability import BrokerReachability
from tiered.cluster.model import TopicMetadata
from tiered.errors import ErrorCode, TieredError
from tiered.retry import Backoff, ExponentialBackoff
from tiered.rpc.channels import ChannelCache
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import records_pb2

log = logging.getLogger(__name__)

Request = TypeVar("Request")
Response = TypeVar("Response")

# The codes of a call that did not get through, or whose answer did not come back in time; any
# other outcome (an answer, errors included, or an abort by the broker) means the broker got it.
UNANSWERED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


@dataclass(frozen=True)
class DisableWork:
    controller_epoch: int
    entries: Sequence[DisableEntry]


@dataclass(frozen=True)
class AssignWork:
    controller_epoch: int
    topics: Sequence[tuple[TopicMetadata, int]]  # (topic, pending generation) of this broker's
    broker_id: int


@dataclass(frozen=True)
class RemoveWork:
    controller_epoch: int
    partitions: Sequence[tuple[str, uuid.UUID, int]]  # (topic, topic id, partition)


Work = DisableWork | AssignWork | RemoveWork


class ChannelOwner(Protocol):
    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        """(broker endpoint, what to send), or None when nothing is owed or it is not live."""

    def on_disable_response(
        self, broker_id: int, work: DisableWork, errors: Sequence[TieredError | None]
    ) -> None: ...

    def on_assign_response(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None: ...

    def on_remove_response(
        self, broker_id: int, work: RemoveWork, errors: Sequence[TieredError | None]
    ) -> None: ...

    def on_stale_controller_epoch(self, broker_id: int, message: str) -> None: ...


def _tp(topic: str, topic_id: uuid.UUID, partition: int) -> records_pb2.TopicIdPartition:
    return records_pb2.TopicIdPartition(topic_id=topic_id.bytes, topic=topic, partition=partition)


def disable_request(work: DisableWork) -> pb.DisableRemoteTopicRequest:
    return pb.DisableRemoteTopicRequest(
        controller_epoch=work.controller_epoch,
        entries=[
            pb.DisableRemoteTopicEntry(
                partition=_tp(e.topic, e.topic_id, e.partition),
                tiered_epoch=e.tiered_epoch,
                policy=e.policy.value,
            )
            for e in work.entries
        ],
    )


def assign_request(work: AssignWork) -> pb.AssignPartitionsRequest:
    return pb.AssignPartitionsRequest(
        controller_epoch=work.controller_epoch,
        partitions=[
            pb.PartitionAssignment(
                partition=_tp(topic.name, topic.topic_id, p),
                configs=dict(topic.configs),
                tiered_epoch=topic.tiered_epoch,
            )
            for topic, _ in work.topics
            for p in topic.partitions_on(work.broker_id)
        ],
    )


class BrokerChannel:
    def __init__(
        self,
        broker_id: int,
        owner: ChannelOwner,
        backoff: ExponentialBackoff,
        request_timeout_s: float,
        metrics: ControllerMetrics | None = None,
        credentials: grpc.ChannelCredentials | None = None,  # TLS to the broker
        reachability: BrokerReachability | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._owner = owner
        self._metrics = metrics
        self._reachability = reachability
        self._timeout_s = request_timeout_s
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._endpoint: str | None = None
        self._stubs = ChannelCache(pb_grpc.BrokerServiceStub, credentials=credentials)
        # Owned by the channel thread; other threads ask for a reset through reset_backoff.
        self._backoff = Backoff(backoff)
        self._failed_since_success = False  # a reset backoff still sends the failed work again
        self._backoff_reset_requested = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-channel-{broker_id}", daemon=True
        )
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def reset_backoff(self) -> None:
        """The broker came back: the next failure backs off from the start again (call
        ``wake`` to retry at once)."""
        self._backoff_reset_requested.set()

    def close(self) -> None:
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=self._timeout_s + 5)
        self._stubs.close()

    def stub(self, endpoint: str) -> pb_grpc.BrokerServiceStub:
        if self._endpoint is not None and endpoint != self._endpoint:
            self._stubs.forget(self._endpoint)  # the broker moved: drop its old connection
        self._endpoint = endpoint
        return self._stubs.get(endpoint)

    def _run(self) -> None:
        delay: float | None = None
        while not self._closed.is_set():
            self._wake.wait(delay)
            self._wake.clear()
            if self._closed.is_set():
                return
            if self._backoff_reset_requested.is_set():
                self._backoff_reset_requested.clear()
                self._backoff.reset()
            try:
                sent = self._send_next()
            except Exception as e:  # a failing round must not end the channel
                self._failed_since_success = True
                if self._metrics is not None:
                    self._metrics.request_failed(self.broker_id)
                delay = self._backoff.next_delay()
                log.warning(
                    "Broker %d: request failed (attempt %d, next in %.2fs): %s",
                    self.broker_id,
                    self._backoff.failures,
                    delay,
                    e,
                )
                continue
            self._backoff.reset()
            self._failed_since_success = self._failed_since_success and not sent
            delay = 0.0 if sent else None  # drain what is owed, then sleep until woken

    def _raise_if_stale(self, error: TieredError | None) -> None:
        """A broker that heard from a newer controller rejects the whole request: this
        controller is deposed (its owner steps down)."""
        if error is not None and error.code is ErrorCode.STALE_CONTROLLER_EPOCH:
            self._owner.on_stale_controller_epoch(self.broker_id, error.message)
            raise error

    def _call(self, method: Callable[..., Response], request: Request) -> Response:
        """One call to the broker, within the request timeout, recording whether it was
        answered."""
        try:
            response = method(request, timeout=self._timeout_s)
        except grpc.RpcError as e:
            self._record_call(answered=e.code() not in UNANSWERED)
            raise
        self._record_call(answered=True)
        return response

    def _record_call(self, answered: bool) -> None:
        if self._reachability is None:
            return
        if answered:
            self._reachability.answered(self.broker_id)
        else:
            self._reachability.unanswered(self.broker_id)

    def _send_next(self) -> bool:
        found = self._owner.next_work(self.broker_id)
        if found is None:
            if self._reachability is not None:
                self._reachability.nothing_owed(self.broker_id)
            return False
        endpoint, work = found
        if self._failed_since_success and self._metrics is not None:
            self._metrics.request_retried(self.broker_id)
        stub = self.stub(endpoint)
        if isinstance(work, DisableWork):
            response = self._call(stub.DisableRemoteTopic, disable_request(work))
            self._raise_if_stale(error_from_proto(response.error))
            errors = [error_from_proto(e) for e in response.errors]
            if len(errors) != len(work.entries):
                raise RuntimeError("DisableRemoteTopic response does not match the request")
            if self._metrics is not None:
                self._metrics.disable_answered(self.broker_id, len(work.entries))
            self._owner.on_disable_response(self.broker_id, work, errors)
            if any(errors):
                raise RuntimeError(
                    f"{sum(1 for e in errors if e)} of {len(errors)} partitions failed to stop: "
                    f"{next(e for e in errors if e)}"
                )
        elif isinstance(work, RemoveWork):
            removed = self._call(
                stub.RemovePartitions,
                pb.RemovePartitionsRequest(
                    controller_epoch=work.controller_epoch,
                    partitions=[_tp(t, i, p) for t, i, p in work.partitions],
                ),
            )
            errors = [error_from_proto(e) for e in removed.errors]
            self._raise_if_stale(errors[0] if errors else None)
            self._owner.on_remove_response(self.broker_id, work, errors)
        else:
            response = self._call(stub.AssignPartitions, assign_request(work))
            errors = [error_from_proto(e) for e in response.errors]
            self._raise_if_stale(errors[0] if errors else None)
            self._owner.on_assign_response(self.broker_id, work, errors)
        return True
