"""Client <-> partition leader, mid-produce, with an idempotent producer, in both metadata modes
and with two client implementations (librdkafka through confluent-kafka, and kafka-python): every
acknowledged record is read back once, in order.

The producer is a process of its own (``system_tests.sequenced_producer``) in its own cgroup, so
that ``tests.support.network`` cuts it from one broker both ways while it sends a steady stream
of sequenced values to every partition, for longer than its request timeout and far shorter
than its delivery timeout: it times out the requests in flight to the cut broker, whose records
that broker may already have written, and resends them with the same producer id and sequence
numbers once healed. The broker must write each once (the producer's sequence dedup); every
record is then read back and checked against the producer's delivery reports."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from system_tests.partitions import broker_id, client_address, cluster_status, partitioned_cluster
from system_tests.sequenced_producer import DELIVERY_TIMEOUT_MS, REQUEST_TIMEOUT_MS
from tests.support.polling import poll_until
from tests.support.processes import REPO
from tiered.admin import AdminClient

pytestmark = [pytest.mark.netns, pytest.mark.timeout(900)]

TOPIC = "sequenced"
PARTITIONS = 4
LEADER = "broker-2"
PRODUCER = "producer"
CUT_S = 3 * REQUEST_TIMEOUT_MS / 1000
assert CUT_S < DELIVERY_TIMEOUT_MS / 1000 / 4  # retried within the delivery timeout
BEFORE_AND_AFTER = 100  # acknowledged records from the leader before the cut, and after it


def _reports(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def _acked_from(path: Path, partitions: list[int]) -> int:
    return sum(1 for r in _reports(path) if r.get("partition") in partitions)


def _read_back(bootstrap: str, partition: int) -> list[tuple[int, int]]:
    """Every record of ``partition``, as (offset, value), up to its high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False}
    )
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30)
        assert low == 0, (partition, low)
        consumer.assign([TopicPartition(TOPIC, partition, 0)])
        records: list[tuple[int, int]] = []
        deadline = time.monotonic() + 120
        while len(records) < high and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            assert message.error() is None, message.error()
            records.append((message.offset(), int(message.value())))
        return records
    finally:
        consumer.close()


def check_history(
    reports: list[dict[str, Any]], records: dict[int, list[tuple[int, int]]]
) -> list[str]:
    """What is wrong with what was read back (``records``: by partition, (offset, value) in
    offset order) against the delivery reports: a failed delivery, an acknowledged value
    missing, doubled, at another offset or out of send order, a gap among the offsets, or a
    value that was never acknowledged."""
    problems = [f"value {r['value']} failed: {r['error']}" for r in reports if "error" in r]
    acked = {r["value"]: (r["partition"], r["offset"]) for r in reports if "error" not in r}
    seen = Counter(value for partition in records.values() for _, value in partition)
    problems += [f"value {v} read {n} times" for v, n in sorted(seen.items()) if n > 1]
    problems += [f"acknowledged value {v} never read" for v in sorted(acked) if v not in seen]
    for partition, read in sorted(records.items()):
        offsets = [offset for offset, _ in read]
        if offsets != list(range(len(read))):
            problems.append(f"partition {partition}: offsets {offsets[:5]}... are not 0, 1, 2, ...")
        values = [value for _, value in read]
        if values != sorted(values):
            problems.append(f"partition {partition}: values out of send order")
        for offset, value in read:
            if value not in acked:
                problems.append(f"partition {partition}: value {value} was never acknowledged")
            elif acked[value] != (partition, offset):
                problems.append(f"value {value} acknowledged at {acked[value]}, read at "
                                f"{(partition, offset)}")  # fmt: skip
    return problems


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
@pytest.mark.parametrize("metadata", ["kraft", "zookeeper"])
def test_an_idempotent_producer_cut_from_a_partition_leader_mid_produce(
    tmp_path: Path, metadata: str, client: str
) -> None:
    data = tmp_path / "cluster"
    with partitioned_cluster(data, "--brokers", "2", "--metadata", metadata) as (network, layout):
        _, status = cluster_status(data)
        admin = AdminClient(client_address(status, status["active_controller"]))
        admin.create_topic(TOPIC, PARTITIONS, {})
        topic = admin.describe_topic(TOPIC)
        led = [p.partition for p in topic.partitions if p.leader == broker_id(LEADER)]
        others = [p.partition for p in topic.partitions if p.partition not in led]
        assert led and others, topic.partitions
        bootstrap = layout["kafka_bootstrap_servers"]
        report = tmp_path / "deliveries.jsonl"
        command = [sys.executable, "-m", "system_tests.sequenced_producer", client, bootstrap,
                   TOPIC, str(PARTITIONS), str(report)]  # fmt: skip
        pipes = dict.fromkeys(("stdin", "stdout", "stderr"), subprocess.PIPE)
        producer = network.spawn(PRODUCER, command, cwd=REPO, text=True, **pipes)
        try:
            poll_until(
                lambda: _acked_from(report, led) >= BEFORE_AND_AFTER,
                timeout=120,
                what="acknowledgements from the leader before the cut",
            )
            network.cut(PRODUCER, LEADER, both_ways=True)
            cut_at = time.monotonic()
            elsewhere = _acked_from(report, others)
            # The cut lasts CUT_S (a fault's length, not a wait for an event), while the other
            # broker's partitions go on being acknowledged.
            poll_until(
                lambda: (
                    time.monotonic() - cut_at >= CUT_S
                    and _acked_from(report, others) > elsewhere + BEFORE_AND_AFTER
                ),
                timeout=120,
                what="the other broker's acknowledgements during the cut",
            )
            network.heal()
            after_heal = _acked_from(report, led)
            poll_until(
                lambda: _acked_from(report, led) >= after_heal + BEFORE_AND_AFTER,
                timeout=120,
                what="acknowledgements from the leader after the heal",
            )
        finally:  # closing its stdin ends the stream
            out, err = producer.communicate(timeout=DELIVERY_TIMEOUT_MS / 1000 + 60)
        assert producer.returncode == 0, (out, err[-5000:])
        reports = _reports(report)
        records = {p: _read_back(bootstrap, p) for p in range(PARTITIONS)}
        problems = check_history(reports, records)
        assert not problems, problems[:20]
        assert len(reports) > 3 * BEFORE_AND_AFTER, len(reports)


def test_the_history_check_finds_each_violation() -> None:
    reports = [
        {"value": 0, "partition": 0, "offset": 0},
        {"value": 1, "partition": 0, "offset": 1},
        {"value": 2, "partition": 0, "offset": 2},
    ]
    good = {0: [(0, 0), (1, 1), (2, 2)]}
    assert check_history(reports, good) == []
    doubled = {0: [(0, 0), (1, 1), (2, 1), (3, 2)]}
    assert any("read 2 times" in p for p in check_history(reports, doubled))
    missing = {0: [(0, 0), (1, 1)]}
    assert any("never read" in p for p in check_history(reports, missing))
    swapped = {0: [(0, 0), (1, 2), (2, 1)]}
    assert any("out of send order" in p for p in check_history(reports, swapped))
    gap = {0: [(0, 0), (1, 1), (3, 2)]}
    assert any("are not 0, 1, 2" in p for p in check_history(reports, gap))
    stray = {0: [(0, 0), (1, 1), (2, 2), (3, 9)]}
    assert any("never acknowledged" in p for p in check_history(reports, stray))
    failed = [*reports, {"value": 3, "error": "timed out"}]
    assert any("failed" in p for p in check_history(failed, good))
