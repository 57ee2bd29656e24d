"""Test helpers for the Kafka listener: a raw-socket wire client and a one-topic handler."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import socket
import threading
import time
import types
import typing
import uuid
from collections.abc import Iterator
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import RequestContext
from broker.listener.server import KafkaServer, ListenerSettings
from cli.kafka_client.connection import KafkaConnection, encode_request
from tiered.kafka.messages import build, nested, response_type_for
from tiered.kafka.record_batch import validate_produce_records
from tiered.kafka.records import ConsumedRecord, decode_batch

__all__ = ["OneTopicHandler", "WireClient", "encode_request", "sample_message", "serving"]

NO_THROTTLE = datetime.timedelta(0)
UNKNOWN_OPERATIONS = -(2**31)


class WireClient(KafkaConnection):
    """A blocking client on one connection (the product's), plus what listener tests need:
    raw bytes out, and whether the server closes. Every read has a deadline."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0) -> None:
        sock = socket.create_connection(address, timeout=timeout)
        super().__init__(sock, f"{address[0]}:{address[1]}", client_id="wire-test")

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """Whether the server closes the connection within ``timeout`` (data is discarded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                if not self.sock.recv(65536):
                    return True
            except TimeoutError:
                return False
            except ConnectionError:
                return True
        return False


@contextlib.contextmanager
def serving(
    handler: OneTopicHandler, registry: ApiVersionRegistry, **settings: Any
) -> Iterator[KafkaServer]:
    """A started listener for ``handler`` (which learns its port for Metadata answers)."""
    server = KafkaServer(handler, ListenerSettings(**settings), registry)
    server.start()
    handler.port = server.address[1]
    try:
        yield server
    finally:
        server.stop()


class OneTopicHandler:
    """Metadata for one broker (this listener) and one single-partition topic; Produce keeps
    every batch it accepts. Enough for real clients to list topics and produce."""

    def __init__(self, topic: str = "orders") -> None:
        self.topic = topic
        self.port = 0
        self.lock = threading.Lock()
        self.produced: list[tuple[int, list[ConsumedRecord]]] = []  # (acks, records)
        self._next_offset = 0

    def metadata(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        broker = build(
            nested(response_type, "MetadataResponseBroker"),
            node_id=1,
            host="127.0.0.1",
            port=self.port,
            rack=None,
        )
        partition = build(
            nested(response_type, "MetadataResponsePartition"),
            error_code=ErrorCode.none,
            partition_index=0,
            leader_id=1,
            leader_epoch=0,
            replica_nodes=(1,),
            isr_nodes=(1,),
            offline_replicas=(),
        )
        topic = build(
            nested(response_type, "MetadataResponseTopic"),
            error_code=ErrorCode.none,
            name=self.topic,
            topic_id=None,
            is_internal=False,
            partitions=(partition,),
            topic_authorized_operations=UNKNOWN_OPERATIONS,
        )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            brokers=(broker,),
            cluster_id="wire-test",
            controller_id=1,
            topics=(topic,),
            cluster_authorized_operations=UNKNOWN_OPERATIONS,
        )

    def produce(self, request: Any, context: RequestContext) -> ResponsePayload | None:
        response_type = response_type_for(request)
        topics = []
        for topic in request.topic_data:
            partitions = []
            for data in topic.partition_data:
                header = validate_produce_records(data.records)
                with self.lock:
                    base_offset = self._next_offset
                    self._next_offset += header.records_count
                    batch = bytearray(data.records)
                    self.produced.append((int(request.acks), decode_batch(batch, header)))
                partitions.append(
                    build(
                        nested(response_type, "PartitionProduceResponse"),
                        index=data.index,
                        error_code=ErrorCode.none,
                        base_offset=base_offset,
                        log_append_time=None,
                        log_start_offset=0,
                        record_errors=(),
                        error_message=None,
                    )
                )
            topics.append(
                build(
                    nested(response_type, "TopicProduceResponse"),
                    name=topic.name,
                    partition_responses=tuple(partitions),
                )
            )
        if request.acks == 0:
            return None
        return build(response_type, responses=tuple(topics), throttle_time=NO_THROTTLE)


_SAMPLES: dict[str, Any] = {
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 3,
    "uint32": 3,
    "int64": 4,
    "uint64": 4,
    "float64": 1.5,
    "bool": True,
    "string": "ab",
    "bytes": b"xy",
    "records": b"rec",
    "uuid": uuid.UUID(int=7),
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(milliseconds=5),
    "timedelta_i64": datetime.timedelta(milliseconds=6),
    "datetime_i64": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
}


def sample_message(entity_type: type[Any], array_length: int = 2) -> Any:
    """An instance of any kio message class with every field set (arrays of
    ``array_length``), so a test can write it with kio and walk the bytes."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(entity_type):
        field_type = _non_null(field.type)
        if typing.get_origin(field_type) is tuple:
            item_type = _non_null(typing.get_args(field_type)[0])
            values[field.name] = tuple(
                sample_message(item_type, array_length)
                if dataclasses.is_dataclass(item_type)
                else _SAMPLES[field.metadata["kafka_type"]]
                for _ in range(array_length)
            )
        elif dataclasses.is_dataclass(field_type):
            values[field.name] = sample_message(field_type, array_length)
        else:
            values[field.name] = _SAMPLES[field.metadata["kafka_type"]]
    return entity_type(**values)


def _non_null(field_type: Any) -> Any:
    if typing.get_origin(field_type) in (types.UnionType, typing.Union):
        return next(arg for arg in typing.get_args(field_type) if arg is not type(None))
    return field_type
