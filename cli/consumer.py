"""``tiered-console-consumer``: print one partition's records, like kafka-console-consumer.sh.

    tiered-console-consumer --bootstrap-server H:P --topic T --partition P
                            --offset O|earliest|latest [--max-messages N] [--format text|json]
                            [--follow]

Reads from the partition's leader from ``--offset`` on; records in remote storage are served by
the broker like local ones. Without ``--follow`` the consumer stops at the log end offset it saw
when it started (or after ``--max-messages``), so a script gets what is there and an exit; with
``--follow`` it keeps polling for new records until ``--max-messages`` or Ctrl-C.

Text output is each record's value on a line (UTF-8, undecodable bytes replaced); ``--format
json`` prints one JSON object a line: ``{"offset", "timestamp", "key", "value"}`` with the
timestamp in epoch milliseconds and a null key for records without one (a null value, which
Kafka clients can produce, prints as ``null`` in text). At the end
``Processed a total of N messages`` goes to stderr. An offset outside [log start, log end] is
OFFSET_OUT_OF_RANGE, naming the valid range.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import BinaryIO

from cli.common import (
    add_bootstrap_option,
    command_config_credentials,
    explaining_refusals,
    invalid,
    run,
)
from cli.partition_client import (
    ConsumedRecord,
    Offsets,
    PartitionClient,
    warn_on_retry,
)
from tiered.errors import ErrorCode, TieredError

__all__ = ["build_parser", "main", "parse_offset", "record_json", "resolve_offset"]

FETCH_MAX_BYTES = 1024 * 1024
DEFAULT_POLL_INTERVAL_MS = 500
# Fetches in a row that return nothing below the log end before giving up (without --follow).
MAX_EMPTY_FETCHES = 5


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tiered-console-consumer",
        description=(
            "Print the records of one partition, from an offset on, and exit at the log end "
            "offset seen at the start (or keep polling with --follow)."
        ),
    )
    add_bootstrap_option(parser)
    parser.add_argument("--topic", required=True, metavar="T", help="the topic")
    parser.add_argument("--partition", required=True, type=int, metavar="P", help="the partition")
    parser.add_argument(
        "--offset",
        required=True,
        metavar="O",
        help=(
            "the first offset to print: a number, 'earliest' (the log start offset) or "
            "'latest' (the log end offset: only new records, with --follow)"
        ),
    )
    parser.add_argument(
        "--max-messages",
        type=int,
        metavar="N",
        help="stop after N records (default: at the log end offset, or never with --follow)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help=(
            "text: each value on a line; json: one {offset, timestamp, key, value} object a "
            "line (default: text)"
        ),
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="do not stop at the log end offset: keep polling for new records",
    )
    parser.add_argument(
        "--poll-interval-ms",
        type=int,
        default=DEFAULT_POLL_INTERVAL_MS,
        metavar="MS",
        help=f"with --follow, the wait between empty fetches (default: {DEFAULT_POLL_INTERVAL_MS})",
    )
    return parser


def _check_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.max_messages is not None and args.max_messages < 1:
        parser.error("--max-messages must be at least 1")
    if args.poll_interval_ms < 1:
        parser.error("--poll-interval-ms must be at least 1")


# --------------------------------------------------------------------------------- offsets


def _range(offsets: Offsets) -> str:
    if offsets.log_start_offset == offsets.log_end_offset:
        return f"the partition holds no records; the only valid offset is {offsets.log_end_offset}"
    return (
        f"valid offsets are {offsets.log_start_offset} (log start) to "
        f"{offsets.log_end_offset} (log end)"
    )


def parse_offset(text: str) -> int | str:
    """``--offset``: a non-negative number, ``earliest`` or ``latest`` (else INVALID_REQUEST)."""
    value = text.strip().lower()
    if value in ("earliest", "latest"):
        return value
    try:
        offset = int(value)
    except ValueError:
        raise invalid(f"--offset {text!r} is not a number, 'earliest' or 'latest'") from None
    if offset < 0:
        raise invalid(f"--offset must not be negative, not {offset}")
    return offset


def resolve_offset(spec: int | str, offsets: Offsets, where: str) -> int:
    """The parsed ``--offset`` as a number within [log start, log end]; OFFSET_OUT_OF_RANGE
    naming the valid range if it is outside."""
    if spec == "earliest":
        return offsets.log_start_offset
    if spec == "latest":
        return offsets.log_end_offset
    assert isinstance(spec, int)
    if not offsets.log_start_offset <= spec <= offsets.log_end_offset:
        below = spec < offsets.log_start_offset
        why = "below the log start offset" if below else "beyond the log end offset"
        raise TieredError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {spec} of {where} is {why}: {_range(offsets)}",
        )
    return spec


# --------------------------------------------------------------------------------- output


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _value_text(record: ConsumedRecord) -> str:
    return "null" if record.value is None else _text(record.value)


def record_json(record: ConsumedRecord) -> dict[str, object]:
    return {
        "offset": record.offset,
        "timestamp": record.timestamp_ms,
        "key": None if record.key is None else _text(record.key),
        "value": None if record.value is None else _text(record.value),
    }


def _formatter(fmt: str) -> Callable[[ConsumedRecord], bytes]:
    if fmt == "json":
        return lambda r: json.dumps(record_json(r), ensure_ascii=False).encode() + b"\n"
    return lambda r: _value_text(r).encode() + b"\n"


# --------------------------------------------------------------------------------- consuming


class Consumer:
    def __init__(
        self,
        client: PartitionClient,
        args: argparse.Namespace,
        out: BinaryIO,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.topic: str = args.topic
        self.partition: int = args.partition
        self.where = f"{self.topic}-{self.partition}"
        self.max_messages: int | None = args.max_messages
        self.follow: bool = args.follow
        self.poll_s = args.poll_interval_ms / 1000
        self.format = _formatter(args.format)
        self.out = out
        self.sleep = sleep
        self.consumed = 0

    def _fetch(self, offset: int) -> list[ConsumedRecord]:
        try:
            return self.client.fetch(self.topic, self.partition, offset, FETCH_MAX_BYTES).records
        except TieredError as e:
            if e.code is not ErrorCode.OFFSET_OUT_OF_RANGE:
                raise
            try:
                offsets = self.client.list_offsets(self.topic, self.partition)
            except TieredError:
                raise e from None
            why = (
                "is no longer available (retention moved the log start offset past it)"
                if offset < offsets.log_start_offset
                else "is out of range"
            )
            raise TieredError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} of {self.where} {why}: {_range(offsets)}",
            ) from None

    def run(self, start: int | str) -> None:
        offsets = self.client.list_offsets(self.topic, self.partition)
        position = resolve_offset(start, offsets, self.where)
        end = offsets.log_end_offset
        empty = 0
        while self.max_messages is None or self.consumed < self.max_messages:
            if not self.follow and position >= end:
                return
            records = [
                r
                for r in self._fetch(position)
                if r.offset >= position and (self.follow or r.offset < end)
            ]
            if self.max_messages is not None:
                records = records[: self.max_messages - self.consumed]
            if records:
                empty = 0
                self.out.write(b"".join(self.format(r) for r in records))
                self.out.flush()
                self.consumed += len(records)
                position = records[-1].offset + 1
                continue
            if self.follow:
                self.sleep(self.poll_s)
                continue
            empty += 1
            if empty >= MAX_EMPTY_FETCHES:
                raise TieredError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"{self.where}: the leader returned no records at offset {position}, below "
                    f"the log end offset {end}, {empty} times in a row",
                )
            self.sleep(self.poll_s * empty)


def main(argv: Sequence[str] | None = None, stdout: BinaryIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _check_usage(parser, args)

    def body() -> int:
        start = parse_offset(args.offset)
        with (
            explaining_refusals(args.command_config, args.bootstrap_server),
            PartitionClient(
                args.bootstrap_server,
                credentials=command_config_credentials(args.command_config),
                on_retry=warn_on_retry,
            ) as client,
        ):
            client.check_partition(args.topic, args.partition)
            consumer = Consumer(client, args, stdout or sys.stdout.buffer)
            try:
                consumer.run(start)
            except KeyboardInterrupt:
                if not args.follow:
                    raise
                # Ctrl-C is how --follow ends: not an error.
            finally:
                print(f"Processed a total of {consumer.consumed} messages", file=sys.stderr)
        return 0

    return run(body)


if __name__ == "__main__":
    raise SystemExit(main())
