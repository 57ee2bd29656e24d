"""Produce and fetch through the broker's Kafka listener with confluent-kafka, against the same
records through the gRPC Produce/Fetch and against a floor, measured in one run.

Setup: a real cluster as the integration tests run it (``tests.support.cluster.Cluster``, KRaft
mode: an active controller, a standby and ONE broker, each a separate process; the broker fsyncs
every append). The records: ``--size-mb`` MiB (1024; ``--quick`` 32) of 1 KiB values, no keys,
each value's first 8 bytes its index (the rest the same bytes), one partition per topic.

Measured, in this order, with ``os.sync()`` (untimed) before each phase (the baselines are in
``bench/kafka_floor.py``):

1. *floor produce*: the batches of 2 as length-prefixed frames of a ProduceRequest's size to a
   bare loopback server in another process that appends each batch to a file, fsyncs and acks;
2. *gRPC produce*: the same records as record batches v2 (``tiered.kafka.records.build_batch``,
   as many 1 KiB records as fit in the producer's ``batch.size``), one ``BrokerService.Produce``
   at a time (a produce answer tells the next batch's offsets), to a topic without tiering;
3. *Kafka produce*: a confluent-kafka ``Producer`` (``PRODUCER`` settings, in the JSON), one
   ``produce()`` per record, until ``flush()`` returns with every record acknowledged; then
   *bare client*: the floor's client sending pre-encoded ProduceRequests of the batches of 2 to
   the broker's Kafka listener (the broker's cost without a client library's);
4. *floor fetch*: the floor file read back in the ranges a fetch of ``FETCH_MAX_BYTES`` returns
   (whole batches), one request at a time, by a server that ``pread``s and sends them;
5. *gRPC local fetch*: ``Fetch`` from offset 0 with ``max_bytes`` ``FETCH_MAX_BYTES``, one at a
   time, the next offset after the last whole batch received;
6. *Kafka local fetch*: a confluent-kafka ``Consumer`` (``group.id`` set, auto-commit off)
   ``assign()``ed at offset 0, ``consume()`` until every record is seen, a checksum of each
   value; then *bare client*: FetchRequests encoded and answers decoded with kio, one at a time;
7. remote reads: two tiered topics (segments of 1/16 of the data, ``local.retention.bytes`` 1)
   get the same records through gRPC and Kafka (timed too, with the copier running: *produce to
   a tiered topic*), then a segment of padding records each (gRPC) so that the last data
   segment rolls; the bench polls ListOffsets until the local log start offset is past the data
   on both (every data segment copied to remote storage and deleted locally), then times the
   fetches of 5 and 6 from offset 0 (every gRPC answer ``from_remote``).

Kafka produce and fetch are probed first with one record. When the broker does not serve one of
them, its Kafka phases are skipped and ``kafka_missing`` in the JSON says why; the summary then
holds the gRPC and floor rows only. (If only produce is missing, the Kafka consumer reads the
gRPC path's topics: the same records.) Each phase records the CPU seconds its server (the broker,
or the floor's server process) and its client (this process: librdkafka's threads included) used:
on a busy machine they say more than the wall-clock figures. ``--profile`` samples the broker with
py-spy in each phase (summarised in the JSON).

Verified, exiting 1 on a mismatch (timings are never asserted): every produce answered without
error at contiguous offsets, ending at the record count; every Kafka record delivered; each
consumer saw every record once (count, first and last offset, no gap) and the CRC32C of every
value in order equals the produced one; each gRPC and bare-client fetch returned, at contiguous
offsets, exactly the batches produced (record count and the batch CRC32C, which covers every
value byte), as does the bare client's topic after its produce; the floor's file and the bytes
fetched from it are the batches.

MB/s = 10^6 bytes of record values per second (the same bytes for every path). ratio = MB/s /
the floor's MB/s: the share of the floor's throughput (higher is better). Goals, reported and not
asserted: Kafka produce >= 0.5, local fetch >= 0.5, remote fetch >= 0.4.

Usage: ``python bench/kafka_protocol.py [--quick] [--size-mb 1024] [--profile] [--workdir DIR]
[--out PATH]`` (results default to ``bench/results/kafka_protocol.json``).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from crc32c import crc32c

from bench import kafka_floor
from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    finish_run,
    format_table,
    load_average,
    machine_info,
    summary_row,
    utc_now,
)
from bench.disable_throughput import Profiler, cpu_seconds, summarize_profile
from bench.kafka_floor import (
    BATCH_BYTES,
    FETCH_MAX_BYTES,
    IN_FLIGHT,
    RECORD_BYTES,
    STALL_S,
    Checked,
    Partition,
    Workload,
    bare_kafka_fetch,
    bare_kafka_produce,
    build_workload,
    check_end,
    figures,
    floor_fetch,
    floor_produce,
    grpc_append,
    grpc_fetch,
    grpc_produce,
    list_offsets,
    make_batches,
    value,
)
from tests.rlmm_support import poll_until
from tests.support.cluster import Cluster, grpc_address, kafka_address
from tiered.kafka.record_batch import iter_batches
from tiered.rpc.channels import open_channel
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc

DEFAULT_OUT = RESULTS_DIR / "kafka_protocol.json"
MIB = 1024 * 1024
QUICK_MB = 32
REMOTE_TIMEOUT_S = 900.0
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
GRPC_CHANNEL = [("grpc.max_receive_message_length", 4 * FETCH_MAX_BYTES)]

TOPICS = ("grpc-local", "kafka-local", "bare-local", "grpc-tiered", "kafka-tiered", "probe")

Log = Callable[[str], None]


# ----------------------------------------------------------------------------- Kafka


def kafka_produce(bootstrap: str, stub: Any, partition: Partition, workload: Workload) -> Checked:
    errors: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:  # delivery.report.only.error: only failures call back
            errors.append(str(error))

    producer = Producer(
        {**PRODUCER, **QUIET, "bootstrap.servers": bootstrap, "on_delivery": on_delivery}
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
    """Reads every record in order (not the padding after them); a checksum of the values."""
    consumer = Consumer({**CONSUMER, **QUIET, "bootstrap.servers": bootstrap})
    seen = gaps = checksum = 0
    first = last = -1
    errors: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        start = progress = time.perf_counter()
        while seen < workload.records and time.perf_counter() - progress < STALL_S:
            # No more than what is left: consume() waits out its timeout for a count not
            # yet fetched, and the log may hold nothing more.
            wanted = min(10_000, workload.records - seen)
            for message in consumer.consume(num_messages=wanted, timeout=1.0):
                if message.error() is not None:
                    errors.append(str(message.error()))
                    continue
                offset = message.offset()
                if offset >= workload.records:
                    continue
                if offset != last + 1:
                    gaps += 1
                first = offset if first < 0 else first
                last = offset
                checksum = crc32c(message.value(), checksum)
                seen += 1
                progress = time.perf_counter()
        seconds = time.perf_counter() - start
    finally:
        consumer.close()

    def check() -> list[str]:
        got = (seen, first, last, gaps, checksum)
        expected = (workload.records, 0, workload.records - 1, 0, workload.values_crc)
        if got == expected and not errors:
            return []
        return [
            f"Kafka consume {topic}: (records, first, last, gaps, crc) {got}, expected "
            f"{expected}; {len(errors)} errors {errors[:1]}"
        ]

    return figures(seconds, workload, records=seen), check


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


# ----------------------------------------------------------------------------- phases


class Meter:
    """Runs a phase after an untimed ``os.sync()`` and files its figures under the phase's name
    in ``results``, with the CPU seconds its server and its client used, the load average after
    it, py-spy's summary with ``--profile``, and then the problems its check found."""

    def __init__(
        self, broker_pid: int, profile: bool, directory: Path, log: Log, results: dict[str, Any]
    ) -> None:
        self.broker_pid = broker_pid
        self.profile = profile
        self.directory = directory
        self.log = log
        self.results = results

    def __call__(self, phase: str, run: Callable[[], Checked]) -> None:
        os.sync()
        profiler = None
        if self.profile:
            profiler = Profiler({"broker": self.broker_pid}, self.directory, phase, 100)
        broker_before, own_before = cpu_seconds(self.broker_pid), own_cpu_seconds()
        result, check = run()
        broker_s, client_s = cpu_seconds(self.broker_pid) - broker_before, own_cpu_seconds()
        floor_server_s = result.pop("server_cpu_s", None)
        result["cpu_s"] = {  # the server: the broker, or the floor's server process
            "server": round(broker_s if floor_server_s is None else floor_server_s, 3),
            "client": round(client_s - own_before, 3),
        }
        result["load_average_after"] = load_average()
        if profiler is not None:
            profiler.stop()
            result["profile"] = broker_profile(profiler.files["broker"])
        result["problems"] = check()
        self.results[phase] = result
        rate = f"{result['mb_per_s']:,.1f} MB/s" if "mb_per_s" in result else "no figure"
        self.log(f"  {phase}: {rate}; CPU s {result['cpu_s']}; problems {result['problems']}")


def broker_profile(path: Path) -> dict[str, Any]:
    """py-spy's summary without the samples of the Kafka listener's event loop waiting for its
    sockets (``disable_throughput``'s idle leaves do not name ``EpollSelector.select``)."""
    if not path.exists():
        return {"error": "py-spy wrote no profile (pip install py-spy)"}
    waiting = "EpollSelector.select (selectors.py:"
    lines = path.read_text().splitlines()
    return summarize_profile(x for x in lines if waiting not in x.rsplit(";", 1)[-1])


def own_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def make_topic(cluster: Cluster, stub: Any, name: str, configs: dict[str, str]) -> Partition:
    topic_id = cluster.admin.create_topic(name, 1, configs)
    partition = Partition(name, topic_id)

    def hosted() -> bool:
        response = stub.DescribeLogDirs(pb.DescribeLogDirsRequest(), timeout=10)
        return any(d.partition.topic_id == topic_id.bytes for d in response.partitions)

    poll_until(hosted, timeout=60, what=f"{name} to be hosted")
    return partition


def tiered_configs(workload: Workload) -> dict[str, str]:
    """Segments of 1/16 of the data (2 to 64 MiB); local retention deletes every copied one."""
    segment = min(64 * MIB, max(2 * MIB, workload.batch_bytes // 16))
    return {
        "remote.storage.enable": "true",
        "segment.bytes": str(segment),
        "local.retention.bytes": "1",
    }


def move_to_remote(
    stub: Any, partitions: Sequence[Partition], workload: Workload, segment_bytes: int, log: Log
) -> dict[str, Any]:
    """Pads each partition with a segment's worth of records (the last data segment rolls), then
    polls until its local log start offset is past the data: the padding, the seconds waited
    and the problems producing it."""
    padding_count = segment_bytes // RECORD_BYTES + workload.per_batch
    padding = make_batches(workload.records, padding_count, workload.per_batch, 0)
    problems: list[str] = []
    for part in partitions:
        end = list_offsets(stub, part).log_end_offset
        problems += grpc_append(stub, part, padding, end)
    start = time.perf_counter()
    for part in partitions:
        poll_until(
            lambda part=part: list_offsets(stub, part).local_log_start_offset >= workload.records,
            timeout=REMOTE_TIMEOUT_S,
            what=f"{part.name}'s local log start offset to pass {workload.records}",
        )
    waited = time.perf_counter() - start
    log(f"  every data segment is remote only after {waited:.1f} s")
    return {"padding_records": padding_count, "waited_s": waited, "problems": problems}


def run(args: argparse.Namespace, workdir: Path, log: Log) -> dict[str, Any]:
    workload = build_workload(int(args.size_mb * MIB))
    log(
        f"{workload.records:,} records in {len(workload.batches)} batches of "
        f"{workload.per_batch} ({workload.batch_bytes:,} bytes)"
    )
    results: dict[str, Any] = {
        "workload": {
            "records": workload.records,
            "value_bytes": workload.value_bytes,
            "batches": len(workload.batches),
            "records_per_batch": workload.per_batch,
            "batch_bytes": workload.batch_bytes,
        }
    }
    cluster = Cluster(workdir / "cluster", "kraft", brokers=1)
    channel = None
    try:
        cluster.start()
        broker = cluster.brokers[1]
        assert broker.process is not None
        channel = open_channel(grpc_address(broker.properties), options=GRPC_CHANNEL)
        stub = pb_grpc.BrokerServiceStub(channel)
        bootstrap = kafka_address(broker.properties)
        kafka_port = int(bootstrap.rpartition(":")[2])
        measure = Meter(broker.process.pid, args.profile, workdir, log, results)
        tiered = tiered_configs(workload)
        topics = {
            name: make_topic(cluster, stub, name, tiered if name.endswith("tiered") else {})
            for name in TOPICS
        }
        missing = results["kafka_missing"] = probe_kafka(bootstrap, stub, topics["probe"], workload)
        for what, why in missing.items():
            log(f"  Kafka {what} is not served: {why}")
        source = "kafka" if "produce" not in missing else "grpc"  # what the consumer reads
        floor_file = workdir / "floor.log"

        def produce(kind: str, suffix: str) -> None:
            grpc_topic, kafka_topic = topics[f"grpc-{kind}"], topics[f"kafka-{kind}"]
            measure(f"grpc_produce{suffix}", lambda: grpc_produce(stub, grpc_topic, workload))
            if "produce" not in missing:
                measure(
                    f"kafka_produce{suffix}",
                    lambda: kafka_produce(bootstrap, stub, kafka_topic, workload),
                )
                results[f"kafka_produce{suffix}"]["batches"] = kafka_batches(stub, kafka_topic)
                if kind == "local":
                    measure(
                        "kafka_produce_bare",
                        lambda: bare_kafka_produce(
                            kafka_port, stub, topics["bare-local"], workload
                        ),
                    )

        def fetch(kind: str, where: str) -> None:
            remote = where == "remote"
            grpc_topic, kafka_topic = topics[f"grpc-{kind}"], topics[f"{source}-{kind}"].name
            measure(f"grpc_fetch_{where}", lambda: grpc_fetch(stub, grpc_topic, workload, remote))
            if "fetch" not in missing:
                measure(
                    f"kafka_fetch_{where}", lambda: kafka_consume(bootstrap, kafka_topic, workload)
                )
                measure(  # the gRPC topic holds the workload's batches, as bare fetches expect
                    f"kafka_fetch_{where}_bare",
                    lambda: bare_kafka_fetch(kafka_port, grpc_topic, workload),
                )

        measure("floor_produce", lambda: floor_produce(floor_file, workload))
        produce("local", "")
        measure("floor_fetch", lambda: floor_fetch(floor_file, workload))
        fetch("local", "local")
        produce("tiered", "_tiered")
        with_data = [topics["grpc-tiered"]] + ([] if source == "grpc" else [topics["kafka-tiered"]])
        segment_bytes = int(tiered["segment.bytes"])
        results["move_to_remote"] = move_to_remote(stub, with_data, workload, segment_bytes, log)
        fetch("tiered", "remote")
    except Exception:
        results["crashed"] = traceback.format_exc()
        log(f"CRASHED:\n{results['crashed']}")
        log(cluster.dump_logs()[-20_000:])
    finally:
        if channel is not None:
            channel.close()
        cluster.close()
    return results


# ----------------------------------------------------------------------------- summary

FLOOR_PRODUCE = "floor: loopback socket server, append + fsync per request"
FLOOR_FETCH = "floor: loopback socket server, pread + send per request"
# (figure, phase, baseline phase, its label, goal as a share of the floor's MB/s)
BARE = "bare client: pre-encoded requests, no client library"
ROWS: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("Kafka produce (confluent-kafka)", "kafka_produce", "floor_produce", FLOOR_PRODUCE, 0.5),
    ("Kafka fetch, local log", "kafka_fetch_local", "floor_fetch", FLOOR_FETCH, 0.5),
    ("Kafka fetch, remote storage", "kafka_fetch_remote", "floor_fetch", FLOOR_FETCH, 0.4),
    (f"Kafka produce, {BARE}", "kafka_produce_bare", "floor_produce", FLOOR_PRODUCE, None),
    (f"Kafka fetch, local log, {BARE}", "kafka_fetch_local_bare", "floor_fetch", FLOOR_FETCH, None),
    (f"Kafka fetch, remote, {BARE}", "kafka_fetch_remote_bare", "floor_fetch", FLOOR_FETCH, None),
    ("gRPC Produce, same batches", "grpc_produce", "floor_produce", FLOOR_PRODUCE, None),
    ("gRPC Fetch, local log", "grpc_fetch_local", "floor_fetch", FLOOR_FETCH, None),
    ("gRPC Fetch, remote storage", "grpc_fetch_remote", "floor_fetch", FLOOR_FETCH, None),
    ("Kafka produce", "kafka_produce", "grpc_produce", "gRPC Produce, same batches", None),
    ("Kafka fetch, local log", "kafka_fetch_local", "grpc_fetch_local", "gRPC Fetch", None),
    ("Kafka fetch, remote storage", "kafka_fetch_remote", "grpc_fetch_remote", "gRPC Fetch", None),
)


def summary_rows(results: dict[str, Any], scenario: str) -> list[dict[str, Any]]:
    """MB/s rows; ratio = MB/s / the baseline's MB/s (a share: higher is better)."""
    rows = []
    for figure, phase, baseline, label, goal in ROWS:
        value, base = results.get(phase, {}), results.get(baseline, {})
        if "mb_per_s" in value and "mb_per_s" in base:
            wanted = f", goal >= {goal:.2f}" if goal else ""
            rows.append(
                summary_row(
                    scenario,
                    f"{figure}, MB/s (ratio: share of the baseline's MB/s{wanted})",
                    value["mb_per_s"],
                    "MB/s",
                    label,
                    base["mb_per_s"],
                )
            )
    return rows


def print_table(results: dict[str, Any], log: Log) -> None:
    floors = {"produce": results.get("floor_produce"), "fetch": results.get("floor_fetch")}
    rows = []
    for phase, result in results.items():
        if not isinstance(result, dict) or "mb_per_s" not in result:
            continue
        floor = floors["produce" if "produce" in phase else "fetch"]
        share = f"{result['mb_per_s'] / floor['mb_per_s']:.2f}" if floor else ""
        cpu = result["cpu_s"]
        rows.append(
            [
                phase,
                f"{result['mb_per_s']:,.1f}",
                f"{result['seconds']:.2f}",
                share,
                cpu["server"],
                cpu["client"],
            ]
        )
    log(format_table(["phase", "MB/s", "s", "of floor", "server CPU s", "client CPU s"], rows))
    for what, why in results.get("kafka_missing", {}).items():
        log(f"Kafka {what}: MISSING ({why})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-mb", type=float, help="MiB of record values (default 1024)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_MB} MiB (smoke test)")
    parser.add_argument("--profile", action="store_true", help="py-spy the broker per phase")
    parser.add_argument("--workdir", type=Path, help="where the cluster and floor files go")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    args.size_mb = args.size_mb or (QUICK_MB if args.quick else 1024)
    if args.size_mb * MIB < 4 * BATCH_BYTES:
        parser.error("--size-mb wants at least 4 (MiB): a few batches")

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {name: code_fingerprint(name) for name in ("tiered", "broker")}
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="kafka-protocol-", dir=args.workdir))
    try:
        results = run(args, workdir, log)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    failures = [p for r in results.values() if isinstance(r, dict) for p in r.get("problems", ())]
    if "crashed" in results:
        failures.append(f"crashed:\n{results['crashed']}")
    runtime_s = time.perf_counter() - started
    scenario = f"{args.size_mb:g} MiB of 1 KiB records, one broker (KRaft)"
    document = {
        "benchmark": "kafka_protocol",
        "description": (
            "Produce then fetch the same 1 KiB records (local log, then remote storage) through "
            "the broker's Kafka listener with confluent-kafka and through the gRPC Produce/Fetch, "
            "against a floor: a bare loopback socket server in another process that appends and "
            "fsyncs the same frames (produce), or preads and sends the same bytes (fetch). "
            "MB/s = 10^6 bytes of record values per second; ratio = MB/s / the baseline's MB/s "
            "(a share of the baseline's throughput: higher is better)."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "settings": {
            "size_mib": args.size_mb,
            "quick": args.quick,
            "profile": args.profile,
            "record": f"{RECORD_BYTES}-byte value, no key, no headers",
            "producer": PRODUCER,
            "consumer": CONSUMER,
            "grpc": "one Produce / Fetch at a time; Fetch max_bytes = fetch_max_bytes",
            "fetch_max_bytes": FETCH_MAX_BYTES,
            "floor": {
                "in_flight": IN_FLIGHT,
                "produce_request_overhead_bytes": kafka_floor.PRODUCE_REQUEST_OVERHEAD,
                "ack_bytes": kafka_floor.ACK_BYTES,
                "fetch_request_bytes": kafka_floor.FETCH_REQUEST_BYTES,
                "fetch_response_overhead_bytes": kafka_floor.FETCH_RESPONSE_OVERHEAD,
                "fsync": "os.fsync after every request, as the broker's flush_every_append",
            },
            "tiered_topics": "remote.storage.enable=true, segment.bytes 1/16 of the data "
            "(2-64 MiB), local.retention.bytes=1",
            "page_cache": "each phase reads what was written moments before (page cache)",
        },
        "results": results,
        "kafka_missing": results.get("kafka_missing", {}),
        "summary": summary_rows(results, scenario),
        "failures": failures,
        "ok": not failures,
    }
    return finish_run(
        args.out, document, runtime_s, failures, lambda: print_table(results, log), log
    )


if __name__ == "__main__":
    sys.exit(main())
