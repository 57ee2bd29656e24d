"""The verify's checker (controller.remote_verify) and the periodic verify
(controller.periodic_verify) over the fsspec RemoteStorageManager (local, memory and S3) and a
fake RLMM; the plugin's inspection capability itself."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from controller.config import VERIFY_INTERVAL_KEY, verify_interval_ms
from controller.periodic_verify import PeriodicVerify, periodic_verify
from controller.remote_verify import (
    RemoteVerify,
    SegmentVerifier,
    VerifyUnsupportedError,
    inspector_of,
    partitions_of,
)
from tests.support.flat_rsm import CopyOnlyRsm
from tests.support.polling import poll_until
from tests.tiered.rsm.test_rsm_fsspec import (  # noqa: F401 - the fixture
    LOG,
    manager,
    segment_data,
    segment_meta,
)
from tiered.api import (
    IndexType,
    RemoteLogMetadataManager,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    RemoteStorageManager,
    TopicIdPartition,
)
from tiered.cluster.model import MetadataImage, TopicMetadata
from tiered.errors import ErrorCode, TieredError
from tiered.rsm import layout
from tiered.rsm.fsspec_rsm import FsspecRemoteStorageManager

FINISHED = RemoteLogSegmentState.COPY_SEGMENT_FINISHED
TOPIC_ID = uuid.UUID("00000000-0000-4000-8000-000000000001")


class FakeRlmm:
    """The RLMM reads the verify makes: each partition's segments, in order; ``then`` replaces
    a partition's segments after its next listing (a segment deleted while it is checked)."""

    def __init__(self) -> None:
        self.segments: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]] = {}
        self.then: dict[TopicIdPartition, list[RemoteLogSegmentMetadata]] = {}
        self.listings = 0

    def list_remote_log_segments(
        self, topic_id_partition: TopicIdPartition, leader_epoch: int | None = None
    ) -> Iterator[RemoteLogSegmentMetadata]:
        self.listings += 1
        if topic_id_partition not in self.segments:
            raise RemoteResourceNotFoundException(f"no metadata for {topic_id_partition}")
        listed = list(self.segments[topic_id_partition])
        if topic_id_partition in self.then:
            self.segments[topic_id_partition] = self.then.pop(topic_id_partition)
        return iter(listed)

    def remote_log_segment_ids(self, topic_id_partition: TopicIdPartition) -> set[uuid.UUID]:
        """As the ABC's default: the ids of the listing."""
        return {
            m.remote_log_segment_id.id for m in self.list_remote_log_segments(topic_id_partition)
        }


def _tp(partition: int = 0, topic: str = "orders") -> TopicIdPartition:
    return TopicIdPartition(TOPIC_ID, topic, partition)


def _copied(
    storage: FsspecRemoteStorageManager,
    tmp_path: Path,
    tp: TopicIdPartition,
    start_offset: int,
    state: RemoteLogSegmentState = FINISHED,
) -> RemoteLogSegmentMetadata:
    metadata = segment_meta(tp, start_offset=start_offset)
    storage.copy_log_segment_data(metadata, segment_data(tmp_path))
    return replace(metadata, state=state)


def _remove(storage: FsspecRemoteStorageManager, key: str) -> None:
    # By hand, as an operator's mistake or a bucket lifecycle rule would.
    storage._fs.rm_file(storage._path(key))


def _key(metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
    return layout.object_key(layout.segment_prefix(metadata), suffix)


def _one_segment(
    storage: FsspecRemoteStorageManager, tmp_path: Path
) -> tuple[TopicIdPartition, FakeRlmm, RemoteLogSegmentMetadata]:
    """A partition whose RLMM lists one finished segment, copied whole."""
    tp, rlmm = _tp(), FakeRlmm()
    metadata = _copied(storage, tmp_path, tp, 0)
    rlmm.segments[tp] = [metadata]
    return tp, rlmm, metadata


def _verifier(rlmm: FakeRlmm, storage: RemoteStorageManager) -> SegmentVerifier:
    return SegmentVerifier(cast(RemoteLogMetadataManager, rlmm), storage)


# -- the plugin's capability ----------------------------------------------------------------


def test_a_whole_segment_has_nothing_missing_and_its_data_size(
    manager: FsspecRemoteStorageManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    metadata = _copied(manager, tmp_path, _tp(), 100)
    held = manager.segment_objects(metadata)
    assert held.missing == ()
    assert held.data_key == _key(metadata, "log")
    assert held.data_size_bytes == len(LOG)


def test_each_removed_object_is_named_missing(
    manager: FsspecRemoteStorageManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    metadata = _copied(manager, tmp_path, _tp(), 100)
    _remove(manager, _key(metadata, IndexType.OFFSET.value))
    assert manager.segment_objects(metadata).missing == (_key(metadata, "index"),)
    _remove(manager, _key(metadata, "log"))
    held = manager.segment_objects(metadata)
    assert held.missing == (_key(metadata, "log"), _key(metadata, "index"))
    assert held.data_size_bytes is None


def test_optional_indexes_are_not_required(
    manager: FsspecRemoteStorageManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    metadata = segment_meta(_tp(), start_offset=100)
    data = segment_data(tmp_path, optional=False)
    manager.copy_log_segment_data(metadata, data)
    assert manager.segment_objects(metadata).missing == ()


def test_segment_objects_refuses_what_is_not_metadata(
    manager: FsspecRemoteStorageManager,  # noqa: F811
) -> None:
    with pytest.raises(TypeError, match="RemoteLogSegmentMetadata"):
        manager.segment_objects(cast(RemoteLogSegmentMetadata, "nope"))


# -- the checker ----------------------------------------------------------------------------


def test_verify_reports_the_segment_missing_an_object_with_its_fields(
    manager: FsspecRemoteStorageManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    tp = _tp(2)
    rlmm = FakeRlmm()
    segments = [_copied(manager, tmp_path, tp, start) for start in (0, 100, 200)]
    # A copy in progress is not promised yet: its absent objects are not data loss.
    unfinished = replace(
        segment_meta(tp, start_offset=300), state=RemoteLogSegmentState.COPY_SEGMENT_STARTED
    )
    rlmm.segments[tp] = [*segments, unfinished]
    _remove(manager, _key(segments[1], "timeindex"))

    report = _verifier(rlmm, manager).verify([tp, _tp(7)])  # 7: no remote metadata at all

    assert report.segments_checked == 3
    [missing] = report.missing
    broken = segments[1]
    assert (missing.topic, missing.partition) == ("orders", 2)
    assert missing.segment_id == broken.remote_log_segment_id.id
    assert missing.tiered_epoch == broken.tiered_epoch
    assert (missing.start_offset, missing.end_offset) == (100, broken.end_offset)
    assert missing.objects == (_key(broken, "timeindex"),)


def test_a_data_object_of_another_size_is_reported(
    manager: FsspecRemoteStorageManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    tp, rlmm, metadata = _one_segment(manager, tmp_path)
    rlmm.segments[tp] = [replace(metadata, segment_size_in_bytes=len(LOG) + 1)]
    [missing] = _verifier(rlmm, manager).verify([tp]).missing
    assert missing.objects == (_key(metadata, "log"),)


def test_a_segment_deleted_while_it_was_checked_is_not_reported(
    manager: FsspecRemoteStorageManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    tp, rlmm, metadata = _one_segment(manager, tmp_path)
    _remove(manager, _key(metadata, "log"))
    rlmm.then[tp] = [replace(metadata, state=RemoteLogSegmentState.DELETE_SEGMENT_STARTED)]
    report = _verifier(rlmm, manager).verify([tp])
    assert report.segments_checked == 1
    assert report.missing == ()


def _plain_storage(tmp_path: Path) -> CopyOnlyRsm:
    """A plugin with Kafka's API alone: no inspection capability."""
    return CopyOnlyRsm({"test.flat.dir": str(tmp_path / "flat")})


def _image(*topics: tuple[str, int]) -> MetadataImage:
    return MetadataImage(
        topics={
            name: TopicMetadata(name, uuid.uuid5(TOPIC_ID, name), (0,) * count)
            for name, count in topics
        }
    )


def test_a_plugin_without_the_capability_is_a_clear_error(tmp_path: Path) -> None:
    refusal = r"CopyOnlyRsm does not implement .*RemoteStorageInspector"
    with pytest.raises(VerifyUnsupportedError, match=refusal):
        inspector_of(_plain_storage(tmp_path))
    verify = RemoteVerify(
        _verifier(FakeRlmm(), _plain_storage(tmp_path)),
        lambda topic: partitions_of(_image(("t", 1))),
    )
    with pytest.raises(TieredError, match="RemoteStorageInspector") as raised:
        verify.verify(None)
    assert raised.value.code is ErrorCode.INVALID_REQUEST


def test_an_unknown_topic_is_named_and_nothing_is_read(tmp_path: Path) -> None:
    rlmm = FakeRlmm()
    image = _image(("orders", 2), ("audit", 1))
    verify = RemoteVerify(
        _verifier(rlmm, _plain_storage(tmp_path)), lambda topic: partitions_of(image, topic)
    )
    with pytest.raises(TieredError, match="'nope' does not exist") as raised:
        verify.verify("nope")
    assert raised.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert rlmm.listings == 0
    assert [(tp.topic, tp.partition) for tp in partitions_of(image)] == [
        ("audit", 0),
        ("orders", 0),
        ("orders", 1),
    ]


def test_a_controller_without_remote_storage_refuses_to_verify() -> None:
    verify = RemoteVerify(None, lambda topic: partitions_of(_image(("t", 1)), topic))
    with pytest.raises(TieredError, match="no remote storage settings") as raised:
        verify.verify(None)
    assert raised.value.code is ErrorCode.INVALID_REQUEST


# -- the periodic verify --------------------------------------------------------------------


class _CountingVerifier(SegmentVerifier):
    """Counts what each pass lists and checks."""

    def __init__(self, rlmm: FakeRlmm, storage: RemoteStorageManager) -> None:
        super().__init__(cast(RemoteLogMetadataManager, rlmm), storage)
        self.work = 0

    def finished_segments(self, tp: TopicIdPartition) -> list[RemoteLogSegmentMetadata]:
        self.work += 1
        return super().finished_segments(tp)

    def check(self, tp: TopicIdPartition, segments: object) -> list:  # type: ignore[override, type-arg]
        self.work += len(cast(list[RemoteLogSegmentMetadata], segments))
        return super().check(tp, cast(list[RemoteLogSegmentMetadata], segments))


def test_periodic_passes_are_bounded_and_resume_where_the_last_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = FsspecRemoteStorageManager(str(tmp_path / "remote"))
    rlmm = FakeRlmm()
    partitions = [_tp(p) for p in range(3)]
    for tp in partitions:
        rlmm.segments[tp] = [_copied(storage, tmp_path, tp, start) for start in range(0, 400, 100)]
    broken = rlmm.segments[partitions[1]][2]
    _remove(storage, _key(broken, "log"))
    verifier = _CountingVerifier(rlmm, storage)
    periodic = PeriodicVerify(verifier, lambda: list(partitions), 60_000, work_per_pass=5)

    caplog.set_level(logging.WARNING, logger="controller.periodic_verify")
    passes = 0
    while periodic._cursor is not None or passes == 0:  # one round
        verifier.work = 0
        periodic.run_pass()
        passes += 1
        # A listing counts one; a pass may finish the segment batch that crossed its share.
        assert verifier.work <= 5 + 1
    # 3 partitions x 4 segments at 5 units a pass (a listing counts one): several passes.
    assert passes >= 3
    gauges = periodic.gauges()
    assert (gauges.segments_checked, gauges.segments_missing) == (12, 1)

    for _ in range(passes):  # a second round: the same figures, the segment not logged again
        periodic.run_pass()
    assert (periodic.gauges().segments_checked, periodic.gauges().segments_missing) == (12, 1)
    logged = [r for r in caplog.records if str(broken.remote_log_segment_id.id) in r.getMessage()]
    assert len(logged) == 1
    assert "orders-1" in logged[0].getMessage()

    # Once the segment is gone from the metadata, it is no longer missing after a round.
    rlmm.segments[partitions[1]].remove(broken)
    for _ in range(passes):
        periodic.run_pass()
    assert periodic.gauges().segments_missing == 0
    assert periodic.gauges().segments_checked == 11


def test_the_periodic_verify_survives_a_failing_pass(tmp_path: Path) -> None:
    storage = FsspecRemoteStorageManager(str(tmp_path / "remote"))
    rlmm = FakeRlmm()
    tp = _tp()
    rlmm.segments[tp] = [_copied(storage, tmp_path, tp, 0)]
    _remove(storage, _key(rlmm.segments[tp][0], "index"))
    failures = threading.Semaphore(2)

    def partitions() -> list[TopicIdPartition]:
        if failures.acquire(blocking=False):
            raise RuntimeError("the image could not be read")
        return [tp]

    periodic = PeriodicVerify(_verifier(rlmm, storage), partitions, 10)
    periodic.start()
    try:
        poll_until(lambda: periodic.gauges().segments_missing == 1, 30, "the missing segment found")
    finally:
        periodic.stop()
    assert periodic.gauges().segments_checked == 1


def test_the_interval_key_is_off_by_default_and_bad_values_are_named() -> None:
    assert verify_interval_ms({}) == 0
    assert verify_interval_ms({VERIFY_INTERVAL_KEY: " 60000 "}) == 60000
    for bad in ("-1", "soon", str(2**31)):
        with pytest.raises(ValueError, match=rf"{VERIFY_INTERVAL_KEY}=.*0\.\.2147483647"):
            verify_interval_ms({VERIFY_INTERVAL_KEY: bad})


def test_the_periodic_verify_is_off_without_interval_settings_or_capability(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    storage = FsspecRemoteStorageManager(str(tmp_path / "remote"))
    assert periodic_verify(_verifier(FakeRlmm(), storage), list, 0) is None
    assert periodic_verify(None, list, 1000) is None
    caplog.set_level(logging.WARNING, logger="controller.periodic_verify")
    assert periodic_verify(_verifier(FakeRlmm(), _plain_storage(tmp_path)), list, 1000) is None
    assert "CopyOnlyRsm does not implement" in caplog.text
    assert isinstance(periodic_verify(_verifier(FakeRlmm(), storage), list, 1000), PeriodicVerify)
