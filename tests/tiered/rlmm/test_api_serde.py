"""Unit tests of the plugin API value types (tiered.api) and their protobuf serde (tiered.rlmm.serde)."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiered.api import (
    CustomMetadata,
    DeleteOutcome,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tiered.rlmm import serde

SEG = RemoteLogSegmentState
DEL = RemotePartitionDeleteState

TP = TopicIdPartition(uuid.UUID("6a1c2f1e-8d4b-4f3a-9a57-0c3b5e2d7f10"), "orders", 3)
SEGMENT_ID = RemoteLogSegmentId(TP, uuid.UUID("0b7f3c55-2a41-4e0e-8f5d-9c1a6b2e4d33"))


def segment_kwargs(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "remote_log_segment_id": SEGMENT_ID,
        "start_offset": 100,
        "end_offset": 200,
        "max_timestamp_ms": 1_700_000_000_500,
        "broker_id": 1,
        "event_timestamp_ms": 1_700_000_001_000,
        "segment_size_in_bytes": 4096,
        "segment_leader_epochs": {0: 100, 3: 150, 5: 180},
    }
    values.update(changes)
    return values


def segment(**changes: Any) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(**segment_kwargs(**changes))


def update_kwargs(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "remote_log_segment_id": SEGMENT_ID,
        "event_timestamp_ms": 1_700_000_002_000,
        "custom_metadata": None,
        "state": SEG.COPY_SEGMENT_FINISHED,
        "broker_id": 2,
    }
    values.update(changes)
    return values


def update(**changes: Any) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(**update_kwargs(**changes))


def delete_kwargs(**changes: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "topic_id_partition": TP,
        "state": DEL.DELETE_PARTITION_MARKED,
        "event_timestamp_ms": 1_700_000_003_000,
        "broker_id": 4,
    }
    values.update(changes)
    return values


# -- state transitions ---------------------------------------------------------------------------

VALID_SEGMENT_TRANSITIONS = {
    (None, SEG.COPY_SEGMENT_STARTED),
    (SEG.COPY_SEGMENT_STARTED, SEG.COPY_SEGMENT_STARTED),
    (SEG.COPY_SEGMENT_STARTED, SEG.COPY_SEGMENT_FINISHED),
    (SEG.COPY_SEGMENT_STARTED, SEG.DELETE_SEGMENT_STARTED),
    (SEG.COPY_SEGMENT_FINISHED, SEG.COPY_SEGMENT_FINISHED),
    (SEG.COPY_SEGMENT_FINISHED, SEG.DELETE_SEGMENT_STARTED),
    (SEG.DELETE_SEGMENT_STARTED, SEG.DELETE_SEGMENT_STARTED),
    (SEG.DELETE_SEGMENT_STARTED, SEG.DELETE_SEGMENT_FINISHED),
    (SEG.DELETE_SEGMENT_FINISHED, SEG.DELETE_SEGMENT_FINISHED),
}
SEGMENT_PAIRS = list(itertools.product([None, *SEG], SEG))


def _pair_id(pair: tuple[Any, Any]) -> str:
    source, target = pair
    return f"{source.name if source else 'None'}->{target.name}"


@pytest.mark.parametrize("pair", SEGMENT_PAIRS, ids=[_pair_id(p) for p in SEGMENT_PAIRS])
def test_segment_state_transition_table(
    pair: tuple[RemoteLogSegmentState | None, RemoteLogSegmentState],
) -> None:
    source, target = pair
    assert SEG.is_valid_transition(source, target) is (pair in VALID_SEGMENT_TRANSITIONS)


def test_segment_state_table_is_complete_and_kafka_ids() -> None:
    assert len(SEGMENT_PAIRS) == 20
    assert [s.value for s in SEG] == [0, 1, 2, 3]
    with pytest.raises(TypeError):
        SEG.is_valid_transition(SEG.COPY_SEGMENT_STARTED, None)  # type: ignore[arg-type]


VALID_DELETE_TRANSITIONS = {
    (None, DEL.DELETE_PARTITION_MARKED),
    (DEL.DELETE_PARTITION_MARKED, DEL.DELETE_PARTITION_MARKED),
    (DEL.DELETE_PARTITION_MARKED, DEL.DELETE_PARTITION_STARTED),
    (DEL.DELETE_PARTITION_STARTED, DEL.DELETE_PARTITION_STARTED),
    (DEL.DELETE_PARTITION_STARTED, DEL.DELETE_PARTITION_FINISHED),
    (DEL.DELETE_PARTITION_FINISHED, DEL.DELETE_PARTITION_FINISHED),
}
DELETE_PAIRS = list(itertools.product([None, *DEL], DEL))


@pytest.mark.parametrize("pair", DELETE_PAIRS, ids=[_pair_id(p) for p in DELETE_PAIRS])
def test_partition_delete_state_transition_table(
    pair: tuple[RemotePartitionDeleteState | None, RemotePartitionDeleteState],
) -> None:
    source, target = pair
    assert DEL.is_valid_transition(source, target) is (pair in VALID_DELETE_TRANSITIONS)


def test_partition_delete_state_table_is_complete_and_kafka_ids() -> None:
    assert len(DELETE_PAIRS) == 12
    assert [s.value for s in DEL] == [0, 1, 2]
    with pytest.raises(TypeError):
        DEL.is_valid_transition(DEL.DELETE_PARTITION_MARKED, None)  # type: ignore[arg-type]


# -- constructor validation ----------------------------------------------------------------------


def test_valid_values_construct() -> None:
    m = segment()
    assert m.state is SEG.COPY_SEGMENT_STARTED
    assert m.custom_metadata is None
    assert m.tiered_epoch == 0
    assert m.topic_id_partition == TP
    assert segment(end_offset=100).end_offset == 100  # a one-offset segment
    assert update().topic_id_partition == TP
    assert RemotePartitionDeleteMetadata(**delete_kwargs()).state is DEL.DELETE_PARTITION_MARKED


SEGMENT_FIELDS = [*segment_kwargs(), "state", "tiered_epoch"]


@pytest.mark.parametrize("name", SEGMENT_FIELDS)
def test_segment_metadata_rejects_none(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        segment(**{name: None})


@pytest.mark.parametrize("name", [n for n in update_kwargs() if n != "custom_metadata"])
def test_segment_update_rejects_none(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        update(**{name: None})


@pytest.mark.parametrize("name", list(delete_kwargs()))
def test_partition_delete_metadata_rejects_none(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        RemotePartitionDeleteMetadata(**delete_kwargs(**{name: None}))


def test_identifiers_reject_none_and_wrong_types() -> None:
    with pytest.raises(TypeError):
        TopicIdPartition(None, "t", 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TopicIdPartition(uuid.uuid4(), None, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TopicIdPartition(str(uuid.uuid4()), "t", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="partition"):
        TopicIdPartition(uuid.uuid4(), "t", -1)
    with pytest.raises(TypeError):
        RemoteLogSegmentId(None, uuid.uuid4())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RemoteLogSegmentId(TP, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CustomMetadata(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        CustomMetadata("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        segment(custom_metadata=b"raw bytes")
    with pytest.raises(TypeError):
        segment(state=1)


INT_FIELDS = [
    "start_offset",
    "end_offset",
    "max_timestamp_ms",
    "broker_id",
    "event_timestamp_ms",
    "segment_size_in_bytes",
    "tiered_epoch",
]


@pytest.mark.parametrize("name", INT_FIELDS)
def test_segment_metadata_rejects_bool_as_int(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        segment(**{name: True})


def test_bool_as_int_is_rejected_everywhere() -> None:
    with pytest.raises(TypeError):
        segment(segment_leader_epochs={True: 100})
    with pytest.raises(TypeError):
        segment(segment_leader_epochs={0: False})
    with pytest.raises(TypeError):
        TopicIdPartition(uuid.uuid4(), "t", True)
    with pytest.raises(TypeError):
        update(broker_id=False)
    with pytest.raises(TypeError):
        update(event_timestamp_ms=True)
    with pytest.raises(TypeError):
        RemotePartitionDeleteMetadata(**delete_kwargs(broker_id=True))
    with pytest.raises(TypeError):
        segment(start_offset=100.0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"start_offset": -1, "end_offset": 10}, "start_offset"),
        ({"start_offset": 100, "end_offset": 99}, "end_offset"),
        ({"segment_leader_epochs": {}}, "segment_leader_epochs"),
        ({"segment_size_in_bytes": -1}, "segment_size_in_bytes"),
        ({"tiered_epoch": -1}, "tiered_epoch"),
    ],
)
def test_segment_metadata_rejects_invalid_values(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        segment(**changes)


def test_update_to_copy_segment_started_is_rejected() -> None:
    with pytest.raises(ValueError, match="COPY_SEGMENT_STARTED"):
        update(state=SEG.COPY_SEGMENT_STARTED)
    for state in (
        SEG.COPY_SEGMENT_FINISHED,
        SEG.DELETE_SEGMENT_STARTED,
        SEG.DELETE_SEGMENT_FINISHED,
    ):
        assert update(state=state).state is state


def test_segment_leader_epochs_are_copied_and_sorted() -> None:
    epochs = {7: 190, 0: 100, 3: 150}
    m = segment(segment_leader_epochs=epochs)

    assert list(m.segment_leader_epochs.items()) == [(0, 100), (3, 150), (7, 190)]
    assert m.segment_leader_epochs is not epochs
    epochs[9] = 199
    del epochs[0]
    assert m.segment_leader_epochs == {0: 100, 3: 150, 7: 190}


# -- derived metadata ----------------------------------------------------------------------------


def test_create_with_updates_applies_the_update() -> None:
    cm = CustomMetadata(b"bucket-a")
    m = segment(custom_metadata=cm, tiered_epoch=2)
    u = update(state=SEG.COPY_SEGMENT_FINISHED, event_timestamp_ms=42, broker_id=9)

    updated = m.create_with_updates(u)

    assert updated.state is SEG.COPY_SEGMENT_FINISHED
    assert updated.event_timestamp_ms == 42
    assert updated.broker_id == 9
    assert updated.custom_metadata == cm  # None in the update keeps the segment's
    # Everything else is kept, and the original is unchanged.
    assert updated == segment(
        custom_metadata=cm,
        tiered_epoch=2,
        state=SEG.COPY_SEGMENT_FINISHED,
        event_timestamp_ms=42,
        broker_id=9,
    )
    assert m.state is SEG.COPY_SEGMENT_STARTED
    assert m.broker_id == 1


def test_create_with_updates_replaces_custom_metadata_when_given() -> None:
    m = segment(custom_metadata=CustomMetadata(b"old"))

    assert m.create_with_updates(
        update(custom_metadata=CustomMetadata(b"new"))
    ).custom_metadata == CustomMetadata(b"new")
    assert m.create_with_updates(
        update(custom_metadata=CustomMetadata(b""))
    ).custom_metadata == CustomMetadata(b"")
    assert segment().create_with_updates(update()).custom_metadata is None


def test_create_with_updates_rejects_another_segments_update() -> None:
    other = RemoteLogSegmentId.generate_new(TP)
    with pytest.raises(ValueError, match="segment"):
        segment().create_with_updates(update(remote_log_segment_id=other))
    with pytest.raises(TypeError):
        segment().create_with_updates(None)  # type: ignore[arg-type]


def test_create_with_custom_metadata() -> None:
    m = segment(state=SEG.COPY_SEGMENT_FINISHED)

    with_cm = m.create_with_custom_metadata(CustomMetadata(b"\x01\x02"))

    assert with_cm.custom_metadata == CustomMetadata(b"\x01\x02")
    assert with_cm == segment(
        state=SEG.COPY_SEGMENT_FINISHED, custom_metadata=CustomMetadata(b"\x01\x02")
    )
    assert m.custom_metadata is None
    with pytest.raises(TypeError):
        m.create_with_custom_metadata(None)  # type: ignore[arg-type]


def test_leader_epoch_end_offset() -> None:
    m = segment(start_offset=100, end_offset=200, segment_leader_epochs={5: 180, 0: 100, 3: 150})

    assert m.leader_epoch_end_offset(0) == 149
    assert m.leader_epoch_end_offset(3) == 179
    assert m.leader_epoch_end_offset(5) == 200  # the last epoch ends with the segment
    single = segment(start_offset=10, end_offset=20, segment_leader_epochs={4: 10})
    assert single.leader_epoch_end_offset(4) == 20


def test_generate_new_gives_distinct_ids() -> None:
    ids = [RemoteLogSegmentId.generate_new(TP) for _ in range(1000)]

    assert len({i.id for i in ids}) == 1000
    assert len(set(ids)) == 1000
    assert all(i.topic_id_partition == TP for i in ids)
    assert all(i.id.version == 4 for i in ids)


def test_values_are_hashable_and_equal_by_value() -> None:
    tp_copy = TopicIdPartition(TP.topic_id, "orders", 3)
    assert tp_copy == TP
    assert hash(tp_copy) == hash(TP)
    assert TopicIdPartition(TP.topic_id, "orders", 4) != TP
    assert RemoteLogSegmentId(tp_copy, SEGMENT_ID.id) == SEGMENT_ID
    assert CustomMetadata(b"x") == CustomMetadata(b"x")
    assert CustomMetadata(b"") != CustomMetadata(b"x")

    # Equal whatever the order the epochs were given in.
    a = segment(segment_leader_epochs={0: 100, 3: 150}, custom_metadata=CustomMetadata(b"c"))
    b = segment(segment_leader_epochs={3: 150, 0: 100}, custom_metadata=CustomMetadata(b"c"))
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    different = [
        segment(segment_leader_epochs={0: 100, 3: 151}, custom_metadata=CustomMetadata(b"c")),
        segment(segment_leader_epochs={0: 100, 3: 150}, custom_metadata=CustomMetadata(b"d")),
        segment(
            segment_leader_epochs={0: 100, 3: 150},
            custom_metadata=CustomMetadata(b"c"),
            state=SEG.COPY_SEGMENT_FINISHED,
        ),
    ]
    assert all(d != a for d in different)
    assert len({a, *different}) == 4

    assert update() == update()
    assert len({update(), update(), update(state=SEG.DELETE_SEGMENT_STARTED)}) == 2
    d1 = RemotePartitionDeleteMetadata(**delete_kwargs())
    d2 = RemotePartitionDeleteMetadata(**delete_kwargs())
    assert d1 == d2
    assert len({d1, d2, RemotePartitionDeleteMetadata(**delete_kwargs(broker_id=5))}) == 2


def test_values_are_frozen() -> None:
    m = segment()
    with pytest.raises(AttributeError):
        m.start_offset = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        update().state = SEG.DELETE_SEGMENT_STARTED  # type: ignore[misc]
    with pytest.raises(AttributeError):
        TP.partition = 1  # type: ignore[misc]


# -- serde ---------------------------------------------------------------------------------------

CUSTOM_METADATA_VALUES = [None, CustomMetadata(b""), CustomMetadata(b"\x00\x01\x02\xfe\xff")]
CM_IDS = ["none", "empty", "bytes"]


@pytest.mark.parametrize("cm", CUSTOM_METADATA_VALUES, ids=CM_IDS)
@pytest.mark.parametrize("state", list(SEG), ids=[s.name for s in SEG])
def test_segment_metadata_round_trips(
    cm: CustomMetadata | None, state: RemoteLogSegmentState
) -> None:
    m = segment(custom_metadata=cm, state=state, tiered_epoch=3)

    decoded = serde.decode_segment_metadata(serde.encode_segment_metadata(m))

    assert decoded == m
    assert decoded.custom_metadata == cm
    assert (decoded.custom_metadata is None) is (cm is None)
    assert list(decoded.segment_leader_epochs) == [0, 3, 5]


def test_custom_metadata_none_empty_and_bytes_encode_distinctly() -> None:
    segments = [
        serde.encode_segment_metadata(segment(custom_metadata=cm)) for cm in CUSTOM_METADATA_VALUES
    ]
    assert len(set(segments)) == 3
    assert [
        serde.decode_segment_metadata(s).custom_metadata for s in segments
    ] == CUSTOM_METADATA_VALUES


def test_states_map_to_protobuf_ids_past_unspecified() -> None:
    assert [serde.segment_state_to_proto(s) for s in SEG] == [1, 2, 3, 4]
    assert [serde.delete_state_to_proto(s) for s in DEL] == [1, 2, 3]
    assert all(serde.segment_state_from_proto(serde.segment_state_to_proto(s)) is s for s in SEG)
    assert all(serde.delete_state_from_proto(serde.delete_state_to_proto(s)) is s for s in DEL)
    with pytest.raises(ValueError):
        serde.segment_state_from_proto(0)
    with pytest.raises(ValueError):
        serde.delete_state_from_proto(0)


def test_a_record_without_a_state_is_rejected() -> None:
    record = serde.segment_metadata_to_proto(segment())
    record.ClearField("state")
    with pytest.raises(ValueError, match="state"):
        serde.decode_segment_metadata(record.SerializeToString())


# -- serde property tests ------------------------------------------------------------------------

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
NON_NEGATIVE_INT32 = st.integers(0, 2**31 - 1)
NON_NEGATIVE_INT64 = st.integers(0, 2**63 - 1)

topic_id_partitions = st.builds(
    TopicIdPartition,
    topic_id=st.uuids(),
    topic=st.text(st.characters(codec="utf-8"), max_size=40),
    partition=NON_NEGATIVE_INT32,
)
segment_ids = st.builds(RemoteLogSegmentId, topic_id_partition=topic_id_partitions, id=st.uuids())
custom_metadatas = st.none() | st.builds(CustomMetadata, st.binary(max_size=300))


@st.composite
def segment_metadatas(draw: st.DrawFn) -> RemoteLogSegmentMetadata:
    start = draw(NON_NEGATIVE_INT64)
    end = draw(st.integers(start, 2**63 - 1))
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=draw(segment_ids),
        start_offset=start,
        end_offset=end,
        max_timestamp_ms=draw(INT64),
        broker_id=draw(INT32),
        event_timestamp_ms=draw(INT64),
        segment_size_in_bytes=draw(NON_NEGATIVE_INT64),
        segment_leader_epochs=draw(
            st.dictionaries(NON_NEGATIVE_INT32, INT64, min_size=1, max_size=12)
        ),
        state=draw(st.sampled_from(SEG)),
        custom_metadata=draw(custom_metadatas),
        tiered_epoch=draw(NON_NEGATIVE_INT32),
    )


@given(segment_metadatas())
def test_any_segment_metadata_round_trips(m: RemoteLogSegmentMetadata) -> None:
    data = serde.encode_segment_metadata(m)
    decoded = serde.decode_segment_metadata(data)

    assert decoded == m
    assert hash(decoded) == hash(m)
    assert decoded.custom_metadata == m.custom_metadata
    assert list(decoded.segment_leader_epochs) == sorted(m.segment_leader_epochs)
    assert serde.encode_segment_metadata(decoded) == data  # deterministic


@given(segment_metadatas(), custom_metadatas)
def test_create_with_updates_keeps_or_replaces_custom_metadata(
    m: RemoteLogSegmentMetadata, cm: CustomMetadata | None
) -> None:
    u = update(remote_log_segment_id=m.remote_log_segment_id, custom_metadata=cm)

    updated = m.create_with_updates(u)

    assert updated.custom_metadata == (m.custom_metadata if cm is None else cm)
    assert (updated.start_offset, updated.end_offset) == (m.start_offset, m.end_offset)
    assert updated.segment_leader_epochs == m.segment_leader_epochs
    assert updated.tiered_epoch == m.tiered_epoch
    assert updated.state is u.state


def test_delete_outcome_adds_and_counts() -> None:
    a = DeleteOutcome(1, 2, ("k1",), "k1: OSError")
    b = DeleteOutcome(10, 20, ("k2", "k3"))
    assert a + b == DeleteOutcome(11, 22, ("k1", "k2", "k3"), "k1: OSError")
    assert (a + b).done == 33 and (a + b).failed == 3
    assert DeleteOutcome() + b == b
    assert sum([a, b], DeleteOutcome()) == a + b


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"deleted": -1}, ValueError),
        ({"missing": True}, TypeError),
        ({"failed_handles": ["k"]}, TypeError),
        ({"failed_handles": None}, TypeError),
    ],
)
def test_delete_outcome_rejects_invalid_values(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        DeleteOutcome(**kwargs)
