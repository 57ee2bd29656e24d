"""A fake AdminService for client and CLI tests: a real gRPC server on a free loopback port serving
an in-memory implementation.

What it models of the controller (docs/design.md §2 and docs/design.md §4): topics with configs,
KIP-950's tiered state machine (a disable moves ENABLED to DISABLING with ``tiered_epoch + 1``; the
test completes it with ``ack``/``complete_disable``), config validation errors, and a standby mode
that answers NOT_CONTROLLER (naming the active controller's endpoint). An empty topic name is
rejected with gRPC INVALID_ARGUMENT, as a servicer rejects a malformed request.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

import grpc

from cli.launch.ports import free_port
from tiered.errors import ErrorCode
from tiered.rpc.v1 import broker_pb2, metadata_pb2
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc

__all__ = ["DEFAULT_CONFIGS", "FakeAdminServer", "FakeAdminService", "FakeTopic"]

HOST = "127.0.0.1"

DEFAULT_CONFIGS: dict[str, str] = {
    "remote.storage.enable": "false",
    "remote.log.disable.policy": "retain",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "cleanup.policy": "delete",
    "retention.ms": "604800000",
}
_BOOLEANS = ("remote.storage.enable", "remote.log.copy.disable", "remote.log.delete.on.disable")
_STATE_TO_PROTO = {
    "ENABLED": metadata_pb2.ENABLED,
    "DISABLING": metadata_pb2.DISABLING,
    "DISABLED": metadata_pb2.DISABLED,
}


def _error(code: ErrorCode = ErrorCode.NONE, message: str = "") -> broker_pb2.Error:
    return broker_pb2.Error(code=int(code), name=code.name, message=message)


class _RejectedError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class FakeTopic:
    name: str
    partitions: int
    configs: dict[str, str]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    state: str = "DISABLED"
    epoch: int = 0
    policy: str = ""
    acked: set[int] = field(default_factory=set)  # partitions acked for the current disablement
    log_end_offsets: dict[int, int] = field(default_factory=dict)

    def effective(self, key: str) -> str:
        return self.configs.get(key, DEFAULT_CONFIGS.get(key, ""))


def _validate(configs: dict[str, str]) -> None:
    for key in _BOOLEANS:
        if key in configs and configs[key] not in ("true", "false"):
            raise _RejectedError(
                ErrorCode.INVALID_REQUEST,
                f"{key}={configs[key]!r} is not valid; valid values: true, false",
            )
    policy = configs.get("remote.log.disable.policy")
    if policy is not None and policy not in ("retain", "delete"):
        raise _RejectedError(
            ErrorCode.INVALID_REQUEST,
            f"remote.log.disable.policy={policy!r} is not valid; valid values: retain, delete",
        )
    cleanup = {p.strip() for p in configs.get("cleanup.policy", "delete").split(",")}
    if "compact" in cleanup and configs.get("remote.storage.enable") == "true":
        raise _RejectedError(ErrorCode.INVALID_CONFIG, "a compacted topic cannot be tiered")


class FakeAdminService(pb_grpc.AdminServiceServicer):
    def __init__(self, *, brokers: int = 3, controller_id: int = 1) -> None:
        self.brokers = brokers
        self.controller_id = controller_id
        # broker id -> (last_reached_ms, reachable) DescribeCluster reports; unset: (0, True)
        self.reach: dict[int, tuple[int, bool]] = {}
        self.address = ""  # set by FakeAdminServer
        self.topics: dict[str, FakeTopic] = {}
        self.calls: list[str] = []  # every RPC received, by method name
        self._standby_of: str | None = None  # None: active; else the active endpoint it names
        self._lock = threading.Lock()
        self._describes = threading.Condition(self._lock)
        self._describe_calls = 0
        self.answering = threading.Event()  # cleared: DescribeTopics hangs (a paused controller)
        self.answering.set()

    # -- test hooks

    def set_standby(self, active_endpoint: str = "") -> None:
        """Answer NOT_CONTROLLER from now on, naming ``active_endpoint``."""
        with self._lock:
            self._standby_of = active_endpoint

    def set_active(self) -> None:
        with self._lock:
            self._standby_of = None

    def ack(self, name: str, *partitions: int) -> int:
        """Brokers acked these partitions of the current disablement; all acked: DISABLED.
        Returns how many DescribeTopics calls came before the change."""
        with self._lock:
            topic = self.topics[name]
            assert topic.state == "DISABLING", topic.state
            topic.acked.update(partitions)
            if len(topic.acked) >= topic.partitions:
                topic.state = "DISABLED"
            return self._describe_calls

    def complete_disable(self, name: str) -> int:
        with self._lock:
            partitions = range(self.topics[name].partitions)
        return self.ack(name, *partitions)

    @property
    def describe_calls(self) -> int:
        with self._lock:
            return self._describe_calls

    def wait_for_describes(self, count: int, timeout: float = 10.0) -> bool:
        """Block until DescribeTopics has been called ``count`` times in all."""
        with self._describes:
            return self._describes.wait_for(lambda: self._describe_calls >= count, timeout)

    # -- helpers

    def _standby_error(self) -> broker_pb2.Error | None:
        if self._standby_of is None:
            return None
        return _error(ErrorCode.NOT_CONTROLLER, "this controller is a standby")

    def _apply_configs(
        self, topic: FakeTopic, configs: dict[str, str], touched: set[str], validate_only: bool
    ) -> None:
        _validate(configs)
        was_enabled = topic.effective("remote.storage.enable") == "true"
        enable = configs.get("remote.storage.enable", "false") == "true"
        if topic.state == "DISABLING" and "remote.storage.enable" in touched:
            raise _RejectedError(
                ErrorCode.TIERED_STORAGE_DISABLEMENT_IN_PROGRESS,
                f"topic {topic.name!r} is DISABLING (epoch {topic.epoch}); wait until it is "
                "DISABLED",
            )
        if validate_only:
            return
        topic.configs = dict(configs)
        if was_enabled and not enable:
            delete = (
                configs.get("remote.log.disable.policy") == "delete"
                or configs.get("remote.log.delete.on.disable") == "true"
            )
            topic.state = "DISABLING"
            topic.epoch += 1
            topic.policy = "delete" if delete else "retain"
            topic.acked = set()
        elif enable and topic.state == "DISABLED":
            topic.state = "ENABLED"

    def _alter_response(self, topic: FakeTopic) -> pb.AlterConfigsResponse:
        return pb.AlterConfigsResponse(
            error=_error(), tiered_state=_STATE_TO_PROTO[topic.state], tiered_epoch=topic.epoch
        )

    def _describe(self, topic: FakeTopic, include_partition_state: bool) -> pb.TopicDescription:
        partitions = []
        for p in range(topic.partitions):
            description = pb.PartitionDescription(
                partition=p,
                leader=p % self.brokers + 1,
                leader_available=include_partition_state,
                remote_log_start_offset=-1,
                remote_delete_state="",
                disable_acked=topic.state == "DISABLING" and p in topic.acked,
            )
            if include_partition_state:
                end = topic.log_end_offsets.get(p, 0)
                description.offsets.CopyFrom(
                    broker_pb2.PartitionOffsets(
                        log_start_offset=0, local_log_start_offset=0, log_end_offset=end
                    )
                )
            partitions.append(description)
        disabling = topic.state == "DISABLING"
        return pb.TopicDescription(
            name=topic.name,
            topic_id=topic.topic_id.bytes,
            tiered_state=_STATE_TO_PROTO[topic.state],
            tiered_epoch=topic.epoch,
            configs=topic.configs,
            partitions=partitions,
            disable_acks_owed=topic.partitions - len(topic.acked) if disabling else 0,
            disable_acks_total=topic.partitions if disabling else 0,
            disable_policy=topic.policy,
            error=_error(),
        )

    # -- AdminService

    def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: grpc.ServicerContext
    ) -> pb.CreateTopicsResponse:
        results = []
        with self._lock:
            self.calls.append("CreateTopics")
            standby = self._standby_error()
            for new in request.topics:
                if standby is not None:
                    results.append(pb.TopicResult(name=new.name, error=standby))
                    continue
                if not new.name:
                    context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "INVALID_REQUEST: topic name must not be empty",
                    )
                try:
                    if new.name in self.topics:
                        raise _RejectedError(
                            ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {new.name!r} already exists"
                        )
                    if new.partitions < 1:
                        raise _RejectedError(
                            ErrorCode.INVALID_PARTITIONS,
                            f"partitions must be at least 1, not {new.partitions}",
                        )
                    configs = dict(new.configs)
                    _validate(configs)
                except _RejectedError as e:
                    results.append(pb.TopicResult(name=new.name, error=_error(e.code, e.message)))
                    continue
                topic = FakeTopic(new.name, new.partitions, configs)
                if configs.get("remote.storage.enable") == "true":
                    topic.state = "ENABLED"
                if not request.validate_only:
                    self.topics[new.name] = topic
                results.append(
                    pb.TopicResult(name=new.name, error=_error(), topic_id=topic.topic_id.bytes)
                )
        return pb.CreateTopicsResponse(results=results)

    def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: grpc.ServicerContext
    ) -> pb.DeleteTopicsResponse:
        results = []
        with self._lock:
            self.calls.append("DeleteTopics")
            standby = self._standby_error()
            for name in request.names:
                if standby is not None:
                    results.append(pb.TopicResult(name=name, error=standby))
                    continue
                topic = self.topics.pop(name, None)
                if topic is None:
                    error = _error(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                    )
                    results.append(pb.TopicResult(name=name, error=error))
                else:
                    results.append(
                        pb.TopicResult(name=name, error=_error(), topic_id=topic.topic_id.bytes)
                    )
        return pb.DeleteTopicsResponse(results=results)

    def DescribeTopics(
        self, request: pb.DescribeTopicsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeTopicsResponse:
        self.answering.wait()
        with self._lock:
            self.calls.append("DescribeTopics")
            self._describe_calls += 1
            self._describes.notify_all()
            standby = self._standby_error()
            if standby is not None:
                names = list(request.names) or [""]
                return pb.DescribeTopicsResponse(
                    topics=[pb.TopicDescription(name=n, error=standby) for n in names]
                )
            names = list(request.names) or sorted(self.topics)
            topics = []
            for name in names:
                topic = self.topics.get(name)
                if topic is None:
                    error = _error(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                    )
                    topics.append(pb.TopicDescription(name=name, error=error))
                else:
                    topics.append(self._describe(topic, request.include_partition_state))
        return pb.DescribeTopicsResponse(topics=topics)

    def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeConfigsResponse:
        with self._lock:
            self.calls.append("DescribeConfigs")
            standby = self._standby_error()
            if standby is not None:
                return pb.DescribeConfigsResponse(error=standby)
            topic = self.topics.get(request.topic)
            if topic is None:
                return pb.DescribeConfigsResponse(
                    error=_error(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {request.topic!r} does not exist",
                    )
                )
            entries = [
                pb.ConfigEntry(name=k, value=v, is_default=False)
                for k, v in sorted(topic.configs.items())
            ]
            entries += [
                pb.ConfigEntry(name=k, value=v, is_default=True)
                for k, v in sorted(DEFAULT_CONFIGS.items())
                if k not in topic.configs
            ]
        return pb.DescribeConfigsResponse(error=_error(), entries=entries)

    def _alter(
        self,
        method: str,
        topic_name: str,
        build: Callable[[FakeTopic], tuple[dict[str, str], set[str]]],
        validate_only: bool,
    ) -> pb.AlterConfigsResponse:
        with self._lock:
            self.calls.append(method)
            standby = self._standby_error()
            if standby is not None:
                return pb.AlterConfigsResponse(error=standby)
            topic = self.topics.get(topic_name)
            if topic is None:
                return pb.AlterConfigsResponse(
                    error=_error(
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        f"topic {topic_name!r} does not exist",
                    )
                )
            try:
                configs, touched = build(topic)
                self._apply_configs(topic, configs, touched, validate_only)
            except _RejectedError as e:
                return pb.AlterConfigsResponse(error=_error(e.code, e.message))
            return self._alter_response(topic)

    def AlterConfigs(
        self, request: pb.AlterConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterConfigsResponse:
        return self._alter(
            "AlterConfigs",
            request.topic,
            lambda t: (dict(request.configs), set(t.configs) | set(request.configs)),
            request.validate_only,
        )

    def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterConfigsResponse:
        def build(topic: FakeTopic) -> tuple[dict[str, str], set[str]]:
            duplicated = set(request.set) & set(request.delete)
            if duplicated:
                raise _RejectedError(
                    ErrorCode.INVALID_REQUEST, f"duplicate config keys {sorted(duplicated)}"
                )
            configs = {k: v for k, v in topic.configs.items() if k not in request.delete}
            configs.update(request.set)
            return configs, set(request.set) | set(request.delete)

        return self._alter("IncrementalAlterConfigs", request.topic, build, request.validate_only)

    def AlterTopicConfigs(
        self, request: pb.AlterTopicConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterTopicConfigsResponse:
        """Each topic's SET and DELETE operations, as IncrementalAlterConfigs applies them."""
        results = []
        for alteration in request.topics:
            to_set = {
                c.name: c.value
                for c in alteration.configs
                if c.operation == pb.CONFIG_OPERATION_SET
            }
            to_delete = {
                c.name for c in alteration.configs if c.operation == pb.CONFIG_OPERATION_DELETE
            }

            def build(
                topic: FakeTopic, to_set: dict[str, str] = to_set, to_delete: set[str] = to_delete
            ) -> tuple[dict[str, str], set[str]]:
                configs = {k: v for k, v in topic.configs.items() if k not in to_delete}
                configs.update(to_set)
                return configs, set(to_set) | to_delete

            answer = self._alter(
                "AlterTopicConfigs", alteration.topic, build, request.validate_only
            )
            if answer.error.code == ErrorCode.NOT_CONTROLLER.value:
                return pb.AlterTopicConfigsResponse(error=answer.error)
            results.append(
                pb.AlterTopicConfigsResult(
                    topic=alteration.topic,
                    error=answer.error,
                    tiered_state=answer.tiered_state,
                    tiered_epoch=answer.tiered_epoch,
                )
            )
        return pb.AlterTopicConfigsResponse(results=results, error=_error())

    def DescribeCluster(
        self, request: pb.DescribeClusterRequest, context: grpc.ServicerContext
    ) -> pb.DescribeClusterResponse:
        with self._lock:
            self.calls.append("DescribeCluster")
            standby = self._standby_error()
            brokers = [
                pb.BrokerDescription(
                    broker_id=b,
                    host=HOST,
                    port=9092 + b,
                    fenced=False,
                    last_reached_ms=self.reach.get(b, (0, True))[0],
                    reachable=self.reach.get(b, (0, True))[1],
                )
                for b in range(1, self.brokers + 1)
            ]
            if standby is not None:
                return pb.DescribeClusterResponse(
                    controller_id=-1,
                    controller_endpoint=self._standby_of or "",
                    metadata_mode="kraft",
                    error=standby,
                )
            return pb.DescribeClusterResponse(
                controller_id=self.controller_id,
                controller_epoch=1,
                controller_endpoint=self.address,
                metadata_mode="kraft",
                brokers=brokers,
                error=_error(),
            )


class FakeAdminServer:
    """A started gRPC server around a FakeAdminService; ``address`` is ``127.0.0.1:PORT``."""

    def __init__(self, service: FakeAdminService | None = None) -> None:
        self.service = service or FakeAdminService()
        self.port = free_port()
        self.address = f"{HOST}:{self.port}"
        self.service.address = self.address
        self._server = grpc.server(ThreadPoolExecutor(max_workers=8))
        pb_grpc.add_AdminServiceServicer_to_server(self.service, self._server)  # type: ignore[no-untyped-call]
        self._server.add_insecure_port(self.address)
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None).wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
