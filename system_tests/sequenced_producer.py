"""An idempotent producer (acks=all) as a process of its own, so that a test can cut it from a
broker: sends the values 0, 1, 2, ... in turn, value ``i`` to partition ``i % PARTITIONS``, until
its stdin closes; then waits for every delivery and exits. Each delivery report is a line of
REPORT as soon as it comes, ``{"value": i, "partition": p, "offset": o}`` or, for a failed
delivery, ``{"value": i, "error": "..."}``. Exits 0 once every value was reported.

    python -m system_tests.sequenced_producer CLIENT BOOTSTRAP TOPIC PARTITIONS REPORT

CLIENT is ``confluent`` (librdkafka) or ``kafka-python``. Both time a request out after
``REQUEST_TIMEOUT_MS`` and retry it until ``DELIVERY_TIMEOUT_MS``, with the same producer id and
sequence numbers: a cut longer than the first and shorter than the second makes them resend what
the broker may already have written.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from confluent_kafka import Producer
from kafka import KafkaProducer

REQUEST_TIMEOUT_MS = 2000
DELIVERY_TIMEOUT_MS = 120_000
_PACE_S = 0.005  # between two sends: a steady stream, a few hundred records a second
_CLIENTS = ("confluent", "kafka-python")


class _Reports:
    """The delivery reports, one JSON line each, flushed at once (the test reads them live)."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._lock = threading.Lock()
        self.count = 0

    def delivered(self, value: int, partition: int, offset: int) -> None:
        self._write({"value": value, "partition": partition, "offset": offset})

    def failed(self, value: int, error: object) -> None:
        self._write({"value": value, "error": str(error)})

    def _write(self, report: dict[str, Any]) -> None:
        with self._lock:
            self._out.write(json.dumps(report) + "\n")
            self._out.flush()
            self.count += 1


_Client = tuple[Callable[[str, int, int, "_Reports"], None], Callable[[], None], Callable[[], None]]
"""(send, flush, close) of one client implementation."""


def _confluent(bootstrap: str) -> _Client:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
            "linger.ms": 5,
        }
    )

    def send(topic: str, partition: int, value: int, reports: _Reports) -> None:
        def on_delivery(error: Any, message: Any) -> None:
            if error is not None:
                reports.failed(value, error)
            else:
                reports.delivered(value, message.partition(), message.offset())

        producer.produce(topic, str(value).encode(), partition=partition, on_delivery=on_delivery)
        producer.poll(0)

    def flush() -> None:
        producer.flush(DELIVERY_TIMEOUT_MS / 1000)

    return send, flush, lambda: None


def _kafka_python(bootstrap: str) -> _Client:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        acks="all",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        linger_ms=5,
    )

    def send(topic: str, partition: int, value: int, reports: _Reports) -> None:
        future = producer.send(topic, str(value).encode(), partition=partition)
        future.add_callback(lambda meta: reports.delivered(value, meta.partition, meta.offset))
        future.add_errback(lambda error: reports.failed(value, error))

    def flush() -> None:
        producer.flush(DELIVERY_TIMEOUT_MS / 1000)

    return send, flush, producer.close


def main(argv: list[str]) -> int:
    client, bootstrap, topic, partitions_text, report_path = argv
    if client not in _CLIENTS:
        print(f"CLIENT must be one of {', '.join(_CLIENTS)}, not {client!r}", file=sys.stderr)
        return 2
    partitions = int(partitions_text)
    send, flush, close = (_confluent if client == "confluent" else _kafka_python)(bootstrap)
    stop = threading.Event()

    def until_stdin_closes() -> None:  # the test closes it to end the stream
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    with Path(report_path).open("w") as out:
        reports = _Reports(out)
        sent = 0
        while not stop.wait(_PACE_S):
            send(topic, sent % partitions, sent, reports)
            sent += 1
        flush()
        close()
    print(f"sent {sent}, reported {reports.count}", flush=True)
    return 0 if reports.count == sent else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
