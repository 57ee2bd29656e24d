"""Record batches v2: build/parse round trips for every codec, CRC and framing errors."""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tiered.kafka.compression import XERIAL_MAGIC, Codec
from tiered.kafka.record_batch import (
    BATCH_HEADER_SIZE,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchError,
    TimestampType,
    assign_offsets,
    assigned_offsets_pieces,
    iter_batches,
    parse_batch_header,
    validate_produce_records,
    verify_crc,
)
from tiered.kafka.records import ConsumedRecord, Record, build_batch, decode_batch, iter_records

CRC_START = 21  # attributes: the first byte the CRC covers

records_strategy = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=64),
        value=st.none() | st.binary(max_size=256),
        headers=st.lists(
            st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=16)), max_size=3
        ).map(tuple),
        timestamp=st.integers(min_value=0, max_value=2**42),
    ),
    min_size=1,
    max_size=20,
)
codecs = st.sampled_from(list(Codec))


def with_new_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[CRC_START:])))
    return batch


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_strategy, codec=codecs, producer_id=st.integers(-1, 2**40))
def test_build_then_parse_round_trips_every_field_byte_exact(
    records: list[Record], codec: Codec, producer_id: int
) -> None:
    batch = build_batch(records, codec, base_offset=40, producer_id=producer_id, producer_epoch=3)
    [header] = iter_batches(batch)
    assert header.size == len(batch)
    assert header.codec is codec
    assert header.records_count == len(records) == header.last_offset_delta + 1
    assert header.base_offset == 40
    assert header.last_offset == 40 + len(records) - 1
    assert header.base_timestamp == records[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert header.producer_id == producer_id
    assert header.producer_epoch == 3
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert not header.is_control
    assert not header.is_transactional
    assert decode_batch(batch, header) == [
        ConsumedRecord(40 + i, record) for i, record in enumerate(records)
    ]
    assert validate_produce_records(batch) == header


@settings(max_examples=100, deadline=None)
@given(records=records_strategy, codec=codecs, data=st.data())
def test_any_corrupted_byte_in_the_crc_range_is_corrupt_message(
    records: list[Record], codec: Codec, data: st.DataObject
) -> None:
    batch = bytearray(build_batch(records, codec))
    position = data.draw(st.integers(min_value=17, max_value=len(batch) - 1))
    batch[position] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(CorruptRecordError) as raised:
        validate_produce_records(batch)
    assert raised.value.error_code is ErrorCode.corrupt_message


@settings(deadline=None)
@given(records=records_strategy, base=st.integers(0, 2**62), epoch=st.integers(0, 2**31 - 1))
def test_assign_offsets_rewrites_in_place_and_keeps_the_crc_valid(
    records: list[Record], base: int, epoch: int
) -> None:
    original = build_batch(records, Codec.LZ4)
    batch = bytearray(original)
    header = parse_batch_header(batch)
    assert assign_offsets(batch, header, base, epoch) == base + len(records)
    assert batch[12:16] != original[12:16] or epoch == -1
    assert batch[BATCH_HEADER_SIZE - 40 :] == original[BATCH_HEADER_SIZE - 40 :]
    [rewritten] = iter_batches(batch)
    assert (rewritten.base_offset, rewritten.partition_leader_epoch) == (base, epoch)
    assert [c.offset for c in decode_batch(batch, rewritten)] == [
        base + i for i in range(len(records))
    ]


def test_assigned_offsets_pieces_are_the_rewritten_batch_without_copying_its_records() -> None:
    first, second = (
        build_batch([Record(b"a", b"1", (), 5)]),
        build_batch([Record(b"b", b"2", (), 6), Record(None, b"3", (), 7)], Codec.GZIP),
    )
    payload = memoryview(first + second)
    header = dataclasses.replace(parse_batch_header(second), position=len(first))
    head, rest = assigned_offsets_pieces(payload, header, 40, 3)
    expected = bytearray(second)
    assign_offsets(expected, parse_batch_header(second), 40, 3)
    assert bytes(head) + bytes(rest) == expected
    assert rest.obj is payload.obj  # a view of the payload, not a copy
    assert payload.tobytes() == first + second  # the payload is untouched


def test_log_append_time_batches_give_every_record_the_max_timestamp() -> None:
    records = [Record(b"a", b"1", (), 5), Record(b"b", b"2", (), 9)]
    batch = build_batch(records, timestamp_type=TimestampType.LOG_APPEND_TIME)
    [header] = iter_batches(batch)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [c.record.timestamp for c in decode_batch(batch, header)] == [9, 9]


def test_iter_batches_walks_concatenated_batches_and_tolerates_a_cut_tail_only_on_request() -> None:
    first = build_batch([Record(b"k", b"v", (), 1)], base_offset=0)
    second = build_batch(
        [Record(None, b"w", (), 2), Record(None, b"x", (), 3)], Codec.GZIP, base_offset=1
    )
    log = first + second
    assert [h.base_offset for h in iter_batches(log)] == [0, 1]
    assert [c.offset for c in iter_records(log)] == [0, 1, 2]
    for cut in (1, 11, 30, len(second) - 1):
        truncated = log[: len(first) + cut]
        with pytest.raises(CorruptRecordError):
            list(iter_batches(truncated))
        assert [h.base_offset for h in iter_batches(truncated, allow_truncated_tail=True)] == [0]


def test_a_header_in_a_window_is_framed_against_the_segment_limit_not_the_window() -> None:
    first = build_batch([Record(b"k", b"v", (), 1)], base_offset=0)
    second = build_batch([Record(b"k", b"v" * 200, (), 2)], base_offset=1)
    segment = first + second
    window = segment[len(first) : len(first) + BATCH_HEADER_SIZE]  # the header only
    header = parse_batch_header(window, len(first), len(segment), len(first))
    assert header == parse_batch_header(segment, len(first))
    with pytest.raises(CorruptRecordError, match="truncated"):
        parse_batch_header(window, len(first), len(segment) - 1, len(first))


def test_snappy_java_xerial_framing_is_decoded_like_raw_snappy() -> None:
    records = [Record(b"key", b"value" * 50, (("h", b"1"),), 7)] * 3
    raw = build_batch(records, Codec.SNAPPY)
    body = build_batch(records)[BATCH_HEADER_SIZE:]
    chunks = [body[:40], body[40:]]
    framed = (
        XERIAL_MAGIC
        + struct.pack(">ii", 1, 1)
        + b"".join(
            struct.pack(">i", len(c)) + bytes(c)
            for c in (cramjam.snappy.compress_raw(x) for x in chunks)
        )
    )
    xerial = with_new_crc(bytearray(raw[:BATCH_HEADER_SIZE] + framed))
    struct.pack_into(">i", xerial, 8, len(xerial) - 12)
    xerial = with_new_crc(xerial)
    [header] = iter_batches(xerial)
    assert [c.record for c in decode_batch(xerial, header)] == records


def test_decompression_is_bounded() -> None:
    batch = build_batch([Record(None, b"\0" * 100_000, (), 0)], Codec.ZSTD)
    [header] = iter_batches(batch)
    with pytest.raises(InvalidRecordError, match="decompress"):
        decode_batch(batch, header, max_decompressed=10_000)
    assert decode_batch(batch, header)[0].record.value == b"\0" * 100_000


def _patched(batch: bytes, fmt: str, position: int, value: int) -> bytearray:
    patched = bytearray(batch)
    struct.pack_into(fmt, patched, position, value)
    return with_new_crc(patched)


ONE = build_batch([Record(b"k", b"v", (), 1)])
TWO = build_batch([Record(b"k", b"v", (), 1), Record(b"k", b"v", (), 2)])


@pytest.mark.parametrize(
    ("payload", "error", "message"),
    [
        (b"", InvalidRecordError, "one record batch"),
        (ONE + ONE, InvalidRecordError, "only one record batch"),
        (ONE + b"\0\0\0", CorruptRecordError, "cannot hold"),
        (ONE[:-1], CorruptRecordError, "truncated"),
        (ONE[:30], CorruptRecordError, "header truncated"),
        (_patched(ONE, ">b", 16, 1), InvalidRecordError, "magic 1"),
        (_patched(ONE, ">i", 8, 10), CorruptRecordError, "minimum overhead"),
        (_patched(TWO, ">i", 57, 3), InvalidRecordError, "record count"),
        (_patched(TWO, ">i", 23, 0), InvalidRecordError, "record count"),
        (_patched(ONE, ">h", 21, 5), InvalidRecordError, "codec id 5"),
        (_patched(ONE, ">h", 21, 0x20), InvalidRecordError, "control"),
        (_patched(ONE, ">h", 21, 0x10), InvalidRecordError, "transactional"),
    ],
)
def test_produce_validation_follows_kafka_error_semantics(
    payload: bytes, error: type[RecordBatchError], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        validate_produce_records(payload)
    expected = (
        ErrorCode.invalid_record if error is InvalidRecordError else ErrorCode.corrupt_message
    )
    assert raised.value.error_code is expected


def test_records_section_that_disagrees_with_the_header_is_invalid_record() -> None:
    lying = _patched(ONE, ">i", 57, 2)  # declares two records, holds one
    header = parse_batch_header(lying)
    verify_crc(lying, header)
    with pytest.raises(InvalidRecordError, match="declares 2 records but holds 1"):
        decode_batch(lying, header)


@settings(max_examples=300)
@given(st.binary(max_size=300))
def test_random_bytes_only_ever_raise_record_batch_errors(garbage: bytes) -> None:
    for check in (validate_produce_records, lambda b: list(iter_records(b))):
        with contextlib.suppress(RecordBatchError):
            check(garbage)


@settings(max_examples=100, deadline=None)
@given(records=records_strategy, codec=codecs, noise=st.binary(min_size=1, max_size=64))
def test_garbage_records_section_with_a_valid_crc_is_invalid_record(
    records: list[Record], codec: Codec, noise: bytes
) -> None:
    batch = bytearray(build_batch(records, codec)[:BATCH_HEADER_SIZE] + noise)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    header = parse_batch_header(with_new_crc(batch))
    try:
        decoded = decode_batch(batch, header)
    except InvalidRecordError:
        return
    assert len(decoded) == header.records_count
