"""AdminClient: the Python client of the controller's AdminService (what the CLIs use).

Results are plain frozen dataclasses; protobuf stays inside this module. Domain errors in a response
raise ``TieredError`` with the response's code; gRPC INVALID_ARGUMENT raises ``INVALID_REQUEST``.

``bootstrap`` is a comma list of ``host:port`` (controllers or brokers). The client finds the active
controller by asking each address in turn for DescribeCluster; a standby answers NOT_CONTROLLER and
may name the active controller's endpoint, which is tried next. The first address that answers
without an error is cached. When the cached address later answers NOT_CONTROLLER or is UNAVAILABLE,
or when only standbys answer (an election is in progress: the old controller's session has not
expired yet), the client rediscovers and retries the call until its timeout, like Kafka's admin
client with a retriable error (``ControllerRetry`` decides how often and how long; inject another
one to change that). When no address answers at all it fails at once: a wrong bootstrap address
should not cost the operator the whole timeout.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import grpc
from google.protobuf.message import Message

from tiered.cluster.model import TieredState
from tiered.config import INT32_MAX
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import broker_pb2, metadata_pb2
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc

__all__ = [
    "AdminClient",
    "AlterResult",
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "ControllerRetry",
    "DeleteJobDescription",
    "PartitionDescription",
    "TopicDescription",
    "parse_bootstrap",
]

R = TypeVar("R")

DEFAULT_DISCOVERY_TIMEOUT_S = 3.0

# --------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_available: bool
    # None when the controller did not report offsets (no partition state asked for, or the
    # leader did not answer).
    log_start_offset: int | None
    local_log_start_offset: int | None
    log_end_offset: int | None
    remote_log_start_offset: int  # -1: nothing in remote storage
    remote_log_size_bytes: int
    remote_segment_count: int
    remote_delete_state: str
    disable_acked: bool
    # The topic's latest delete job (delete policy): objects listed (-1: not yet) and deleted.
    delete_objects_total: int = -1
    delete_objects_deleted: int = 0
    delete_done: bool = False


@dataclass(frozen=True)
class DeleteJobDescription:
    """A bulk delete of remote data below ``tiered_epoch`` and how far it got."""

    state: str  # PENDING | RUNNING | DONE
    tiered_epoch: int
    attempts: int
    last_error: str
    objects_total: int
    objects_deleted: int
    partitions_done: int
    partition_count: int


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    tiered_state: TieredState
    tiered_epoch: int
    configs: dict[str, str]  # keys set on the topic only
    partitions: list[PartitionDescription]
    disable_acks_owed: int  # DISABLING: partitions whose broker has not acked yet
    disable_acks_total: int
    disable_policy: str  # of the current or last disablement; "" if none
    delete_job: DeleteJobDescription | None = None

    @property
    def disable_acks_done(self) -> int:
        return self.disable_acks_total - self.disable_acks_owed


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str
    is_default: bool


@dataclass(frozen=True)
class AlterResult:
    tiered_state: TieredState  # after the change
    tiered_epoch: int


@dataclass(frozen=True)
class BrokerDescription:
    broker_id: int
    host: str
    port: int
    fenced: bool


@dataclass(frozen=True)
class ClusterDescription:
    controller_id: int
    controller_epoch: int
    controller_endpoint: str
    metadata_mode: str  # kraft | zookeeper
    brokers: list[BrokerDescription] = field(default_factory=list)


# --------------------------------------------------------------------------------- retry


class ControllerMovedError(Exception):
    """Internal: the controller we talked to is gone or no longer active. ``error`` is what the
    caller sees when the retry policy gives up."""

    def __init__(self, error: TieredError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True)
class ControllerRetry:
    """How a call is retried after the controller moved: at most ``max_tries`` attempts in all
    (None: as many as fit), within ``deadline_s`` of the first, waiting ``delay_s`` (times
    ``backoff`` per attempt, capped at ``max_delay_s``) in between. Stateless: one policy serves
    every call."""

    max_tries: int | None = None
    deadline_s: float = 30.0
    delay_s: float = 0.05
    backoff: float = 2.0
    max_delay_s: float = 1.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def __call__(self, attempt: Callable[[], R]) -> R:
        start = self.clock()
        delay = self.delay_s
        tries = 0
        while True:
            try:
                return attempt()
            except ControllerMovedError as moved:
                tries += 1
                out_of_tries = self.max_tries is not None and tries >= self.max_tries
                if out_of_tries or self.clock() + delay - start > self.deadline_s:
                    raise moved.error from None
            self.sleep(delay)
            delay = min(delay * self.backoff, self.max_delay_s)


# --------------------------------------------------------------------------------- conversions

_STATES: dict[int, TieredState] = {
    metadata_pb2.ENABLED: TieredState.ENABLED,
    metadata_pb2.DISABLING: TieredState.DISABLING,
    metadata_pb2.DISABLED: TieredState.DISABLED,
    # Unset: a topic that was never tiered (DESIGN.md section 4: DISABLED, epoch 0).
    metadata_pb2.TIERED_STATE_UNSPECIFIED: TieredState.DISABLED,
}


def _state(value: int) -> TieredState:
    try:
        return _STATES[value]
    except KeyError:
        raise TieredError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"unknown tiered state {value} in the response"
        ) from None


def _error(error: broker_pb2.Error) -> TieredError | None:
    if error.code == 0:
        return None
    try:
        code = ErrorCode(error.code)
    except ValueError:
        label = error.name or "UNKNOWN"
        return TieredError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"{label} ({error.code}): {error.message}"
        )
    return TieredError(code, error.message or "(no details)")


def _topic_id(raw: bytes) -> uuid.UUID:
    try:
        return uuid.UUID(bytes=raw)
    except ValueError:
        raise TieredError(
            ErrorCode.UNKNOWN_SERVER_ERROR, f"malformed topic id {raw.hex()!r} in the response"
        ) from None


def _partition(message: pb.PartitionDescription) -> PartitionDescription:
    has_offsets = message.HasField("offsets")
    offsets = message.offsets
    return PartitionDescription(
        partition=message.partition,
        leader=message.leader,
        leader_available=message.leader_available,
        log_start_offset=offsets.log_start_offset if has_offsets else None,
        local_log_start_offset=offsets.local_log_start_offset if has_offsets else None,
        log_end_offset=offsets.log_end_offset if has_offsets else None,
        remote_log_start_offset=message.remote_log_start_offset,
        remote_log_size_bytes=message.remote_log_size_bytes,
        remote_segment_count=message.remote_segment_count,
        remote_delete_state=message.remote_delete_state,
        disable_acked=message.disable_acked,
        delete_objects_total=message.delete_objects_total,
        delete_objects_deleted=message.delete_objects_deleted,
        delete_done=message.delete_done,
    )


def _topic(message: pb.TopicDescription) -> TopicDescription:
    return TopicDescription(
        name=message.name,
        topic_id=_topic_id(message.topic_id),
        tiered_state=_state(message.tiered_state),
        tiered_epoch=message.tiered_epoch,
        configs=dict(sorted(message.configs.items())),
        partitions=sorted((_partition(p) for p in message.partitions), key=lambda p: p.partition),
        disable_acks_owed=message.disable_acks_owed,
        disable_acks_total=message.disable_acks_total,
        disable_policy=message.disable_policy,
        delete_job=_delete_job(message.delete_job) if message.HasField("delete_job") else None,
    )


def _delete_job(message: pb.DeleteJobDescription) -> DeleteJobDescription:
    return DeleteJobDescription(
        state=message.state,
        tiered_epoch=message.tiered_epoch,
        attempts=message.attempts,
        last_error=message.last_error,
        objects_total=message.objects_total,
        objects_deleted=message.objects_deleted,
        partitions_done=message.partitions_done,
        partition_count=message.partition_count,
    )


def _alter_result(response: pb.AlterConfigsResponse) -> AlterResult:
    _raise_if_error(response.error)
    return AlterResult(_state(response.tiered_state), response.tiered_epoch)


def _raise_if_error(error: broker_pb2.Error) -> None:
    exc = _error(error)
    if exc is not None:
        raise exc


def _not_controller(response: Any) -> broker_pb2.Error | None:
    """The NOT_CONTROLLER error of a standby's answer, if it is one: in the response's ``error``
    or, for the responses without one (CreateTopics, DeleteTopics, DescribeTopics), in any of
    its per-topic results."""
    errors: list[broker_pb2.Error] = []
    if isinstance(getattr(response, "error", None), broker_pb2.Error):
        errors.append(response.error)
    for item in [*getattr(response, "results", ()), *getattr(response, "topics", ())]:
        errors.append(item.error)
    for error in errors:
        if error.code == ErrorCode.NOT_CONTROLLER:
            return error
    return None


def _grpc_details(e: grpc.RpcError) -> str:
    details = cast(grpc.Call, e).details() or ""
    # Servicers put the error name in front already (broker/servicer.py); don't double it.
    for prefix in (f"{ErrorCode.INVALID_REQUEST.name}: ", f"{ErrorCode.INVALID_REQUEST.name}:"):
        if details.startswith(prefix):
            return details[len(prefix) :].strip()
    return details


def _grpc_code(e: grpc.RpcError) -> grpc.StatusCode | None:
    code = cast(grpc.Call, e).code()
    return code if isinstance(code, grpc.StatusCode) else None


def parse_bootstrap(bootstrap: str) -> list[str]:
    """``"h1:p1, h2:p2"`` → ``["h1:p1", "h2:p2"]``; INVALID_REQUEST for an empty or malformed
    list."""
    addresses: list[str] = []
    for raw in bootstrap.split(","):
        address = raw.strip()
        if not address:
            continue
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                f"bootstrap address {address!r} is not host:port",
            )
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise TieredError(ErrorCode.INVALID_REQUEST, "no bootstrap address given")
    return addresses


def _check_partition_count(partitions: int) -> None:
    """Refuses a count that ``NewTopic.partitions`` (an int32) cannot carry, where protobuf would
    raise a bare ValueError; the controller holds the count to its own, lower limit."""
    if (
        isinstance(partitions, bool)
        or not isinstance(partitions, int)
        or not 1 <= partitions <= INT32_MAX
    ):
        raise TieredError(
            ErrorCode.INVALID_PARTITIONS,
            f"partition count {partitions!r} is not valid; valid values: an integer from 1 to "
            f"{INT32_MAX}",
        )


# --------------------------------------------------------------------------------- client


class AdminClient:
    """A client of the active controller's AdminService. Thread-safe; ``close()`` when done (or
    use it as a context manager)."""

    def __init__(
        self,
        bootstrap: str,
        timeout_s: float = 30.0,
        *,
        retry: ControllerRetry | None = None,
        discovery_timeout_s: float = DEFAULT_DISCOVERY_TIMEOUT_S,
    ) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, not {timeout_s}")
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout_s = timeout_s
        self._retry = retry if retry is not None else ControllerRetry(deadline_s=timeout_s)
        self._discovery_timeout_s = min(discovery_timeout_s, timeout_s)
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[grpc.Channel, Any]] = {}
        self._controller: str | None = None
        self._closed = False

    # -- lifecycle

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._controller = None
        for channel, _stub in channels:
            channel.close()

    @property
    def controller_address(self) -> str | None:
        """The address the client currently sends requests to (None before discovery)."""
        return self._controller

    # -- API

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> uuid.UUID:
        _check_partition_count(partitions)
        request = pb.CreateTopicsRequest(
            topics=[pb.NewTopic(name=name, partitions=partitions, configs=dict(configs or {}))],
            validate_only=validate_only,
        )
        response = self._call("CreateTopics", request, pb.CreateTopicsResponse)
        result = self._result_for(name, response.results)
        _raise_if_error(result.error)
        if validate_only and not result.topic_id:
            return uuid.UUID(int=0)
        return _topic_id(result.topic_id)

    def delete_topic(self, name: str) -> None:
        response = self._call(
            "DeleteTopics", pb.DeleteTopicsRequest(names=[name]), pb.DeleteTopicsResponse
        )
        _raise_if_error(self._result_for(name, response.results).error)

    def describe_topics(
        self, names: Iterable[str] | None = None, include_partition_state: bool = True
    ) -> list[TopicDescription]:
        """The named topics in the order asked, or every topic (by name) when ``names`` is None.
        A named topic that does not exist raises UNKNOWN_TOPIC_OR_PARTITION."""
        wanted = list(names) if names is not None else []
        request = pb.DescribeTopicsRequest(
            names=wanted, include_partition_state=include_partition_state
        )
        response = self._call("DescribeTopics", request, pb.DescribeTopicsResponse)
        for message in response.topics:
            _raise_if_error(message.error)
        topics = [_topic(message) for message in response.topics]
        if not wanted:
            return sorted(topics, key=lambda t: t.name)
        by_name = {t.name: t for t in topics}
        missing = [n for n in wanted if n not in by_name]
        if missing:
            raise TieredError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {missing[0]!r} does not exist"
            )
        return [by_name[n] for n in dict.fromkeys(wanted)]

    def describe_topic(self, name: str, include_partition_state: bool = True) -> TopicDescription:
        return self.describe_topics([name], include_partition_state)[0]

    def describe_configs(self, topic: str) -> list[ConfigEntry]:
        response = self._call(
            "DescribeConfigs", pb.DescribeConfigsRequest(topic=topic), pb.DescribeConfigsResponse
        )
        _raise_if_error(response.error)
        return [ConfigEntry(e.name, e.value, e.is_default) for e in response.entries]

    def alter_configs(
        self, topic: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> AlterResult:
        """Replace the topic's whole config set."""
        request = pb.AlterConfigsRequest(
            topic=topic, configs=dict(configs), validate_only=validate_only
        )
        return _alter_result(self._call("AlterConfigs", request, pb.AlterConfigsResponse))

    def incremental_alter_configs(
        self,
        topic: str,
        set: Mapping[str, str] | None = None,  # the proto's name
        delete: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> AlterResult:
        request = pb.IncrementalAlterConfigsRequest(
            topic=topic, set=dict(set or {}), delete=list(delete), validate_only=validate_only
        )
        return _alter_result(
            self._call("IncrementalAlterConfigs", request, pb.AlterConfigsResponse)
        )

    def describe_cluster(self) -> ClusterDescription:
        response = self._call(
            "DescribeCluster", pb.DescribeClusterRequest(), pb.DescribeClusterResponse
        )
        _raise_if_error(response.error)
        return ClusterDescription(
            controller_id=response.controller_id,
            controller_epoch=response.controller_epoch,
            controller_endpoint=response.controller_endpoint,
            metadata_mode=response.metadata_mode,
            brokers=[
                BrokerDescription(b.broker_id, b.host, b.port, b.fenced) for b in response.brokers
            ],
        )

    # -- plumbing

    @staticmethod
    def _result_for(name: str, results: Sequence[pb.TopicResult]) -> pb.TopicResult:
        for result in results:
            if result.name == name:
                return result
        if len(results) == 1:
            return results[0]
        raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no result for topic {name!r}")

    def _stub(self, address: str) -> Any:
        with self._lock:
            if self._closed:
                raise TieredError(ErrorCode.INVALID_REQUEST, "the AdminClient is closed")
            entry = self._channels.get(address)
            if entry is None:
                channel = grpc.insecure_channel(address)
                entry = (channel, pb_grpc.AdminServiceStub(channel))  # type: ignore[no-untyped-call]
                self._channels[address] = entry
            return entry[1]

    def _call(self, method: str, request: Message, response_type: type[R]) -> R:
        def attempt() -> R:
            address = self._controller or self._discover()
            response = self._invoke(address, method, request, self.timeout_s)
            error = _not_controller(response)
            if error is not None:
                self._forget(address)
                raise ControllerMovedError(
                    TieredError(
                        ErrorCode.NOT_CONTROLLER,
                        error.message or f"{address} is no longer the active controller",
                    )
                )
            return cast(R, response)

        return self._retry(attempt)

    def _forget(self, address: str) -> None:
        with self._lock:
            if self._controller == address:
                self._controller = None

    def _invoke(self, address: str, method: str, request: Message, timeout_s: float) -> Any:
        """One RPC; domain errors stay in the response, gRPC failures become TieredErrors
        (UNAVAILABLE: ControllerMovedError, for the retry policy)."""
        try:
            return getattr(self._stub(address), method)(request, timeout=timeout_s)
        except grpc.RpcError as e:
            code = _grpc_code(e)
            details = _grpc_details(e)
            if code is grpc.StatusCode.INVALID_ARGUMENT:
                raise TieredError(ErrorCode.INVALID_REQUEST, details) from None
            if code is grpc.StatusCode.UNAVAILABLE:
                self._forget(address)
                raise ControllerMovedError(
                    TieredError(
                        ErrorCode.BROKER_NOT_AVAILABLE,
                        f"controller at {address} is unavailable: {details}",
                    )
                ) from None
            if code is grpc.StatusCode.DEADLINE_EXCEEDED:
                # Not retried (a write may have been applied), but the next call rediscovers:
                # a controller that stopped answering (paused, partitioned) is likely deposed.
                self._forget(address)
                raise TieredError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"{method} to {address} got no answer within {timeout_s:g}s",
                ) from None
            name = code.name if code is not None else "UNKNOWN"
            raise TieredError(
                ErrorCode.UNKNOWN_SERVER_ERROR, f"{method} to {address} failed: {name}: {details}"
            ) from None

    def _discover(self) -> str:
        """Find the active controller: DescribeCluster on each bootstrap address (and each
        controller endpoint a standby names) until one answers without an error."""
        queue = list(self.bootstrap)
        failures: dict[str, str] = {}
        standbys = 0
        while queue:
            address = queue.pop(0)
            if address in failures:
                continue
            try:
                response = self._invoke(
                    address,
                    "DescribeCluster",
                    pb.DescribeClusterRequest(),
                    self._discovery_timeout_s,
                )
            except ControllerMovedError as moved:
                failures[address] = moved.error.message.removeprefix(f"controller at {address} is ")
                continue
            except TieredError as e:
                failures[address] = f"{e.code.name}: {e.message}"
                continue
            error = _error(response.error)
            if error is None:
                with self._lock:
                    self._controller = address
                return address
            failures[address] = f"{error.code.name}: {error.message}"
            if error.code is ErrorCode.NOT_CONTROLLER:
                standbys += 1
                named = response.controller_endpoint.strip()
                if named and named not in failures and named not in queue:
                    queue.insert(0, named)
        reasons = "; ".join(f"{a}: {why}" for a, why in failures.items())
        if standbys == len(failures):
            raise ControllerMovedError(
                TieredError(
                    ErrorCode.NOT_CONTROLLER,
                    f"no active controller; only standbys answered ({reasons})",
                )
            )
        if standbys:
            # A standby answered and the controller it names is gone: a failover in progress.
            raise ControllerMovedError(
                TieredError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"no active controller reachable ({reasons})"
                )
            )
        raise TieredError(
            ErrorCode.BROKER_NOT_AVAILABLE, f"no active controller reachable ({reasons})"
        )
