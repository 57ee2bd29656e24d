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
6. *stub fetch* (``bench/kafka_stub.py``): the consumer below reading the floor's file from a
   stub broker (this listener, no log: the consumer's own ceiling on this machine); then *Kafka
   local fetch*: a confluent-kafka ``Consumer`` in a process of its own (``group.id`` set,
   auto-commit off) ``assign()``ed at offset 0, ``consume()`` until every record is seen, a
   checksum of each value; then *bare client*: FetchRequests encoded and answers decoded with
   kio, one at a time;
7. *consumer groups* (``bench/consumer_group.py``): the workload again, in four partitions of one
   topic, read by 4 consumers (each a process) with assigned partitions and as a group, the two
   alternating ``--rounds`` times (goal: the group >= 0.9x the assigned consumers' MB/s); then
   ``--handovers`` times (5; ``--quick`` 2) a member of a two-member group leaves, timed to the
   survivor's first record of the moved partitions (goal <= 1 s), with the bench's client
   settings and again with librdkafka's default heartbeat and fetch wait;
8. *OffsetCommit* (``bench/offset_commit.py``): one standalone commit at a time to the broker
   (the coordinator), each answered once fsynced, against one write + ``fdatasync`` of the
   same record batch (``--commits``, 2000; ``--quick`` 200);
9. remote reads: two tiered topics (segments of 1/16 of the data, ``local.retention.bytes`` 1)
   get the same records through gRPC and Kafka (timed too, with the copier running: *produce to
   a tiered topic*), then a segment of padding records each (gRPC) so that the last data
   segment rolls; the bench polls ListOffsets until the local log start offset is past the data
   on both (every data segment copied to remote storage and deleted locally), then times the
   fetches of 5 and 6 from offset 0 (every gRPC answer ``from_remote``).

Phases 1-6 run ``--rounds`` times (3; ``--quick`` 1), floor and paths alternating (each produce
round to empty topics and a new floor file), and so do the remote fetches: a disk or a machine
whose speed drifts moves a path and its floor alike. Each figure is its median round; the JSON
keeps every round's MB/s (``rounds_mb_per_s``) and every round's problems.

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
asserted: Kafka produce >= 0.5, local fetch >= 0.5, remote fetch >= 0.4; OffsetCommit latency at
most 2x one fdatasync of its bytes (ratio = commit / fdatasync, lower is better); a group at least
0.9x the assigned consumers' MB/s; a leaver's partitions fetched by the survivor within 1 s.

Usage: ``python bench/kafka_protocol.py [--quick] [--size-mb 1024] [--rounds 3] [--commits 2000]
[--handovers 5] [--group-initial-rebalance-delay-ms MS] [--profile] [--workdir DIR] [--out PATH]``
(results default to ``bench/results/kafka_protocol.json``). ``--group-initial-rebalance-delay-ms``
sets the broker's ``group.initial.rebalance.delay.ms`` (its default, as Kafka's, is 3000 ms): it
only delays the forming of each new group, which is not timed (the smoke test shortens it).
"""

from __future__ import annotations

import argparse
import os
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


from bench import consumer_group, kafka_floor, offset_commit
from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    finish_run,
    format_table,
    load_average,
    machine_info,
    process_cpu_seconds,
    summary_row,
    utc_now,
)
from bench.disable_throughput import Profiler, summarize_profile
from bench.kafka_clients import (
    CONSUMER,
    PRODUCER,
    kafka_batches,
    kafka_consume,
    kafka_produce,
    own_cpu_seconds,
    probe_kafka,
)
from bench.kafka_floor import (
    BATCH_BYTES,
    FETCH_MAX_BYTES,
    IN_FLIGHT,
    RECORD_BYTES,
    Checked,
    Partition,
    Workload,
    bare_kafka_fetch,
    bare_kafka_produce,
    build_workload,
    floor_fetch,
    floor_produce,
    grpc_append,
    grpc_fetch,
    grpc_produce,
    list_offsets,
    make_batches,
)
from bench.kafka_stub import stub_consume
from tests.support.cluster import Cluster, grpc_address, kafka_address
from tests.support.polling import poll_until
from tiered.rpc.channels import open_channel
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc

DEFAULT_OUT = RESULTS_DIR / "kafka_protocol.json"
MIB = 1024 * 1024
QUICK_MB = 32
REMOTE_TIMEOUT_S = 900.0
GRPC_CHANNEL = [("grpc.max_receive_message_length", 4 * FETCH_MAX_BYTES)]
TOPICS = ("grpc-local", "kafka-local", "bare-local", "grpc-tiered", "kafka-tiered", "probe")
ROUND_TOPICS = ("grpc-local", "kafka-local", "bare-local")
ROUNDS = 3
GROUP_DELAY = "group.initial.rebalance.delay.ms"

Log = Callable[[str], None]


# ----------------------------------------------------------------------------- phases


class Meter:
    """Runs a phase after an untimed ``os.sync()`` and files its figures under the phase's name
    in ``results``, with the CPU seconds its server and its client used, the load average after
    it, py-spy's summary with ``--profile``, and then the problems its check found.

    A phase run in several rounds is filed as its median round (by MB/s) with every round's
    MB/s (``rounds_mb_per_s``) and every round's problems."""

    def __init__(
        self, broker_pid: int, profile: bool, directory: Path, log: Log, results: dict[str, Any]
    ) -> None:
        self.broker_pid = broker_pid
        self.profile = profile
        self.directory = directory
        self.log = log
        self.results = results
        self.runs: dict[str, list[dict[str, Any]]] = {}

    def __call__(self, phase: str, run: Callable[[], Checked]) -> None:
        os.sync()
        profiler = None
        if self.profile:
            profiler = Profiler({"broker": self.broker_pid}, self.directory, phase, 100)
        broker_before, own_before = process_cpu_seconds(self.broker_pid), own_cpu_seconds()
        result, check = run()
        broker_s, client_s = process_cpu_seconds(self.broker_pid) - broker_before, own_cpu_seconds()
        floor_server_s = result.pop("server_cpu_s", None)
        client_process_s = result.pop("client_cpu_s", None)
        result["cpu_s"] = {  # the server: the broker, or the floor's server process
            "server": round(broker_s if floor_server_s is None else floor_server_s, 3),
            # the client: this process, or the client's own (the Kafka consumer's)
            "client": round(
                client_s - own_before if client_process_s is None else client_process_s, 3
            ),
        }
        result["load_average_after"] = load_average()
        if profiler is not None:
            profiler.stop()
            result["profile"] = broker_profile(profiler.files["broker"])
        result["problems"] = check()
        runs = self.runs.setdefault(phase, [])
        runs.append(result)
        self.results[phase] = median_run(runs)
        rate = f"{result['mb_per_s']:,.1f} MB/s" if "mb_per_s" in result else "no figure"
        self.log(f"  {phase}: {rate}; CPU s {result['cpu_s']}; problems {result['problems']}")


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median MB/s (the lower middle of an even count), with every run's MB/s and
    problems."""
    if len(runs) == 1:
        return runs[0]
    ranked = sorted(runs, key=lambda r: float(r.get("mb_per_s", 0.0)))
    median = dict(ranked[(len(ranked) - 1) // 2])
    median["rounds_mb_per_s"] = [r.get("mb_per_s") for r in runs]
    median["problems"] = [p for r in runs for p in r["problems"]]
    return median


def broker_profile(path: Path) -> dict[str, Any]:
    """py-spy's summary without the samples of the Kafka listener's event loop waiting for its
    sockets (``disable_throughput``'s idle leaves do not name ``EpollSelector.select``)."""
    if not path.exists():
        return {"error": "py-spy wrote no profile (pip install py-spy)"}
    waiting = "EpollSelector.select (selectors.py:"
    lines = path.read_text().splitlines()
    return summarize_profile(x for x in lines if waiting not in x.rsplit(";", 1)[-1])


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
    broker_extra = {}
    if args.group_initial_rebalance_delay_ms is not None:
        broker_extra[GROUP_DELAY] = str(args.group_initial_rebalance_delay_ms)
    cluster = Cluster(workdir / "cluster", "kraft", brokers=1, broker_extra=broker_extra)
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
        for r in range(1, args.rounds):  # each produce round writes to empty topics
            for name in ROUND_TOPICS:
                topics[f"{name}@{r}"] = make_topic(cluster, stub, f"{name}-round-{r}", {})
        missing = results["kafka_missing"] = probe_kafka(bootstrap, stub, topics["probe"], workload)
        for what, why in missing.items():
            log(f"  Kafka {what} is not served: {why}")
        source = "kafka" if "produce" not in missing else "grpc"  # what the consumer reads
        floor_file = workdir / "floor.log"

        def produce(kind: str, suffix: str, round_: int = 0) -> None:
            at = f"@{round_}" if round_ else ""
            grpc_topic, kafka_topic = topics[f"grpc-{kind}{at}"], topics[f"kafka-{kind}{at}"]
            measure(f"grpc_produce{suffix}", lambda: grpc_produce(stub, grpc_topic, workload))
            if "produce" not in missing:
                measure(
                    f"kafka_produce{suffix}",
                    lambda: kafka_produce(bootstrap, stub, kafka_topic, workload),
                )
                if not round_:
                    results[f"kafka_batches{suffix}"] = kafka_batches(stub, kafka_topic)
                if kind == "local":
                    bare_topic = topics[f"bare-local{at}"]
                    measure(
                        "kafka_produce_bare",
                        lambda: bare_kafka_produce(kafka_port, stub, bare_topic, workload),
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

        # Rounds alternate each path with its floor, so that a disk or a machine whose speed
        # drifts during the run moves both alike; the median round of each is reported.
        for r in range(args.rounds):
            round_file = floor_file if r == 0 else workdir / f"floor-round-{r}.log"
            measure("floor_produce", lambda path=round_file: floor_produce(path, workload))
            if r:
                round_file.unlink()
            produce("local", "", r)
        for _ in range(args.rounds):
            measure("floor_fetch", lambda: floor_fetch(floor_file, workload))
            if "fetch" not in missing:
                measure("kafka_fetch_stub", lambda: stub_consume(floor_file, workload))
            fetch("local", "local")
        results["consumer_group"] = consumer_group.measure(
            bootstrap,
            consumer_group.make_topics(cluster, stub, workload),
            args.rounds,
            args.handovers,
            log,
        )
        results["offset_commit"] = offset_commit.measure(
            bootstrap, topics["probe"].name, workdir, args.commits
        )
        log(f"  offset_commit: {results['offset_commit']}")
        produce("tiered", "_tiered")
        with_data = [topics["grpc-tiered"]] + ([] if source == "grpc" else [topics["kafka-tiered"]])
        segment_bytes = int(tiered["segment.bytes"])
        results["move_to_remote"] = move_to_remote(stub, with_data, workload, segment_bytes, log)
        for _ in range(args.rounds):
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
STUB = "the same consumer against a stub broker serving the floor file (its ceiling)"
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
    ("Kafka fetch, local log", "kafka_fetch_local", "kafka_fetch_stub", STUB, None),
    ("Kafka fetch, remote storage", "kafka_fetch_remote", "kafka_fetch_stub", STUB, None),
    (
        "confluent-kafka against the stub broker",
        "kafka_fetch_stub",
        "floor_fetch",
        FLOOR_FETCH,
        None,
    ),
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
    parser.add_argument(
        "--rounds", type=int, help=f"runs of each local phase (default {ROUNDS}; --quick 1)"
    )
    parser.add_argument("--commits", type=int, help="OffsetCommits timed (2000; --quick 200)")
    parser.add_argument(
        "--handovers", type=int, help="a member's leave, timed (default 5; --quick 2)"
    )
    parser.add_argument(
        "--group-initial-rebalance-delay-ms",
        type=int,
        help=f"the broker's {GROUP_DELAY} (default: the broker's, Kafka's 3000); it only delays "
        "the untimed forming of each new group",
    )
    parser.add_argument("--profile", action="store_true", help="py-spy the broker per phase")
    parser.add_argument("--workdir", type=Path, help="where the cluster and floor files go")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    args.size_mb = args.size_mb or (QUICK_MB if args.quick else 1024)
    args.rounds = args.rounds or (1 if args.quick else ROUNDS)
    args.commits = args.commits or (200 if args.quick else 2000)
    args.handovers = args.handovers or (2 if args.quick else 5)
    if args.rounds < 1:
        parser.error(f"--rounds wants at least 1, got {args.rounds}")
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
            "rounds": args.rounds,
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
            "offset_commits": args.commits,
            "consumer_group": {
                "members": consumer_group.MEMBERS,
                "consumer": consumer_group.SETTINGS,
                "handovers": args.handovers,
                "handover_records_per_partition": consumer_group.HANDOVER_RECORDS,
                "broker_group_initial_rebalance_delay_ms": args.group_initial_rebalance_delay_ms,
            },
        },
        "results": results,
        "kafka_missing": results.get("kafka_missing", {}),
        "summary": summary_rows(results, scenario)
        + consumer_group.summary_rows(results.get("consumer_group"), scenario)
        + offset_commit.summary_rows(results.get("offset_commit"), scenario),
        "failures": failures,
        "ok": not failures,
    }
    return finish_run(
        args.out, document, runtime_s, failures, lambda: print_table(results, log), log
    )


if __name__ == "__main__":
    sys.exit(main())
