"""The offsets of one ``__consumer_offsets`` partition on a real broker log: commits survive a
reopen, tombstones delete, compaction keeps a load in proportion to the live offsets and loses
nothing if it stops at any point, and the store's upkeep expires offsets."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
from kio.schema.errors import ErrorCode

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView, KafkaCluster, TopicPlacement
from broker.groups.membership import OffsetExpiry
from broker.groups.offset_records import (
    CommittedOffset,
    GroupKey,
    OffsetKey,
    RecordFormatError,
    decode_key,
    decode_value,
    encode_group_key,
    encode_offset_key,
    encode_value,
)
from broker.groups.offset_store import OffsetStore
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.offsets_partition import OffsetsPartition
from broker.groups.placement import OFFSETS_TOPIC, OffsetsTopic, java_string_hash, partition_for
from broker.log import Log, LogConfig
from tests.support.group_fakes import NoMembers
from tests.support.polling import poll_until
from tiered.errors import ErrorCode as TieredCode
from tiered.errors import TieredError
from tiered.kafka.record_batch import iter_batches
from tiered.kafka.records import Record, build_batch


def _committed(offset: int, at: int = 1000) -> CommittedOffset:
    return CommittedOffset(offset, 0, f"m{offset}", at)


def _open(directory: Path, clock: list[int] | None = None) -> OffsetsPartition:
    times = clock if clock is not None else [1000]
    partition = OffsetsPartition(
        Log.open(directory, LogConfig(segment_bytes=4096)),
        lambda: times[0],
        compaction_min_records=10,
    )
    partition.load()
    return partition


def test_records_use_kafkas_layouts() -> None:
    key = OffsetKey("g", "t", 3)
    encoded = encode_offset_key(key)
    # version 1, "g", "t", partition 3: Kafka's OffsetCommitKey
    assert encoded == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    assert decode_key(encoded) == key
    assert decode_key(encode_group_key(GroupKey("g"))) == GroupKey("g")
    value = CommittedOffset(42, 7, "meta", 123)
    assert encode_value(value)[:2] == b"\x00\x03"
    assert decode_value(encode_value(value)) == value
    with pytest.raises(RecordFormatError, match="key version 9"):
        decode_key(b"\x00\x09")


def test_an_offsets_topic_id_is_kept_as_kafka_41_keeps_it() -> None:
    """OffsetCommitValue v4 (flexible), the topic id as tagged field 0 (KAFKA-19141)."""
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    encoded = encode_value(CommittedOffset(42, 7, "meta", 123, topic_id))
    assert encoded == (
        b"\x00\x04"  # version 4
        + (42).to_bytes(8, "big")
        + (7).to_bytes(4, "big")
        + b"\x05meta"  # compact string: length + 1
        + (123).to_bytes(8, "big")
        + b"\x01\x00\x10"  # one tagged field: tag 0, 16 bytes
        + topic_id.bytes
    )
    decoded = decode_value(encoded)
    assert decoded == CommittedOffset(42, 7, "meta", 123) and decoded.topic_id == topic_id
    assert decode_value(encode_value(CommittedOffset(1, -1, "", 5))).topic_id is None
    # Kafka's "no topic id", and another tag (a later Kafka's field), read as no id
    zero = encoded[:-19] + b"\x02\x00\x10" + bytes(16) + b"\x05\x01\x07"
    assert decode_value(zero).topic_id is None
    with pytest.raises(RecordFormatError, match="topic id of 3 bytes"):
        decode_value(encoded[:-19] + b"\x01\x00\x03abc")


def test_offsets_keep_their_topic_id_across_a_reopen(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    partition = _open(tmp_path)
    partition.commit("g", {("t", 0): CommittedOffset(5, 0, "", 1000, topic_id)})
    partition.commit("g", {("u", 0): CommittedOffset(6, 0, "", 1000)})
    partition.log.close()
    reopened = _open(tmp_path)
    assert {tp: c.topic_id for tp, c in reopened.committed("g").items()} == {
        ("t", 0): topic_id,
        ("u", 0): None,
    }


def test_group_placement_is_kafkas() -> None:
    assert java_string_hash("abc") == 96354  # Java's "abc".hashCode()
    assert java_string_hash("") == 0
    # over UTF-16 code units: a character outside the BMP is two of them
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("abc", 50) == 96354 % 50


def test_commits_survive_reopening_and_tombstones_delete(tmp_path: Path) -> None:
    partition = _open(tmp_path)
    partition.commit("g1", {("t", 0): _committed(5), ("t", 1): _committed(6)})
    partition.commit("g1", {("t", 0): _committed(9)})
    partition.commit("g2", {("u", 0): _committed(1)})
    partition.offsets_deleted("g1", [("t", 1)])
    partition.group_deleted("g2")
    partition.log.close()

    reopened = _open(tmp_path)
    assert reopened.committed("g1") == {("t", 0): _committed(9)}
    assert reopened.committed("g2") == {}
    assert sorted(reopened.groups()) == ["g1"]
    assert reopened.live_offsets == 1


def test_compaction_keeps_loading_proportional_to_live_offsets(tmp_path: Path) -> None:
    partition = _open(tmp_path)
    for round_ in range(200):  # 200 commits of the same 5 partitions
        partition.commit("g", {("t", p): _committed(round_ * 10 + p) for p in range(5)})
        if partition.compaction_due():
            partition.compact()
    assert partition.records_from_start <= max(2 * 5, 10) + 5
    history = sum(s.size_bytes for s in partition.log.segments())
    partition.log.close()

    reopened = _open(tmp_path)
    assert reopened.committed("g") == {("t", p): _committed(1990 + p) for p in range(5)}
    # A load reads the live offsets and what followed the last compaction, not 1,000 records.
    assert reopened.records_from_start <= 15
    assert history < 4096 * 3  # old segments were deleted


def test_compaction_interrupted_at_any_point_loses_nothing(tmp_path: Path) -> None:
    partition = _open(tmp_path)
    for round_ in range(20):
        partition.commit("g", {("t", 0): _committed(round_), ("t", 1): _committed(100 + round_)})
    partition.offsets_deleted("g", [("t", 1)])
    expected = partition.committed("g")
    # Stopped after the copy was appended, before the log start moved: a crash there.
    log = partition.log
    log.roll()
    copy = Record(encode_offset_key(OffsetKey("g", "t", 0)), encode_value(expected[("t", 0)]))
    log.append_batches(build_batch([copy]), 0)
    log.close()
    reopened = _open(tmp_path)
    assert reopened.committed("g") == expected
    reopened.compact()  # and a whole one after it
    reopened.log.close()
    assert _open(tmp_path).committed("g") == expected


def test_store_serves_loaded_partitions_and_expires_offsets(tmp_path: Path) -> None:
    logs = {0: Log.open(tmp_path / "p0")}
    clock = [10_000_000]
    t_id, earlier_t_id = uuid.uuid4(), uuid.uuid4()
    existing = {"t": t_id, "u": uuid.uuid4()}
    store = OffsetStore(
        logs.get,
        lambda: [0],
        OffsetsConfig(retention_ms=60_000, retention_check_interval_ms=3_600_000),
        NoMembers(),
        lambda: existing,
        lambda: clock[0],
    )
    assert store.partition(1) is ErrorCode.not_coordinator
    store.start()
    try:
        poll_until(lambda: not isinstance(store.partition(0), ErrorCode), what="a load")
        partition = store.partition(0)
        assert isinstance(partition, OffsetsPartition)
        partition.commit("old", {("t", 0): store.committed_at(1, -1, "")})
        clock[0] += 30_000
        partition.commit("new", {("t", 0): store.committed_at(2, -1, "", t_id)})
        partition.commit("gone-topic", {("v", 0): store.committed_at(3, -1, "")})
        # committed for a topic "t" since deleted, the "t" that exists now being another
        partition.commit("recreated", {("t", 0): store.committed_at(4, -1, "", earlier_t_id)})
        clock[0] += 40_000  # "old" is 70 s old: past retention; "new" 40 s
        assert store.remove_expired() == 3
        assert sorted(store.groups()) == ["new"]
    finally:
        store.close()
        logs[0].close()


def test_a_long_log_loads_in_the_background_meanwhile_load_in_progress(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "p0")
    partition = OffsetsPartition(log)
    partition.commit("g", {("t", 0): _committed(1), ("t", 1): _committed(2)})
    store = OffsetStore(
        lambda index: log if index == 0 else None,
        lambda: [],
        OffsetsConfig(),
        NoMembers(),
        lambda: None,
        inline_load_max_records=1,
    )
    assert store.partition(0) is ErrorCode.coordinator_load_in_progress
    assert store.partition(0) is ErrorCode.coordinator_load_in_progress  # queued once
    store.start()
    try:
        poll_until(lambda: not isinstance(store.partition(0), ErrorCode), what="a load")
        loaded = store.partition(0)
        assert isinstance(loaded, OffsetsPartition)
        assert loaded.committed("g") == {("t", 0): _committed(1), ("t", 1): _committed(2)}
    finally:
        store.close()
        log.close()


def test_a_commit_is_one_batch_however_many_partitions(tmp_path: Path) -> None:
    partition = _open(tmp_path)
    partition.commit("g", {("t", p): _committed(p) for p in range(1500)})
    read = partition.log.read(0, 64 * 1024 * 1024)
    assert len(list(iter_batches(read.records))) == 1  # a crash keeps all of it or none
    partition.log.close()
    assert _open(tmp_path).live_offsets == 1500


def test_a_partition_no_longer_hosted_is_forgotten(tmp_path: Path) -> None:
    logs = {0: Log.open(tmp_path / "p0")}
    store = OffsetStore(logs.get, lambda: [0], OffsetsConfig(), NoMembers(), lambda: None)
    try:
        loaded = store.partition(0)
        assert isinstance(loaded, OffsetsPartition)
        loaded.commit("g", {("t", 0): _committed(1)})
        assert store.groups() == ["g"]
        del logs[0]  # moved to another broker
        assert store.groups() == ["g"]  # until the next look
        assert store.partition(0) is ErrorCode.not_coordinator
        assert store.groups() == []
    finally:
        store.close()
        loaded.log.close()


class _Expiries(NoMembers):
    """Each group's ``OffsetExpiry`` as the test sets it (a group not set: standalone)."""

    def __init__(self) -> None:
        self.expiries: dict[str, OffsetExpiry | None] = {}

    def offset_expiry(self, group_id: str) -> OffsetExpiry | None:
        return self.expiries.get(group_id, OffsetExpiry())


def test_offsets_expire_as_their_groups_expiry_says(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "p0")
    clock = [1_000_000]
    membership = _Expiries()
    store = OffsetStore(
        lambda index: log if index == 0 else None,
        lambda: [0],
        OffsetsConfig(retention_ms=60_000),
        membership,
        lambda: None,
        lambda: clock[0],
    )
    try:
        partition = store.partition(0)
        assert isinstance(partition, OffsetsPartition)
        for group in ("rebalancing", "emptied", "stable", "standalone"):
            partition.commit(
                group,
                {("t", 0): store.committed_at(1, -1, ""), ("u", 0): store.committed_at(2, -1, "")},
            )
        membership.expiries["rebalancing"] = None
        membership.expiries["stable"] = OffsetExpiry(subscribed_topics=frozenset({"t"}))
        clock[0] += 50_000
        membership.expiries["emptied"] = OffsetExpiry(empty_since_ms=clock[0])
        clock[0] += 20_000  # 70 s after the commits, 20 s after "emptied" emptied
        assert store.remove_expired() == 3  # standalone's two, stable's unsubscribed "u"
        assert set(partition.committed("stable")) == {("t", 0)}
        assert "standalone" not in store.groups()
        clock[0] += 40_000
        assert store.remove_expired() == 2  # "emptied": 60 s since it emptied
        assert sorted(store.groups()) == ["rebalancing", "stable"]
        assert len(partition.committed("rebalancing")) == 2  # a rebalancing group keeps all
    finally:
        store.close()
        log.close()


class _OffsetsTopicView:
    """The controller's answer for __consumer_offsets: missing, or partitions on brokers 1, 2."""

    def __init__(self) -> None:
        self.exists = False

    def topics(self, names: Sequence[str]) -> KafkaCluster:
        found: TopicPlacement | TieredError = TieredError(
            TieredCode.UNKNOWN_TOPIC_OR_PARTITION, "no such topic"
        )
        if self.exists:
            found = TopicPlacement(OFFSETS_TOPIC, uuid.uuid4(), (1, 2))
        return KafkaCluster("", {}, dict.fromkeys(names, found))


def test_the_leader_of_a_groups_partition_coordinates_it() -> None:
    view = _OffsetsTopicView()
    hosted: dict[int, ErrorCode] = {}
    topic = OffsetsTopic(
        cast(ClusterView, view),
        cast(ControllerAdmin, None),
        OffsetsConfig(),
        1,
        lambda index: hosted.get(index, ErrorCode.not_coordinator),
    )
    on_one, on_two = "g1", "g0"  # partitions 0 (broker 1) and 1 (broker 2) of 2
    assert topic.coordinates(on_one) is ErrorCode.coordinator_not_available  # no topic yet
    view.exists = True
    assert (topic.partition_of(on_one), topic.partition_of(on_two)) == (0, 1)
    # broker 1 leads partition 0 but does not host it yet: load in progress, not elsewhere
    assert topic.coordinates(on_one) is ErrorCode.coordinator_load_in_progress
    assert topic.coordinates(on_two) is ErrorCode.not_coordinator
    hosted[0] = ErrorCode.none
    assert topic.coordinates(on_one) is ErrorCode.none
