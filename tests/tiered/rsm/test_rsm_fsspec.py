"""The fsspec RemoteStorageManager on a local directory, on fsspec's memory filesystem and on S3
(a real moto server over HTTP)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from tiered import rsm
from tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.rsm import layout
from tiered.rsm.custom_metadata import SegmentLocation
from tiered.rsm.fsspec_rsm import FsspecRemoteStorageManager

TOPIC_ID = uuid.UUID("9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d")
SEGMENT_ID = uuid.UUID("1b4e28ba-2ca1-11d3-9e6d-0800200c9a66")
TP = TopicIdPartition(topic_id=TOPIC_ID, topic="orders", partition=3)

LOG = bytes(range(256)) * 4  # 1024 distinct-ish bytes
CONTENTS = {
    IndexType.OFFSET: b"offset-index-bytes",
    IndexType.TIMESTAMP: b"time-index-bytes!",
    IndexType.LEADER_EPOCH: b"0\n1\n0 0\n",
    IndexType.PRODUCER_SNAPSHOT: b"producer-snapshot",
    IndexType.TRANSACTION: b"txn",
}


def _clear_memory_fs() -> None:
    MemoryFileSystem.store.clear()
    MemoryFileSystem.pseudo_dirs.clear()
    MemoryFileSystem.pseudo_dirs.append("")


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def manager(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FsspecRemoteStorageManager]:
    config = {"remote.storage.delete.threads": "4"}
    if request.param == "local":
        config["remote.storage.root"] = str(tmp_path / "remote")
    elif request.param == "memory":
        _clear_memory_fs()
        config["remote.storage.root"] = "memory://rsm-test"
    else:
        config = request.getfixturevalue("s3_store").config(**config)
    with rsm.create(config) as m:
        yield m
    if request.param == "memory":
        _clear_memory_fs()


def segment_meta(
    tp: TopicIdPartition = TP,
    *,
    start_offset: int = 100,
    tiered_epoch: int = 0,
    segment_id: uuid.UUID | None = None,
) -> RemoteLogSegmentMetadata:
    seg_id = RemoteLogSegmentId(topic_id_partition=tp, id=segment_id or uuid.uuid4())
    return RemoteLogSegmentMetadata(
        remote_log_segment_id=seg_id,
        start_offset=start_offset,
        end_offset=start_offset + 99,
        max_timestamp_ms=1_700_000_000_000,
        broker_id=1,
        event_timestamp_ms=1_700_000_000_001,
        segment_size_in_bytes=len(LOG),
        segment_leader_epochs={0: start_offset},
        tiered_epoch=tiered_epoch,
    )


def segment_data(tmp_path: Path, *, optional: bool = True, name: str = "seg") -> LogSegmentData:
    d = tmp_path / f"local-{name}-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    paths = {}
    for label, content in [
        ("log", LOG),
        ("index", CONTENTS[IndexType.OFFSET]),
        ("timeindex", CONTENTS[IndexType.TIMESTAMP]),
        ("snapshot", CONTENTS[IndexType.PRODUCER_SNAPSHOT]),
        ("txnindex", CONTENTS[IndexType.TRANSACTION]),
    ]:
        p = d / f"00000000000000000100.{label}"
        p.write_bytes(content)
        paths[label] = str(p)
    return LogSegmentData(
        log_segment=paths["log"],
        offset_index=paths["index"],
        time_index=paths["timeindex"],
        leader_epoch_index=CONTENTS[IndexType.LEADER_EPOCH],
        producer_snapshot_index=paths["snapshot"] if optional else None,
        transaction_index=paths["txnindex"] if optional else None,
    )


def expected_keys(meta: RemoteLogSegmentMetadata, *, optional: bool = True) -> list[str]:
    suffixes = ["log", "index", "timeindex", "epochs"]
    if optional:
        suffixes += ["snapshot", "txnindex"]
    prefix = layout.segment_prefix(meta)
    return sorted(f"{prefix}.{s}" for s in suffixes)


# -- layout -------------------------------------------------------------------------------------


def test_layout_keys_match_design() -> None:
    meta = segment_meta(start_offset=1234, tiered_epoch=7, segment_id=SEGMENT_ID)
    prefix = layout.segment_prefix(meta)
    assert prefix == (
        "orders-9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d/3/te=7/"
        "00000000000000001234-1b4e28ba-2ca1-11d3-9e6d-0800200c9a66"
    )
    assert layout.object_key(prefix, "log") == prefix + ".log"
    assert layout.object_key(prefix, IndexType.TIMESTAMP.value) == prefix + ".timeindex"
    assert layout.partition_prefix(TP) == "orders-9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d/3"
    assert layout.tiered_epoch_prefix(TP, 7) == "orders-9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d/3/te=7"
    with pytest.raises(ValueError, match="unknown object suffix"):
        layout.object_key(prefix, "tmp")
    with pytest.raises(ValueError, match="tiered_epoch"):
        layout.tiered_epoch_prefix(TP, -1)


def test_parse_tiered_epoch_dir() -> None:
    assert layout.parse_tiered_epoch_dir("/root/t-x/0/te=12") == 12
    assert layout.parse_tiered_epoch_dir("te=0/") == 0
    for bad in ["te=", "te=01", "te=-1", "te=1.tmp", "x=1", "00000000000000000100-a.log"]:
        assert layout.parse_tiered_epoch_dir(bad) is None, bad


def test_objects_are_stored_under_the_design_keys(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    meta = segment_meta(start_offset=5, tiered_epoch=2, segment_id=SEGMENT_ID)
    manager.copy_log_segment_data(meta, segment_data(tmp_path))
    base = "orders-9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d/3/te=2/"
    name = "00000000000000000005-1b4e28ba-2ca1-11d3-9e6d-0800200c9a66"
    assert manager.object_keys(TP) == sorted(
        base + name + s
        for s in (".log", ".index", ".timeindex", ".epochs", ".snapshot", ".txnindex")
    )
    assert manager.list_tiered_epochs(TP) == [2]


def test_optional_indexes_are_stored_only_when_present(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    meta = segment_meta()
    manager.copy_log_segment_data(meta, segment_data(tmp_path, optional=False))
    assert manager.object_keys(TP) == expected_keys(meta, optional=False)
    for index_type in (IndexType.PRODUCER_SNAPSHOT, IndexType.TRANSACTION):
        with pytest.raises(RemoteResourceNotFoundException):
            manager.fetch_index(meta, index_type)


def test_the_objects_every_copy_writes_are_named_from_the_metadata(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    metas = [segment_meta(start_offset=n * 10, segment_id=uuid.uuid4()) for n in range(2)]
    for meta, optional in zip(metas, (False, True), strict=True):
        manager.copy_log_segment_data(meta, segment_data(tmp_path, optional=optional))
    handles = manager.object_handles_of([*metas, metas[0]])  # each handle once
    assert sorted(handles) == sorted(
        expected_keys(metas[0], optional=False) + expected_keys(metas[1], optional=False)
    )
    assert set(handles) < set(manager.object_keys(TP))  # the optional indexes: the listing's
    assert manager.object_handles_of([]) == []
    with pytest.raises(TypeError, match="RemoteLogSegmentMetadata"):
        manager.object_handles_of(["orders-0"])  # type: ignore[list-item]


# -- copy and fetch -----------------------------------------------------------------------------


def test_copy_then_fetch_full_and_ranged(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    meta = segment_meta()
    manager.copy_log_segment_data(meta, segment_data(tmp_path))
    assert manager.fetch_log_segment(meta, 0) == LOG
    assert manager.fetch_log_segment(meta, 0, None) == LOG
    assert manager.fetch_log_segment(meta, 0, 0) == LOG[0:1]
    assert manager.fetch_log_segment(meta, 3, 7) == LOG[3:8]  # inclusive end
    assert manager.fetch_log_segment(meta, 1000) == LOG[1000:]
    assert manager.fetch_log_segment(meta, 1020, 5000) == LOG[1020:]
    assert manager.fetch_log_segment(meta, len(LOG) - 1, len(LOG) - 1) == LOG[-1:]
    assert manager.fetch_log_segment(meta, len(LOG)) == b""
    assert manager.fetch_log_segment(meta, len(LOG) + 10, len(LOG) + 20) == b""


def test_fetch_rejects_bad_positions(manager: FsspecRemoteStorageManager, tmp_path: Path) -> None:
    meta = segment_meta()
    manager.copy_log_segment_data(meta, segment_data(tmp_path))
    with pytest.raises(ValueError, match="start_position"):
        manager.fetch_log_segment(meta, -1)
    with pytest.raises(ValueError, match="end_position"):
        manager.fetch_log_segment(meta, 0, -1)
    with pytest.raises(ValueError, match="less than start_position"):
        manager.fetch_log_segment(meta, 10, 9)
    with pytest.raises(TypeError):
        manager.fetch_log_segment(meta, True)


@pytest.mark.parametrize("index_type", list(IndexType))
def test_fetch_index_of_each_type(
    manager: FsspecRemoteStorageManager, tmp_path: Path, index_type: IndexType
) -> None:
    meta = segment_meta()
    manager.copy_log_segment_data(meta, segment_data(tmp_path))
    assert manager.fetch_index(meta, index_type) == CONTENTS[index_type]


def test_fetch_of_unknown_segment_is_not_found(manager: FsspecRemoteStorageManager) -> None:
    meta = segment_meta()
    with pytest.raises(RemoteResourceNotFoundException, match=r"\.log"):
        manager.fetch_log_segment(meta, 0)
    with pytest.raises(RemoteResourceNotFoundException, match=r"\.index"):
        manager.fetch_index(meta, IndexType.OFFSET)


def test_other_filesystem_errors_are_remote_storage_exceptions(
    manager: FsspecRemoteStorageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    meta = segment_meta()
    manager.copy_log_segment_data(meta, segment_data(tmp_path))

    def broken(*args: Any, **kwargs: Any) -> bytes:
        raise PermissionError("access denied")

    monkeypatch.setattr(manager._fs, "cat_file", broken)
    with pytest.raises(RemoteStorageException, match="access denied") as info:
        manager.fetch_log_segment(meta, 0)
    assert not isinstance(info.value, RemoteResourceNotFoundException)
    assert isinstance(info.value.__cause__, PermissionError)


# -- custom metadata ----------------------------------------------------------------------------


def test_custom_metadata_round_trip_size_and_byte_count(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    topic = "payments.eu-west-1.card-authorizations-v2"[:40]
    assert len(topic) == 40
    tp = TopicIdPartition(topic_id=uuid.uuid4(), topic=topic, partition=117)
    meta = segment_meta(tp, start_offset=9_876_543_210, tiered_epoch=3)
    custom = manager.copy_log_segment_data(meta, segment_data(tmp_path))
    assert isinstance(custom, CustomMetadata)
    assert len(custom) < 128
    # 1 version + 2 (1,087 bytes) + 1 (tiered epoch) + 5 (10-digit offset) + 16: no topic name
    assert len(custom) == 25

    location = rsm.decode_custom_metadata(custom, tp)
    assert location.topic_id_partition == tp
    assert location.tiered_epoch == 3
    assert location.start_offset == 9_876_543_210
    assert location.segment_id == meta.remote_log_segment_id.id
    assert location.prefix == layout.segment_prefix(meta)

    keys = manager.object_keys(tp)
    assert keys == expected_keys(meta)
    stored = sum(manager._fs.size(manager._path(k)) for k in keys)
    assert location.total_bytes == stored
    assert stored == len(LOG) + sum(len(c) for c in CONTENTS.values())
    assert rsm.decode_custom_metadata(custom.value, tp) == location  # raw bytes accepted too
    # The documented figure: the same segment at 1 GiB takes 28 bytes.
    gib = SegmentLocation(
        topic_id_partition=tp,
        tiered_epoch=3,
        start_offset=9_876_543_210,
        segment_id=location.segment_id,
        total_bytes=2**30,
    )
    assert len(rsm.encode_custom_metadata(gib)) == 28
    # A long topic name changes nothing. (200, not Kafka's 249: "{topic}-{topic_id}" must also
    # fit a local file system's 255-byte name limit.)
    longest = TopicIdPartition(topic_id=uuid.uuid4(), topic="t" * 200, partition=117)
    long_meta = segment_meta(longest, start_offset=9_876_543_210, tiered_epoch=3)
    assert len(manager.copy_log_segment_data(long_meta, segment_data(tmp_path)) or b"") == 25


def test_custom_metadata_encoding_round_trips_large_values() -> None:
    location = SegmentLocation(
        topic_id_partition=TopicIdPartition(topic_id=TOPIC_ID, topic="tøpic", partition=2**31 - 1),
        tiered_epoch=2**31 - 1,
        start_offset=2**63 - 1,
        segment_id=SEGMENT_ID,
        total_bytes=2**63 - 1,
    )
    encoded = rsm.encode_custom_metadata(location)
    assert len(encoded) == 40  # the documented maximum
    assert rsm.decode_custom_metadata(encoded, location.topic_id_partition) == location


def test_decode_rejects_foreign_or_damaged_metadata(tmp_path: Path) -> None:
    good = rsm.encode_custom_metadata(
        SegmentLocation(
            topic_id_partition=TP,
            tiered_epoch=0,
            start_offset=100,
            segment_id=SEGMENT_ID,
            total_bytes=5000,
        )
    ).value
    with pytest.raises(ValueError, match="version"):
        rsm.decode_custom_metadata(b"\x02" + good[1:], TP)
    with pytest.raises(ValueError, match="truncated"):
        rsm.decode_custom_metadata(good[:-1], TP)
    with pytest.raises(ValueError, match="trailing"):
        rsm.decode_custom_metadata(good + b"\x00", TP)
    with pytest.raises(ValueError, match="truncated"):
        rsm.decode_custom_metadata(b"", TP)


# -- failed uploads -----------------------------------------------------------------------------


def test_missing_local_file_fails_the_copy_and_leaves_nothing(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    meta = segment_meta()
    data = segment_data(tmp_path)
    broken = LogSegmentData(
        log_segment=data.log_segment,
        offset_index=data.offset_index,
        time_index=str(tmp_path / "does-not-exist.timeindex"),
        leader_epoch_index=data.leader_epoch_index,
    )
    with pytest.raises(RemoteStorageException, match=str(meta.remote_log_segment_id)) as info:
        manager.copy_log_segment_data(meta, broken)
    assert "does-not-exist.timeindex" in str(info.value)
    assert manager.object_keys(TP) == []


@pytest.mark.parametrize("failing_suffix", [".log", ".snapshot"])
def test_failure_mid_upload_removes_what_was_written(
    manager: FsspecRemoteStorageManager,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failing_suffix: str,
) -> None:
    other = segment_meta(start_offset=0)
    manager.copy_log_segment_data(other, segment_data(tmp_path))
    meta = segment_meta()
    real_put = manager._fs.put_file
    uploads: list[str] = []

    def flaky_put(lpath: str, rpath: str, *args: Any, **kwargs: Any) -> None:
        if lpath.endswith(failing_suffix):
            # Write part of it first, as a dying upload might.
            manager._fs.pipe_file(rpath, b"partial")
            uploads.append(rpath)
            raise ConnectionError("connection reset")
        real_put(lpath, rpath, *args, **kwargs)
        uploads.append(rpath)

    monkeypatch.setattr(manager._fs, "put_file", flaky_put)
    with pytest.raises(RemoteStorageException, match="connection reset") as info:
        manager.copy_log_segment_data(meta, segment_data(tmp_path))
    assert str(meta.remote_log_segment_id) in str(info.value)
    assert len(uploads) >= 2  # the failure came after other objects were written
    # Nothing of the failed segment, temporary names included; the other segment is intact.
    assert manager.object_keys(TP) == expected_keys(other)
    with pytest.raises(RemoteResourceNotFoundException):
        manager.fetch_log_segment(meta, 0)


def test_log_object_is_written_last(
    manager: FsspecRemoteStorageManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    order: list[str] = []
    real_put, real_pipe = manager._fs.put_file, manager._fs.pipe_file

    def put(lpath: str, rpath: str, *args: Any, **kwargs: Any) -> None:
        order.append(rpath)
        real_put(lpath, rpath, *args, **kwargs)

    def pipe(path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        order.append(path)
        real_pipe(path, value, *args, **kwargs)

    monkeypatch.setattr(manager._fs, "put_file", put)
    monkeypatch.setattr(manager._fs, "pipe_file", pipe)
    manager.copy_log_segment_data(segment_meta(), segment_data(tmp_path))
    assert len(order) == 6
    assert ".log" in order[-1].rsplit("/", 1)[-1]
    assert all(".log" not in p.rsplit("/", 1)[-1] for p in order[:-1])


def test_local_copy_writes_temporary_names_then_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with rsm.create({"remote.storage.root": str(tmp_path / "r")}) as manager:
        moves: list[tuple[str, str]] = []
        real_mv = manager._fs.mv

        def recording_mv(src: str, dst: str, *args: Any, **kwargs: Any) -> None:
            assert Path(src).exists() and not Path(dst).exists()
            moves.append((src, dst))
            real_mv(src, dst, *args, **kwargs)

        monkeypatch.setattr(manager._fs, "mv", recording_mv)
        meta = segment_meta()
        manager.copy_log_segment_data(meta, segment_data(tmp_path))
        assert sorted(manager._relative(dst) for _, dst in moves) == expected_keys(meta)
        assert all(src.startswith(dst + ".tmp-") for src, dst in moves)
        assert manager.object_keys(TP) == expected_keys(meta)  # no .tmp- leftovers
        on_disk = sorted(
            p.relative_to(tmp_path / "r").as_posix() for p in (tmp_path / "r").rglob("*.*")
        )
        assert on_disk == expected_keys(meta)


# -- deletes ------------------------------------------------------------------------------------


def test_delete_is_idempotent_and_fetch_after_delete_is_not_found(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    meta = segment_meta()
    keep = segment_meta(start_offset=200)
    manager.copy_log_segment_data(meta, segment_data(tmp_path))
    manager.copy_log_segment_data(keep, segment_data(tmp_path))
    manager.delete_log_segment_data(meta)
    assert manager.object_keys(TP) == expected_keys(keep)
    manager.delete_log_segment_data(meta)  # again: nothing left, no error
    manager.delete_log_segment_data(segment_meta(start_offset=999))  # never written
    assert manager.object_keys(TP) == expected_keys(keep)
    with pytest.raises(RemoteResourceNotFoundException):
        manager.fetch_log_segment(meta, 0)
    with pytest.raises(RemoteResourceNotFoundException):
        manager.fetch_index(meta, IndexType.TIMESTAMP)
    assert manager.fetch_log_segment(keep, 0, 9) == LOG[:10]


def test_list_tiered_epochs_of_unknown_partition_is_empty(
    manager: FsspecRemoteStorageManager,
) -> None:
    assert manager.list_tiered_epochs(TP) == []
    assert manager.object_keys(TP) == []


def test_closed_manager_refuses_work(tmp_path: Path) -> None:
    manager = rsm.create({"remote.storage.root": str(tmp_path / "r")})
    manager.close()
    manager.close()
    with pytest.raises(RemoteStorageException, match="closed"):
        manager.copy_log_segment_data(segment_meta(), segment_data(tmp_path))
    assert manager.object_keys(TP) == []


# -- config -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [{}, {"remote.storage.root": ""}, {"remote.storage.root": "   "}, {"remote.storage.root": 5}],
)
def test_missing_root_is_a_value_error_naming_the_key(config: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"remote\.storage\.root"):
        rsm.create(config)


def test_unknown_scheme_names_the_key_and_the_url() -> None:
    with pytest.raises(ValueError, match=r"remote\.storage\.root='nosuchfs://bucket/x'"):
        rsm.create({"remote.storage.root": "nosuchfs://bucket/x"})


@pytest.mark.parametrize("threads", ["zero", "0", "-3"])
def test_bad_delete_threads(tmp_path: Path, threads: str) -> None:
    with pytest.raises(ValueError, match=r"remote\.storage\.delete\.threads"):
        rsm.create({"remote.storage.root": str(tmp_path), "remote.storage.delete.threads": threads})


def test_plain_path_and_file_url_are_the_local_filesystem(tmp_path: Path) -> None:
    meta = segment_meta()
    with rsm.create({"remote.storage.root": str(tmp_path / "r")}) as by_path:
        by_path.copy_log_segment_data(meta, segment_data(tmp_path))
    with rsm.create({"remote.storage.root": (tmp_path / "r").as_uri()}) as by_url:
        assert by_url.fetch_log_segment(meta, 0, 3) == LOG[:4]
        assert by_url.root == (tmp_path / "r").as_uri()
    assert (tmp_path / "r" / f"{layout.segment_prefix(meta)}.log").read_bytes() == LOG


def test_a_plugin_class_is_loaded_by_name_and_bad_names_are_rejected(tmp_path: Path) -> None:
    from tests.support.scripted_rsm import ScriptedRsm

    key = "remote.log.storage.manager.class.name"
    plugin = rsm.create(
        {"remote.storage.root": str(tmp_path / "r"), key: "tests.support.scripted_rsm.ScriptedRsm"}
    )
    assert isinstance(plugin, ScriptedRsm)
    for bad in (
        "no.such.module.Rsm",
        "tiered.rsm.NoSuchClass",
        "tiered.config.RemoteLogDisablePolicy",
    ):
        with pytest.raises(ValueError, match=key):
            rsm.create({"remote.storage.root": str(tmp_path / "r"), key: bad})


def test_delete_removes_what_a_crashed_upload_left_behind(
    manager: FsspecRemoteStorageManager, tmp_path: Path
) -> None:
    meta = segment_meta(TP, start_offset=500, tiered_epoch=0)
    manager.copy_log_segment_data(meta, segment_data(tmp_path))
    # A process killed mid-write leaves its temporary object beside the real ones.
    leftover = layout.object_key(layout.segment_prefix(meta), "log") + ".tmp-0123abcd"
    with manager._fs.open(manager._path(leftover), "wb") as f:
        f.write(b"half a segment")
    other = segment_meta(TP, start_offset=600, tiered_epoch=0)
    manager.copy_log_segment_data(other, segment_data(tmp_path))
    manager.delete_log_segment_data(meta)
    assert manager.object_keys(TP) == expected_keys(other)  # the neighbour is untouched
