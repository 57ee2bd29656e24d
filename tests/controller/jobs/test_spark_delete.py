"""The bulk delete engine (controller.jobs.spark_delete) with the fsspec storage plugin's deleter,
against real files and a real local Spark.

One SparkSession serves the whole module (starting one takes about 7 s). Failures are injected
without privileges (the tests run as root): a key whose path is a non-empty directory cannot be
deleted as a file; a task failure is injected by the shipped function's token-directory hook.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from controller.jobs import spark_delete
from controller.jobs.spark_delete import (
    BulkDeleteError,
    BulkObjectDeleter,
    EngineChoice,
    SparkSessionProvider,
    delete_with_spark,
)
from tests.support.processes import REPO
from tests.support.remote_tree import block, build_tree, listed, remaining, unblock
from tiered.api import DeleteOutcome, RemoteObjectDeleter, RemoteStorageException
from tiered.retry import RetryPolicy
from tiered.retry_policies import BULK_DELETE_RETRY
from tiered.rsm import FsspecRemoteStorageManager

pytestmark = pytest.mark.processes


@pytest.fixture(scope="module")
def provider() -> Iterator[SparkSessionProvider]:
    p = SparkSessionProvider(master="local[2]")
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="module")
def spark(provider: SparkSessionProvider) -> object:
    return provider.get()


class Sleeps:
    """Records the backoff waits instead of sleeping; runs ``on_sleep`` at each."""

    def __init__(self, on_sleep: object = None) -> None:
        self.calls: list[float] = []
        self.on_sleep = on_sleep

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if callable(self.on_sleep):
            self.on_sleep()


IN_PROCESS = EngineChoice(on_spark=False, reason="engine in process (test)")


def fast_retry(sleeps: Sleeps, retries: int = 3) -> RetryPolicy:
    """The product's policy with ``retries`` retries and millisecond delays, ``sleeps`` waiting."""
    return dataclasses.replace(
        BULK_DELETE_RETRY, max_tries=retries + 1, delay_s=0.001, max_delay_s=0.002, sleep=sleeps
    )


class ScriptedDeleter(RemoteObjectDeleter):
    """A deleter that fails the handles (or the whole call) its script says, attempt by
    attempt, and records what each attempt was given."""

    def __init__(self, script: list[set[str] | Exception]) -> None:
        self.script = script
        self.given: list[list[str]] = []

    def delete_objects(self, handles: Sequence[str]) -> DeleteOutcome:
        self.given.append(list(handles))
        step = self.script[min(len(self.given), len(self.script)) - 1]
        if isinstance(step, Exception):
            raise step
        failed = tuple(h for h in handles if h in step)
        return DeleteOutcome(len(handles) - len(failed), 0, failed, "boom" if failed else None)


def test_only_failed_handles_are_retried_with_capped_jittered_backoff_then_given_up() -> None:
    sleeps = Sleeps()
    retry = RetryPolicy(
        max_tries=6, deadline_s=None, delay_s=0.1, max_delay_s=0.4, jitter=0.5, sleep=sleeps
    )
    deleter = ScriptedDeleter([{"b", "c"}, {"c"}])
    engine = BulkObjectDeleter(SparkSessionProvider(), retry=retry)

    outcome = engine.delete(deleter, ["a", "b", "c", "a"], IN_PROCESS)

    assert deleter.given == [["a", "b", "c"], ["b", "c"]] + [["c"]] * 4
    assert outcome == DeleteOutcome(2, 0, ("c",), "boom")
    ceilings = [0.1, 0.2, 0.4, 0.4, 0.4]  # doubling, capped; none after the last attempt
    assert len(sleeps.calls) == len(ceilings)
    for delay, ceiling in zip(sleeps.calls, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


def test_a_job_failing_as_a_whole_is_retried_then_raises_bulk_delete_error() -> None:
    sleeps = Sleeps()
    deleter = ScriptedDeleter([{"b"}, RemoteStorageException("store down")])
    engine = BulkObjectDeleter(SparkSessionProvider(), retry=fast_retry(sleeps, retries=2))

    with pytest.raises(BulkDeleteError, match=r"1 objects .* after 3 attempts.*store down"):
        engine.delete(deleter, ["a", "b"], IN_PROCESS)
    assert deleter.given == [["a", "b"], ["b"], ["b"]]
    assert len(sleeps.calls) == 2
    # A whole failure followed by success is no failure.
    recovered = ScriptedDeleter([RemoteStorageException("blip"), set()])
    assert engine.delete(recovered, ["a"], IN_PROCESS) == DeleteOutcome(1, 0)


def test_fast_path_deletes_exactly_the_listed_keys_without_spark(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id)
    before = remaining(tmp_path)
    storage = FsspecRemoteStorageManager(str(tmp_path))
    handles = listed(storage, topic_id, 0, 2)
    gone = handles[:3]
    for key in gone:
        (tmp_path / key).unlink()
    unstarted = SparkSessionProvider()
    deleter = BulkObjectDeleter(unstarted, fast_path_max_objects=len(handles))

    outcome = deleter.delete(storage.object_deleter(), handles, deleter.choose(len(handles)))

    assert outcome == DeleteOutcome(deleted=len(handles) - 3, missing=3)
    assert remaining(tmp_path) == before - set(handles)
    assert set(keys[(0, 2)]) <= remaining(tmp_path)
    assert not unstarted.started  # the fast path never starts a session


def test_spark_path_deletes_exactly_the_listed_keys(
    tmp_path: Path, provider: SparkSessionProvider, caplog: pytest.LogCaptureFixture
) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, segments=30)
    before = remaining(tmp_path)
    storage = FsspecRemoteStorageManager(str(tmp_path))
    handles = listed(storage, topic_id, 1, 2)
    assert len(handles) == 2 * 30 * 4
    gone = handles[::50]
    for key in gone:
        (tmp_path / key).unlink()
    deleter = BulkObjectDeleter(provider, fast_path_max_objects=10, slices=5)

    with caplog.at_level(logging.INFO, logger=spark_delete.__name__):
        outcome = deleter.delete(storage.object_deleter(), handles, deleter.choose(len(handles)))

    assert outcome == DeleteOutcome(len(handles) - len(gone), len(gone))
    assert remaining(tmp_path) == before - set(handles)
    assert set(keys[(1, 2)]) <= remaining(tmp_path)
    assert set(keys[(0, 0)]) <= remaining(tmp_path)
    assert "via Spark" in caplog.text


def test_the_jobs_engine_holds_for_a_batch_of_any_size(
    tmp_path: Path, provider: SparkSessionProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """A job larger than the fast path deletes even a batch of 3 handles on Spark; a job within
    it deletes in process even a batch larger than the limit."""
    keys = build_tree(tmp_path, uuid.uuid4(), partitions=(0,), epochs=(0,), segments=5)[(0, 0)]
    storage = FsspecRemoteStorageManager(str(tmp_path))
    engine = BulkObjectDeleter(provider, fast_path_max_objects=10)
    large, small = engine.choose(11), engine.choose(10)
    assert large == EngineChoice(
        True, "engine Spark (local[2]) since 11 > bulk.delete.fast.path.max.objects=10"
    )
    assert small == EngineChoice(
        False, "engine in process (no Spark) since 10 <= bulk.delete.fast.path.max.objects=10"
    )

    with caplog.at_level(logging.INFO, logger=spark_delete.__name__):
        assert engine.delete(storage.object_deleter(), keys[:3], large) == DeleteOutcome(3, 0)
        rest = keys[3:]
        assert len(rest) > 10
        assert engine.delete(storage.object_deleter(), rest, small) == DeleteOutcome(len(rest), 0)

    attempts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("deleting ")]
    assert [m.split(" with ")[0] for m in attempts] == [
        "deleting 3 objects",
        f"deleting {len(rest)} objects",
    ]
    assert "via Spark" in attempts[0] and "via fast path (in process)" in attempts[1]
    assert remaining(tmp_path) == set()


def test_delete_with_spark_sums_the_slices(tmp_path: Path, spark: object) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=25)
    handles = keys[(0, 0)]
    deleter = FsspecRemoteStorageManager(str(tmp_path), delete_threads=3).object_deleter()
    assert delete_with_spark(spark, deleter, [], slices=3) == DeleteOutcome()
    outcome = delete_with_spark(spark, deleter, [*handles, "absent/key.log"], slices=7)
    assert outcome == DeleteOutcome(len(handles), 1)
    assert remaining(tmp_path) == set()


@pytest.mark.parametrize("path", ["fast", "spark"])
def test_undeletable_keys_fail_after_retries_and_the_rest_is_deleted(
    tmp_path: Path, provider: SparkSessionProvider, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic_id = uuid.uuid4()
    build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=10)
    storage = FsspecRemoteStorageManager(str(tmp_path))
    handles = listed(storage, topic_id, 0, 1)
    blocked = sorted([handles[1], handles[17], handles[30]])
    for key in blocked:
        block(tmp_path, key)
    sleeps = Sleeps()
    deleter = BulkObjectDeleter(
        provider,
        fast_path_max_objects=1000 if path == "fast" else 5,
        retry=fast_retry(sleeps, retries=2),
    )

    with caplog.at_level(logging.INFO, logger=spark_delete.__name__):
        outcome = deleter.delete(storage.object_deleter(), handles, deleter.choose(len(handles)))

    assert outcome.failed == 3
    assert sorted(outcome.failed_handles) == blocked
    assert outcome.deleted == len(handles) - 3 and outcome.missing == 0
    assert outcome.first_error is not None and "Error" in outcome.first_error
    assert len(sleeps.calls) == 2  # retried twice, then given up
    # the retries of the 3 failed handles stay on the job's engine
    via = "via Spark" if path == "spark" else "via fast path"
    attempts = [r.getMessage() for r in caplog.records if r.getMessage().startswith("deleting ")]
    assert len(attempts) == 3 and all(via in m for m in attempts), attempts
    assert all(m.startswith("deleting 3 objects ") for m in attempts[1:]), attempts
    assert {k for k in remaining(tmp_path) if not k.endswith("/inside")} == set()


def test_only_failed_keys_are_retried(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=5)
    storage = FsspecRemoteStorageManager(str(tmp_path))
    handles = listed(storage, topic_id, 0, 1)
    blocked = [handles[0], handles[9]]
    for key in blocked:
        block(tmp_path, key)
    # During the backoff the obstacles go away: the retry finds those keys missing.
    sleeps = Sleeps(on_sleep=lambda: [unblock(tmp_path, k) for k in blocked])
    deleter = BulkObjectDeleter(SparkSessionProvider(), retry=fast_retry(sleeps))

    outcome = deleter.delete(storage.object_deleter(), handles, IN_PROCESS)

    # Had the retry covered every key, the already deleted ones would count as missing too.
    assert outcome == DeleteOutcome(deleted=len(handles) - 2, missing=2)
    assert len(sleeps.calls) == 1
    assert remaining(tmp_path) == set()


def test_a_failing_spark_task_is_retried_as_a_whole(
    tmp_path: Path, provider: SparkSessionProvider, caplog: pytest.LogCaptureFixture
) -> None:
    topic_id = uuid.uuid4()
    build_tree(tmp_path / "remote", topic_id, partitions=(0, 1), epochs=(0,), segments=20)
    root = tmp_path / "remote"
    storage = FsspecRemoteStorageManager(str(root))
    handles = listed(storage, topic_id, 0, 1) + listed(storage, topic_id, 1, 1)
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "fail-once").write_bytes(b"")
    sleeps = Sleeps()
    deleter = BulkObjectDeleter(
        provider,
        fast_path_max_objects=10,
        slices=4,
        retry=fast_retry(sleeps),
        fail_task_tokens_dir=str(tokens),
    )

    with caplog.at_level(logging.WARNING, logger=spark_delete.__name__):
        outcome = deleter.delete(storage.object_deleter(), handles, deleter.choose(len(handles)))

    assert list(tokens.iterdir()) == []  # the token was taken: one task did fail
    assert len(sleeps.calls) == 1
    assert "injected task failure" in caplog.text
    assert outcome.failed == 0 and outcome.failed_handles == ()
    assert outcome.deleted + outcome.missing == len(handles)
    assert remaining(root) == set()


def test_a_spark_job_failing_every_time_raises(
    tmp_path: Path, provider: SparkSessionProvider
) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path / "remote", topic_id, partitions=(0,), epochs=(0,), segments=5)
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    for n in range(10):
        (tokens / f"t{n}").write_bytes(b"")
    sleeps = Sleeps()
    deleter = BulkObjectDeleter(
        provider,
        fast_path_max_objects=0,
        retry=fast_retry(sleeps, retries=1),
        slices=1,
        fail_task_tokens_dir=str(tokens),
    )
    storage = FsspecRemoteStorageManager(str(tmp_path / "remote"))

    with pytest.raises(
        BulkDeleteError, match=r"20 objects .* after 2 attempts.*injected task failure"
    ):
        deleter.delete(storage.object_deleter(), keys[(0, 0)], deleter.choose(len(keys[(0, 0)])))
    assert len(sleeps.calls) == 1
    assert len(list(tokens.iterdir())) == 8
    assert remaining(tmp_path / "remote") == set(keys[(0, 0)])


def test_the_shipped_task_needs_the_storage_plugin_not_the_controller(
    tmp_path: Path, spark: object
) -> None:
    """What executors unpickle runs with the controller unimportable, and loads of this
    repository only the plugin API and the fsspec storage plugin."""
    from pyspark import cloudpickle

    spark_delete._ship_by_value()
    keys = build_tree(tmp_path / "remote", uuid.uuid4(), partitions=(0,), epochs=(0,))[(0, 0)]
    deleter = FsspecRemoteStorageManager(str(tmp_path / "remote"), delete_threads=4)
    task = functools.partial(spark_delete._delete_slice, deleter.object_deleter(), None, None)
    (tmp_path / "task.pickle").write_bytes(cloudpickle.dumps(task))
    (tmp_path / "keys").write_text("\n".join([*keys, "absent.log"]), encoding="utf-8")
    script = (
        "import json, pickle, sys\n"
        "sys.modules['controller'] = None  # any import of it fails\n"
        "task = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "keys = open(sys.argv[2]).read().split('\\n')\n"
        "[outcome] = task(iter([(0, keys)]))\n"
        "print(outcome.deleted, outcome.missing, outcome.failed_handles)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "task.pickle"), str(tmp_path / "keys")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    counts, modules = done.stdout.strip().splitlines()
    assert counts == f"{len(keys)} 1 ()"
    loaded = json.loads(modules)
    assert "tiered.api" in loaded and "tiered.rsm.fsspec_delete" in loaded
    unwanted = ("controller.", "grpc", "tiered.rlmm", "tiered.cluster", "tiered.rpc")
    assert not [m for m in loaded if m.startswith(unwanted)]
    assert remaining(tmp_path / "remote") == set()


# ----------------------------------------------------------------------------- session


def test_session_settings(provider: SparkSessionProvider, spark: object) -> None:
    conf = spark.sparkContext.getConf()  # type: ignore[attr-defined]
    assert conf.get("spark.app.name") == "tiered-bulk-delete"
    assert conf.get("spark.master") == "local[2]"
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.ui.showConsoleProgress") == "false"
    assert "-Dlog4j2.configurationFile=file:" in conf.get("spark.driver.extraJavaOptions")
    assert os.environ["PYSPARK_PYTHON"] == sys.executable
    assert os.environ["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert provider.started and provider.start_seconds is not None
    assert provider.get() is spark


def test_effective_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert SparkSessionProvider().effective_master() == "local[*]"
    assert SparkSessionProvider("spark://h:7077").effective_master() == "spark://h:7077"
    assert SparkSessionProvider(conf={"spark.master": "local[3]"}).effective_master() is None
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")  # launched by spark-submit
    assert SparkSessionProvider().effective_master() is None


def test_default_slices() -> None:
    default_slices = spark_delete.default_slices
    assert default_slices(0, 2) == default_slices(499, 2) == 1
    assert default_slices(4000, 2) == 8  # four per core
    assert default_slices(1200, 8) == 3  # at least 500 keys each
    assert default_slices(400_000, 2) == 50  # at most 8000 keys each
