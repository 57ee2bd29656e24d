"""The KRaft-mode metadata log (``controller.store.kraft_log``), the store over it
(``controller.store.kraft``) and the record conversions (``tiered.cluster.serde``)."""

from __future__ import annotations

import logging
import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from controller.store import ControllerFencedError, MetadataStoreError, create, kraft_log
from controller.store.kraft import CONTROLLER_FILE, KRaftMetadataStore
from controller.store.kraft_log import (
    HEADER_SIZE,
    LOCK_FILE,
    CorruptLogError,
    LogNotWritableError,
    MetadataLog,
    OffsetBelowLogStart,
    encode_frame,
    segment_file_name,
    snapshot_file_name,
)
from tests.support.kraft_lock_holder import held_topic
from tests.support.polling import poll_until
from tiered.cluster import serde
from tiered.cluster.model import (
    BrokerRegistration,
    DeleteJob,
    DeleteJobState,
    MetadataImage,
    PartitionDeleteProgress,
    TieredState,
    TopicMetadata,
)
from tiered.rpc.v1 import metadata_pb2

REPO_ROOT = Path(__file__).resolve().parents[3]

Batch = metadata_pb2.MetadataRecordBatch
Record = metadata_pb2.MetadataRecord


# --------------------------------------------------------------------------------- builders


def topic(i: int, partitions: int = 3) -> TopicMetadata:
    return TopicMetadata(
        name=f"topic-{i}",
        topic_id=uuid.UUID(int=i + 1),
        replicas=tuple(p % 3 for p in range(partitions)),
        configs={"remote.storage.enable": "true", "retention.ms": str(1000 + i)},
        tiered_state=TieredState.ENABLED,
    )


def broker(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id=broker_id, host="127.0.0.1", port=9090 + broker_id)


def job(
    t: TopicMetadata, tiered_epoch: int, state: DeleteJobState = DeleteJobState.PENDING
) -> DeleteJob:
    return DeleteJob(
        topic=t.name,
        topic_id=t.topic_id,
        tiered_epoch=tiered_epoch,
        partition_count=t.partition_count,
        state=state,
        progress=tuple(
            PartitionDeleteProgress(
                partition=p,
                objects_total=-1 if state is DeleteJobState.PENDING else 10 * p,
                objects_deleted=p,
                segments_deleted=p // 2,
                done=state is DeleteJobState.DONE,
            )
            for p in range(t.partition_count)
        )
        if state is not DeleteJobState.PENDING
        else (),
        attempts=1 if state is DeleteJobState.RUNNING else 0,
        last_error="throttled" if state is DeleteJobState.RUNNING else "",
    )


def replay(batches: Sequence[Batch], image: MetadataImage | None = None) -> MetadataImage:
    image = MetadataImage() if image is None else image
    for batch in batches:
        serde.apply_batch(image, batch)
    return image


def open_log(directory: Path, segment_bytes: int = 64 * 1024) -> tuple[MetadataLog, list[Batch]]:
    """A writable log (lock taken) and the batches its recovery replayed."""
    log = MetadataLog(directory, segment_bytes=segment_bytes)
    assert log.acquire_lock(threading.Event(), 0.01)
    replayed: list[Batch] = []
    try:
        log.open(on_batch=replayed.append)
    except BaseException:
        log.release_lock()
        raise
    return log, replayed


def close_log(log: MetadataLog) -> None:
    log.close()
    log.release_lock()


def recover_image(directory: Path, segment_bytes: int = 64 * 1024) -> tuple[MetadataImage, int]:
    """The image a writable open replays (snapshot + tail), and the log start offset."""
    log = MetadataLog(directory, segment_bytes=segment_bytes)
    assert log.acquire_lock(threading.Event(), 0.01)
    holder = [MetadataImage()]

    def on_snapshot(batch: Batch) -> None:
        holder[0] = serde.image_from_snapshot(batch)

    try:
        log.open(on_snapshot=on_snapshot, on_batch=lambda b: serde.apply_batch(holder[0], b))
        return holder[0], log.log_start_offset
    finally:
        close_log(log)


def append_topics(log: MetadataLog, first: int, count: int, per_batch: int) -> list[Batch]:
    """Appends topics ``first..first+count-1``, ``per_batch`` topics a batch; the batches."""
    batches = []
    for start in range(first, first + count, per_batch):
        records = [
            r
            for i in range(start, min(start + per_batch, first + count))
            for r in serde.topic_to_records(topic(i))
        ]
        base = log.append(records)
        batches.append(Batch(base_offset=base, records=records))
    return batches


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "metadata"


@pytest.fixture
def stores() -> Iterator[list[KRaftMetadataStore]]:
    """Stores a test opens; all closed afterwards."""
    opened: list[KRaftMetadataStore] = []
    yield opened
    for s in opened:
        s.close()


def new_store(
    stores: list[KRaftMetadataStore], directory: Path, **kwargs: int
) -> KRaftMetadataStore:
    store = KRaftMetadataStore(directory, lock_poll_s=0.01, **kwargs)  # type: ignore[arg-type]
    stores.append(store)
    return store


def elect(store: KRaftMetadataStore, controller_id: int = 1) -> int:
    epoch = store.elect(controller_id, f"127.0.0.1:{9000 + controller_id}", threading.Event())
    assert epoch is not None
    return epoch


# --------------------------------------------------------------------------------- serde


def test_serde_round_trips_the_domain() -> None:
    t = topic(5).with_tiered_state(TieredState.DISABLING, 3)
    b = broker(2)
    assert serde.broker_registration_from_proto(serde.broker_registration_to_proto(b)) == b
    for state in TieredState:
        assert serde.tiered_state_from_proto(serde.tiered_state_to_proto(state)) is state
    with pytest.raises(ValueError, match="tiered state 0"):
        serde.tiered_state_from_proto(metadata_pb2.TIERED_STATE_UNSPECIFIED)

    image = MetadataImage()
    for record in [*serde.topic_to_records(t), serde.registration_to_record(b)]:
        serde.apply_record(image, record)
    serde.apply_record(image, serde.controller_epoch_record(3, 9, "h:1"))
    assert image.topics == {t.name: t} and image.brokers == {2: b}
    assert (image.controller_id, image.controller_epoch, image.controller_endpoint) == (3, 9, "h:1")

    # A snapshot of the image rebuilds it; records for unknown topic ids are ignored.
    again = serde.image_from_snapshot(Batch(base_offset=41, records=serde.image_to_records(image)))
    image.offset = 41
    assert again == image
    stranger = uuid.uuid4()
    for record in [
        serde.remove_topic_record(stranger),
        *serde.topic_update_records(topic(6).with_configs({})),
    ]:
        serde.apply_record(again, record)
    assert again == image
    serde.apply_record(again, serde.remove_topic_record(t.topic_id))
    assert again.topics == {} and again.topic_by_id(t.topic_id) is None


def test_serde_round_trips_delete_jobs_and_snapshots_keep_them() -> None:
    t, gone = topic(1), topic(2)
    jobs = [job(t, 3), job(t, 5, DeleteJobState.RUNNING), job(gone, 2, DeleteJobState.DONE)]
    every_epoch = DeleteJob.of_deleted_topic(gone.with_tiered_state(TieredState.ENABLED, 2))
    for j in [*jobs, every_epoch]:
        assert serde.delete_job_from_proto(serde.delete_job_to_proto(j)) == j
        assert serde.delete_job_from_proto(serde.delete_job_to_record(j)) == j
    for state in DeleteJobState:
        assert serde.delete_job_state_from_proto(serde.delete_job_state_to_proto(state)) is state
    with pytest.raises(ValueError, match="delete job state 0"):
        serde.delete_job_state_from_proto(metadata_pb2.DELETE_JOB_STATE_UNSPECIFIED)
    with pytest.raises(ValueError, match="not a delete job record"):
        serde.delete_job_from_proto(serde.remove_topic_record(t.topic_id))

    image = MetadataImage()
    serde.apply_records(image, [*serde.topic_to_records(t), *serde.topic_to_records(gone)])
    for j in jobs:
        serde.apply_record(image, serde.delete_job_to_record(j))
    serde.apply_record(image, serde.remove_topic_record(gone.topic_id))  # jobs outlive topics
    assert image.delete_jobs == {j.key: j for j in jobs}
    # A record with the same key replaces the job.
    done = replace(jobs[0], state=DeleteJobState.DONE)
    serde.apply_record(image, serde.delete_job_to_record(done))
    assert image.delete_jobs[t.topic_id, 3] == done and len(image.delete_jobs) == 3

    # Both snapshot forms keep every job (of a known topic or not).
    image.offset = 17
    kinds = [r.WhichOneof("record") for r in serde.image_to_records(image)]
    assert kinds.count("delete_job") == 3
    assert (
        serde.image_from_snapshot(Batch(base_offset=17, records=serde.image_to_records(image)))
        == image
    )
    assert serde.image_from_snapshot(serde.image_to_batch(image, 17)) == image


def test_apply_records_fast_path_equals_record_by_record() -> None:
    t = topic(1)
    renamed = TopicMetadata(name="renamed", topic_id=t.topic_id, replicas=(2,))
    clash = TopicMetadata(name=t.name, topic_id=uuid.UUID(int=999), replicas=(1, 1))
    records = [
        serde.registration_to_record(broker(1)),
        *serde.topic_to_records(t),
        *serde.topic_to_records(t.with_configs({"x": "y"})),  # re-applied with new configs
        *serde.topic_to_records(topic(2))[:2],  # a topic without its state record
        *serde.topic_to_records(renamed),  # same id, new name
        *serde.topic_to_records(clash),  # same name, new id
        serde.remove_topic_record(topic(2).topic_id),
        *serde.topic_to_records(topic(3)),
    ]
    one_by_one = MetadataImage()
    for record in records:
        serde.apply_record(one_by_one, record)
    fast = MetadataImage()
    serde.apply_records(fast, records)
    assert fast == one_by_one
    assert set(fast.topics) == {"renamed", "topic-1", "topic-3"}


def test_a_snapshot_holds_its_topics_as_one_table_with_each_config_set_once() -> None:
    shared = {"remote.storage.enable": "true", "retention.ms": "1000"}
    topics = [
        TopicMetadata(f"t{i}", uuid.UUID(int=i + 1), (i % 3,) * (i % 4 + 1), shared)
        for i in range(50)
    ]
    topics.append(topic(100).with_tiered_state(TieredState.DISABLING, 4))  # configs of its own
    image = MetadataImage()
    for t in topics:
        image.put_topic(t)
    image.offset = 9
    batch = serde.image_to_batch(image, 9)
    tables = [r.topic_table for r in batch.records if r.WhichOneof("record") == "topic_table"]
    assert [r.WhichOneof("record") for r in batch.records].count("topic") == 0
    assert len(tables) == 1 and len(tables[0].names) == 51 and len(tables[0].config_sets) == 2
    again = serde.image_from_snapshot(batch)
    assert again == image
    assert again.topics["t0"].configs is again.topics["t49"].configs  # one shared copy


def test_a_topic_table_applied_over_topics_replaces_them_as_records_would() -> None:
    source = MetadataImage()
    source.put_topic(topic(1).with_configs({"retention.ms": "5"}))
    source.put_topic(topic(2))
    renamed = TopicMetadata("renamed", topic(3).topic_id, (1,))
    source.put_topic(renamed)
    table = serde.image_to_batch(source, 0).records
    target = MetadataImage()
    for t in (topic(1), topic(3)):  # topic-1 replaced, topic-3's id now names "renamed"
        target.put_topic(t)
    serde.apply_records(target, table)
    assert target.topics == source.topics
    assert target.topic_by_id(renamed.topic_id) == renamed


def test_a_snapshot_of_three_records_a_topic_still_loads() -> None:
    """Snapshots written before the table (TopicRecord, ConfigRecord, TieredStateRecord)."""
    image = MetadataImage()
    for i in range(3):
        image.put_topic(topic(i).with_tiered_state(TieredState.DISABLED, i))
    image.offset = 4
    records = [r for i in range(3) for r in serde.topic_to_records(image.topics[f"topic-{i}"])]
    assert serde.image_from_snapshot(Batch(base_offset=4, records=records)) == image


@pytest.mark.parametrize(
    "damage",
    ["short id", "missing state", "replica short", "no such config set", "keys without values"],
)
def test_a_malformed_topic_table_is_refused_whole(damage: str) -> None:
    image = MetadataImage()
    for i in range(3):
        image.put_topic(topic(i))
    batch = serde.image_to_batch(image, 2)
    (table,) = [r.topic_table for r in batch.records if r.WhichOneof("record") == "topic_table"]
    if damage == "short id":
        table.topic_ids = table.topic_ids[:-1]
    elif damage == "missing state":
        del table.states[-1]
    elif damage == "replica short":
        del table.replicas[-1]
    elif damage == "no such config set":
        table.config_set_index[0] = len(table.config_sets)
    else:
        del table.config_sets[0].values[-1]
    loaded = MetadataImage()
    with pytest.raises(ValueError):
        serde.apply_records(loaded, batch.records)
    assert loaded.topics == {}


def test_partition_records_grow_a_topic_idempotently() -> None:
    t = topic(1, partitions=2)
    grown = t.with_replicas((*t.replicas, 2, 0))
    records = serde.partition_records(t, grown)
    assert [r.partition.partition_id for r in records] == [2, 3]
    image = MetadataImage()
    serde.apply_records(image, serde.topic_to_records(t))
    serde.apply_records(image, records)
    serde.apply_records(image, records)  # re-applied: the same partitions
    assert image.topics[t.name] == grown
    # A snapshot carries the grown assignment in the TopicRecord.
    assert serde.image_from_snapshot(serde.image_to_batch(image, 5)).topics[t.name] == grown
    # A record of an unknown topic is ignored; a gap or a partition without one replica is not.
    serde.apply_records(image, serde.partition_records(topic(9), topic(9, partitions=4)))
    assert set(image.topics) == {t.name}
    gap = serde.partition_records(grown, grown.with_replicas((*grown.replicas, 1, 1)))[1:]
    many = serde.partition_records(grown, grown.with_replicas((*grown.replicas, 1)))
    del many[0].partition.replicas[:]
    for bad in (gap, many):
        with pytest.raises(ValueError):
            serde.apply_records(image, bad)
    assert image.topics[t.name] == grown


def test_topics_with_the_same_configs_share_one_read_only_mapping() -> None:
    configs = {"remote.storage.enable": "true", "retention.ms": "5"}
    first = TopicMetadata("a", uuid.uuid4(), (1,), configs)
    second = TopicMetadata("b", uuid.uuid4(), (2,), dict(configs))
    configs["retention.ms"] = "6"  # the caller's dict is copied, not shared
    assert first.configs is second.configs
    assert dict(first.configs) == {"remote.storage.enable": "true", "retention.ms": "5"}
    with pytest.raises(TypeError):
        first.configs["retention.ms"] = "7"  # type: ignore[index]
    assert TopicMetadata("c", uuid.uuid4(), (1,), first.configs).configs is first.configs
    assert first.with_configs(configs).configs == configs
    image = MetadataImage()
    serde.apply_records(image, [*serde.topic_to_records(first), *serde.topic_to_records(second)])
    assert image.topics["a"].configs is image.topics["b"].configs


# --------------------------------------------------------------------------------- the log


def test_append_and_replay_round_trip_across_segments(tmp_path: Path) -> None:
    log, replayed = open_log(tmp_path, segment_bytes=1024)
    assert replayed == [] and log.end_offset == 0
    batches = append_topics(log, 0, 60, per_batch=3)
    assert [b.base_offset for b in batches] == list(range(0, 180, 9))
    assert log.end_offset == 180
    assert len(log.segment_paths()) > 3  # rolled at 1 KiB
    assert log.read(0, 1000) == batches
    assert log.read(27, 2) == batches[3:5]
    assert log.read(30, 1) == [batches[3]]  # the batch holding the offset
    assert log.read(180, 10) == []
    assert log.read(0, 1000, max_bytes=1) == batches[:1]
    close_log(log)

    # Every acknowledged append is there after a reopen, and appends go on from the end.
    log, replayed = open_log(tmp_path, segment_bytes=1024)
    assert replayed == batches
    assert log.append(serde.topic_to_records(topic(99))) == 180
    close_log(log)
    log, replayed = open_log(tmp_path, segment_bytes=1024)
    assert replayed[:-1] == batches and replayed[-1].base_offset == 180
    close_log(log)


def test_writes_need_the_lock_and_an_open_log(tmp_path: Path) -> None:
    log = MetadataLog(tmp_path)
    with pytest.raises(LogNotWritableError, match="needs its lock"):
        log.open()
    log.open(read_only=True)
    with pytest.raises(LogNotWritableError, match="read-only"):
        log.append([serde.registration_to_record(broker(1))])
    log.close()


def _frame_positions(path: Path) -> list[int]:
    data, positions, pos = path.read_bytes(), [], 0
    while pos < len(data):
        positions.append(pos)
        pos += HEADER_SIZE + int.from_bytes(data[pos : pos + 4], "big")
    return positions


@pytest.mark.parametrize("garbage", ["random", "zeros", "none"])
def test_torn_tail_is_truncated_to_the_last_good_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: str
) -> None:
    log, _ = open_log(tmp_path)
    batches = append_topics(log, 0, 5, per_batch=1)
    close_log(log)
    path = tmp_path / segment_file_name(0)
    last = _frame_positions(path)[-1]
    # kill -9 mid-write: the last frame is cut short, followed by whatever the disk had.
    with path.open("r+b") as f:
        f.truncate(last + HEADER_SIZE + 5)
        f.seek(0, os.SEEK_END)
        f.write(
            {"random": random.Random(7).randbytes(300), "zeros": bytes(300), "none": b""}[garbage]
        )
    torn_size = path.stat().st_size

    with caplog.at_level(logging.WARNING, logger="controller.store.kraft_log"):
        log, replayed = open_log(tmp_path)
    assert replayed == batches[:4]
    assert path.stat().st_size == last
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(path) in warning
    assert f"byte {last}" in warning and "offset 12" in warning
    assert f"{torn_size - last} bytes dropped" in warning

    assert log.append(serde.topic_to_records(topic(50))) == 12
    close_log(log)
    log, replayed = open_log(tmp_path)
    assert replayed[:4] == batches[:4]
    assert [b.base_offset for b in replayed] == [0, 3, 6, 9, 12]
    assert replay(replayed).topics.keys() == {f"topic-{i}" for i in [0, 1, 2, 3, 50]}
    close_log(log)


@pytest.mark.parametrize("where", ["payload", "crc", "length"])
def test_a_bad_frame_in_the_middle_refuses_to_open(tmp_path: Path, where: str) -> None:
    log, _ = open_log(tmp_path)
    append_topics(log, 0, 5, per_batch=1)
    close_log(log)
    path = tmp_path / segment_file_name(0)
    second = _frame_positions(path)[1]
    data = bytearray(path.read_bytes())
    data[second + {"length": 2, "crc": 5, "payload": HEADER_SIZE + 10}[where]] ^= 0x40
    path.write_bytes(bytes(data))

    log = MetadataLog(tmp_path)
    assert log.acquire_lock(threading.Event(), 0.01)
    with pytest.raises(CorruptLogError, match="refusing to open") as err:
        log.open()
    assert f"byte {second}" in str(err.value) and str(path) in str(err.value)
    assert path.read_bytes() == bytes(data)  # nothing was truncated
    log.release_lock()


def test_a_bad_frame_in_an_older_segment_refuses_to_open(tmp_path: Path) -> None:
    log, _ = open_log(tmp_path, segment_bytes=512)
    append_topics(log, 0, 20, per_batch=1)
    close_log(log)
    first = tmp_path / segment_file_name(0)
    data = bytearray(first.read_bytes())
    data[-1] ^= 0x01  # the last frame of a segment that is not the last one
    first.write_bytes(bytes(data))
    log = MetadataLog(tmp_path, segment_bytes=512)
    assert log.acquire_lock(threading.Event(), 0.01)
    with pytest.raises(CorruptLogError, match="not the last"):
        log.open()
    log.release_lock()


def test_snapshot_of_50k_records_replaces_the_history(tmp_path: Path) -> None:
    seg = 256 * 1024
    log, _ = open_log(tmp_path, segment_bytes=seg)
    batches = append_topics(log, 0, 16_667, per_batch=10)  # 50,001 records
    assert log.end_offset == 50_001
    scratch = replay(batches)
    segments_before = log.segment_paths()
    log.write_snapshot(log.end_offset - 1, serde.image_to_records(scratch))
    # One snapshot: nothing deleted yet (a corrupt one would fall back to a replay from 0).
    assert log.segment_paths() == segments_before
    first_snapshot = log.end_offset - 1

    # Deletes and updates after it, then a second snapshot: the log up to the first one goes.
    more = [
        Batch(
            base_offset=log.append([serde.remove_topic_record(topic(i).topic_id)]),
            records=[serde.remove_topic_record(topic(i).topic_id)],
        )
        for i in range(0, 100, 7)
    ]
    more += append_topics(log, 20_000, 400, per_batch=10)
    replay(more, scratch)
    second_snapshot = log.end_offset - 1
    log.write_snapshot(second_snapshot, serde.image_to_records(scratch))
    tail = append_topics(log, 30_000, 10, per_batch=5)
    replay(tail, scratch)
    start = log.log_start_offset
    assert 0 < start <= first_snapshot + 1
    assert not any(p.exists() for p in segments_before if int(p.name[:20]) < start)
    assert not (tmp_path / segment_file_name(0)).exists()
    with pytest.raises(OffsetBelowLogStart):
        log.read(0, 10)
    assert log.read(log.end_offset - 5, 10) == tail[1:]
    close_log(log)

    image, log_start = recover_image(tmp_path, seg)
    assert log_start == start
    assert image == scratch
    assert sorted(p.name for p in tmp_path.glob("*.snapshot")) == [
        snapshot_file_name(first_snapshot),
        snapshot_file_name(second_snapshot),
    ]

    # A corrupt newest snapshot falls back to the previous one plus the log after it.
    newest = tmp_path / snapshot_file_name(second_snapshot)
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    image, _ = recover_image(tmp_path, seg)
    assert image == scratch
    assert not newest.exists() and newest.with_name(newest.name + ".corrupt").exists()


def test_batches_covered_by_the_snapshot_are_indexed_without_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = open_log(tmp_path)
    batches = append_topics(log, 0, 10, per_batch=1)  # offsets 3k..3k+2; the first omits 0
    log.write_snapshot(17, serde.image_to_records(replay(batches[:6])))
    close_log(log)
    parsed: list[int] = []
    real_decode = kraft_log.decode_frame

    def counting_decode(data: bytes, pos: int = 0) -> tuple[Batch, int] | None:
        decoded = real_decode(data, pos)
        if decoded is not None:
            parsed.append(decoded[0].base_offset)
        return decoded

    monkeypatch.setattr(kraft_log.recovery, "decode_frame", counting_decode)
    log, replayed = open_log(tmp_path)
    assert replayed == batches[6:]
    assert parsed == [17, 18, 21, 24, 27]  # the snapshot (at 17), then the batches after it
    assert log.end_offset == 30
    assert log.read(0, 3) == batches[:3]  # the covered batches are indexed all the same
    assert log.read(16, 2) == batches[5:7]
    close_log(log)


@pytest.mark.parametrize("frame", [0, 2, 5])
def test_a_bad_frame_covered_by_the_snapshot_still_refuses_to_open(
    tmp_path: Path, frame: int
) -> None:
    log, _ = open_log(tmp_path)
    batches = append_topics(log, 0, 10, per_batch=1)
    log.write_snapshot(17, serde.image_to_records(replay(batches[:6])))
    close_log(log)
    path = tmp_path / segment_file_name(0)
    position = _frame_positions(path)[frame]
    data = bytearray(path.read_bytes())
    data[position + HEADER_SIZE + 3] ^= 0x40
    path.write_bytes(bytes(data))
    log = MetadataLog(tmp_path)
    assert log.acquire_lock(threading.Event(), 0.01)
    with pytest.raises(CorruptLogError, match=f"byte {position} "):
        log.open()
    log.release_lock()


# --------------------------------------------------------------------------------- the store


def test_store_round_trip_through_a_new_instance(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir)
    assert store.load() == MetadataImage()  # nothing written yet
    assert elect(store) == 1
    for i in range(6):
        store.writes.create_topic(topic(i))
    store.register_broker(broker(0))
    store.register_broker(broker(1))
    moved = BrokerRegistration(broker_id=1, host="10.0.0.1", port=1)
    store.register_broker(moved)  # replaces the previous registration
    t2 = topic(2)
    store.writes.update_topic(
        t2, t2.with_tiered_state(TieredState.DISABLING, 1).with_configs({"a": "b"})
    )
    store.writes.delete_topic(topic(4))
    with pytest.raises(MetadataStoreError, match="exists"):
        store.writes.create_topic(topic(1))
    before = store.load()
    assert before.topics["topic-2"].tiered_state is TieredState.DISABLING
    assert before.topics["topic-2"].configs == {"a": "b"}
    assert "topic-4" not in before.topics and before.brokers[1] == moved
    assert (before.controller_id, before.controller_epoch, before.offset) == (
        1,
        1,
        store.end_offset - 1,
    )

    # A standby (no lock) replays the same image read-only.
    standby = new_store(stores, store_dir)
    assert standby.load() == before
    store.close()

    again = new_store(stores, store_dir)
    assert elect(again, 2) == 2
    after = again.load()
    assert after.topics == before.topics and after.brokers == before.brokers
    assert (after.controller_id, after.controller_epoch) == (2, 2)
    assert after.offset == before.offset + 1  # the new ControllerEpochRecord


def test_update_topic_is_one_batch(store_dir: Path, stores: list[KRaftMetadataStore]) -> None:
    store = new_store(stores, store_dir)
    elect(store)
    t = topic(1)
    store.writes.create_topic(t)
    end = store.end_offset
    store.writes.update_topic(t, t.with_tiered_state(TieredState.DISABLING, 1))
    batches, is_snapshot = store.read_batches(end, 0)
    assert not is_snapshot and len(batches) == 1
    assert batches[0].base_offset == end
    assert [r.WhichOneof("record") for r in batches[0].records] == ["config", "tiered_state"]
    assert store.end_offset == end + 2


def test_update_topic_with_a_delete_job_is_one_batch(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir)
    elect(store)
    t = topic(1).with_tiered_state(TieredState.DISABLING, 1)
    store.writes.create_topic(t)
    end = store.end_offset
    disabled = t.with_tiered_state(TieredState.DISABLED, 2)
    store.writes.update_topic(t, disabled, job(disabled, 2))
    batches, is_snapshot = store.read_batches(end, 0)
    assert not is_snapshot and len(batches) == 1
    assert [r.WhichOneof("record") for r in batches[0].records] == [
        "config",
        "tiered_state",
        "delete_job",
    ]
    assert store.load().delete_jobs == {(t.topic_id, 2): job(disabled, 2)}
    with pytest.raises(ValueError, match="delete job"):
        store.writes.update_topic(disabled, disabled, job(topic(2), 2))  # another topic's job
    assert store.end_offset == end + 3

    store.writes.put_delete_job(job(disabled, 2, DeleteJobState.RUNNING))
    batches, _ = store.read_batches(end + 3, 0)
    assert [[r.WhichOneof("record") for r in b.records] for b in batches] == [["delete_job"]]


def test_delete_topic_with_its_delete_job_is_one_batch(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir)
    elect(store)
    t = topic(1).with_tiered_state(TieredState.ENABLED, 3)
    store.writes.create_topic(t)
    end = store.end_offset
    store.writes.delete_topic(t, DeleteJob.of_deleted_topic(t))
    batches, is_snapshot = store.read_batches(end, 0)
    assert not is_snapshot and len(batches) == 1
    assert [r.WhichOneof("record") for r in batches[0].records] == ["remove_topic", "delete_job"]
    assert store.load().delete_jobs[t.topic_id, 4].topic_deleted


def test_delete_jobs_survive_snapshots_and_reopening(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir, segment_bytes=4 * 1024, snapshot_interval_records=50)
    elect(store)
    t = topic(1).with_tiered_state(TieredState.DISABLING, 1)
    store.writes.create_topic(t)
    disabled = t.with_tiered_state(TieredState.DISABLED, 2)
    store.writes.update_topic(t, disabled, job(disabled, 2))
    store.writes.delete_topic(disabled)
    store.writes.put_delete_job(job(disabled, 2, DeleteJobState.RUNNING))
    store.writes.put_delete_job(job(topic(7), 4, DeleteJobState.DONE))  # never a topic here
    expected = {
        (t.topic_id, 2): job(disabled, 2, DeleteJobState.RUNNING),
        (topic(7).topic_id, 4): job(topic(7), 4, DeleteJobState.DONE),
    }
    for i in range(10, 60):  # 150 records: snapshots, and the old segments go
        store.writes.create_topic(topic(i))
    store.snapshot_now()
    assert not (store_dir / segment_file_name(0)).exists()
    assert store.load().delete_jobs == expected

    batches, is_snapshot = store.read_batches(0, 0)  # below the log start: the snapshot
    assert is_snapshot
    assert serde.image_from_snapshot(batches[0]).delete_jobs == expected
    assert new_store(stores, store_dir).load().delete_jobs == expected  # a standby's replay
    store.close()

    reopened = new_store(stores, store_dir, segment_bytes=4 * 1024)
    elect(reopened, 2)
    assert reopened.load().delete_jobs == expected


def test_writes_without_the_lock_are_fenced(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    active = new_store(stores, store_dir)
    standby = new_store(stores, store_dir)
    with pytest.raises(ControllerFencedError):
        standby.writes.create_topic(topic(0))  # never elected
    elect(active)
    active.writes.create_topic(topic(0))
    end = active.end_offset
    segments = {p: p.stat().st_size for p in store_dir.glob("*.log")}
    for write in (
        lambda: standby.writes.create_topic(topic(1)),
        lambda: standby.writes.update_topic(topic(0), topic(0).with_configs({})),
        lambda: standby.writes.delete_topic(topic(0)),
        lambda: standby.register_broker(broker(1)),
        lambda: standby.writes.put_delete_job(job(topic(0), 1)),
        lambda: standby.writes.update_topic(topic(0), topic(0), job(topic(0), 1)),
    ):
        with pytest.raises(ControllerFencedError):
            write()
    with pytest.raises(ControllerFencedError):
        standby.read_batches(0, 0)
    assert {p: p.stat().st_size for p in store_dir.glob("*.log")} == segments
    assert active.end_offset == end and standby.load().offset == end - 1

    active.resign()
    active.resign()  # idempotent
    with pytest.raises(ControllerFencedError):
        active.writes.create_topic(topic(1))
    assert standby.load().offset == end - 1


def test_active_controller_and_config(store_dir: Path, stores: list[KRaftMetadataStore]) -> None:
    with pytest.raises(ValueError, match=r"metadata\.log\.dir"):
        create({"metadata.store": "kraft"})
    with pytest.raises(ValueError, match=r"metadata\.log\.snapshot\.interval\.records"):
        create({"metadata.log.dir": str(store_dir), "metadata.log.snapshot.interval.records": "x"})
    store = create(
        {
            "metadata.log.dir": str(store_dir),
            "metadata.log.segment.bytes": "4096",
            "metadata.log.snapshot.interval.records": "7",
        }
    )
    assert isinstance(store, KRaftMetadataStore) and store.mode == "kraft"
    stores.append(store)
    assert (store.segment_bytes, store.snapshot_interval_records) == (4096, 7)
    standby = new_store(stores, store_dir)
    assert store.active_controller() is None and standby.active_controller() is None
    elect(store, 3)
    assert store.active_controller() == (3, "127.0.0.1:9003")
    assert standby.active_controller() == (3, "127.0.0.1:9003")
    assert (store_dir / CONTROLLER_FILE).exists()
    assert not store.leadership_lost.is_set()
    store.close()
    assert standby.active_controller() is None  # nobody holds the lock
    with pytest.raises(MetadataStoreError, match="closed"):
        store.elect(3, "x:1", threading.Event())


def test_store_snapshots_and_serves_them_below_the_log_start(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir, segment_bytes=8 * 1024, snapshot_interval_records=300)
    elect(store)
    for i in range(400):  # 1201 records: snapshots start on their own every 300 records
        store.writes.create_topic(topic(i))
        if i % 100 == 0:
            store.wait_for_snapshot()
    store.wait_for_snapshot()
    assert len(list(store_dir.glob("*.snapshot"))) == 2
    assert not (store_dir / segment_file_name(0)).exists()

    batches, is_snapshot = store.read_batches(0, 0)
    assert is_snapshot and len(batches) == 1
    follower = serde.image_from_snapshot(batches[0])
    assert follower == store.load()
    # The follower continues from the offset after the snapshot.
    store.writes.delete_topic(topic(3))
    more, is_snapshot = store.read_batches(batches[0].base_offset + 1, 0)
    assert not is_snapshot
    assert replay(more, follower) == store.load()
    # Beyond the end (a follower of some other log): the snapshot too.
    assert store.read_batches(store.end_offset + 5, 0)[1]
    assert store.read_batches(store.end_offset, 0) == ([], False)

    store.close()
    reopened = new_store(stores, store_dir, segment_bytes=8 * 1024, snapshot_interval_records=300)
    elect(reopened)
    image = reopened.load()
    assert image.topics == follower.topics and image.brokers == follower.brokers


def test_a_broker_that_starts_gets_the_image_however_short_the_history(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    """Its disk holds what later records made of its partitions (a topic deleted and created
    again under the same name): the history would replay the old topic over the new one."""
    store = new_store(stores, store_dir, snapshot_interval_records=1000)
    elect(store)
    for i in range(3):
        store.writes.create_topic(topic(i))
    end = store.end_offset
    batches, is_snapshot = store.read_batches(0, 0)
    assert is_snapshot and len(batches) == 1 and batches[0].base_offset == end - 1
    batches, is_snapshot = store.read_batches(1, 0)  # a follower resuming: the history
    assert not is_snapshot and sum(len(b.records) for b in batches) == end - 1


def test_a_follower_far_behind_gets_the_image_not_the_history(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir, snapshot_interval_records=30)
    elect(store)
    for i in range(12):
        store.writes.create_topic(topic(i))
    end = store.end_offset
    assert end == 37
    batches, is_snapshot = store.read_batches(end - 30, 0)  # 30 records behind: the history
    assert not is_snapshot and sum(len(b.records) for b in batches) == 30
    batches, is_snapshot = store.read_batches(0, 0)  # 37 behind (a broker that starts)
    assert is_snapshot and len(batches) == 1 and batches[0].base_offset == end - 1
    assert serde.image_from_snapshot(batches[0]) == store.load()
    assert store.read_batches(0, 0)[0][0] is batches[0]  # kept for followers starting together
    store.writes.create_topic(topic(50))
    batches, is_snapshot = store.read_batches(0, 0)
    assert is_snapshot and batches[0].base_offset == end + 2
    assert "topic-50" in serde.image_from_snapshot(batches[0]).topics


def test_read_batches_wakes_up_when_a_batch_is_appended(
    store_dir: Path, stores: list[KRaftMetadataStore]
) -> None:
    store = new_store(stores, store_dir)
    elect(store)
    end = store.end_offset
    assert store.read_batches(end, 0) == ([], False)
    results: list[tuple[list[Batch], bool]] = []
    done = threading.Event()

    def reader() -> None:
        results.append(store.read_batches(end, 120))
        done.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    # White box: wait until the reader is waiting on the store's condition.
    poll_until(lambda: len(store._active.appended._waiters) == 1, what="the reader to wait")  # type: ignore[attr-defined]
    started = time.monotonic()
    store.writes.create_topic(topic(1))
    assert done.wait(30)
    woke_after = time.monotonic() - started
    thread.join()
    [(batches, is_snapshot)] = results
    assert not is_snapshot and [b.base_offset for b in batches] == [end]
    assert woke_after < 60  # far below max_wait_s: woken by the append, not by the timeout

    # Resigning wakes a waiting reader too: it is no longer the active controller.
    errors: list[BaseException] = []
    done.clear()

    def fenced_reader() -> None:
        try:
            store.read_batches(store.end_offset, 120)
        except ControllerFencedError as exc:
            errors.append(exc)
        done.set()

    thread = threading.Thread(target=fenced_reader, daemon=True)
    thread.start()
    poll_until(lambda: len(store._active.appended._waiters) == 1, what="the reader to wait")  # type: ignore[attr-defined]
    store.resign()
    assert done.wait(30) and len(errors) == 1


# --------------------------------------------------------------------------------- lock


class Holder:
    """``tests.support.kraft_lock_holder`` in a real process."""

    def __init__(self, directory: Path, controller_id: int, mode: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.support.kraft_lock_holder",
                str(directory),
                str(controller_id),
                mode,
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        self.lines: list[str] = []
        self._pending = b""

    def read_until(self, predicate: str, deadline_s: float = 60) -> None:
        """Reads lines until ``len(lines)`` satisfies ``count`` or one starts with ``prefix``."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + deadline_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while not self._seen(predicate):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    pytest.fail(f"holder did not print {predicate!r}: {self.lines}")
                if not sel.select(remaining):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    pytest.fail(f"holder exited ({self.proc.wait()}): {self.lines}")
                self._take(chunk)

    def _seen(self, predicate: str) -> bool:
        if predicate.startswith("#"):
            return sum(line.startswith("topic ") for line in self.lines) >= int(predicate[1:])
        return any(line.startswith(predicate) for line in self.lines)

    def _take(self, chunk: bytes) -> None:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        self.lines += [line.decode() for line in lines]

    @property
    def epoch(self) -> int:
        return next(int(line.split()[1]) for line in self.lines if line.startswith("epoch "))

    def kill(self) -> None:
        """kill -9, then the lines it printed before dying (acknowledged too)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        assert self.proc.stdout is not None
        self._take(self.proc.stdout.read())
        self.proc.stdout.close()
        if self.proc.stdin is not None:
            self.proc.stdin.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    started: list[Holder] = []
    yield started
    for h in started:
        if h.proc.poll() is None:
            h.kill()


def _elect_blocked_until_stopped(store: KRaftMetadataStore) -> None:
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    try:
        assert store.elect(1, "127.0.0.1:9001", stop) is None
    finally:
        timer.cancel()
    assert not store.is_active
    with pytest.raises(ControllerFencedError):
        store.writes.create_topic(topic(0))


@pytest.mark.processes
def test_a_standby_takes_over_when_the_holder_is_killed(
    store_dir: Path, stores: list[KRaftMetadataStore], holders: list[Holder]
) -> None:
    store = new_store(stores, store_dir)
    elect(store)
    store.writes.create_topic(topic(0))
    store.close()  # the holder is elected second

    holder = Holder(store_dir, 2, "wait")
    holders.append(holder)
    holder.read_until("epoch ")
    assert holder.epoch == 2
    standby = new_store(stores, store_dir)
    assert standby.active_controller() == (2, "127.0.0.1:9002")
    _elect_blocked_until_stopped(standby)

    holder.kill()
    assert holder.proc.returncode == -signal.SIGKILL
    epoch = standby.elect(1, "127.0.0.1:9001", threading.Event())
    assert epoch == holder.epoch + 1
    image = standby.load()
    assert image.topics == {"topic-0": topic(0), "held-0": held_topic(0)}
    assert image.brokers[7].endpoint == "127.0.0.1:9097"
    assert standby.active_controller() == (1, "127.0.0.1:9001")
    assert (store_dir / LOCK_FILE).read_text().strip() == str(os.getpid())


@pytest.mark.processes
def test_kill_9_while_writing_loses_no_acknowledged_write(
    store_dir: Path, stores: list[KRaftMetadataStore], holders: list[Holder]
) -> None:
    holder = Holder(store_dir, 2, "write")
    holders.append(holder)
    holder.read_until("#200")
    standby = new_store(stores, store_dir)
    _elect_blocked_until_stopped(standby)
    holder.read_until("#250")
    holder.kill()
    acked = [line.split()[1] for line in holder.lines if line.startswith("topic ")]
    assert len(acked) >= 250

    epoch = standby.elect(1, "127.0.0.1:9001", threading.Event())
    assert epoch == holder.epoch + 1
    image = standby.load()
    assert set(acked) <= image.topics.keys()
    names = sorted(image.topics, key=lambda n: int(n.split("-")[1]))
    assert names == [f"held-{i}" for i in range(len(names))]  # no gap: every batch whole
    for name in names:
        assert image.topics[name] == held_topic(int(name.split("-")[1]))
    standby.writes.create_topic(topic(0))  # and the log goes on after the (possibly torn) tail


# --------------------------------------------------------------------------------- figures


def _write_raw_log(directory: Path, history: Iterator[list[Record]], segment_bytes: int) -> int:
    """The log as the store would have written it, without one fsync per batch: frames straight
    to segment files, rolled as the log rolls them. Returns the end offset."""
    seg_base, offset, chunk = 0, 0, bytearray()
    for records in history:
        frame = encode_frame(Batch(base_offset=offset, records=records).SerializeToString())
        if chunk and len(chunk) + len(frame) > segment_bytes:
            (directory / segment_file_name(seg_base)).write_bytes(chunk)
            seg_base, chunk = offset, bytearray()
        chunk += frame
        offset += len(records)
    (directory / segment_file_name(seg_base)).write_bytes(chunk)
    return offset


def test_replay_of_100k_topics_snapshot_vs_raw_log(tmp_path: Path) -> None:
    """Measured once and printed, not asserted: start-up with 100k topics from the raw log
    (one batch per topic created, then one per topic disabled) vs from a snapshot, once
    retention dropped the covered segments."""
    count, seg = 100_000, 1024 * 1024

    def history() -> Iterator[list[Record]]:
        yield [serde.controller_epoch_record(1, 1, "127.0.0.1:9001")]
        for i in range(count):
            yield serde.topic_to_records(topic(i))
        for i in range(count):
            yield serde.topic_update_records(topic(i).with_tiered_state(TieredState.DISABLING, 1))

    end = _write_raw_log(tmp_path, history(), seg)
    raw_bytes = sum(p.stat().st_size for p in tmp_path.glob("*.log"))

    started = time.perf_counter()
    image, _ = recover_image(tmp_path, seg)
    raw_s = time.perf_counter() - started
    assert len(image.topics) == count and image.offset == end - 1

    log, _ = open_log(tmp_path, seg)
    log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
    serde.apply_batch(
        image,
        Batch(
            base_offset=log.append([serde.registration_to_record(broker(1))]),
            records=[serde.registration_to_record(broker(1))],
        ),
    )
    started = time.perf_counter()
    log.write_snapshot(image.offset, serde.image_to_batch(image, image.offset))
    snapshot_write_s = time.perf_counter() - started
    close_log(log)
    assert len(list(tmp_path.glob("*.log"))) == 1  # the covered history is gone

    started = time.perf_counter()
    from_snapshot, _ = recover_image(tmp_path, seg)
    snap_s = time.perf_counter() - started
    assert from_snapshot == image
    snapshot_bytes = max(p.stat().st_size for p in tmp_path.glob("*.snapshot"))
    print(
        f"\nstart-up with {count} topics: raw log ({end} records, {raw_bytes / 1e6:.1f} MB) "
        f"{raw_s:.2f}s, snapshot ({snapshot_bytes / 1e6:.1f} MB) {snap_s:.2f}s "
        f"({raw_s / snap_s:.1f}x faster); writing the snapshot took {snapshot_write_s:.2f}s"
    )
