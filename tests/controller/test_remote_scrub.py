"""The scrub (controller.remote_scrub) over the fsspec RemoteStorageManager on local disk, a fake
RLMM and an in-process engine: what is an orphan and why, what never is (claimed by a record or
by an unfinished delete job, too young, outside the layout), ``execute``, and bad input; the
layout's key parsing and the plugin's listing."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest

from controller.jobs.spark_delete import EngineChoice
from controller.metrics import ControllerMetrics
from controller.remote_scrub import ClaimsOfJobs, RemoteObjectScrubber, RemoteScrub
from tests.controller.test_remote_verify import FakeRlmm, _copied
from tests.support.flat_rsm import CopyOnlyRsm
from tiered.api import (
    DeleteOutcome,
    RemoteLogMetadataManager,
    RemoteLogSegmentState,
    RemoteObjectDeleter,
    RemoteSegmentKey,
    RemoteStorageManager,
    TopicIdPartition,
)
from tiered.cluster.model import (
    MAX_SCRUB_EXAMPLES,
    DeleteJob,
    DeleteJobState,
    MetadataImage,
    OrphanReason,
    RemoteStorageScrub,
    TopicMetadata,
)
from tiered.errors import ErrorCode, TieredError
from tiered.rsm import layout
from tiered.rsm.fsspec_rsm import FsspecRemoteStorageManager

LIVE = uuid.UUID("00000000-0000-4000-8000-000000000001")  # the FakeRlmm tests' topic id
GONE = uuid.UUID("00000000-0000-4000-8000-0000000000ff")
NOW_MS = 2_000_000_000_000
HOUR_MS = 3_600_000


class InProcessEngine:
    """The bulk delete's engine, in this process: what it was asked to delete is kept."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    def choose(self, object_count: int) -> EngineChoice:
        return EngineChoice(False, f"in process for {object_count}")

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        handles: Sequence[str],
        engine: EngineChoice,
        on_progress: Callable[[Sequence[str]], None] | None = None,
    ) -> DeleteOutcome:
        self.deleted.extend(handles)
        return deleter.delete_objects(handles)


def _tp(topic_id: uuid.UUID = LIVE, partition: int = 0) -> TopicIdPartition:
    return TopicIdPartition(topic_id, "orders", partition)


def _age_all(root: Path, age_ms: int) -> None:
    """Every file under ``root`` last written ``age_ms`` before NOW_MS."""
    seconds = (NOW_MS - age_ms) / 1000
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (seconds, seconds))


def _drop(root: Path, key: str, age_ms: int = 2 * HOUR_MS) -> str:
    path = root / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left")
    seconds = (NOW_MS - age_ms) / 1000
    os.utime(path, (seconds, seconds))
    return key


def _segment_key(tp: TopicIdPartition, epoch: int, start: int, suffix: str = "log") -> str:
    prefix = layout.segment_prefix_of(tp, epoch, start, uuid.uuid4())
    return layout.object_key(prefix, suffix)


def _scrubber(
    rlmm: FakeRlmm, storage: RemoteStorageManager, engine: InProcessEngine | None = None
) -> RemoteObjectScrubber:
    return RemoteObjectScrubber(
        cast(RemoteLogMetadataManager, rlmm),
        storage,
        engine or InProcessEngine(),
        parallelism=4,
        clock_ms=lambda: NOW_MS,
    )


def _claims(
    deleting_below: Mapping[uuid.UUID, int] | None = None,
    deleted_below: Mapping[uuid.UUID, int] | None = None,
) -> Callable[[], ClaimsOfJobs]:
    return lambda: ClaimsOfJobs(frozenset({LIVE}), deleting_below or {}, deleted_below or {})


@pytest.fixture
def setup(
    tmp_path: Path,
) -> tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]]:
    """A root with two finished segments of a live partition recorded in the RLMM, an hour old
    and more; returns their keys."""
    root = tmp_path / "remote"
    storage = FsspecRemoteStorageManager(str(root))
    rlmm = FakeRlmm()
    tp = _tp()
    segments = [_copied(storage, tmp_path, tp, start) for start in (0, 100)]
    rlmm.segments[tp] = segments
    _age_all(root, 2 * HOUR_MS)
    keys = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return root, storage, rlmm, keys


def test_nothing_is_an_orphan_when_every_object_is_claimed(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    _, storage, rlmm, keys = setup
    report = _scrubber(rlmm, storage).scrub(0, False, _claims())
    assert report.scanned_objects == len(keys) > 0
    assert (report.orphan_objects, report.orphan_bytes, report.examples) == (0, 0, ())
    assert report.by_reason == dict.fromkeys(OrphanReason, 0)


def test_each_reason_is_given_to_its_orphans_and_only_to_them(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, keys = setup
    deleted_topic = [
        _drop(root, _segment_key(_tp(GONE), 0, 0)),
        _drop(root, f"orders-{GONE}/0/by-hand.bin"),
    ]
    unknown = [
        _drop(root, _segment_key(_tp(), 3, 500)),
        _drop(root, f"orders-{LIVE}/1/stray.txt"),
    ]
    deleted_segment = [_drop(root, _segment_key(_tp(), 1, 200, "index"))]
    foreign = _drop(root, "not-ours/readme.txt")

    report = _scrubber(rlmm, storage).scrub(HOUR_MS, False, _claims(deleted_below={LIVE: 2}))

    assert report.scanned_objects == len(keys) + 6
    assert report.by_reason == {
        OrphanReason.DELETED_TOPIC: 2,
        OrphanReason.UNKNOWN_SEGMENT: 2,
        OrphanReason.DELETED_SEGMENT: 1,
    }
    orphans = deleted_topic + unknown + deleted_segment
    assert sorted(report.examples) == sorted(orphans)
    assert foreign not in report.examples
    assert report.orphan_objects == 5
    assert report.orphan_bytes == 5 * len(b"left")
    assert report.deleted == 0
    assert all((root / key).exists() for key in [*keys, *orphans, foreign])


def test_an_object_younger_than_the_minimum_age_is_never_an_orphan(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, _ = setup
    young = _drop(root, _segment_key(_tp(GONE), 0, 0), age_ms=HOUR_MS - 1)
    old = _drop(root, _segment_key(_tp(GONE), 0, 100), age_ms=HOUR_MS)
    report = _scrubber(rlmm, storage).scrub(HOUR_MS, False, _claims())
    assert report.examples == (old,)
    assert young not in report.examples


def test_a_copy_in_flight_is_claimed_by_its_started_record(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
    tmp_path: Path,
) -> None:
    _, storage, rlmm, _ = setup
    tp = _tp()
    in_flight = _copied(storage, tmp_path, tp, 200, RemoteLogSegmentState.COPY_SEGMENT_STARTED)
    rlmm.segments[tp] = [*rlmm.segments[tp], in_flight]
    report = _scrubber(rlmm, storage).scrub(0, False, _claims())
    assert report.orphan_objects == 0
    # The same objects once its record is gone are orphans of an unknown segment.
    rlmm.segments[tp] = [s for s in rlmm.segments[tp] if s is not in_flight]
    report = _scrubber(rlmm, storage).scrub(0, False, _claims())
    assert report.by_reason[OrphanReason.UNKNOWN_SEGMENT] == report.orphan_objects > 0


def test_objects_an_unfinished_delete_job_will_delete_are_claimed_by_it(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, _ = setup
    below = _drop(root, _segment_key(_tp(GONE), 4, 0))
    at = _drop(root, _segment_key(_tp(GONE), 5, 0))
    report = _scrubber(rlmm, storage).scrub(0, False, _claims(deleting_below={GONE: 5}))
    assert report.examples == (at,)
    assert below not in report.examples


def test_claims_of_jobs_read_the_image() -> None:
    image = MetadataImage()
    image.put_topic(TopicMetadata("orders", LIVE, (1,)))
    for topic_id, epoch, state in [
        (LIVE, 2, DeleteJobState.DONE),
        (LIVE, 4, DeleteJobState.CANCELLED),
        (LIVE, 6, DeleteJobState.SCHEDULED),
        (GONE, 9, DeleteJobState.RUNNING),
    ]:
        job = DeleteJob("orders", topic_id, epoch, 1, state=state)
        image.delete_jobs[(topic_id, epoch)] = job
    claims = ClaimsOfJobs.of_image(image)
    assert claims.live == frozenset({LIVE})
    assert dict(claims.deleted_below) == {LIVE: 2}
    assert dict(claims.deleting_below) == {LIVE: 6, GONE: 9}


def test_examples_are_bounded(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, _ = setup
    for start in range(MAX_SCRUB_EXAMPLES + 5):
        _drop(root, _segment_key(_tp(GONE), 0, start))
    report = _scrubber(rlmm, storage).scrub(0, False, _claims())
    assert report.orphan_objects == MAX_SCRUB_EXAMPLES + 5
    assert len(report.examples) == MAX_SCRUB_EXAMPLES


def test_execute_deletes_exactly_the_orphans_through_the_engine(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, keys = setup
    orphans = {
        _drop(root, _segment_key(_tp(GONE), 0, 0)),
        _drop(root, _segment_key(_tp(), 3, 500)),
    }
    young = _drop(root, _segment_key(_tp(GONE), 0, 9), age_ms=0)
    engine = InProcessEngine()
    report = _scrubber(rlmm, storage, engine).scrub(HOUR_MS, True, _claims())
    assert set(engine.deleted) == orphans
    assert report.deleted == 2
    left = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert left == {*keys, young}


# -- RemoteScrub: what the admin call checks --------------------------------------------------


def _report() -> RemoteStorageScrub:
    return RemoteStorageScrub(1, 0, 0, dict.fromkeys(OrphanReason, 0), ())


class CountingScrubber:
    def __init__(self) -> None:
        self.calls = 0

    def scrub(
        self, min_age_ms: int, execute: bool, claims: Callable[[], ClaimsOfJobs]
    ) -> RemoteStorageScrub:
        self.calls += 1
        return _report()


@pytest.mark.parametrize("age", [-1, -HOUR_MS])
def test_a_negative_minimum_age_is_refused_and_nothing_is_listed(age: int) -> None:
    scrubber = CountingScrubber()
    scrub = RemoteScrub(cast(RemoteObjectScrubber, scrubber), _claims())
    with pytest.raises(TieredError) as e:
        scrub.scrub(age, True)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert "--min-age-ms must be >= 0" in e.value.message
    assert scrubber.calls == 0


def test_a_controller_without_remote_storage_refuses_to_scrub() -> None:
    with pytest.raises(TieredError) as e:
        RemoteScrub(None, _claims()).scrub(0, True)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert "remote.storage.root" in e.value.message


def test_a_standby_answers_not_controller_before_listing() -> None:
    def standby() -> ClaimsOfJobs:
        raise TieredError(ErrorCode.NOT_CONTROLLER, "not the active controller")

    scrubber = CountingScrubber()
    with pytest.raises(TieredError) as e:
        RemoteScrub(cast(RemoteObjectScrubber, scrubber), standby).scrub(0, False)
    assert e.value.code == ErrorCode.NOT_CONTROLLER
    assert scrubber.calls == 0


def test_plugins_without_the_capabilities_are_named(tmp_path: Path) -> None:
    storage = CopyOnlyRsm({"test.flat.dir": str(tmp_path / "flat")})
    scrub = RemoteScrub(_scrubber(FakeRlmm(), storage), _claims())
    with pytest.raises(TieredError) as e:
        scrub.scrub(0, False)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert "RemoteStorageScanner (scan_objects)" in e.value.message


def test_a_store_that_can_not_be_listed_is_a_storage_error(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, storage, rlmm, _ = setup
    orphan = _drop(root, _segment_key(_tp(GONE), 0, 0))

    def refused(path: str, detail: bool = True) -> object:
        raise PermissionError(f"listing of {path} refused")

    monkeypatch.setattr(storage._fs, "find", refused)
    with pytest.raises(TieredError) as e:
        RemoteScrub(_scrubber(rlmm, storage), _claims()).scrub(0, True)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "listing of" in e.value.message and "refused" in e.value.message
    assert (root / orphan).exists()  # nothing deleted on a partial listing


def test_each_scrub_is_reported_to_the_gauges(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, _ = setup
    _drop(root, _segment_key(_tp(GONE), 0, 0))
    seen: list[RemoteStorageScrub] = []
    report = RemoteScrub(_scrubber(rlmm, storage), _claims(), seen.append).scrub(0, False)
    assert seen == [report]
    assert report.orphan_bytes == len(b"left")


# -- the layout and the plugin's listing -------------------------------------------------------


def test_keys_are_parsed_back_into_topic_and_segment() -> None:
    tp = _tp(partition=7)
    segment_id = uuid.uuid4()
    prefix = layout.segment_prefix_of(tp, 3, 1234, segment_id)
    expected = ("orders", LIVE, RemoteSegmentKey(7, 3, 1234, segment_id))
    for suffix in layout.ALL_SUFFIXES:
        assert layout.parse_object_key(layout.object_key(prefix, suffix)) == expected
    assert layout.parse_object_key(f"{prefix}.log.tmp-0a1b") == expected
    assert layout.parse_object_key(f"my-topic-{LIVE}/x") == ("my-topic", LIVE, None)
    assert layout.parse_object_key(f"orders-{LIVE}") is None
    assert layout.parse_object_key("elsewhere/key") is None


def test_the_listing_refuses_a_parallelism_below_one(tmp_path: Path) -> None:
    storage = FsspecRemoteStorageManager(str(tmp_path))
    with pytest.raises(ValueError, match="parallelism must be an int >= 1"):
        list(storage.scan_objects(0))


def test_the_listing_finds_every_object_once_at_every_depth(tmp_path: Path) -> None:
    keys = {
        "top.txt",
        f"orders-{LIVE}/near.txt",
        f"orders-{LIVE}/0/te=0/a.log",
        f"orders-{LIVE}/0/te=1/deep/b.log",
        f"orders-{LIVE}/12/te=0/c.log",
    }
    for key in keys:
        _drop(tmp_path, key)
    storage = FsspecRemoteStorageManager(str(tmp_path))
    listed = [o.handle for batch in storage.scan_objects(3) for o in batch]
    assert sorted(listed) == sorted(keys)
    assert list(FsspecRemoteStorageManager(str(tmp_path / "absent")).scan_objects(2)) == []


def test_memory_filesystem_objects_carry_their_creation_time() -> None:
    storage = FsspecRemoteStorageManager(f"memory://scrub-{uuid.uuid4().hex}")
    key = _segment_key(_tp(), 0, 0)
    storage._fs.pipe_file(storage._path(key), b"abc")
    [[found]] = list(storage.scan_objects(2))
    assert replace(found, last_modified_ms=0) == replace(
        found, last_modified_ms=0, handle=key, size_bytes=3
    )
    assert found.last_modified_ms > 1_600_000_000_000


def test_an_object_deleted_with_its_record_after_the_listing_is_not_an_orphan(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    """Retention deletes a segment's objects, then its record, between the scrub's listing and its
    reading of the RLMM."""
    root, storage, rlmm, _ = setup
    tp = _tp()
    [expired, kept] = rlmm.segments[tp]
    prefix = layout.segment_prefix(expired)

    def expire_after_listing() -> ClaimsOfJobs:
        for path in root.rglob("*"):
            if path.is_file() and str(path.relative_to(root)).startswith(prefix):
                path.unlink()
        rlmm.segments[tp] = [kept]
        return _claims()()

    report = _scrubber(rlmm, storage).scrub(0, False, expire_after_listing)
    assert report.orphan_objects == 0


def test_the_gauges_count_what_a_scrub_left(
    setup: tuple[Path, FsspecRemoteStorageManager, FakeRlmm, list[str]],
) -> None:
    root, storage, rlmm, _ = setup
    _drop(root, _segment_key(_tp(GONE), 0, 0))
    metrics = ControllerMetrics("kraft")
    scrub = RemoteScrub(_scrubber(rlmm, storage), _claims(), metrics.remote_storage_scrubbed)

    def gauges() -> tuple[float | None, float | None]:
        return (
            metrics.registry.get_sample_value("kafka_controller_remotestoragescrub_orphanbytes"),
            metrics.registry.get_sample_value("kafka_controller_remotestoragescrub_orphanobjects"),
        )

    scrub.scrub(0, False)
    assert gauges() == (len(b"left"), 1)
    scrub.scrub(0, True)
    assert gauges() == (0, 0)
