"""The Kafka consumer's own ceiling: confluent-kafka fetching the floor's file from a stub broker.

The floor fetch (``kafka_floor``) is a raw socket client; a Kafka consumer does much more per
record (librdkafka parses every batch and hands out one message object per record), and on a
small machine that client work, not the broker, may bound what any broker can show. This stub
measures that bound: this repo's Kafka listener (``broker.listener.server``) with a handler that
knows one single-partition topic stored in the floor's file and nothing else. Metadata and
FindCoordinator name the stub itself; Fetch answers whole batches from the file (``os.pread``,
the ranges the broker answers, found by bisecting the batches' base offsets). No log, index,
partition lookup or controller: the same consumer reading the same bytes, minus the broker.

The stub is a process of its own (``python -c``, as the floor's servers): it prints ``READY``
and its port, serves until its stdin closes, then prints the CPU seconds it used.
"""

from __future__ import annotations

import bisect
import os
import resource
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kio.schema.errors import ErrorCode

from bench.kafka_clients import kafka_consume
from bench.kafka_floor import Checked, Workload, finish_server, spawn_server
from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import RequestContext
from broker.listener.server import KafkaServer, ListenerSettings
from tests.support.kafka_wire import NO_THROTTLE, OneTopicHandler
from tiered.kafka.messages import build, nested, response_type_for
from tiered.kafka.record_batch import LOG_OVERHEAD, assign_offsets, parse_batch_header

__all__ = ["STUB_TOPIC", "stub_consume"]

STUB_TOPIC = "floor"
READY = "stub broker listening on port "
CPU = "stub broker CPU seconds "
# ApiVersions, Metadata, Fetch, FindCoordinator, and Produce (OneTopicHandler has it)
_BATCH_LENGTH = struct.Struct(">i")  # after the base offset: the bytes that follow
_REGISTRY = {18: (0, 4), 3: (0, 12), 1: (4, 12), 10: (0, 6), 0: (3, 11)}


def stub_consume(path: Path, workload: Workload) -> Checked:
    """``kafka_consume`` of the floor file's records through the stub broker."""
    with StubBroker(path) as stub:
        result, check = kafka_consume(f"127.0.0.1:{stub.port}", STUB_TOPIC, workload)
    result["server_cpu_s"] = stub.cpu_s
    return result, check


class StubBroker:
    """The stub process serving ``path``; ``cpu_s`` once the context is left."""

    def __init__(self, path: Path) -> None:
        self.process, self.port = spawn_server("bench.kafka_stub", [str(path)], READY, stdin=True)
        self.cpu_s = 0.0

    def __enter__(self) -> StubBroker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cpu_s = finish_server(self.process, CPU)


def serve(argv: Sequence[str]) -> None:
    """The stub process: serves the file ``argv[0]`` until stdin closes."""
    handler = FloorFileHandler(Path(argv[0]))
    server = KafkaServer(handler, ListenerSettings(), ApiVersionRegistry(_REGISTRY))
    server.start()
    handler.port = server.address[1]
    before = _cpu_seconds()  # serving only, not the copy the handler made
    print(f"{READY}{handler.port}", flush=True)
    sys.stdin.read()  # until the bench closes our stdin
    server.stop()
    print(f"{CPU}{_cpu_seconds() - before}", flush=True)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class FloorFileHandler(OneTopicHandler):
    """Metadata (``OneTopicHandler``), FindCoordinator and Fetch for the one partition of
    ``STUB_TOPIC`` whose batches are the file's."""

    def __init__(self, path: Path) -> None:
        super().__init__(STUB_TOPIC)
        self._positions: list[int] = []
        self._base_offsets: list[int] = []
        self._end_offset = 0
        # The floor's batches all start at offset 0 (nobody assigned them any): a copy with
        # offsets assigned, as a log holds them, made before serving (untimed).
        served = path.with_name(path.name + ".stub")
        with path.open("rb") as source, served.open("wb") as copy:
            while head := source.read(LOG_OVERHEAD):
                batch = bytearray(head + source.read(_BATCH_LENGTH.unpack_from(head, 8)[0]))
                header = parse_batch_header(batch, 0)
                self._positions.append(copy.tell())
                self._base_offsets.append(self._end_offset)
                self._end_offset = assign_offsets(batch, header, self._end_offset, 0)
                copy.write(batch)
            self._positions.append(copy.tell())
        self._fd = os.open(served, os.O_RDONLY)
        served.unlink()  # gone with the process

    def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        response_type = response_type_for(request)
        answer = {
            "node_id": 1,
            "host": "127.0.0.1",
            "port": self.port,
            "error_code": ErrorCode.none,
            "error_message": None,
        }
        if not hasattr(request, "coordinator_keys"):
            return build(response_type, throttle_time=NO_THROTTLE, **answer)
        coordinator_type = nested(response_type, "Coordinator")
        coordinators = tuple(
            build(coordinator_type, key=key, **answer) for key in request.coordinator_keys
        )
        return build(response_type, throttle_time=NO_THROTTLE, coordinators=coordinators)

    def fetch(self, request: Any, context: RequestContext) -> Any:
        response_type = response_type_for(request)
        partition_type = nested(response_type, "PartitionData")
        budget = int(request.max_bytes)
        topics = []
        for topic in request.topics:
            partitions = []
            for asked in topic.partitions:
                records = b""
                code = ErrorCode.unknown_topic_or_partition
                if topic.topic == STUB_TOPIC and int(asked.partition) == 0:
                    code = ErrorCode.none
                    records = self._read(
                        int(asked.fetch_offset), min(budget, int(asked.partition_max_bytes))
                    )
                    budget -= len(records)
                partitions.append(
                    build(
                        partition_type,
                        partition_index=int(asked.partition),
                        error_code=code,
                        high_watermark=self._end_offset,
                        last_stable_offset=self._end_offset,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=records,
                    )
                )
            topics.append(
                build(
                    nested(response_type, "FetchableTopicResponse"),
                    topic=topic.topic,
                    partitions=tuple(partitions),
                )
            )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            session_id=0,
            responses=tuple(topics),
        )

    def _read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``offset`` while they fit, at least one."""
        first = bisect.bisect_right(self._base_offsets, offset) - 1
        if offset >= self._end_offset or first < 0:
            return b""
        last = first + 1
        while (
            last < len(self._base_offsets)
            and self._positions[last + 1] - self._positions[first] <= max_bytes
        ):
            last += 1
        start = self._positions[first]
        return os.pread(self._fd, self._positions[last] - start, start)
