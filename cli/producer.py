"""``tiered-console-producer``: one record a line from stdin, like kafka-console-producer.sh.

    tiered-console-producer --bootstrap-server H:P --topic T [--partition P]
                            [--key-separator SEP] [--batch-size N] [--max-request-bytes B]
                            [--linger-ms MS] [--retries N]

Lines are read as bytes; the line break (``\\n`` or ``\\r\\n``) is not part of the record, an empty
line is an empty record, and a last line without a line break is a record too. Each record is
stamped with the time its line was read. Lines are sent in batches (one Produce request each,
carrying one Kafka record batch v2 as a Kafka producer builds it) of at most ``--batch-size``
records and ``--max-request-bytes`` bytes; a batch that is not full goes out ``--linger-ms`` after
its first line was read (typing at a terminal), or at the end of input.
With ``--partition`` every batch goes to that partition; without it the batches go round-robin
over the topic's partitions, starting at partition 0.

At the end a summary goes to stderr: the records acknowledged per partition and each partition's
last offset. A batch that fails (after retries of NOT_LEADER_OR_FOLLOWER and the like, re-describing
the leader each time) stops the producer: the summary shows what was acknowledged before it, and
the error names the input lines of the failed batch, after which nothing was sent, so a rerun can
resume from there (delivery is at least once: a retried batch may have been appended before its
answer was lost).
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import select
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import BinaryIO

from cli.common import (
    add_bootstrap_option,
    command_config_credentials,
    explaining_refusals,
    invalid,
    run,
)
from cli.partition_client import PartitionClient, warn_on_retry
from tiered.errors import ErrorCode, TieredError
from tiered.retry_policies import PARTITION_CLIENT_MAX_ATTEMPTS, PARTITION_CLIENT_RETRY

__all__ = ["build_parser", "main"]

DEFAULT_BATCH_SIZE = 500
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024
# The broker's gRPC server takes messages up to 4 MiB; leave room for the envelope.
MAX_REQUEST_BYTES_LIMIT = 4 * 1024 * 1024 - 64 * 1024
DEFAULT_LINGER_MS = 100
RECORD_OVERHEAD_BYTES = 16  # a record's framing in a record batch, roughly
READ_CHUNK_BYTES = 64 * 1024


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-console-producer",
        description=(
            "Read records from stdin, one a line, and produce them to a topic. Without "
            "--partition, batches of lines go round-robin over the topic's partitions "
            "(starting at 0). A summary of what was acknowledged goes to stderr."
        ),
    )
    add_bootstrap_option(parser)
    parser.add_argument("--topic", required=True, metavar="T", help="the topic to produce to")
    parser.add_argument(
        "--partition",
        type=int,
        metavar="P",
        help="the partition to produce to (default: round-robin over all partitions, per batch)",
    )
    parser.add_argument(
        "--key-separator",
        metavar="SEP",
        help=(
            "split each line at the first SEP into key and value (like Kafka's parse.key=true "
            "with key.separator); a line without SEP is an error"
        ),
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=DEFAULT_BATCH_SIZE,
        metavar="N",
        help=f"records per Produce request at most (default: {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="B",
        help=(
            f"bytes per Produce request at most (default: {DEFAULT_MAX_REQUEST_BYTES}); "
            "a longer line is an error"
        ),
    )
    parser.add_argument(
        "--linger-ms",
        type=int,
        default=DEFAULT_LINGER_MS,
        metavar="MS",
        help=(
            "send a batch that is not full MS milliseconds after its first line was read "
            f"(default: {DEFAULT_LINGER_MS})"
        ),
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=PARTITION_CLIENT_MAX_ATTEMPTS - 1,
        metavar="N",
        help=(
            "retries of a batch after a retriable error such as NOT_LEADER_OR_FOLLOWER "
            f"(default: {PARTITION_CLIENT_MAX_ATTEMPTS - 1})"
        ),
    )
    return parser


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    if not 1 <= args.max_request_bytes <= MAX_REQUEST_BYTES_LIMIT:
        parser.error(f"--max-request-bytes must be between 1 and {MAX_REQUEST_BYTES_LIMIT}")
    if args.linger_ms < 0:
        parser.error("--linger-ms must not be negative")
    if args.retries < 0:
        parser.error("--retries must not be negative")
    if args.key_separator is not None and not args.key_separator:
        parser.error("--key-separator must not be empty")


# --------------------------------------------------------------------------------- input


class LineReader:
    """Lines from a binary stream as they arrive. ``next_line(wait_s)`` returns the next line
    (without its line break), ``None`` at the end of input, or raises ``TimeoutError`` when no
    complete line arrived within ``wait_s`` (``None``: wait as long as it takes)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (OSError, AttributeError, ValueError):  # e.g. io.BytesIO
            self._fd = None
        self._buffer = bytearray()
        self._lines: collections.deque[bytes] = collections.deque()
        self._eof = False

    def _read(self, wait_s: float | None) -> None:
        if self._fd is None:
            chunk = self._stream.read(READ_CHUNK_BYTES)
        else:
            if wait_s is not None:
                ready, _, _ = select.select([self._fd], [], [], max(0.0, wait_s))
                if not ready:
                    raise TimeoutError
            chunk = os.read(self._fd, READ_CHUNK_BYTES)
        if not chunk:
            self._eof = True
            if self._buffer:
                self._lines.append(bytes(self._buffer))
                self._buffer.clear()
            return
        self._buffer += chunk
        *complete, rest = self._buffer.split(b"\n")
        self._lines.extend(bytes(line) for line in complete)
        self._buffer = bytearray(rest)

    def next_line(self, wait_s: float | None = None) -> bytes | None:
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while not self._lines:
            if self._eof:
                return None
            self._read(None if deadline is None else deadline - time.monotonic())
        line = self._lines.popleft()
        return line[:-1] if line.endswith(b"\r") else line


# --------------------------------------------------------------------------------- producing


@dataclass
class PartitionTally:
    records: int = 0
    last_offset: int = -1


@dataclass
class Batch:
    partition: int
    first_line: int
    records: list[tuple[bytes | None, bytes, int]] = field(default_factory=list)
    size_bytes: int = 0
    started: float = 0.0

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.records) - 1


@dataclass
class Producer:
    client: PartitionClient
    topic: str
    partitions: Iterator[int]
    tallies: dict[int, PartitionTally] = field(default_factory=dict)

    @property
    def acknowledged(self) -> int:
        return sum(t.records for t in self.tallies.values())

    def send(self, batch: Batch) -> None:
        try:
            result = self.client.produce(self.topic, batch.partition, batch.records)
        except TieredError as e:
            raise self._failure(e, batch) from None
        tally = self.tallies.setdefault(batch.partition, PartitionTally())
        tally.records += len(batch.records)
        tally.last_offset = result.last_offset

    def _failure(self, error: TieredError, batch: Batch) -> TieredError:
        fate = (
            "may or may not have been appended"
            if error.code is ErrorCode.REQUEST_TIMED_OUT
            else "was not acknowledged"
        )
        lines = (
            f"line {batch.first_line}"
            if len(batch.records) == 1
            else f"lines {batch.first_line}-{batch.last_line}"
        )
        return TieredError(
            error.code,
            f"{error.message}; {self.acknowledged} records were acknowledged before this failure, "
            f"the failed batch ({lines}, to partition {batch.partition}) {fate}, and no later "
            f"input was sent",
        )

    def summary(self, failed: bool) -> list[str]:
        head = (
            f"Acknowledged {self.acknowledged} records to topic {self.topic} before stopping"
            if failed
            else f"Sent {self.acknowledged} records to topic {self.topic}"
        )
        lines = [head + ("." if not self.tallies else ":")]
        for partition, tally in sorted(self.tallies.items()):
            lines.append(
                f"  partition {partition}: {tally.records} records, last offset {tally.last_offset}"
            )
        return lines


def _split(line: bytes, separator: bytes | None, line_no: int) -> tuple[bytes | None, bytes]:
    if separator is None:
        return None, line
    key, found, value = line.partition(separator)
    if not found:
        raise invalid(f"line {line_no} has no key separator {separator.decode(errors='replace')!r}")
    return key, value


def _produce(args: argparse.Namespace, stdin: BinaryIO, producer: Producer) -> None:
    separator = None if args.key_separator is None else args.key_separator.encode()
    linger_s = args.linger_ms / 1000
    reader = LineReader(stdin)
    line_no = 0
    batch: Batch | None = None
    while True:
        try:
            wait = None if batch is None else batch.started + linger_s - time.monotonic()
            line = reader.next_line(wait)
        except TimeoutError:
            assert batch is not None
            producer.send(batch)
            batch = None
            continue
        if line is None:
            break
        line_no += 1
        try:
            key, value = _split(line, separator, line_no)
        except TieredError:
            if batch is not None:
                producer.send(batch)  # the lines before the bad one are good
            raise
        size = len(value) + len(key or b"") + RECORD_OVERHEAD_BYTES
        if size > args.max_request_bytes:
            if batch is not None:
                producer.send(batch)
            raise invalid(
                f"line {line_no} makes a record of {size} bytes ({len(line)} bytes of text), "
                f"more than --max-request-bytes {args.max_request_bytes} allows"
            )
        if batch is not None and (
            len(batch.records) >= args.batch_size
            or batch.size_bytes + size > args.max_request_bytes
        ):
            producer.send(batch)
            batch = None
        if batch is None:
            batch = Batch(next(producer.partitions), line_no, started=time.monotonic())
        batch.records.append((key, value, int(time.time() * 1000)))
        batch.size_bytes += size
    if batch is not None:
        producer.send(batch)


def main(argv: Sequence[str] | None = None, stdin: BinaryIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_usage(parser, args)

    def body() -> int:
        with (
            explaining_refusals(args.command_config, args.bootstrap_server),
            PartitionClient(
                args.bootstrap_server,
                credentials=command_config_credentials(args.command_config),
                retry=replace(PARTITION_CLIENT_RETRY, max_tries=args.retries + 1),
                on_retry=warn_on_retry,
            ) as client,
        ):
            partitions: Iterator[int]
            if args.partition is None:
                partitions = itertools.cycle(range(len(client.topic(args.topic).partitions)))
            else:
                client.check_partition(args.topic, args.partition)
                partitions = itertools.repeat(args.partition)
            producer = Producer(client, args.topic, partitions)
            failed = True
            try:
                _produce(args, stdin or sys.stdin.buffer, producer)
                failed = False
            finally:
                print("\n".join(producer.summary(failed)), file=sys.stderr, flush=True)
        return 0

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
