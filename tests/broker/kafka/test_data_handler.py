"""The broker's record APIs (Produce, Fetch, ListOffsets, DeleteRecords, InitProducerId) over a real
``Broker`` in this process, requests handed to the handler directly: Kafka's per-partition
rules and errors, the fetch size budget, long polls, special offsets."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.listener.handler import CloseConnectionError
from tests.support.kafka_local import NODE_ID, LocalBroker
from tests.support.kafka_requests import (
    by_partition,
    delete_records,
    fetch,
    init_producer_id,
    list_offsets,
    produce,
)
from tiered.kafka.record_batch import iter_batches
from tiered.kafka.records import Record, build_batch, decode_batch
from tiered.security.access import AccessControl
from tiered.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.principal import ANONYMOUS

T0 = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    b = LocalBroker(tmp_path)
    yield b
    b.close()


def batch(*values: bytes, timestamp: int = T0, **producer: int) -> bytes:
    return build_batch([Record(b"k", v, (("h", b"1"),), timestamp) for v in values], **producer)


def values(records: bytes) -> list[bytes | None]:
    return [c.record.value for h in iter_batches(records) for c in decode_batch(records, h)]


def log_end(broker: LocalBroker, topic: str, partition: int = 0) -> int:
    hosted = broker.broker.partitions.hosted_by_name(topic, partition)
    assert hosted is not None
    return hosted.log.log_end_offset


# ------------------------------------------------------------------------------------ produce


def test_produce_appends_each_batch_and_answers_its_base_offset(broker: LocalBroker) -> None:
    broker.host("t")
    first = by_partition(broker.call(produce({("t", 0): batch(b"a", b"b", b"c")})))[("t", 0)]
    second = by_partition(broker.call(produce({("t", 0): batch(b"d")})))[("t", 0)]
    assert (first.error_code, first.base_offset, first.log_start_offset) == (ErrorCode.none, 0, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
    assert first.log_append_time is None  # -1 on the wire: CreateTime
    read = by_partition(broker.call(fetch({("t", 0): 0})))[("t", 0)]
    assert values(read.records) == [b"a", b"b", b"c", b"d"]
    assert (read.high_watermark, read.last_stable_offset, read.log_start_offset) == (4, 4, 0)


def test_each_partition_is_refused_on_its_own_and_nothing_is_written(
    broker: LocalBroker,
) -> None:
    broker.host("t", 3)
    broker.led_elsewhere("theirs")
    corrupt = bytearray(batch(b"x"))
    corrupt[-1] ^= 0xFF
    answer = by_partition(
        broker.call(
            produce(
                {
                    ("t", 0): batch(b"a") + batch(b"b"),  # v3+: one batch per partition
                    ("t", 1): bytes(corrupt),
                    ("t", 2): batch(b"fine"),
                    ("t", 9): batch(b"no such partition"),
                    ("nope", 0): batch(b"no such topic"),
                    ("theirs", 0): batch(b"led by broker 2"),
                }
            )
        )
    )
    codes = {tp: (p.error_code, p.base_offset) for tp, p in answer.items()}
    assert codes == {
        ("t", 0): (ErrorCode.invalid_record, -1),
        ("t", 1): (ErrorCode.corrupt_message, -1),
        ("t", 2): (ErrorCode.none, 0),
        ("t", 9): (ErrorCode.unknown_topic_or_partition, -1),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, -1),
        ("theirs", 0): (ErrorCode.not_leader_or_follower, -1),
    }
    assert "one record batch" in answer[("t", 0)].error_message
    assert "broker 2" in answer[("theirs", 0)].error_message
    assert all(answer[tp].error_message for tp in answer if tp != ("t", 2))
    assert [log_end(broker, "t", p) for p in range(3)] == [0, 0, 1]


def test_acks(broker: LocalBroker) -> None:
    broker.host("t")
    assert broker.start(produce({("t", 0): batch(b"zero")}, acks=0)) is None  # no answer
    assert log_end(broker, "t") == 1
    # acks=0 that failed anywhere: the client learns of it by the close, as from Kafka.
    with pytest.raises(CloseConnectionError, match="nope-0: UNKNOWN_TOPIC_OR_PARTITION"):
        broker.start(produce({("t", 0): batch(b"kept"), ("nope", 0): batch(b"x")}, acks=0))
    assert log_end(broker, "t") == 2  # the partitions that succeeded keep their records
    answer = by_partition(broker.call(produce({("t", 0): batch(b"all")}, acks=-1)))[("t", 0)]
    assert (answer.error_code, answer.base_offset) == (ErrorCode.none, 2)
    bad = by_partition(broker.call(produce({("t", 0): batch(b"two")}, acks=2)))[("t", 0)]
    assert bad.error_code is ErrorCode.invalid_required_acks and "acks=2" in bad.error_message
    transactional = broker.call(produce({("t", 0): batch(b"tx")}, transactional_id="tx-1"))
    assert by_partition(transactional)[("t", 0)].error_code is ErrorCode.invalid_request
    assert log_end(broker, "t") == 3


def test_a_retried_idempotent_batch_is_answered_with_its_first_offsets(
    broker: LocalBroker,
) -> None:
    broker.host("t")
    broker.call(produce({("t", 0): batch(b"other")}))
    ids = broker.call(init_producer_id())
    producer = {"producer_id": ids.producer_id, "producer_epoch": ids.producer_epoch}
    first = batch(b"a", b"b", base_sequence=0, **producer)
    answers = [by_partition(broker.call(produce({("t", 0): first})))[("t", 0)] for _ in range(3)]
    assert {(a.error_code, a.base_offset) for a in answers} == {(ErrorCode.none, 1)}
    gap = by_partition(broker.call(produce({("t", 0): batch(b"c", base_sequence=5, **producer)})))
    assert gap[("t", 0)].error_code is ErrorCode.out_of_order_sequence_number
    assert log_end(broker, "t") == 3


# -------------------------------------------------------------------------------------- fetch


def test_partition_and_request_byte_limits(broker: LocalBroker) -> None:
    broker.host("t", 2)
    payload = b"x" * 1000
    for p in range(2):
        for _ in range(3):
            broker.call(produce({("t", p): batch(payload)}))
    size = len(batch(payload))

    def sizes(**limits: int) -> list[tuple[int, int]]:
        answer = by_partition(broker.call(fetch({("t", 0): 0, ("t", 1): 0}, **limits)))
        return [(len(answer[("t", p)].records), answer[("t", p)].high_watermark) for p in (0, 1)]

    # Each partition gets the whole batches that fit its own limit.
    assert sizes(partition_max_bytes=2 * size + 10) == [(2 * size, 3), (2 * size, 3)]
    # KIP-74: the first batch of the first partition with data comes even if too large; a
    # later partition whose next batch does not fit gets nothing this time.
    assert sizes(partition_max_bytes=100) == [(size, 3), (0, 3)]
    # The request's max_bytes is shared in order.
    assert sizes(max_bytes=size + size // 2) == [(size, 3), (0, 3)]
    assert sizes(max_bytes=3 * size) == [(3 * size, 3), (0, 3)]
    assert sizes(max_bytes=4 * size) == [(3 * size, 3), (size, 3)]


def test_fetch_errors(broker: LocalBroker) -> None:
    broker.host("t")
    broker.call(produce({("t", 0): batch(b"a", b"b")}))
    hosted = broker.broker.partitions.hosted_by_name("t", 0)
    assert hosted is not None
    answer = by_partition(broker.call(fetch({("t", 0): 3, ("nope", 0): 0})))
    assert answer[("t", 0)].error_code is ErrorCode.offset_out_of_range
    assert answer[("t", 0)].high_watermark == -1
    assert answer[("nope", 0)].error_code is ErrorCode.unknown_topic_or_partition
    at_end = by_partition(broker.call(fetch({("t", 0): 2})))[("t", 0)]
    assert (at_end.error_code, at_end.records, at_end.high_watermark) == (ErrorCode.none, b"", 2)
    newer = by_partition(broker.call(fetch({("t", 0): 0}, current_leader_epoch=1)))[("t", 0)]
    assert newer.error_code is ErrorCode.unknown_leader_epoch
    assert by_partition(broker.call(fetch({("t", 0): 0}, current_leader_epoch=0)))[
        ("t", 0)
    ].error_code is (ErrorCode.none)
    # Below the log start offset (raised by retention or a delete-policy disable).
    hosted.log.set_log_start_offset(1)
    below = by_partition(broker.call(fetch({("t", 0): 0})))[("t", 0)]
    assert below.error_code is ErrorCode.offset_out_of_range
    from_start = by_partition(broker.call(fetch({("t", 0): 1})))[("t", 0)]
    assert (from_start.error_code, from_start.log_start_offset) == (ErrorCode.none, 1)


def test_fetch_sessions_are_not_opened(broker: LocalBroker) -> None:
    broker.host("t")
    for session, code in [
        ((0, -1), ErrorCode.none),
        ((0, 0), ErrorCode.none),  # asks for a session: the answer's id 0 says none was made
        ((7, 1), ErrorCode.fetch_session_id_not_found),
        ((0, 3), ErrorCode.invalid_fetch_session_epoch),
    ]:
        answer = broker.call(fetch({("t", 0): 0}, session=session))
        assert (answer.error_code, answer.session_id) == (code, 0), session
        assert len(answer.responses) == (1 if code is ErrorCode.none else 0)


def test_a_waiting_fetch_is_answered_by_an_append(broker: LocalBroker) -> None:
    broker.host("t", 2)
    waiting = broker.start(fetch({("t", 0): 0, ("t", 1): 0}, max_wait_ms=30_000))
    assert isinstance(waiting, Future) and not waiting.done()
    broker.call(produce({("t", 1): batch(b"wake")}))
    answer = by_partition(waiting.result(10))
    assert values(answer[("t", 1)].records) == [b"wake"]
    assert answer[("t", 0)].records == b""


def test_a_waiting_fetch_wants_min_bytes(broker: LocalBroker) -> None:
    broker.host("t")
    one = batch(b"y" * 100)
    waiting = broker.start(fetch({("t", 0): 0}, max_wait_ms=30_000, min_bytes=len(one) + 1))
    assert isinstance(waiting, Future)
    broker.call(produce({("t", 0): one}))
    assert broker.handler.waiting_fetches() == 1  # a wake-up is decided within the append
    broker.call(produce({("t", 0): one}))
    assert len(by_partition(waiting.result(10))[("t", 0)].records) == 2 * len(one)


def test_a_waiting_fetch_ends_at_max_wait(broker: LocalBroker) -> None:
    broker.host("t")
    started = time.monotonic()
    answer = by_partition(broker.call(fetch({("t", 0): 0}, max_wait_ms=300)))[("t", 0)]
    elapsed = time.monotonic() - started
    assert (answer.error_code, answer.records) == (ErrorCode.none, b"")
    assert 0.25 <= elapsed < 5, elapsed


def test_closing_the_handler_cancels_waiting_fetches(broker: LocalBroker) -> None:
    broker.host("t")
    waiting = broker.start(fetch({("t", 0): 0}, max_wait_ms=30_000))
    broker.handler.close()
    assert waiting.cancelled()


# ------------------------------------------------------------------------------- list offsets


def test_list_offsets(broker: LocalBroker) -> None:
    broker.host("t", 2)
    for i, ts in enumerate([T0, T0 + 300, T0 + 100]):
        broker.call(produce({("t", 0): batch(f"r{i}".encode(), timestamp=ts)}))

    def offsets(timestamp: int, partition: int = 0) -> tuple[int, int, int, ErrorCode]:
        found = by_partition(broker.call(list_offsets({("t", partition): timestamp})))
        p = found[("t", partition)]
        return p.offset, p.timestamp, p.leader_epoch, p.error_code

    assert offsets(-1) == (3, -1, 0, ErrorCode.none)  # latest: the log end
    assert offsets(-2) == (0, -1, 0, ErrorCode.none)  # earliest
    assert offsets(-4) == (0, -1, 0, ErrorCode.none)  # earliest local
    assert offsets(-3) == (1, T0 + 300, 0, ErrorCode.none)  # max timestamp
    assert offsets(T0 + 50) == (1, T0 + 300, 0, ErrorCode.none)  # first at or after
    assert offsets(T0 + 301) == (-1, -1, -1, ErrorCode.none)  # none that late
    assert offsets(-1, partition=1) == (0, -1, -1, ErrorCode.none)  # empty: no epoch yet
    assert offsets(-3, partition=1)[:2] == (-1, -1)
    assert offsets(-7)[3] is ErrorCode.invalid_request
    hosted = broker.broker.partitions.hosted_by_name("t", 0)
    assert hosted is not None
    hosted.log.set_log_start_offset(2)
    assert offsets(-2)[0] == offsets(-4)[0] == 2


def test_list_offsets_errors(broker: LocalBroker) -> None:
    broker.host("t")
    broker.led_elsewhere("theirs")
    twice = [(("t", 0), -1), (("t", 0), -2), (("theirs", 0), -1), (("nope", 0), -1)]
    answer = broker.call(list_offsets(twice))
    codes = [(t.name, p.error_code) for t in answer.topics for p in t.partitions]
    assert codes == [
        ("t", ErrorCode.invalid_request),
        ("t", ErrorCode.invalid_request),
        ("theirs", ErrorCode.not_leader_or_follower),
        ("nope", ErrorCode.unknown_topic_or_partition),
    ]


# ----------------------------------------------------------------------------- delete records


def test_delete_records(broker: LocalBroker) -> None:
    broker.host("t", 2)
    broker.host("compacted", **{"cleanup.policy": "compact"})
    broker.led_elsewhere("theirs")
    for i in range(5):
        broker.call(produce({("t", 0): batch(f"r{i}".encode())}))

    def deleted(offsets: dict[tuple[str, int], int], version: int = 2) -> dict[object, object]:
        answer = by_partition(broker.call(delete_records(offsets, version)))
        return {tp: (p.error_code, p.low_watermark) for tp, p in answer.items()}

    assert deleted(
        {
            ("t", 0): 3,
            ("t", 1): -1,  # the high watermark of an empty partition
            ("t", 7): 0,
            ("theirs", 0): 0,
            ("nope", 0): 0,
            ("compacted", 0): 0,
        }
    ) == {
        ("t", 0): (ErrorCode.none, 3),
        ("t", 1): (ErrorCode.none, 0),
        ("t", 7): (ErrorCode.unknown_topic_or_partition, -1),
        ("theirs", 0): (ErrorCode.not_leader_or_follower, -1),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, -1),
        ("compacted", 0): (ErrorCode.policy_violation, -1),
    }
    # Reads below the new log start are refused; ListOffsets' earliest is the new start.
    below = by_partition(broker.call(fetch({("t", 0): 2})))[("t", 0)]
    assert below.error_code is ErrorCode.offset_out_of_range
    from_start = by_partition(broker.call(fetch({("t", 0): 3})))[("t", 0)]
    assert (from_start.error_code, from_start.log_start_offset) == (ErrorCode.none, 3)
    assert values(from_start.records) == [b"r3", b"r4"]
    earliest = by_partition(broker.call(list_offsets({("t", 0): -2})))[("t", 0)]
    assert earliest.offset == 3
    # Past the high watermark or negative: OFFSET_OUT_OF_RANGE, nothing changes (v0 as v2).
    for offset in (6, -2):
        assert deleted({("t", 0): offset}, version=0) == {
            ("t", 0): (ErrorCode.offset_out_of_range, -1)
        }
    assert deleted({("t", 0): 1}) == {("t", 0): (ErrorCode.none, 3)}  # below: the low watermark
    assert deleted({("t", 0): -1}, version=0) == {("t", 0): (ErrorCode.none, 5)}
    appended = by_partition(broker.call(produce({("t", 0): batch(b"r5")})))[("t", 0)]
    assert (appended.base_offset, appended.log_start_offset) == (5, 5)


def test_delete_records_needs_delete_on_the_topic(tmp_path: Path) -> None:
    def allow(topic: str, *operations: AclOperation) -> list[AclBinding]:
        return [
            AclBinding(
                ResourcePattern(ResourceType.TOPIC, topic),
                AccessControlEntry(str(ANONYMOUS), "*", operation, AclPermissionType.ALLOW),
            )
            for operation in operations
        ]

    bindings = allow("kept", AclOperation.WRITE, AclOperation.READ) + allow(
        "purged", AclOperation.WRITE, AclOperation.DELETE
    )
    index = AclIndex({uuid.uuid4(): b for b in bindings})
    access = AccessControl(StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index))
    broker = LocalBroker(tmp_path, access)
    try:
        for topic in ("kept", "purged"):
            broker.host(topic)
            broker.call(produce({(topic, 0): batch(b"a", b"b")}))
        answer = by_partition(broker.call(delete_records({("kept", 0): 1, ("purged", 0): 1})))
        assert answer[("kept", 0)].error_code is ErrorCode.topic_authorization_failed
        assert answer[("purged", 0)].error_code is ErrorCode.none
        kept = broker.broker.partitions.hosted_by_name("kept", 0)
        assert kept is not None and kept.log.log_start_offset == 0  # nothing changed
    finally:
        broker.close()


# ----------------------------------------------------------------------------- producer ids


def test_init_producer_id(broker: LocalBroker) -> None:
    answers = [broker.call(init_producer_id()) for _ in range(3)]
    assert {(a.error_code, a.producer_epoch) for a in answers} == {(ErrorCode.none, 0)}
    ids = [a.producer_id for a in answers]
    assert len(set(ids)) == 3 and {i >> 32 for i in ids} == {NODE_ID}
    refused = broker.call(init_producer_id(transactional_id="tx"))
    assert (refused.error_code, refused.producer_id) == (ErrorCode.invalid_request, -1)
