"""The delete-job runner in process: a real sqlite RLMM, a real remote directory tree behind the
fsspec storage plugin, the real object deleter (fast path); faults injected around it. (On S3,
through a fault-injecting proxy: tests/tiered/rsm/test_s3_faults.py.)"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from controller.jobs.runner import MAX_SWEEPS, DeleteJobRunner, ObjectsLeftError
from controller.jobs.spark_delete import BulkObjectDeleter, EngineChoice, SparkSessionProvider
from tests.rlmm_support import COPY_SEGMENT_FINISHED, segment, update_of
from tests.support.polling import poll_until
from tests.support.remote_tree import ObjectStore, write_objects
from tiered import rlmm
from tiered.api import (
    DeleteOutcome,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    RemoteObjectDeleter,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.cluster.model import (
    DeleteJob,
    DeleteJobState,
    PartitionDeleteProgress,
    TieredState,
    TopicMetadata,
)
from tiered.retry import ExponentialBackoff
from tiered.rsm import FsspecRemoteStorageManager, layout

SUFFIXES = ("log", "index", "timeindex", "epochs")


class Remote:
    """A topic's remote data: RLMM metadata led by 'broker' 0 and objects under the layout, in a
    local directory or, given ``store`` and the ``storage`` that reaches it, in an S3 bucket."""

    def __init__(
        self,
        tmp_path: Path,
        partitions: int = 2,
        store: ObjectStore | None = None,
        storage: FsspecRemoteStorageManager | None = None,
    ) -> None:
        self.root = str(tmp_path / "remote")
        self.tree: Path | ObjectStore = store if store is not None else Path(self.root)
        self.storage = storage or FsspecRemoteStorageManager(self.root)
        self.topic, self.topic_id, self.partitions = "orders", uuid.uuid4(), partitions
        self.broker = rlmm.create({"rlmm.sqlite.path": str(tmp_path / "rlmm.db"), "broker.id": "0"})
        self.controller = rlmm.create(
            {"rlmm.sqlite.path": str(tmp_path / "rlmm.db"), "broker.id": "100"}
        )
        self.broker.on_partition_leadership_changes(set(self.tps()), set())
        self.next_offset = dict.fromkeys(range(partitions), 0)

    def tps(self) -> list[TopicIdPartition]:
        return [TopicIdPartition(self.topic_id, self.topic, p) for p in range(self.partitions)]

    def copy(self, partition: int, count: int, tiered_epoch: int) -> list[RemoteLogSegmentMetadata]:
        """``count`` segments copied by the broker, stamped ``tiered_epoch``, with 4 objects."""
        tp = self.tps()[partition]
        made = []
        for _ in range(count):
            start = self.next_offset[partition]
            made.append(segment(tp, {0: 0}, start, start + 9, tiered_epoch=tiered_epoch))
            self.next_offset[partition] = start + 10
        for m in made:
            self.broker.add_remote_log_segment_metadata(m)
        objects = {
            layout.object_key(layout.segment_prefix(m), suffix): b"x" * 10
            for m in made
            for suffix in SUFFIXES
        }
        write_objects(self.tree, objects)
        for m in made:
            self.broker.update_remote_log_segment_metadata(update_of(m, COPY_SEGMENT_FINISHED))
        return made

    def two_epochs(self, segments: int, kept_segments: int) -> set[str]:
        """``segments`` segments a partition in epoch 0, then ``kept_segments`` of partition 0 in
        epoch 1, in an object store: the keys of epoch 1 (what a delete below it keeps)."""
        assert not isinstance(self.tree, Path), "for a Remote on an object store"
        for p in range(self.partitions):
            self.copy(p, segments, tiered_epoch=0)
        before = self.tree.keys()
        self.copy(0, kept_segments, tiered_epoch=1)
        return self.tree.keys() - before

    def objects(self, tiered_epoch: int) -> list[str]:
        return [
            k
            for tp in self.tps()
            for batch in self.storage.list_objects_below_epoch(tp, tiered_epoch + 1)
            for k in batch
            if f"/te={tiered_epoch}/" in k
        ]

    def listed(self, partition: int) -> list[RemoteLogSegmentMetadata]:
        try:
            return list(self.controller.list_remote_log_segments(self.tps()[partition]))
        except Exception:
            return []

    def job(self, tiered_epoch: int = 1) -> DeleteJob:
        return DeleteJob(self.topic, self.topic_id, tiered_epoch, self.partitions)

    def close(self) -> None:
        self.broker.close()
        self.controller.close()


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    r = Remote(tmp_path)
    try:
        yield r
    finally:
        r.close()


IN_PROCESS = EngineChoice(on_spark=False, reason="engine in process (test)")


class GatedDeleter:
    """The real engine, which can be held at the start of a delete or fail once. It chooses as
    the real one does with ``fast_path_max_objects`` and records each choice and the engine of
    each delete, but deletes in process whatever the choice (no Spark session here)."""

    def __init__(self, fast_path_max_objects: int = 10**9) -> None:
        self.inner = BulkObjectDeleter(
            SparkSessionProvider(), fast_path_max_objects=fast_path_max_objects
        )
        self.entered = threading.Event()
        self.gate: threading.Event | None = None
        self.fail_next = 0
        self.calls: list[int] = []
        self.chosen: list[EngineChoice] = []
        self.engines: list[EngineChoice] = []

    def choose(self, object_count: int) -> EngineChoice:
        choice = self.inner.choose(object_count)
        self.chosen.append(choice)
        return choice

    def delete(
        self,
        deleter: RemoteObjectDeleter,
        keys: Sequence[str],
        engine: EngineChoice,
        on_progress: Callable[[Sequence[str]], None] | None = None,
    ) -> DeleteOutcome:
        self.calls.append(len(keys))
        self.engines.append(engine)
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(30)
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("injected: the delete job's executor died")
        return self.inner.delete(deleter, keys, IN_PROCESS, on_progress)


class Persisted:
    def __init__(self) -> None:
        self.jobs: list[DeleteJob] = []

    def __call__(self, job: DeleteJob) -> None:
        self.jobs.append(job)

    @property
    def last(self) -> DeleteJob:
        return self.jobs[-1]


def runner_for(
    remote: Remote,
    deleter: GatedDeleter,
    persisted: Persisted,
    clock: Callable[[], float] = time.time,
) -> DeleteJobRunner:
    return DeleteJobRunner(
        remote.controller,
        remote.storage,
        deleter,
        persisted,
        backoff=ExponentialBackoff(0.01, 0.05),
        clock=clock,
    )


def test_a_job_deletes_older_epochs_and_records_its_progress(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 5, tiered_epoch=0)
    orphan = Path(remote.root) / layout.tiered_epoch_prefix(remote.tps()[0], 0) / "orphan.log"
    orphan.write_bytes(b"left by a copy that died before its metadata")
    newer = remote.copy(1, 2, tiered_epoch=1)  # re-enabled before the job ran: never touched
    persisted = Persisted()
    job = runner_for(remote, GatedDeleter(), persisted).run_job(remote.job())
    assert job.state is DeleteJobState.DONE and job.attempts == 1 and job.last_error == ""
    assert [p.done for p in job.progress] == [True, True]
    assert [p.segments_deleted for p in job.progress] == [5, 5]
    assert job.progress[0].objects_deleted == job.progress[0].objects_total == 21  # + orphan
    assert remote.objects(0) == [] and not orphan.exists()
    assert remote.listed(0) == []
    assert [m.remote_log_segment_id for m in remote.listed(1)] == [
        m.remote_log_segment_id for m in newer
    ]
    assert len(remote.objects(1)) == 2 * 4
    states = [j.state for j in persisted.jobs]
    assert states[0] is DeleteJobState.RUNNING and states[-1] is DeleteJobState.DONE
    # progress was persisted between the steps: the objects the metadata names before deleting
    # them, the orphan the sweep found before deleting it, deleting before done
    totals = [(j.progress[0].objects_total, j.progress[0].objects_deleted) for j in persisted.jobs]
    assert (20, 0) in totals and (21, 20) in totals


def test_a_reenable_during_the_job_keeps_the_new_epochs_data(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 4, tiered_epoch=0)
    deleter, persisted = GatedDeleter(), Persisted()
    deleter.gate = threading.Event()
    runner = runner_for(remote, deleter, persisted)
    outcome: list[DeleteJob] = []
    worker = threading.Thread(target=lambda: outcome.append(runner.run_job(remote.job())))
    worker.start()
    try:
        assert deleter.entered.wait(30)  # listed and marked; deleting is held
        new = [remote.copy(p, 3, tiered_epoch=1) for p in range(2)]  # tiering resumed, epoch 1
    finally:
        deleter.gate.set()
        worker.join(30)
    [job] = outcome
    assert job.state is DeleteJobState.DONE
    for p in range(2):
        kept = [m.remote_log_segment_id for m in remote.listed(p)]
        assert kept == [m.remote_log_segment_id for m in new[p]]  # only the new epoch's
        assert remote.controller.remote_partition_delete_state(remote.tps()[p]) is None
    assert remote.objects(0) == []
    assert len(remote.objects(1)) == 2 * 3 * 4  # every object of the new epoch is intact
    # and the broker goes on copying in the kept partition
    remote.copy(0, 1, tiered_epoch=1)
    assert len(remote.listed(0)) == 4


def test_a_failed_attempt_is_retried_to_the_same_end_state(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 3, tiered_epoch=0)
    deleter, persisted = GatedDeleter(), Persisted()
    deleter.fail_next = 1
    runner = runner_for(remote, deleter, persisted)
    runner.start([remote.job()])
    try:
        poll_until(
            lambda: bool(persisted.jobs) and persisted.last.state is DeleteJobState.DONE,
            timeout=30,
            what="the job to finish after a retry",
        )
    finally:
        runner.stop()
    assert any("injected" in j.last_error for j in persisted.jobs)  # the failure was recorded
    assert persisted.last.attempts == 2 and persisted.last.last_error == ""
    assert remote.objects(0) == [] and remote.listed(0) == remote.listed(1) == []


def test_a_job_dying_before_the_metadata_removal_is_resumed_and_counts_once(
    remote: Remote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects deleted, the bulk removal of their metadata not done: the next attempt names the
    same segments again (still DELETE_SEGMENT_STARTED), finds their objects gone, removes them,
    and leaves the newer epoch alone."""
    for p in range(2):
        remote.copy(p, 3, tiered_epoch=0)
    newer = remote.copy(1, 2, tiered_epoch=1)
    removal = remote.controller.handle_partition_segments_deleted_below_epoch
    died: list[TopicIdPartition] = []

    def die_once(tp: TopicIdPartition, tiered_epoch: int) -> None:
        if not died:
            died.append(tp)
            raise RuntimeError("injected: the controller died before removing the metadata")
        removal(tp, tiered_epoch)

    monkeypatch.setattr(
        remote.controller, "handle_partition_segments_deleted_below_epoch", die_once
    )
    persisted = Persisted()
    runner = runner_for(remote, GatedDeleter(), persisted)
    runner.start([remote.job()])
    try:
        poll_until(
            lambda: bool(persisted.jobs) and persisted.last.state is DeleteJobState.DONE,
            timeout=30,
            what="the job to finish after a retry",
        )
    finally:
        runner.stop()
    assert died and persisted.last.attempts == 2
    assert remote.listed(0) == [] and remote.objects(0) == []
    assert [m.remote_log_segment_id for m in remote.listed(1)] == [
        m.remote_log_segment_id for m in newer
    ]
    assert len(remote.objects(1)) == 2 * 4
    for progress in persisted.last.progress:
        assert progress.objects_deleted == progress.objects_total == 3 * 4
        assert progress.segments_deleted == 3


def test_a_resumed_job_skips_finished_partitions(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 3, tiered_epoch=0)
    resumed = DeleteJob(
        remote.topic,
        remote.topic_id,
        1,
        2,
        DeleteJobState.RUNNING,
        (PartitionDeleteProgress(0, 12, 12, 3, done=True), PartitionDeleteProgress(1)),
        attempts=1,
    )
    persisted = Persisted()
    job = runner_for(remote, GatedDeleter(), persisted).run_job(resumed)
    assert job.state is DeleteJobState.DONE and job.attempts == 2
    assert job.progress[0] == resumed.progress[0]  # untouched
    assert job.progress[1].done and job.progress[1].segments_deleted == 3
    assert remote.listed(1) == []
    assert len(remote.listed(0)) == 3  # a finished partition is not looked at again


# The two phases: the objects the metadata names, deleted without listing, then the sweep that
# lists what is left below the epoch.


class ListingFailsOnce(FsspecRemoteStorageManager):
    """The remote storage, whose first listing fails: a controller dying between the phases."""

    listings = 0

    def list_objects_below_epoch(
        self, topic_id_partition: TopicIdPartition, tiered_epoch: int
    ) -> Iterator[list[str]]:
        self.listings += 1
        if self.listings == 1:
            raise RemoteStorageException("injected: the controller died before the sweep")
        return super().list_objects_below_epoch(topic_id_partition, tiered_epoch)


def write_object(remote: Remote, key: str) -> Path:
    path = Path(remote.root) / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_objects_without_metadata_are_found_by_the_sweep(remote: Remote) -> None:
    remote.copy(0, 3, tiered_epoch=0)
    tp0, tp1 = remote.tps()
    died = layout.segment_prefix_of(tp0, 0, 30, uuid.uuid4())  # copied, never recorded
    orphans = [write_object(remote, layout.object_key(died, s)) for s in ("index", "log")]
    orphans.append(write_object(remote, layout.object_key(died, "log") + ".tmp-0a1b"))
    # a partition with no metadata at all, only what dead copies left
    orphans.append(write_object(remote, layout.tiered_epoch_prefix(tp1, 0) + "/0-x.log"))
    persisted = Persisted()
    job = runner_for(remote, GatedDeleter(), persisted).run_job(remote.job())
    assert job.state is DeleteJobState.DONE
    assert not any(path.exists() for path in orphans) and remote.objects(0) == []
    assert [(p.objects_deleted, p.objects_total) for p in job.progress] == [(15, 15), (1, 1)]
    assert [p.segments_deleted for p in job.progress] == [3, 0]


def test_a_job_resumed_after_dying_between_the_phases_finishes_and_counts_once(
    remote: Remote,
) -> None:
    for p in range(2):
        remote.copy(p, 5, tiered_epoch=0)
    orphan = write_object(remote, layout.tiered_epoch_prefix(remote.tps()[0], 0) + "/orphan.log")
    storage = ListingFailsOnce(remote.root)
    persisted = Persisted()
    runner = DeleteJobRunner(remote.controller, storage, GatedDeleter(), persisted)
    with pytest.raises(RemoteStorageException, match="before the sweep"):
        runner.run_job(remote.job())
    died = persisted.last  # what the next controller finds
    assert died.state is DeleteJobState.RUNNING
    assert [(p.objects_deleted, p.objects_total) for p in died.progress] == [(20, 20)] * 2
    # the segments whose objects are gone are finished; the orphan is the sweep's
    assert orphan.exists() and remote.listed(0) == []

    resumed = runner_for(remote, GatedDeleter(), Persisted()).run_job(died)
    assert resumed.state is DeleteJobState.DONE and resumed.attempts == 2
    # the metadata's objects were named (and deleted) again, but are counted once
    assert [(p.objects_deleted, p.objects_total) for p in resumed.progress] == [(21, 21), (20, 20)]
    assert not orphan.exists() and remote.objects(0) == []
    assert remote.listed(0) == remote.listed(1) == []


def test_nothing_of_the_epoch_or_of_another_topic_is_touched(
    remote: Remote, tmp_path: Path
) -> None:
    remote.copy(0, 4, tiered_epoch=0)
    kept = remote.copy(0, 2, tiered_epoch=1)
    other = Remote(tmp_path, partitions=1)  # another topic (a new id), same root and RLMM
    try:
        other.copy(0, 3, tiered_epoch=0)
        job = runner_for(remote, GatedDeleter(), Persisted()).run_job(remote.job())
        assert job.state is DeleteJobState.DONE
        assert remote.objects(0) == [] and len(remote.objects(1)) == 2 * 4
        assert [m.remote_log_segment_id for m in remote.listed(0)] == [
            m.remote_log_segment_id for m in kept
        ]
        assert len(other.objects(0)) == 3 * 4 and len(other.listed(0)) == 3
    finally:
        other.close()


def test_objects_that_keep_appearing_fail_the_attempt(remote: Remote) -> None:
    remote.copy(0, 1, tiered_epoch=0)
    deleter = GatedDeleter()
    real_delete = deleter.delete
    epoch_dir = layout.tiered_epoch_prefix(remote.tps()[0], 0)

    def delete_and_write_more(
        deleter_of_store: RemoteObjectDeleter,
        keys: Sequence[str],
        engine: EngineChoice,
        on_progress: Callable[[Sequence[str]], None] | None = None,
    ) -> DeleteOutcome:
        outcome = real_delete(deleter_of_store, keys, engine, on_progress)
        write_object(remote, f"{epoch_dir}/{uuid.uuid4()}.log")  # a writer outrunning the job
        return outcome

    deleter.delete = delete_and_write_more  # type: ignore[method-assign,assignment]
    with pytest.raises(ObjectsLeftError, match=f"each of {MAX_SWEEPS} listings"):
        runner_for(remote, deleter, Persisted()).run_job(remote.job())
    assert len(deleter.calls) == 1 + MAX_SWEEPS


def deleted_topic_job(remote: Remote, last_epoch: int) -> DeleteJob:
    topic = TopicMetadata(remote.topic, remote.topic_id, (1,) * remote.partitions)
    return DeleteJob.of_deleted_topic(topic.with_tiered_state(TieredState.ENABLED, last_epoch))


def metadata_removed(remote: Remote, partition: int) -> bool:
    try:
        remote.controller.remote_partition_delete_state(remote.tps()[partition])
    except RemoteResourceNotFoundException:
        return True
    return False


def test_a_deleted_topics_job_waits_for_its_hold_then_deletes_every_epoch(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 3, tiered_epoch=0)
        remote.copy(p, 2, tiered_epoch=1)  # disabled with retain, re-enabled: a second epoch
    job = deleted_topic_job(remote, last_epoch=1)
    assert job.tiered_epoch == 2 and job.topic_deleted
    brokers_let_go = threading.Event()
    persisted = Persisted()
    runner = DeleteJobRunner(
        remote.controller,
        remote.storage,
        GatedDeleter(),
        persisted,
        backoff=ExponentialBackoff(0.01, 0.05),
        hold=lambda j: None if brokers_let_go.is_set() else "waiting for brokers [1]",
        hold_backoff=ExponentialBackoff(0.01, 0.05),
    )
    runner.start([job])
    try:
        poll_until(
            lambda: runner.progress(job).last_error == "waiting for brokers [1]",
            timeout=10,
            what="the job to be held",
        )
        assert persisted.jobs == []  # held: no attempt, nothing listed
        assert (len(remote.objects(0)), len(remote.objects(1))) == (2 * 3 * 4, 2 * 2 * 4)
        brokers_let_go.set()
        poll_until(
            lambda: bool(persisted.jobs) and persisted.last.state is DeleteJobState.DONE,
            timeout=30,
            what="the job to finish",
        )
    finally:
        runner.stop()
    assert persisted.last.attempts == 1  # waiting cost no attempt, and was no error
    assert all(j.last_error == "" for j in persisted.jobs)
    assert persisted.last.objects_deleted == persisted.last.objects_total == 2 * 5 * 4
    assert remote.objects(0) == remote.objects(1) == []
    assert all(metadata_removed(remote, p) for p in range(2))  # DELETE_PARTITION_FINISHED


def test_a_copy_landing_after_the_listing_is_deleted_by_the_next_attempt(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 2, tiered_epoch=0)
    job = deleted_topic_job(remote, last_epoch=0)
    deleter, persisted = GatedDeleter(), Persisted()
    deleter.gate = threading.Event()
    runner = runner_for(remote, deleter, persisted)
    runner.start([job])
    try:
        assert deleter.entered.wait(30)  # listed; a broker still copying lands one more
        late = remote.copy(0, 1, tiered_epoch=0)
        deleter.gate.set()
        poll_until(
            lambda: bool(persisted.jobs) and persisted.last.state is DeleteJobState.DONE,
            timeout=30,
            what="the job to finish",
        )
    finally:
        deleter.gate.set()
        runner.stop()
    # the sweep deleted its objects; its segment record, added after the job read the metadata,
    # failed the first attempt
    assert any("added after the listing" in j.last_error for j in persisted.jobs)
    assert persisted.last.attempts == 2
    assert persisted.last.progress[0].objects_deleted == (2 + len(late)) * 4
    assert remote.objects(0) == []
    assert all(metadata_removed(remote, p) for p in range(2))


def test_partitions_are_marked_while_the_earlier_ones_are_deleted(tmp_path: Path) -> None:
    """The first partition's objects are deleted while the next partitions are marked, and
    those marked meanwhile go to the engine together, in one batch."""
    remote = Remote(tmp_path, partitions=3)
    try:
        for p in range(3):
            remote.copy(p, 5, tiered_epoch=0)
        deleter = GatedDeleter()
        deleter.gate = threading.Event()
        runner = runner_for(remote, deleter, Persisted())
        outcome: list[DeleteJob] = []
        worker = threading.Thread(target=lambda: outcome.append(runner.run_job(remote.job())))
        worker.start()
        try:
            assert deleter.entered.wait(30)
            assert deleter.calls == [5 * len(SUFFIXES)]  # partition 0 alone

            def marked(partition: int) -> bool:
                states = {m.state for m in remote.listed(partition)}
                return states == {RemoteLogSegmentState.DELETE_SEGMENT_STARTED}

            poll_until(lambda: marked(1) and marked(2), what="partitions 1 and 2 to be marked")
            assert len(remote.objects(0)) == 3 * 5 * len(SUFFIXES)  # nothing deleted yet
        finally:
            deleter.gate.set()
            worker.join(60)
        assert outcome and outcome[0].state is DeleteJobState.DONE
        assert deleter.calls == [5 * len(SUFFIXES), 2 * 5 * len(SUFFIXES)]
        assert remote.objects(0) == [] and all(remote.listed(p) == [] for p in range(3))
    finally:
        remote.close()


# The engine: chosen once, when the job starts, from the objects the RLMM's totals count (the
# segments below the epoch times the plugin's objects per segment), for every delete of the job.

FAST_PATH_MAX = 50


def job_log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "controller.jobs.runner" and r.getMessage().startswith("Bulk delete of")
    ]


def test_a_job_larger_than_the_fast_path_runs_on_spark_though_each_partition_is_smaller(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    remote = Remote(tmp_path, partitions=3)
    try:
        for p in range(3):
            remote.copy(p, 5, tiered_epoch=0)  # 20 objects a partition, 60 in all
        assert 5 * len(SUFFIXES) <= FAST_PATH_MAX < 3 * 5 * len(SUFFIXES)
        write_object(remote, layout.tiered_epoch_prefix(remote.tps()[0], 0) + "/orphan.log")
        deleter = GatedDeleter(FAST_PATH_MAX)
        with caplog.at_level(logging.INFO, logger="controller.jobs.runner"):
            job = runner_for(remote, deleter, Persisted()).run_job(remote.job())
        assert job.state is DeleteJobState.DONE and remote.objects(0) == []
        assert [c.on_spark for c in deleter.chosen] == [True]  # once, for the job
        # every delete on Spark: the batches of marked partitions and the sweep's one orphan
        assert deleter.calls[-1] == 1 and len(deleter.calls) >= 2
        assert all(e.on_spark for e in deleter.engines)
        assert job_log_lines(caplog) == [
            "Bulk delete of topic orders below tiered epoch 1: 60 objects, engine Spark "
            f"(local[*]) since 60 > bulk.delete.fast.path.max.objects={FAST_PATH_MAX}"
        ]
    finally:
        remote.close()


def test_a_job_within_the_fast_path_runs_in_process_though_a_batch_is_larger(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The count leaves out the newer epoch's segments, and what the sweep finds (no metadata
    names it) is deleted in process too, however much it is."""
    remote = Remote(tmp_path, partitions=3)
    try:
        for p in range(3):
            remote.copy(p, 4, tiered_epoch=0)  # 48 objects in all
            remote.copy(p, 2, tiered_epoch=1)  # kept: not counted
        epoch_dir = layout.tiered_epoch_prefix(remote.tps()[0], 0)
        orphans = [write_object(remote, f"{epoch_dir}/orphan-{i}.log") for i in range(60)]
        deleter = GatedDeleter(FAST_PATH_MAX)
        with caplog.at_level(logging.INFO, logger="controller.jobs.runner"):
            job = runner_for(remote, deleter, Persisted()).run_job(remote.job())
        assert job.state is DeleteJobState.DONE and remote.objects(0) == []
        assert not any(path.exists() for path in orphans)
        assert len(remote.objects(1)) == 3 * 2 * len(SUFFIXES)
        assert [c.on_spark for c in deleter.chosen] == [False]
        assert deleter.calls[-1] == 60 > FAST_PATH_MAX  # the sweep's batch
        assert not any(e.on_spark for e in deleter.engines)
        assert job_log_lines(caplog) == [
            "Bulk delete of topic orders below tiered epoch 1: 48 objects, engine in process "
            f"(no Spark) since 48 <= bulk.delete.fast.path.max.objects={FAST_PATH_MAX}"
        ]
    finally:
        remote.close()


def test_each_attempt_counts_what_is_left_and_chooses_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A finished partition is not counted: resumed with one of three done, a job that was
    larger than the fast path is no longer."""
    remote = Remote(tmp_path, partitions=3)
    try:
        for p in range(3):
            remote.copy(p, 5, tiered_epoch=0)
        done = PartitionDeleteProgress(0, 20, 20, 5, done=True)
        resumed = replace(remote.job(), state=DeleteJobState.RUNNING, progress=(done,), attempts=1)
        deleter = GatedDeleter(FAST_PATH_MAX)
        with caplog.at_level(logging.INFO, logger="controller.jobs.runner"):
            job = runner_for(remote, deleter, Persisted()).run_job(resumed)
        assert job.state is DeleteJobState.DONE and job.attempts == 2
        assert [c.on_spark for c in deleter.chosen] == [False]
        assert not any(e.on_spark for e in deleter.engines)
        assert job_log_lines(caplog) == [
            "Bulk delete of topic orders below tiered epoch 1: 40 objects, engine in process "
            f"(no Spark) since 40 <= bulk.delete.fast.path.max.objects={FAST_PATH_MAX}"
        ]
    finally:
        remote.close()


def test_a_scheduled_job_waits_for_its_start_then_runs(remote: Remote) -> None:
    for p in range(2):
        remote.copy(p, 2, tiered_epoch=0)
    wall = [1000.0]  # seconds since the epoch, moved by the test
    job = replace(remote.job(), state=DeleteJobState.SCHEDULED, starts_at_ms=1_000_500)
    persisted = Persisted()
    runner = runner_for(remote, GatedDeleter(), persisted, clock=lambda: wall[0])
    runner.start([job])
    try:
        poll_until(lambda: runner.progress(job) == job, timeout=10, what="the job to be queued")
        assert persisted.jobs == [] and len(remote.objects(0)) == 2 * 2 * 4
        wall[0] = 1000.5  # the start: the runner reads the wall clock again when it wakes
        runner.submit(job)
        poll_until(
            lambda: bool(persisted.jobs) and persisted.last.state is DeleteJobState.DONE,
            timeout=30,
            what="the job to run at its start",
        )
    finally:
        runner.stop()
    assert persisted.jobs[0].state is DeleteJobState.RUNNING  # SCHEDULED -> RUNNING -> DONE
    assert persisted.last.starts_at_ms == 1_000_500 and remote.objects(0) == []


def test_a_job_cancelled_while_scheduled_is_dropped_and_deletes_nothing(remote: Remote) -> None:
    remote.copy(0, 2, tiered_epoch=0)
    job = replace(remote.job(), state=DeleteJobState.SCHEDULED, starts_at_ms=10**15)
    persisted = Persisted()
    runner = runner_for(remote, GatedDeleter(), persisted)
    runner.start([job])
    try:
        runner.submit(job.with_state(DeleteJobState.CANCELLED))
        poll_until(
            lambda: runner.progress(job).state is DeleteJobState.CANCELLED,
            timeout=10,
            what="the cancellation to reach the runner",
        )
    finally:
        runner.stop()
    assert persisted.jobs == [] and len(remote.objects(0)) == 2 * 4
