"""A real ``tiered-broker`` process over gRPC: produce, tier, expire locally, fetch from offset 0
across tiers, stop tiering, bad input, kill -9 and restart, graceful stop."""

from __future__ import annotations

import os
import queue
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from broker.assignment_journal import read_entries
from cli.launch.ports import free_port
from tests.support.batches import batch as one_record
from tests.support.batches import decode, offsets
from tests.support.polling import poll_until
from tiered import rlmm, rsm
from tiered.api import RemoteLogSegmentState, TopicIdPartition
from tiered.kafka.compression import Codec
from tiered.kafka.records import Record, build_batch
from tiered.rlmm.serde import topic_id_partition_to_proto
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import records_pb2

pytestmark = pytest.mark.processes

REPO = Path(__file__).resolve().parents[2]


class BrokerProcess:
    def __init__(self, tmp_path: Path, extra: tuple[str, ...] = ()) -> None:
        self.dir = tmp_path
        self.port = free_port()
        self.config = tmp_path / "broker.properties"
        self.write_config(extra)
        self.process: subprocess.Popen[str] | None = None
        self.metrics_url = ""
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []

    def write_config(self, extra: tuple[str, ...] = ()) -> None:
        tmp_path = self.dir
        self.config.write_text(
            "\n".join(
                [
                    *extra,
                    "node.id=1",
                    f"listeners=GRPC://127.0.0.1:{self.port}",
                    f"log.dirs={tmp_path / 'logs'}",
                    f"rlmm.sqlite.path={tmp_path / 'rlmm.db'}",
                    f"remote.storage.root={tmp_path / 'remote'}",
                    "remote.log.manager.task.interval.ms=100",
                    "remote.log.manager.copier.thread.pool.size=2",
                    "metrics.port=0",
                ]
            )
        )

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "broker.main", "--config", str(self.config)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._pump, args=(self.process,), daemon=True).start()
        deadline = time.monotonic() + 30
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError("broker did not start:\n" + "".join(self.output)) from None
            found = re.search(r"metrics on (http://\S+/metrics)", line)
            if found:
                self.metrics_url = found.group(1)
            if "serving on" in line:
                break
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pb_grpc.BrokerServiceStub(self.channel)

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.output.append(line)
            self.lines.put(line)

    def kill(self) -> None:
        assert self.process is not None
        self.channel.close()
        self.process.kill()
        self.process.wait(10)

    def terminate(self) -> int:
        assert self.process is not None
        self.channel.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(30)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                "broker still running 30 s after SIGTERM:\n" + "".join(self.output)
            ) from None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path)
    b.start()
    try:
        yield b
    finally:
        b.close()


TIERED = {
    "remote.storage.enable": "true",
    "segment.bytes": "4096",
    "local.retention.bytes": "8192",
}


def assign(
    b: BrokerProcess, tp: TopicIdPartition, configs: dict[str, str]
) -> pb.AssignPartitionsResponse:
    return b.stub.AssignPartitions(
        pb.AssignPartitionsRequest(
            partitions=[
                pb.PartitionAssignment(partition=topic_id_partition_to_proto(tp), configs=configs)
            ]
        )
    )


def disable(
    b: BrokerProcess, tp: TopicIdPartition, policy: str, timeout: float | None = None
) -> pb.DisableRemoteTopicResponse:
    """What the controller sends (controller epoch 1) to stop tiering at tiered epoch 1."""
    return b.stub.DisableRemoteTopic(
        pb.DisableRemoteTopicRequest(
            controller_epoch=1,
            entries=[
                pb.DisableRemoteTopicEntry(
                    partition=topic_id_partition_to_proto(tp), tiered_epoch=1, policy=policy
                )
            ],
        ),
        timeout=timeout,
    )


def produce(b: BrokerProcess, tp: TopicIdPartition, start: int, count: int) -> None:
    for batch in range(start, start + count, 50):
        response = b.stub.Produce(
            pb.ProduceRequest(
                partition=topic_id_partition_to_proto(tp),
                records=b"".join(
                    one_record(f"k{i}".encode(), f"record-{i}".encode() * 4)
                    for i in range(batch, min(batch + 50, start + count))
                ),
            )
        )
        assert response.error.code == 0, response.error


def log_dir(b: BrokerProcess, tp: TopicIdPartition) -> pb.PartitionLogDir:
    for d in b.stub.DescribeLogDirs(pb.DescribeLogDirsRequest()).partitions:
        if d.partition.topic_id == tp.topic_id.bytes:
            return d
    raise AssertionError(f"{tp} not hosted")


def fetch_all(b: BrokerProcess, tp: TopicIdPartition, start: int = 0) -> tuple[list[bytes], bool]:
    values: list[bytes] = []
    offset, any_remote = start, False
    end = log_dir(b, tp).offsets.log_end_offset
    while offset < end:
        response = b.stub.Fetch(
            pb.FetchRequest(
                partition=topic_id_partition_to_proto(tp), offset=offset, max_bytes=2000
            )
        )
        assert response.error.code == 0, response.error
        records = decode(response.records)
        assert records and records[0].offset == offset
        values.extend(r.value or b"" for r in records)
        any_remote |= response.from_remote
        offset = records[-1].offset + 1
    return values, any_remote


def expected(count: int) -> list[bytes]:
    return [f"record-{i}".encode() * 4 for i in range(count)]


def test_produce_tier_expire_locally_and_fetch_from_zero(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "orders", 0)
    assert assign(broker, tp, TIERED).errors[0].code == 0
    produce(broker, tp, 0, 600)
    poll_until(
        lambda: log_dir(broker, tp).offsets.local_log_start_offset > 0,
        timeout=30,
        what="tiering and local expiry",
    )
    d = log_dir(broker, tp)
    assert d.remote_copy_finished_bytes > 0 and d.copying
    assert d.offsets.log_start_offset == 0
    values, remote = fetch_all(broker, tp)
    assert values == expected(600)
    assert remote  # the start came from remote storage
    # The metrics endpoint reports what happened, under Kafka's names, per topic.
    poll_until(lambda: _all_closed_copied(broker, tp), timeout=30, what="copying to settle")
    d = log_dir(broker, tp)
    scraped = _scrape(broker)
    assert scraped["kafka_server_brokertopicmetrics_remotecopyrequestspersec_total"] > 0
    assert scraped["kafka_server_brokertopicmetrics_remotecopybytespersec_total"] > 0
    assert scraped["kafka_server_brokertopicmetrics_remotefetchbytespersec_total"] > 0
    assert scraped["kafka_server_brokertopicmetrics_remotelogsizebytes"] == d.remote_size_bytes
    assert (
        scraped["kafka_server_brokertopicmetrics_remotelogmetadatacount"] == d.remote_segment_count
    )
    assert scraped["kafka_server_brokertopicmetrics_remotecopyerrorspersec_total"] == 0
    assert "kafka_server_brokertopicmetrics_remotecopylagbytes" in scraped


def _scrape(b: BrokerProcess, topic: str = "orders") -> dict[str, float]:
    """The ``topic=...`` sample of each metric family."""
    with urllib.request.urlopen(b.metrics_url, timeout=10) as response:
        text = response.read().decode()
    samples: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#") or f'topic="{topic}"' not in line:
            continue
        name, value = line.split("{", 1)[0], float(line.rsplit(" ", 1)[1])
        samples[name] = value
    return samples


def test_errors_are_named_and_change_nothing(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "strict", 0)
    bad = assign(broker, tp, {"retention.bytes": "lots"})
    assert bad.errors[0].name == "INVALID_CONFIG" and "retention.bytes" in bad.errors[0].message
    unknown = broker.stub.Fetch(
        pb.FetchRequest(partition=topic_id_partition_to_proto(tp), offset=0, max_bytes=100)
    )
    assert unknown.error.name == "UNKNOWN_TOPIC_OR_PARTITION"  # the bad assignment hosted nothing
    with pytest.raises(grpc.RpcError) as info:
        broker.stub.Fetch(
            pb.FetchRequest(partition=records_pb2.TopicIdPartition(topic_id=b"short"))
        )
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert assign(broker, tp, TIERED).errors[0].code == 0
    produce(broker, tp, 0, 10)
    beyond = broker.stub.Fetch(
        pb.FetchRequest(partition=topic_id_partition_to_proto(tp), offset=99, max_bytes=100)
    )
    assert beyond.error.name == "OFFSET_OUT_OF_RANGE"
    stop = disable(broker, tp, "purge")
    assert stop.errors[0].name == "INVALID_REQUEST"
    assert (
        "remote.log.disable.policy" in stop.errors[0].message
        and "retain, delete" in stop.errors[0].message
    )
    assert log_dir(broker, tp).copying  # nothing was stopped


def disable_entry(tp: TopicIdPartition, tiered_epoch: int) -> pb.DisableRemoteTopicEntry:
    return pb.DisableRemoteTopicEntry(
        partition=topic_id_partition_to_proto(tp), tiered_epoch=tiered_epoch, policy="retain"
    )


def test_malformed_assignments_and_disables_change_nothing(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "guarded", 0)
    assert assign(broker, tp, TIERED).errors[0].code == 0
    persisted = read_entries(broker.dir / "logs")
    # A bogus policy fails the assignment before its configs replace the hosted ones.
    for enable in ("false", "true"):
        bad = assign(
            broker, tp, {"remote.storage.enable": enable, "remote.log.disable.policy": "bogus"}
        )
        assert bad.errors[0].name == "INVALID_REQUEST"
        assert "remote.log.disable.policy='bogus'" in bad.errors[0].message
    # A topic name that is not valid never becomes a directory, inside log.dirs or out of it.
    for name in ("../escape", "a/b", "", ".."):
        bad = assign(broker, TopicIdPartition(uuid.uuid4(), name, 0), {})
        assert bad.errors[0].name == "INVALID_TOPIC_EXCEPTION", name
    assert not (broker.dir / "escape-0").exists()
    # DisableRemoteTopic: a tiered epoch below 1 fails its entry; a negative partition, the
    # whole request, so the valid entry beside it does not stop copying either.
    disabled = broker.stub.DisableRemoteTopic(
        pb.DisableRemoteTopicRequest(entries=[disable_entry(tp, 0), disable_entry(tp, -1)])
    )
    assert [e.name for e in disabled.errors] == ["INVALID_REQUEST"] * 2
    assert "tiered epoch 0 " in disabled.errors[0].message
    negative = topic_id_partition_to_proto(tp)
    negative.partition = -1
    with pytest.raises(grpc.RpcError) as info:
        broker.stub.DisableRemoteTopic(
            pb.DisableRemoteTopicRequest(
                entries=[
                    disable_entry(tp, 1),
                    pb.DisableRemoteTopicEntry(partition=negative, tiered_epoch=1, policy="retain"),
                ]
            )
        )
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "partition must be >= 0, got -1" in (info.value.details() or "")
    d = log_dir(broker, tp)
    assert d.copying and d.tiered_epoch == 0
    assert read_entries(broker.dir / "logs") == persisted


def test_stop_with_delete_over_grpc(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "dropped", 0)
    assign(broker, tp, TIERED)
    produce(broker, tp, 0, 400)
    poll_until(
        lambda: log_dir(broker, tp).offsets.local_log_start_offset > 0,
        timeout=30,
        what="local expiry",
    )
    stop = disable(broker, tp, "delete")
    assert stop.error.code == 0 and stop.errors[0].code == 0
    d = log_dir(broker, tp)
    assert not d.copying and d.tiered_epoch == 1
    assert d.offsets.log_start_offset == d.offsets.local_log_start_offset > 0
    below = broker.stub.Fetch(
        pb.FetchRequest(partition=topic_id_partition_to_proto(tp), offset=0, max_bytes=100)
    )
    assert below.error.name == "OFFSET_OUT_OF_RANGE"
    values, remote = fetch_all(broker, tp, d.offsets.log_start_offset)
    assert values == expected(400)[d.offsets.log_start_offset :] and not remote


def test_kill_9_while_tiering_then_restart(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "crashy", 0)
    assign(broker, tp, {**TIERED, "local.retention.bytes": "-1"})
    produce(broker, tp, 0, 1500)
    poll_until(lambda: log_dir(broker, tp).remote_segment_count > 0, timeout=30, what="copying")
    broker.kill()  # most likely mid-upload: copies run continuously at this point
    broker.start()
    d = log_dir(broker, tp)
    assert d.offsets.log_end_offset == 1500  # every acknowledged record survived
    produce(broker, tp, 1500, 100)
    # Copying catches up after the restart.
    poll_until(
        lambda: (
            log_dir(broker, tp).remote_copy_finished_bytes
            >= log_dir(broker, tp).local_size_bytes - 8192
        ),
        timeout=60,
        what="copying to catch up",
    )
    values, _ = fetch_all(broker, tp)
    assert values == expected(1600)
    # Invariants: every finished segment has its objects; every object belongs to a listed segment.
    assert broker.terminate() == 0
    manager = rlmm.create({"rlmm.sqlite.path": str(broker.dir / "rlmm.db")})
    storage = rsm.create({"remote.storage.root": str(broker.dir / "remote")})
    try:
        listed = list(manager.list_remote_log_segments(tp))
        assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in listed)
        objects = {Path(k).name.split(".")[0] for k in storage.object_keys(tp)}
        segments = {f"{m.start_offset:020d}-{m.remote_log_segment_id.id}" for m in listed}
        assert objects == segments
    finally:
        manager.close()


def test_a_retried_idempotent_batch_is_written_once_across_a_kill_9(
    broker: BrokerProcess,
) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "exactly-once", 0)
    assign(broker, tp, TIERED)
    produce(broker, tp, 0, 10)
    now_ms = int(time.time() * 1000)

    def idempotent(first_seq: int) -> pb.ProduceResponse:
        batch = build_batch(
            [Record(b"k", f"once-{first_seq + i}".encode(), timestamp=now_ms) for i in range(3)],
            Codec.SNAPPY,
            producer_id=42,
            producer_epoch=0,
            base_sequence=first_seq,
        )
        request = pb.ProduceRequest(partition=topic_id_partition_to_proto(tp), records=batch)
        response: pb.ProduceResponse = broker.stub.Produce(request, timeout=30)
        return response

    first = idempotent(0)
    assert first.error.code == 0 and not first.duplicate
    assert (first.base_offset, first.last_offset) == (10, 12)
    broker.kill()  # the producer's answer is lost with the broker: it retries
    broker.start()
    retry = idempotent(0)
    assert retry.error.code == 0 and retry.duplicate
    assert (retry.base_offset, retry.last_offset) == (10, 12)
    assert log_dir(broker, tp).offsets.log_end_offset == 13
    assert idempotent(7).error.name == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert idempotent(3).base_offset == 13
    found = broker.stub.ListOffsets(
        pb.ListOffsetsRequest(partition=topic_id_partition_to_proto(tp), timestamp_ms=now_ms)
    )
    assert (found.timestamp_offset, found.found_timestamp_ms) == (10, now_ms)
    values, _ = fetch_all(broker, tp)
    assert values[10:] == [f"once-{i}".encode() for i in range(6)]


def test_an_old_format_data_directory_is_refused_untouched(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "legacy", 0)
    assert broker.terminate() == 0
    directory = broker.dir / "logs" / "legacy-0"
    directory.mkdir(parents=True)
    # A record of the broker's format before Kafka batches: length, zlib crc, then its fields.
    body = struct.pack(">qqii", 0, 1_700_000_000_000, 0, -1) + struct.pack(">i", 5) + b"value"
    old = struct.pack(">II", 4 + len(body), zlib.crc32(body)) + body
    (directory / f"{0:020d}.log").write_bytes(old)
    broker.start()
    refused = assign(broker, tp, TIERED).errors[0]
    assert refused.name == "KAFKA_STORAGE_ERROR"
    assert str(directory) in refused.message and "old record format" in refused.message
    assert (directory / f"{0:020d}.log").read_bytes() == old
    fetched = broker.stub.Fetch(
        pb.FetchRequest(partition=topic_id_partition_to_proto(tp), offset=0, max_bytes=100)
    )
    assert fetched.error.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_graceful_stop_exits_zero(broker: BrokerProcess) -> None:
    tp = TopicIdPartition(uuid.uuid4(), "calm", 0)
    assign(broker, tp, TIERED)
    produce(broker, tp, 0, 100)
    assert broker.terminate() == 0
    assert "Stopped" in "".join(broker.output)


SCRIPTED = "remote.log.storage.manager.class.name=tests.support.scripted_rsm.ScriptedRsm"


def test_custom_metadata_over_the_limit_in_a_real_broker(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path, (SCRIPTED, "rsm.config.test.bloat.topics=bloated"))
    b.start()
    try:
        bloated = TopicIdPartition(uuid.uuid4(), "bloated", 0)
        healthy = TopicIdPartition(uuid.uuid4(), "healthy", 0)
        assign(b, bloated, TIERED)
        assign(b, healthy, TIERED)
        produce(b, bloated, 0, 300)
        produce(b, healthy, 0, 300)
        poll_until(
            lambda: not log_dir(b, bloated).copying, timeout=30, what="the bloated task to stop"
        )
        poll_until(
            lambda: log_dir(b, healthy).offsets.local_log_start_offset > 0,
            timeout=30,
            what="the healthy partition to tier",
        )
        d = log_dir(b, bloated)
        assert d.remote_segment_count == 0 and d.offsets.local_log_start_offset == 0
        assert (
            _scrape(b, "bloated")["kafka_server_brokertopicmetrics_remotecopyerrorspersec_total"]
            == 1
        )
        assert "200 bytes, more than remote.log.metadata.custom.metadata.max.bytes=128" in "".join(
            b.output
        )
        values, _ = fetch_all(b, healthy)
        assert values == expected(300)
    finally:
        b.close()


def test_kill_9_between_upload_and_copy_finished(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    hang = (SCRIPTED, "rsm.config.test.hang.topics=crash", f"rsm.config.test.marker.dir={markers}")
    b = BrokerProcess(tmp_path, hang)
    b.start()
    try:
        tp = TopicIdPartition(uuid.uuid4(), "crash", 0)
        assign(b, tp, {**TIERED, "local.retention.bytes": "-1"})
        produce(b, tp, 0, 300)
        poll_until(lambda: any(markers.iterdir()), timeout=30, what="an upload to complete")
        b.kill()  # objects uploaded, metadata COPY_SEGMENT_STARTED: the worst moment
        stranded = next(markers.iterdir()).name.split(".")[0]
        b.write_config((SCRIPTED,))
        b.start()
        poll_until(
            lambda: (
                log_dir(b, tp).remote_segment_count > 0
                and not any(stranded in k for k in _object_keys(b, tp))
            ),
            timeout=30,
            what="the stranded copy to be cleaned up",
        )
        poll_until(lambda: _all_closed_copied(b, tp), timeout=30, what="copying to catch up")
        assert b.terminate() == 0
        manager = rlmm.create({"rlmm.sqlite.path": str(b.dir / "rlmm.db")})
        try:
            listed = list(manager.list_remote_log_segments(tp))
            assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in listed)
            assert stranded not in {str(m.remote_log_segment_id.id) for m in listed}
            objects = {Path(k).name.split(".")[0] for k in _object_keys(b, tp)}
            assert objects == {
                f"{m.start_offset:020d}-{m.remote_log_segment_id.id}" for m in listed
            }
        finally:
            manager.close()
    finally:
        b.close()


def _object_keys(b: BrokerProcess, tp: TopicIdPartition) -> list[str]:
    return rsm.create({"remote.storage.root": str(b.dir / "remote")}).object_keys(tp)  # type: ignore[attr-defined,no-any-return]


def _all_closed_copied(b: BrokerProcess, tp: TopicIdPartition) -> bool:
    d = log_dir(b, tp)
    return (
        d.copying
        and d.remote_copy_finished_bytes > 0
        and d.remote_segment_count > 0
        and (_scrape(b, tp.topic)["kafka_server_brokertopicmetrics_remotecopylagsegments"] == 0)
    )


def _stop_in_background(
    b: BrokerProcess, tp: TopicIdPartition, policy: str
) -> tuple[threading.Thread, dict[str, object]]:
    result: dict[str, object] = {}

    def stop() -> None:
        result["response"] = disable(b, tp, policy, timeout=60)
        result["returned_after_open"] = (b.dir / "gate" / "open").exists()

    thread = threading.Thread(target=stop)
    thread.start()
    return thread, result


def test_stop_with_retain_while_an_upload_is_in_flight(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    b = BrokerProcess(
        tmp_path, (SCRIPTED, "rsm.config.test.gate.topics=slow", f"rsm.config.test.gate.dir={gate}")
    )
    b.start()
    try:
        tp = TopicIdPartition(uuid.uuid4(), "slow", 0)
        assign(b, tp, {**TIERED, "local.retention.bytes": "-1"})
        produce(b, tp, 0, 300)
        poll_until((gate / "copy-started").exists, timeout=30, what="an upload to start")
        thread, result = _stop_in_background(b, tp, "retain")
        poll_until(
            lambda: not log_dir(b, tp).copying, timeout=30, what="the copy task to be cancelled"
        )
        (gate / "open").write_text("")
        thread.join(60)
        response = result["response"]
        assert response.errors[0].code == 0  # type: ignore[attr-defined]
        assert result["returned_after_open"]  # it waited for the upload in flight
        # The upload began before the fence (tiered epoch 0 < 1): discarded, nothing finished.
        assert log_dir(b, tp).remote_segment_count == 0
        assert _object_keys(b, tp) == []
        values, _ = fetch_all(b, tp)
        assert values == expected(300)
    finally:
        b.close()


def test_stop_with_delete_while_a_remote_fetch_is_in_flight(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    b = BrokerProcess(
        tmp_path,
        (
            SCRIPTED,
            "rsm.config.test.gate.topics=slow",
            "rsm.config.test.gate.calls=fetch",
            f"rsm.config.test.gate.dir={gate}",
        ),
    )
    b.start()
    try:
        tp = TopicIdPartition(uuid.uuid4(), "slow", 0)
        assign(b, tp, TIERED)
        produce(b, tp, 0, 400)
        poll_until(
            lambda: log_dir(b, tp).offsets.local_log_start_offset > 0,
            timeout=30,
            what="tiering and local expiry",
        )
        fetched: dict[str, object] = {}
        reader = threading.Thread(
            target=lambda: fetched.update(
                response=b.stub.Fetch(
                    pb.FetchRequest(
                        partition=topic_id_partition_to_proto(tp), offset=0, max_bytes=500
                    ),
                    timeout=60,
                )
            )
        )
        reader.start()
        poll_until((gate / "fetch-started").exists, timeout=30, what="a remote fetch")
        assert log_dir(b, tp).remote_fetch_enabled
        thread, result = _stop_in_background(b, tp, "delete")
        # The stop shuts remote reads, then waits for the one in flight to drain.
        poll_until(
            lambda: not log_dir(b, tp).remote_fetch_enabled,
            timeout=30,
            what="remote fetches to be shut",
        )
        (gate / "open").write_text("")
        reader.join(60)
        thread.join(60)
        assert result["returned_after_open"]  # it drained the fetch in flight
        assert fetched["response"].error.code == 0  # type: ignore[attr-defined]  # which completed
        assert offsets(fetched["response"].records)[0] == 0  # type: ignore[attr-defined]
        d = log_dir(b, tp)
        assert d.offsets.log_start_offset == d.offsets.local_log_start_offset > 0
        below = b.stub.Fetch(
            pb.FetchRequest(partition=topic_id_partition_to_proto(tp), offset=0, max_bytes=100)
        )
        assert below.error.name == "OFFSET_OUT_OF_RANGE"
    finally:
        b.close()
