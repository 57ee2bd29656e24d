"""What ``bench/kafka_protocol.py`` measures the Kafka path against: the same records (one set
of record batches v2, built once) sent through the gRPC Produce/Fetch, and a floor.

The floor is the least a broker could do for the same traffic: a bare loopback TCP server in a
process of its own (:class:`FloorServer`: one connection, one request at a time, as a Kafka
broker serves a connection):

- *produce*: reads length-prefixed frames as large as the ProduceRequests a Kafka client sends
  for the same batches (``PRODUCE_REQUEST_OVERHEAD`` bytes of request header and fields, then the
  record batch), appends the batch bytes to one file, fsyncs it (as the broker fsyncs every
  append) and answers an ``ACK_BYTES`` ack (about a ProduceResponse for one partition); the
  client keeps up to ``IN_FLIGHT`` frames unanswered, as the producer does;
- *fetch*: reads a small request naming a file range (the whole batches a fetch of
  ``FETCH_MAX_BYTES`` returns), reads those bytes from the file (``os.pread``) and sends them
  behind ``FETCH_RESPONSE_OVERHEAD`` bytes of response header.

Nothing in the floor parses Kafka messages: frames only have the sizes of the real ones. This
module has no ``__main__`` (``scripts/bench.sh`` runs every bench script that has one): the
server is started with ``python -c``.

Each phase function returns its figures and a check of what it did (:data:`Checked`), run after
the phase's CPU time is read.
"""

from __future__ import annotations

import datetime
import os
import random
import resource
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from crc32c import crc32c
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i64

from tests.support.kafka_wire import encode_request
from tiered.kafka.record_batch import iter_batches
from tiered.kafka.records import Record, build_batch
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import records_pb2

MB = 1_000_000
RECORD_BYTES = 1024
BATCH_BYTES = 1024 * 1024  # the producer's batch.size
FETCH_MAX_BYTES = 8 * 1024 * 1024  # every path's fetch size (the consumer's too)
IN_FLIGHT = 5  # the producer's max.in.flight.requests.per.connection, the floor's too
STALL_S = 120.0  # a request unanswered this long fails the run
VALUE_TAIL = random.Random(14).randbytes(RECORD_BYTES - 8)
REPO_ROOT = Path(__file__).resolve().parent.parent

LENGTH = struct.Struct(">i")  # every frame's size prefix, as Kafka's
FILE_RANGE = struct.Struct(">qi")  # a fetch request's position and length
# About what a ProduceRequest (v9, one topic, one partition) carries around its batch, and a
# ProduceResponse for one partition; a FetchRequest, and a FetchResponse's bytes before records.
PRODUCE_REQUEST_OVERHEAD = 64
ACK_BYTES = 64
FETCH_REQUEST_BYTES = 96
FETCH_RESPONSE_OVERHEAD = 80
READY = "floor listening on port "
CPU = "floor server CPU seconds "


# ----------------------------------------------------------------------------- the records


def value(index: int) -> bytes:
    return index.to_bytes(8, "big") + VALUE_TAIL


@dataclass(frozen=True)
class Workload:
    records: int
    per_batch: int
    batches: list[bytes]
    values_crc: int  # CRC32C of every value, in order
    timestamp_ms: int

    @property
    def value_bytes(self) -> int:
        return self.records * RECORD_BYTES

    @property
    def batch_bytes(self) -> int:
        return sum(len(b) for b in self.batches)

    def batch_signatures(self) -> list[tuple[int, int]]:
        """(records, CRC32C) of each batch: a fetch returns them unchanged (the broker rewrites
        only the base offset and leader epoch, which the CRC does not cover)."""
        return [(h.records_count, h.crc) for b in self.batches for h in iter_batches(b)]


def make_batches(first: int, count: int, per_batch: int, timestamp_ms: int) -> list[bytes]:
    return [
        build_batch([Record(None, value(i), timestamp=timestamp_ms) for i in range(start, end)])
        for start in range(first, first + count, per_batch)
        for end in [min(first + count, start + per_batch)]
    ]


def build_workload(size_bytes: int) -> Workload:
    timestamp_ms = int(time.time() * 1000)
    per_batch = (BATCH_BYTES - 61) // (RECORD_BYTES + 8)
    while len(make_batches(0, per_batch + 1, per_batch + 1, timestamp_ms)[0]) <= BATCH_BYTES:
        per_batch += 1  # as many as fit in batch.size, as the Kafka producer fills a batch
    records = size_bytes // RECORD_BYTES
    checksum = 0
    for i in range(records):
        checksum = crc32c(value(i), checksum)
    batches = make_batches(0, records, per_batch, timestamp_ms)
    return Workload(records, per_batch, batches, checksum, timestamp_ms)


# ----------------------------------------------------------------------------- the wire


def _recv_exactly(sock: socket.socket, view: memoryview) -> bool:
    """Fills ``view``; False if the peer closed before the first byte (EOFError mid-way)."""
    received = 0
    while received < len(view):
        n = sock.recv_into(view[received:])
        if n == 0:
            if received == 0:
                return False
            raise EOFError(f"connection closed after {received} of {len(view)} bytes")
        received += n
    return True


def _read_frame(sock: socket.socket) -> bytearray | None:
    """The next length-prefixed frame's body, None at the end of the stream."""
    prefix = bytearray(LENGTH.size)
    if not _recv_exactly(sock, memoryview(prefix)):
        return None
    body = bytearray(LENGTH.unpack(prefix)[0])
    if not _recv_exactly(sock, memoryview(body)):
        raise EOFError("connection closed between a frame's length and its body")
    return body


Request = tuple[bytes, bytes]
"""A request frame as its head (size prefix, header, fields) and a body sent as it is."""


def exchange(
    port: int, requests: Sequence[Request], in_flight: int
) -> tuple[float, list[bytearray]]:
    """Sends the requests over one loopback connection, up to ``in_flight`` unanswered (as a
    producer's max.in.flight.requests.per.connection; a consumer has one fetch in flight), and
    reads a length-prefixed answer to each; (seconds from the first send to the last answer,
    the answers' bodies)."""
    answers: list[bytearray] = []

    def answer() -> None:
        frame = _read_frame(sock)
        if frame is None:
            raise EOFError(f"the server closed the connection after {len(answers)} answers")
        answers.append(frame)

    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = 0
        start = time.perf_counter()
        for head, body in requests:
            if pending == in_flight:
                answer()
                pending -= 1
            sock.sendall(head)
            sock.sendall(body)
            pending += 1
        for _ in range(pending):
            answer()
        seconds = time.perf_counter() - start
    return seconds, answers


# ----------------------------------------------------------------------------- the floor server


def _serve_produce(conn: socket.socket, path: Path) -> None:
    ack = LENGTH.pack(ACK_BYTES) + bytes(ACK_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while (frame := _read_frame(conn)) is not None:
            batch = memoryview(frame)[PRODUCE_REQUEST_OVERHEAD:]
            written = 0
            while written < len(batch):
                written += os.write(fd, batch[written:])
            os.fsync(fd)
            conn.sendall(ack)
    finally:
        os.close(fd)


def _serve_fetch(conn: socket.socket, path: Path) -> None:
    header = bytes(FETCH_RESPONSE_OVERHEAD)
    fd = os.open(path, os.O_RDONLY)
    try:
        while (frame := _read_frame(conn)) is not None:
            position, length = FILE_RANGE.unpack_from(frame)
            data = os.pread(fd, length, position)
            conn.sendall(LENGTH.pack(len(header) + len(data)) + header)
            conn.sendall(data)
    finally:
        os.close(fd)


def serve(argv: Sequence[str]) -> None:
    """The server process: ``produce PATH`` or ``fetch PATH``. Prints ``READY`` and the port,
    serves one connection until the client closes it, prints ``CPU`` and the CPU seconds
    serving it took, then exits."""
    kind, path = argv[0], Path(argv[1])
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(f"{READY}{listener.getsockname()[1]}", flush=True)
        conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        before = _cpu_seconds()
        (_serve_produce if kind == "produce" else _serve_fetch)(conn, path)
    print(f"{CPU}{_cpu_seconds() - before}", flush=True)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class FloorServer:
    """A floor server process (``kind`` produce or fetch on ``path``); once its client has
    closed the connection and the context is left, ``cpu_s`` is the CPU it used serving it."""

    def __init__(self, kind: str, path: Path) -> None:
        self.process, self.port = spawn_server("bench.kafka_floor", [kind, str(path)], READY)
        self.cpu_s = 0.0

    def __enter__(self) -> FloorServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cpu_s = finish_server(self.process, CPU)


def spawn_server(
    module: str, argv: Sequence[str], ready: str, *, stdin: bool = False
) -> tuple[subprocess.Popen[str], int]:
    """Starts ``MODULE.serve(argv)`` in a process of its own (the checkout importable) and
    returns it with the port it printed after ``ready``; ``stdin`` gives it a pipe to close."""
    code = f"import sys; from {module} import serve; serve(sys.argv[1:])"
    inherited = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), inherited]))}
    process = subprocess.Popen(
        [sys.executable, "-c", code, *argv],
        stdin=subprocess.PIPE if stdin else None,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(ready):
        process.kill()
        raise RuntimeError(f"{module} did not start: {line!r}")
    return process, int(line[len(ready) :])


def finish_server(process: subprocess.Popen[str], cpu: str) -> float:
    """Closes the server's stdin (if it has one), waits for it to end and returns the CPU
    seconds it printed after ``cpu`` (0 if it printed none)."""
    assert process.stdout is not None
    if process.stdin is not None:
        process.stdin.close()
    line = process.stdout.readline()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return float(line[len(cpu) :]) if line.startswith(cpu) else 0.0


def fetch_ranges(batch_sizes: Sequence[int], max_bytes: int) -> list[tuple[int, int]]:
    """The (position, length) ranges fetches of ``max_bytes`` return: whole batches while they
    fit, at least one (KIP-74), as the broker answers."""
    ranges: list[tuple[int, int]] = []
    position = length = 0
    for size in batch_sizes:
        if length and length + size > max_bytes:
            ranges.append((position, length))
            position, length = position + length, 0
        length += size
    if length:
        ranges.append((position, length))
    return ranges


# ----------------------------------------------------------------------------- floor phases


Checked = tuple[dict[str, Any], Callable[[], list[str]]]
"""A timed phase's figures, and what checks what it did (run after the CPU is read)."""


def figures(seconds: float, workload: Workload, **extra: Any) -> dict[str, Any]:
    return {"seconds": seconds, "mb_per_s": workload.value_bytes / seconds / MB, **extra}


def failed(problem: str) -> Checked:
    return {}, lambda: [problem]


def floor_produce(path: Path, workload: Workload) -> Checked:
    padding = bytes(PRODUCE_REQUEST_OVERHEAD)
    requests = [(LENGTH.pack(len(padding) + len(b)) + padding, b) for b in workload.batches]
    with FloorServer("produce", path) as server:
        seconds, answers = exchange(server.port, requests, IN_FLIGHT)

    def check() -> list[str]:
        if len(answers) == len(requests) and path.read_bytes() == b"".join(workload.batches):
            return []
        return [f"the floor file holds {path.stat().st_size} bytes, not the batches sent"]

    return figures(seconds, workload, requests=len(requests), server_cpu_s=server.cpu_s), check


def floor_fetch(path: Path, workload: Workload) -> Checked:
    ranges = fetch_ranges([len(b) for b in workload.batches], FETCH_MAX_BYTES)
    padding = bytes(FETCH_REQUEST_BYTES - FILE_RANGE.size)
    head = LENGTH.pack(FETCH_REQUEST_BYTES)
    requests = [(head + FILE_RANGE.pack(*r) + padding, b"") for r in ranges]
    with FloorServer("fetch", path) as server:
        seconds, answers = exchange(server.port, requests, 1)

    def check() -> list[str]:
        data = b"".join(memoryview(a)[FETCH_RESPONSE_OVERHEAD:] for a in answers)
        if data == b"".join(workload.batches):
            return []
        return [f"the floor fetch got {len(data)} bytes, not the {workload.batch_bytes} written"]

    return figures(seconds, workload, requests=len(ranges), server_cpu_s=server.cpu_s), check


# ----------------------------------------------------------------------------- gRPC phases


@dataclass(frozen=True)
class Partition:
    name: str
    topic_id: uuid.UUID
    index: int = 0

    @property
    def proto(self) -> records_pb2.TopicIdPartition:
        return records_pb2.TopicIdPartition(
            topic_id=self.topic_id.bytes, topic=self.name, partition=self.index
        )


def grpc_append(
    stub: pb_grpc.BrokerServiceStub, partition: Partition, batches: Sequence[bytes], first: int
) -> list[str]:
    """Produces each batch, one request at a time; the problems seen (errors, offsets)."""
    tp = partition.proto
    expected = first
    for batch in batches:
        response = stub.Produce(pb.ProduceRequest(partition=tp, records=batch), timeout=STALL_S)
        if response.error.code:
            return [f"gRPC Produce to {partition.name}: {response.error}"]
        if response.base_offset != expected:
            return [f"gRPC Produce to {partition.name} at {response.base_offset}, not {expected}"]
        expected = response.last_offset + 1
    return []


def grpc_produce(stub: Any, partition: Partition, workload: Workload) -> Checked:
    start = time.perf_counter()
    problems = grpc_append(stub, partition, workload.batches, 0)
    seconds = time.perf_counter() - start
    return figures(seconds, workload, requests=len(workload.batches)), lambda: [
        *problems,
        *check_end(stub, partition, workload),
    ]


def grpc_fetch(stub: Any, partition: Partition, workload: Workload, remote: bool) -> Checked:
    """Fetches the records in order; the check compares the batches with the ones produced."""
    tp, name = partition.proto, partition.name
    blobs: list[bytes] = []
    offset = not_remote = 0
    start = time.perf_counter()
    while offset < workload.records:
        response = stub.Fetch(
            pb.FetchRequest(partition=tp, offset=offset, max_bytes=FETCH_MAX_BYTES),
            timeout=STALL_S,
        )
        if response.error.code:
            return failed(f"gRPC Fetch {name} at {offset}: {response.error}")
        headers = list(iter_batches(response.records, verify=False, allow_truncated_tail=True))
        if not headers:
            return failed(f"gRPC Fetch {name} at {offset} returned no batch")
        not_remote += remote and not response.from_remote
        blobs.append(response.records)
        offset = headers[-1].last_offset + 1
    seconds = time.perf_counter() - start

    def check() -> list[str]:
        problems = check_fetched(blobs, workload, name)
        if not_remote:
            problems.append(f"{not_remote} of {len(blobs)} remote fetches were served locally")
        return problems

    return figures(seconds, workload, requests=len(blobs)), check


def check_fetched(blobs: Sequence[bytes], workload: Workload, name: str) -> list[str]:
    signatures: list[tuple[int, int]] = []
    next_offset = 0
    for blob in blobs:
        for header in iter_batches(blob, verify=True, allow_truncated_tail=True):
            if header.base_offset >= workload.records:
                break  # padding after the data
            if header.base_offset != next_offset:
                return [f"{name}: a batch at offset {header.base_offset}, not {next_offset}"]
            signatures.append((header.records_count, header.crc))
            next_offset = header.last_offset + 1
    if signatures != workload.batch_signatures():
        return [
            f"{name}: the {len(signatures)} batches fetched (to offset {next_offset}) are not "
            f"the {len(workload.batches)} produced (record counts and CRC32C)"
        ]
    return []


def check_end(stub: Any, partition: Partition, workload: Workload) -> list[str]:
    end = list_offsets(stub, partition).log_end_offset
    if end != workload.records:
        return [f"{partition.name} ends at offset {end}, not {workload.records}"]
    return []


def list_offsets(stub: pb_grpc.BrokerServiceStub, partition: Partition) -> pb.PartitionOffsets:
    response = stub.ListOffsets(pb.ListOffsetsRequest(partition=partition.proto), timeout=30)
    if response.error.code:
        raise RuntimeError(f"ListOffsets {partition.name}: {response.error}")
    return response.offsets


# ----------------------------------------------------------------------------- bare Kafka client
# The floor's client against the broker's Kafka listener: pre-encoded requests for the same
# batches, no client library. What the broker alone costs, next to the floor's server.


def bare_kafka_produce(port: int, stub: Any, partition: Partition, workload: Workload) -> Checked:
    """ProduceRequest v9 (acks 1) frames, one batch each, ``IN_FLIGHT`` unanswered."""
    requests = [
        (
            encode_request(
                ProduceRequest(
                    acks=i16(1),
                    timeout=datetime.timedelta(seconds=STALL_S),
                    topic_data=(
                        TopicProduceData(
                            name=TopicName(partition.name),
                            partition_data=(PartitionProduceData(index=i32(0), records=batch),),
                        ),
                    ),
                ),
                n,
            ),
            b"",
        )
        for n, batch in enumerate(workload.batches)
    ]
    seconds, _ = exchange(port, requests, IN_FLIGHT)
    # Answers are not decoded: the log must end at the record count and hold the same batches.
    return figures(seconds, workload, requests=len(requests)), lambda: [
        *check_end(stub, partition, workload),
        *grpc_fetch(stub, partition, workload, remote=False)[1](),
    ]


def fetch_request(topic: str, offset: int, correlation_id: int) -> bytes:
    return encode_request(
        FetchRequest(
            max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=i32(1),
            max_bytes=i32(FETCH_MAX_BYTES),
            topics=(
                FetchTopic(
                    topic=TopicName(topic),
                    partitions=(
                        FetchPartition(
                            partition=i32(0),
                            fetch_offset=i64(offset),
                            partition_max_bytes=i32(FETCH_MAX_BYTES),
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        ),
        correlation_id,
    )


def bare_kafka_fetch(port: int, partition: Partition, workload: Workload) -> Checked:
    """FetchRequest v12 frames, one at a time, each at the offset after the last whole batch
    of the previous answer (decoded with kio, as any client must)."""
    blobs: list[bytes] = []
    offset = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        while offset < workload.records:
            sock.sendall(fetch_request(partition.name, offset, len(blobs)))
            frame = _read_frame(sock)
            if frame is None:
                return failed(f"the broker closed the connection fetching {partition.name}")
            answer = bytes(frame)  # kio reads from read-only buffers
            _, header_size = entity_reader(ResponseHeader)(answer, 0)
            response, _ = entity_reader(FetchResponse)(answer, header_size)
            data = response.responses[0].partitions[0]
            records = data.records or b""
            headers = list(iter_batches(records, verify=False, allow_truncated_tail=True))
            if data.error_code != ErrorCode.none or not headers:
                return failed(f"bare Kafka fetch {partition.name} at {offset}: {data.error_code}")
            blobs.append(records)
            offset = headers[-1].last_offset + 1
        seconds = time.perf_counter() - start
    return figures(seconds, workload, requests=len(blobs)), lambda: check_fetched(
        blobs, workload, partition.name
    )
