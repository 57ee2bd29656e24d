"""The confluent-kafka side of ``bench/kafka_protocol.py``: its producer and consumer, their
settings, and the probe that tells whether the broker serves Kafka produce and fetch at all."""

from __future__ import annotations

import multiprocessing
import resource
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from crc32c import crc32c

from bench.common import REPO_ROOT
from bench.kafka_floor import (
    BATCH_BYTES,
    FETCH_MAX_BYTES,
    IN_FLIGHT,
    STALL_S,
    Checked,
    Partition,
    Workload,
    check_end,
    figures,
    grpc_append,
    make_batches,
    value,
)
from tiered.kafka.record_batch import iter_batches
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc

PRODUCER: dict[str, Any] = {
    "acks": "1",
    "linger.ms": 10,
    "batch.size": BATCH_BYTES,
    "compression.type": "none",
    "enable.idempotence": False,
    "max.in.flight.requests.per.connection": IN_FLIGHT,
    "message.max.bytes": 2 * BATCH_BYTES,
    "queue.buffering.max.messages": 100_000,
    "queue.buffering.max.kbytes": 256 * 1024,
    "message.timeout.ms": 300_000,
    "delivery.report.only.error": True,
}
CONSUMER: dict[str, Any] = {
    "group.id": "bench-kafka-protocol",
    "enable.auto.commit": False,
    "max.partition.fetch.bytes": FETCH_MAX_BYTES,
    "fetch.max.bytes": FETCH_MAX_BYTES,
    "enable.partition.eof": False,
    # librdkafka (>= 2.4) sleeps this long whenever its local queue is full, i.e. whenever the
    # broker is faster than the application; its 1000 ms default made the same fetch take
    # 1.7 s or 5.2 s at 1 GiB from one run to the next, a measure of that sleep, not the broker.
    "fetch.queue.backoff.ms": 10,
}
QUIET = {"log_level": 3}  # librdkafka: errors only
# A broker without Kafka produce/fetch answers in ways librdkafka logs as protocol errors, at
# every retry: the probe keeps quiet, and says why in the JSON.
PROBE_QUIET = {"log_level": 0}
PROBE_TIMEOUT_MS = 10_000


def kafka_produce(
    bootstrap: str,
    stub: Any,
    partition: Partition,
    workload: Workload,
    security: Mapping[str, Any] | None = None,
) -> Checked:
    """``security``: the client's ``security.protocol``, ``ssl.*`` and ``sasl.*`` settings."""
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:  # delivery.report.only.error: only failures call back
            errors.append(str(error))

    producer = Producer(
        {
            **PRODUCER,
            **QUIET,
            **(security or {}),
            "bootstrap.servers": bootstrap,
            "on_delivery": on_delivery,
        }
    )
    produce, poll, topic = producer.produce, producer.poll, partition.name
    start = time.perf_counter()
    for i in range(workload.records):
        payload = value(i)
        while True:
            try:
                produce(topic, payload, partition=0)
                break
            except BufferError:  # the producer's queue is full: serve deliveries, then retry
                poll(0.005)
    unsent = producer.flush(STALL_S)
    seconds = time.perf_counter() - start

    def check() -> list[str]:
        problems = check_end(stub, partition, workload)
        if errors or unsent:
            problems.append(
                f"Kafka produce to {topic}: {len(errors)} deliveries failed "
                f"({errors[:1]}), {unsent} unacknowledged"
            )
        return problems

    return figures(seconds, workload), check


def kafka_consume(bootstrap: str, topic: str, workload: Workload) -> Checked:
    """Reads every record in order (not the padding after them), with a checksum of the values,
    in a process of its own, as a consumer application would: in this one the heap left by the
    phases before (a GiB of floor answers, say) cost the consumer up to a quarter of its speed
    from one phase to the next, a measure of this process, not of the broker."""
    with fresh_processes().Pool(1) as pool:
        got = pool.apply(consume_all, (bootstrap, topic, workload.records))
    seen = got["tally"][0]

    def check() -> list[str]:
        expected = (workload.records, 0, workload.records - 1, 0, workload.values_crc)
        if tuple(got["tally"]) == expected and not got["errors"]:
            return []
        return [
            f"Kafka consume {topic}: (records, first, last, gaps, crc) {tuple(got['tally'])}, "
            f"expected {expected}; {len(got['errors'])} errors {got['errors'][:1]}"
        ]

    return figures(got["seconds"], workload, records=seen, client_cpu_s=got["cpu_s"]), check


def fresh_processes() -> multiprocessing.context.ForkServerContext:
    """Where the bench's consumer processes come from: multiprocessing's forkserver, a server
    process that imports the bench once and forks each of them. A fresh heap, as a spawned
    process has, without importing the bench again in every consumer: on a busy machine those
    imports made up most of the time a consumer phase took, untimed as they are.

    The server is told what to import: this Python's forkserver does not import ``__main__``
    itself (it looks for a key that its preparation data never has), and a child re-runs the
    main script, which costs nothing once the modules it imports are in the server."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*_main_module(), __name__, "bench.consumer_group"])
    return context


def _main_module() -> list[str]:
    """The dotted name of the script this process runs, when it is a file of this checkout."""
    path = getattr(sys.modules["__main__"], "__file__", None)
    if path is None or not Path(path).resolve().is_relative_to(REPO_ROOT):
        return []
    return [".".join(Path(path).resolve().relative_to(REPO_ROOT).with_suffix("").parts)]


def consume_all(bootstrap: str, topic: str, records: int) -> dict[str, Any]:
    """``kafka_consume``'s consumer: seconds, CPU seconds (librdkafka's threads included),
    (records seen, first offset, last offset, gaps, CRC32C of the values) and errors."""
    consumer = Consumer({**CONSUMER, **QUIET, "bootstrap.servers": bootstrap})
    seen = gaps = checksum = 0
    first = last = -1
    errors: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        cpu_before = own_cpu_seconds()
        start = progress = time.perf_counter()
        while seen < records and time.perf_counter() - progress < STALL_S:
            # No more than what is left: consume() waits out its timeout for a count not
            # yet fetched, and the log may hold nothing more.
            wanted = min(10_000, records - seen)
            for message in consumer.consume(num_messages=wanted, timeout=1.0):
                if message.error() is not None:
                    errors.append(str(message.error()))
                    continue
                offset = message.offset()
                if offset >= records:
                    continue
                if offset != last + 1:
                    gaps += 1
                first = offset if first < 0 else first
                last = offset
                checksum = crc32c(message.value(), checksum)
                seen += 1
                progress = time.perf_counter()
        seconds = time.perf_counter() - start
        cpu_s = own_cpu_seconds() - cpu_before
    finally:
        consumer.close()
    return {
        "seconds": seconds,
        "cpu_s": cpu_s,
        "tally": (seen, first, last, gaps, checksum),
        "errors": errors,
    }


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def probe_kafka(
    bootstrap: str, stub: pb_grpc.BrokerServiceStub, probe: Partition, workload: Workload
) -> dict[str, str]:
    """Whether the broker serves Kafka produce and fetch: {"produce"|"fetch": why not}."""
    missing: dict[str, str] = {}
    failed: list[str] = []
    producer = Producer(
        {
            **PROBE_QUIET,
            "bootstrap.servers": bootstrap,
            "message.timeout.ms": PROBE_TIMEOUT_MS,
            "on_delivery": lambda error, _m: failed.append(str(error)) if error else None,
        }
    )
    producer.produce(probe.name, value(0), partition=0)
    if producer.flush(PROBE_TIMEOUT_MS / 1000 + 5) or failed:
        missing["produce"] = failed[0] if failed else "a produce was not answered"
        problems = grpc_append(stub, probe, make_batches(0, 1, 1, workload.timestamp_ms), 0)
        if problems:
            raise RuntimeError(problems[0])
    consumer = Consumer({**CONSUMER, **PROBE_QUIET, "bootstrap.servers": bootstrap})
    try:
        consumer.assign([TopicPartition(probe.name, 0, 0)])
        deadline = time.monotonic() + PROBE_TIMEOUT_MS / 1000
        got: list[Any] = []
        while not got and time.monotonic() < deadline:
            got = consumer.consume(num_messages=1, timeout=1.0)
        if not got:
            missing["fetch"] = f"no record fetched in {PROBE_TIMEOUT_MS / 1000:.0f} s"
        elif got[0].error() is not None or got[0].value() != value(0):
            missing["fetch"] = f"fetched {got[0].error() or 'another value'} at offset 0"
    finally:
        consumer.close()
    return missing


def kafka_batches(stub: pb_grpc.BrokerServiceStub, partition: Partition) -> dict[str, Any]:
    """What the Kafka producer's batches look like in the log (the first fetch's worth)."""
    response = stub.Fetch(
        pb.FetchRequest(partition=partition.proto, offset=0, max_bytes=FETCH_MAX_BYTES), timeout=30
    )
    headers = list(iter_batches(response.records, verify=False, allow_truncated_tail=True))
    if not headers:
        return {}
    return {
        "sampled": len(headers),
        "mean_bytes": sum(h.size for h in headers) / len(headers),
        "mean_records": sum(h.records_count for h in headers) / len(headers),
    }
