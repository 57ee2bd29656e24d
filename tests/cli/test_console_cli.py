"""tiered-console-producer and tiered-console-consumer as real subprocesses against a real KRaft
cluster (one for the module; each test has its own topics): round trips across both tiers, round-
robin batches, keys and JSON, --max-messages, --follow, a dead leader (retried, then reported with
what was acknowledged), and the operator errors (exit 1, ``NAME: message``, no traceback)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.consumer import parse_offset, resolve_offset
from cli.launch.ports import free_port
from cli.partition_client import Offsets
from cli.producer import LineReader
from tests.support.cluster import Cluster, grpc_address, running_cluster
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import PartitionDescription
from tiered.errors import ErrorCode, TieredError

pytestmark = pytest.mark.processes

BIN = Path(sys.executable).parent
SEGMENTS = {"segment.bytes": "2000"}
# Local retention keeps ~2 segments: most of the log is in remote storage only.
TIERED = {"remote.storage.enable": "true", **SEGMENTS, "local.retention.bytes": "4000"}
# Total retention too: remote segments expire and the log start offset moves up.
SHORT = {**TIERED, "local.retention.bytes": "2000", "retention.bytes": "6000"}


@pytest.fixture(scope="module")
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    yield from running_cluster(request, tmp_path_factory.mktemp("console"), "kraft")


def cli(
    module: str, *argv: str, stdin: bytes = b"", timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", f"cli.{module}", *argv],
        check=False,
        input=stdin,
        capture_output=True,
        cwd=REPO,
        timeout=timeout,
    )
    out, err = done.stdout.decode(), done.stderr.decode()
    assert "Traceback" not in err, err
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def produce(
    cluster: Cluster, topic: str, lines: list[str], *extra: str, ending: str = "\n"
) -> subprocess.CompletedProcess[str]:
    data = "".join(line + ending for line in lines).encode()
    return cli(
        "producer", "--bootstrap-server", cluster.bootstrap, "--topic", topic, *extra, stdin=data
    )


def consume(
    cluster: Cluster, topic: str, partition: int, offset: str | int, *extra: str
) -> subprocess.CompletedProcess[str]:
    return cli(
        "consumer",
        "--bootstrap-server",
        cluster.bootstrap,
        "--topic",
        topic,
        "--partition",
        str(partition),
        "--offset",
        str(offset),
        *extra,
    )


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stderr
    return done


def failed(done: subprocess.CompletedProcess[str], name: str) -> str:
    """The error line of a CLI that must have failed with ``name``."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{name}: "), done.stderr
    return last


def partition_state(cluster: Cluster, topic: str, partition: int) -> PartitionDescription:
    return cluster.admin.describe_topic(topic).partitions[partition]


def lines_of(count: int, start: int = 0) -> list[str]:
    """Distinct lines of ~100 bytes, some with non-ASCII text, one empty."""
    lines = []
    for i in range(start, start + count):
        text = f"line {i:05d} " + ("é-ü-€ " if i % 7 == 0 else "") + "x" * 80
        lines.append("" if i == 3 else text)
    return lines


def test_round_trip_across_both_tiers(cluster: Cluster) -> None:
    cluster.admin.create_topic("tiered", 1, TIERED)
    lines = lines_of(400)
    sent = ok(produce(cluster, "tiered", lines, "--partition", "0", "--batch-size", "25"))
    assert "Sent 400 records to topic tiered:" in sent.stderr
    assert "partition 0: 400 records, last offset 399" in sent.stderr
    assert sent.stdout == ""

    def tiered_and_expired() -> bool:
        p = partition_state(cluster, "tiered", 0)
        return p.remote_segment_count > 3 and (p.local_log_start_offset or 0) > 50

    poll_until(tiered_and_expired, timeout=30, what="segments to tier and expire locally")
    topic = cluster.admin.describe_topic("tiered")
    assert cluster.fetch(topic, 0, 0).from_remote  # offset 0 is in remote storage only

    everything = ok(consume(cluster, "tiered", 0, 0))
    assert everything.stdout == "".join(f"{line}\n" for line in lines)
    assert everything.stderr.strip() == "Processed a total of 400 messages"
    # From the middle of the remote tier, across into the local one, by the installed script.
    local_start = partition_state(cluster, "tiered", 0).local_log_start_offset or 0
    middle = subprocess.run(
        [
            str(BIN / "tiered-console-consumer"),
            "--bootstrap-server",
            cluster.bootstrap,
            "--topic",
            "tiered",
            "--partition",
            "0",
            "--offset",
            str(local_start - 10),
            "--max-messages",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert middle.stdout.splitlines() == lines[local_start - 10 : local_start + 10]
    assert ok(consume(cluster, "tiered", 0, "earliest")).stdout == everything.stdout
    latest = ok(consume(cluster, "tiered", 0, "latest"))
    assert latest.stdout == "" and "total of 0 messages" in latest.stderr


def test_batches_go_round_robin_without_partition(cluster: Cluster) -> None:
    cluster.admin.create_topic("spread", 3, SEGMENTS)
    lines = lines_of(60)
    broker = grpc_address(cluster.brokers[1].properties)
    # A broker as the bootstrap server; a long linger so that only full batches go out.
    sent = ok(
        cli(
            "producer",
            "--bootstrap-server",
            broker,
            "--topic",
            "spread",
            "--batch-size",
            "10",
            "--linger-ms",
            "60000",
            stdin="".join(f"{line}\r\n" for line in lines).encode(),  # CRLF is a line break too
        )
    )
    assert "Sent 60 records to topic spread:" in sent.stderr
    for p in range(3):
        assert f"partition {p}: 20 records, last offset 19" in sent.stderr
        out = ok(consume(cluster, "spread", p, "earliest", "--format", "json")).stdout
        records = [json.loads(line) for line in out.splitlines()]
        assert [r["offset"] for r in records] == list(range(20))
        # Batch b (10 lines) went to partition b % 3.
        expected = [lines[b * 10 + i] for b in range(p, 6, 3) for i in range(10)]
        assert [r["value"] for r in records] == expected


def test_keys_json_and_max_messages(cluster: Cluster) -> None:
    cluster.admin.create_topic("keyed", 1, SEGMENTS)
    before_ms = int(time.time() * 1000)
    lines = ["k1:v1", "k2:a:b", ":no key text", "k4:", "ключ:значение"]
    ok(produce(cluster, "keyed", lines, "--key-separator", ":"))
    after_ms = int(time.time() * 1000)
    out = ok(consume(cluster, "keyed", 0, 0, "--format", "json")).stdout
    records = [json.loads(line) for line in out.splitlines()]
    assert [{k: r[k] for k in ("offset", "key", "value")} for r in records] == [
        {"offset": 0, "key": "k1", "value": "v1"},
        {"offset": 1, "key": "k2", "value": "a:b"},
        {"offset": 2, "key": "", "value": "no key text"},
        {"offset": 3, "key": "k4", "value": ""},
        {"offset": 4, "key": "ключ", "value": "значение"},
    ]
    assert all(before_ms <= r["timestamp"] <= after_ms for r in records)
    # Without a separator there is no key; text output is the values only.
    ok(produce(cluster, "keyed", ["plain"]))
    last = json.loads(ok(consume(cluster, "keyed", 0, 5, "--format", "json")).stdout)
    assert last["key"] is None and last["value"] == "plain" and last["offset"] == 5
    two = ok(consume(cluster, "keyed", 0, 1, "--max-messages", "2"))
    assert two.stdout == "a:b\nno key text\n"
    assert "Processed a total of 2 messages" in two.stderr
    # More than there is: stops at the log end offset.
    assert len(ok(consume(cluster, "keyed", 0, 4, "--max-messages", "50")).stdout.splitlines()) == 2


def test_follow_waits_for_new_records(cluster: Cluster) -> None:
    cluster.admin.create_topic("live", 1, SEGMENTS)
    ok(produce(cluster, "live", ["old"]))
    follower = subprocess.Popen(
        [
            *(sys.executable, "-m", "cli.consumer", "--bootstrap-server", cluster.bootstrap),
            *("--topic", "live", "--partition", "0", "--offset", "1", "--max-messages", "3"),
            *("--follow", "--poll-interval-ms", "50"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )
    try:
        ok(produce(cluster, "live", ["new 1", "new 2"]))
        ok(produce(cluster, "live", ["new 3", "new 4"]))
        out, err = follower.communicate(timeout=30)
    finally:
        follower.kill()
    assert follower.returncode == 0, err
    assert out == "new 1\nnew 2\nnew 3\n"


def test_dead_leader_is_retried_then_reported_with_what_was_acknowledged(
    cluster: Cluster,
) -> None:
    cluster.admin.create_topic("fragile", 2, SEGMENTS)
    topic = cluster.admin.describe_topic("fragile")
    survivor, victim = (topic.partitions[p].leader for p in (0, 1))
    assert survivor != victim  # two partitions on two brokers
    lines = lines_of(30)
    cluster.brokers[victim].kill()
    try:
        # Round-robin: the first batch goes to partition 0 (alive), the second to partition 1.
        broken = produce(
            cluster,
            "fragile",
            lines[:20],
            "--batch-size",
            "10",
            "--linger-ms",
            "60000",
            "--retries",
            "1",
        )
        error = failed(broken, "BROKER_NOT_AVAILABLE")
        assert "gave up after 2 attempts" in error
        assert "10 records were acknowledged before this failure" in error
        assert "lines 11-20, to partition 1" in error
        assert "partition 0: 10 records, last offset 9" in broken.stderr

        # With enough retries the producer outlasts the broker's restart.
        retrying = subprocess.Popen(
            [
                *(sys.executable, "-m", "cli.producer"),
                *("--bootstrap-server", cluster.bootstrap, "--topic", "fragile"),
                *("--partition", "1", "--retries", "40"),
            ],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        try:
            assert retrying.stdin is not None and retrying.stderr is not None
            retrying.stdin.write("".join(f"{line}\n" for line in lines[10:30]))
            retrying.stdin.close()
            # It warns of each retry on stderr; restart the broker once it has failed once.
            warning = retrying.stderr.readline()
            assert warning.startswith("WARN: BROKER_NOT_AVAILABLE: Produce on fragile-1"), warning
            assert "retrying in" in warning
            cluster.brokers[victim].start()
            err = warning + retrying.stderr.read()
            retrying.wait(timeout=60)
        finally:
            retrying.kill()
        assert retrying.returncode == 0, err
        assert "partition 1: 20 records, last offset 19" in err
    finally:
        if not cluster.brokers[victim].alive:
            cluster.brokers[victim].start()
        cluster.wait_for_live_brokers(set(cluster.brokers))
    assert ok(consume(cluster, "fragile", 0, 0)).stdout.splitlines() == lines[:10]
    assert ok(consume(cluster, "fragile", 1, 0)).stdout.splitlines() == lines[10:30]


def test_offset_below_log_start_is_out_of_range(cluster: Cluster) -> None:
    cluster.admin.create_topic("short", 1, SHORT)
    ok(produce(cluster, "short", lines_of(300), "--batch-size", "20"))
    poll_until(
        lambda: (partition_state(cluster, "short", 0).log_start_offset or 0) > 0,
        timeout=30,
        what="remote retention to raise the log start offset",
    )
    start = partition_state(cluster, "short", 0).log_start_offset or 0
    below = failed(consume(cluster, "short", 0, 0), "OFFSET_OUT_OF_RANGE")
    assert "offset 0 of short-0 is below the log start offset" in below
    assert "valid offsets are " in below and "(log start) to 300 (log end)" in below
    beyond = failed(consume(cluster, "short", 0, 301), "OFFSET_OUT_OF_RANGE")
    assert "beyond the log end offset" in beyond
    # earliest follows the log start offset (which retention may still move on: then retry).
    rest: list[str] = []

    def read_from_earliest() -> bool:
        done = consume(cluster, "short", 0, "earliest")
        if done.returncode != 0:
            assert "OFFSET_OUT_OF_RANGE: " in done.stderr, done.stderr
            return False
        rest[:] = done.stdout.splitlines()
        return True

    poll_until(read_from_earliest, timeout=30, what="a read from the earliest offset")
    assert 0 < len(rest) <= 300 - start and rest == lines_of(300)[300 - len(rest) :]


def test_operator_errors_exit_1_with_the_error_name(cluster: Cluster) -> None:
    cluster.admin.create_topic("three", 3, SEGMENTS)
    common = ["--bootstrap-server", cluster.bootstrap]
    produce_argv = ["--topic", "three"]
    consume_argv = ["--topic", "three", "--partition", "0", "--offset", "0"]

    unknown = failed(cli("producer", *common, "--topic", "nope"), "UNKNOWN_TOPIC_OR_PARTITION")
    assert "'nope'" in unknown
    failed(
        cli("consumer", *common, "--topic", "nope", "--partition", "0", "--offset", "0"),
        "UNKNOWN_TOPIC_OR_PARTITION",
    )
    for bad in ("3", "-1"):
        out_of_range = failed(
            cli("producer", *common, *produce_argv, "--partition", bad, stdin=b"x\n"),
            "UNKNOWN_TOPIC_OR_PARTITION",
        )
        assert f"no partition {bad}" in out_of_range and "valid: 0 to 2" in out_of_range
    failed(
        cli("consumer", *common, "--topic", "three", "--partition", "7", "--offset", "0"),
        "UNKNOWN_TOPIC_OR_PARTITION",
    )
    soon = cli("consumer", *common, "--topic", "three", "--partition", "0", "--offset", "soon")
    assert "not a number" in failed(soon, "INVALID_REQUEST")
    # Garbage and unreachable bootstrap addresses.
    dead = f"127.0.0.1:{free_port()}"
    for module, argv in (("producer", produce_argv), ("consumer", consume_argv)):
        garbage = cli(module, "--bootstrap-server", "not-an-address", *argv, stdin=b"x\n")
        assert "'not-an-address' is not host:port" in failed(garbage, "INVALID_REQUEST")
        unreachable = cli(module, "--bootstrap-server", dead, *argv, stdin=b"x\n")
        assert dead in failed(unreachable, "BROKER_NOT_AVAILABLE")
    # A line without the key separator: the lines before it are sent, the rest is not.
    keyless = cli(
        "producer",
        *common,
        *produce_argv,
        "--partition",
        "0",
        "--key-separator",
        "=",
        stdin=b"a=1\nb=2\nthird line\nd=4\n",
    )
    assert "line 3 has no key separator '='" in failed(keyless, "INVALID_REQUEST")
    assert "partition 0: 2 records, last offset 1" in keyless.stderr
    assert ok(consume(cluster, "three", 0, 0)).stdout == "1\n2\n"
    # Usage errors are argparse's (exit 2).
    usage = cli("consumer", *common, "--topic", "three", "--partition", "0")
    assert usage.returncode == 2 and "--offset" in usage.stderr


# --------------------------------------------------------------------------------- no cluster


def test_line_reader_splits_like_readline() -> None:
    reader = LineReader(io.BytesIO(b"a\r\nb\n\n\xff c\nlast"))
    lines = []
    while (line := reader.next_line()) is not None:
        lines.append(line)
    assert lines == [b"a", b"b", b"", b"\xff c", b"last"]
    assert LineReader(io.BytesIO(b"")).next_line() is None


def test_line_reader_times_out_on_a_quiet_pipe() -> None:
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stream:
        reader = LineReader(stream)
        os.write(write_end, b"one\ntw")
        assert reader.next_line(0.5) == b"one"
        with pytest.raises(TimeoutError):
            reader.next_line(0.01)  # "tw" is no line yet
        os.write(write_end, b"o\n")
        os.close(write_end)
        assert reader.next_line(0.5) == b"two"
        assert reader.next_line(0.5) is None


def test_offsets_parse_and_resolve() -> None:
    offsets = Offsets(log_start_offset=10, local_log_start_offset=40, log_end_offset=50)
    assert resolve_offset(parse_offset("earliest"), offsets, "t-0") == 10
    assert resolve_offset(parse_offset(" LATEST "), offsets, "t-0") == 50
    assert resolve_offset(parse_offset("10"), offsets, "t-0") == 10
    assert resolve_offset(parse_offset("50"), offsets, "t-0") == 50
    for text in ("soon", "-1", "1.5", ""):
        with pytest.raises(TieredError) as bad:
            parse_offset(text)
        assert bad.value.code is ErrorCode.INVALID_REQUEST
    with pytest.raises(TieredError) as below:
        resolve_offset(9, offsets, "t-0")
    assert below.value.code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert str(below.value) == (
        "OFFSET_OUT_OF_RANGE: offset 9 of t-0 is below the log start offset: "
        "valid offsets are 10 (log start) to 50 (log end)"
    )
    with pytest.raises(TieredError, match="no records; the only valid offset is 7"):
        resolve_offset(8, Offsets(7, 7, 7), "t-0")
