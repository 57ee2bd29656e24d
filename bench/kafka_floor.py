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

import os
import random
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


# ----------------------------------------------------------------------------- socket helpers


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


def _read_frame(sock: socket.socket, buffer: bytearray) -> memoryview | None:
    """The next length-prefixed frame's body (a view of ``buffer``), None at end of stream."""
    prefix = bytearray(LENGTH.size)
    if not _recv_exactly(sock, memoryview(prefix)):
        return None
    (size,) = LENGTH.unpack(prefix)
    if size > len(buffer):
        raise ValueError(f"a {size}-byte frame does not fit the {len(buffer)}-byte buffer")
    body = memoryview(buffer)[:size]
    if not _recv_exactly(sock, body):
        raise EOFError("connection closed between a frame's length and its body")
    return body


# ----------------------------------------------------------------------------- servers


def _serve_produce(conn: socket.socket, path: Path, max_frame: int) -> None:
    buffer = bytearray(max_frame)
    ack = bytes(ACK_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while (frame := _read_frame(conn, buffer)) is not None:
            batch = frame[PRODUCE_REQUEST_OVERHEAD:]
            written = 0
            while written < len(batch):
                written += os.write(fd, batch[written:])
            os.fsync(fd)
            conn.sendall(ack)
    finally:
        os.close(fd)


def _serve_fetch(conn: socket.socket, path: Path) -> None:
    buffer = bytearray(FETCH_REQUEST_BYTES)
    header = bytes(FETCH_RESPONSE_OVERHEAD)
    fd = os.open(path, os.O_RDONLY)
    try:
        while (frame := _read_frame(conn, buffer)) is not None:
            position, length = FILE_RANGE.unpack_from(frame)
            data = os.pread(fd, length, position)
            conn.sendall(LENGTH.pack(len(header) + len(data)) + header)
            conn.sendall(data)
    finally:
        os.close(fd)


def serve(argv: Sequence[str]) -> None:
    """The server process: ``produce PATH MAX_FRAME`` or ``fetch PATH``. Prints ``READY`` and
    the port, serves one connection until the client closes it, then exits."""
    kind, path = argv[0], Path(argv[1])
    with socket.create_server(("127.0.0.1", 0)) as listener:
        print(f"{READY}{listener.getsockname()[1]}", flush=True)
        conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if kind == "produce":
            _serve_produce(conn, path, int(argv[2]))
        else:
            _serve_fetch(conn, path)


class FloorServer:
    """A floor server process (``kind`` produce or fetch on ``path``) and a connection to it."""

    def __init__(self, kind: str, path: Path, max_frame: int = 0) -> None:
        code = "import sys; from bench.kafka_floor import serve; serve(sys.argv[1:])"
        inherited = os.environ.get("PYTHONPATH")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), inherited])),
        }
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, kind, str(path), str(max_frame)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(READY):
            self.process.kill()
            raise RuntimeError(f"the floor server did not start: {line!r}")
        self.sock = socket.create_connection(("127.0.0.1", int(line[len(READY) :])))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def __enter__(self) -> FloorServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.sock.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ----------------------------------------------------------------------------- clients


def produce(path: Path, batches: Sequence[bytes], in_flight: int) -> float:
    """Sends every batch as a produce frame, up to ``in_flight`` unanswered (as a producer's
    max.in.flight.requests.per.connection); the seconds from the first send to the last ack.
    The server appends the batches to ``path``."""
    max_frame = PRODUCE_REQUEST_OVERHEAD + max(len(b) for b in batches)
    ack = memoryview(bytearray(ACK_BYTES))
    padding = bytes(PRODUCE_REQUEST_OVERHEAD)
    with FloorServer("produce", path, max_frame) as server:
        sock = server.sock
        pending = 0
        start = time.perf_counter()
        for batch in batches:
            if pending == in_flight:
                _recv_exactly(sock, ack)
                pending -= 1
            sock.sendall(LENGTH.pack(len(padding) + len(batch)) + padding)
            sock.sendall(batch)
            pending += 1
        for _ in range(pending):
            _recv_exactly(sock, ack)
        return time.perf_counter() - start


def fetch_ranges(batch_sizes: Sequence[int], max_bytes: int) -> list[tuple[int, int]]:
    """The file ranges fetches of ``max_bytes`` return: whole batches while they fit, at least
    one (KIP-74), as the broker answers."""
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


def fetch(path: Path, ranges: Sequence[tuple[int, int]]) -> tuple[float, int, int]:
    """Fetches each range of ``path``, one request at a time; (seconds, bytes received without
    the response headers, their CRC32C)."""
    largest = FETCH_RESPONSE_OVERHEAD + max(length for _, length in ranges)
    buffer = bytearray(largest)
    padding = bytes(FETCH_REQUEST_BYTES - FILE_RANGE.size)
    received = checksum = 0
    with FloorServer("fetch", path) as server:
        sock = server.sock
        start = time.perf_counter()
        for position, length in ranges:
            request = FILE_RANGE.pack(position, length) + padding
            sock.sendall(LENGTH.pack(len(request)) + request)
            frame = _read_frame(sock, buffer)
            if frame is None:
                raise EOFError("the floor fetch server closed the connection")
            data = frame[FETCH_RESPONSE_OVERHEAD:]
            received += len(data)
            checksum = crc32c(data, checksum)
        return time.perf_counter() - start, received, checksum


# ----------------------------------------------------------------------------- floor phases


Checked = tuple[dict[str, Any], Callable[[], list[str]]]
"""A timed phase's figures, and what checks what it did (run after the CPU is read)."""


def figures(seconds: float, workload: Workload, **extra: Any) -> dict[str, Any]:
    return {"seconds": seconds, "mb_per_s": workload.value_bytes / seconds / MB, **extra}


def failed(problem: str) -> Checked:
    return {}, lambda: [problem]


def floor_produce(path: Path, workload: Workload) -> Checked:
    seconds = produce(path, workload.batches, IN_FLIGHT)

    def check() -> list[str]:
        if path.read_bytes() == b"".join(workload.batches):
            return []
        return [f"the floor file holds {path.stat().st_size} bytes, not the batches sent"]

    return figures(seconds, workload, requests=len(workload.batches)), check


def floor_fetch(path: Path, workload: Workload) -> Checked:
    ranges = fetch_ranges([len(b) for b in workload.batches], FETCH_MAX_BYTES)
    seconds, received, checksum = fetch(path, ranges)

    def check() -> list[str]:
        expected = crc32c(b"".join(workload.batches))
        if received == workload.batch_bytes and checksum == expected:
            return []
        return [
            f"the floor fetch got {received} bytes (crc {checksum:#x}), expected "
            f"{workload.batch_bytes} (crc {expected:#x})"
        ]

    return figures(seconds, workload, requests=len(ranges)), check


# ----------------------------------------------------------------------------- gRPC phases


@dataclass(frozen=True)
class Partition:
    name: str
    topic_id: uuid.UUID

    @property
    def proto(self) -> records_pb2.TopicIdPartition:
        return records_pb2.TopicIdPartition(
            topic_id=self.topic_id.bytes, topic=self.name, partition=0
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
