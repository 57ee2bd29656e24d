"""The bulk delete engine (controller.jobs.spark_delete) against real files and a real local Spark.

One SparkSession serves the whole module (starting one takes about 7 s). Failures are injected
without privileges (the tests run as root): a key whose path is a non-empty directory cannot be
deleted as a file; a task failure is injected by the shipped function's token-directory hook.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.jobs import spark_delete
from controller.jobs.spark_delete import (
    BulkDeleteError,
    BulkObjectDeleter,
    DeleteCounts,
    SparkSessionProvider,
    delete_keys_locally,
    delete_keys_with_spark,
    list_objects_below_epoch,
)
from tiered.retry import ExponentialBackoff

TOPIC = "orders"
SUFFIXES = ("log", "index", "timeindex", "epochs")
FAST_BACKOFF = ExponentialBackoff(initial_s=0.001, max_s=0.002)


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


def build_tree(
    root: Path,
    topic_id: uuid.UUID,
    partitions: tuple[int, ...] = (0, 1),
    epochs: tuple[int, ...] = (0, 1, 2),
    segments: int = 3,
    topic: str = TOPIC,
) -> dict[tuple[int, int], list[str]]:
    """Objects with the real naming; returns the keys by (partition, epoch)."""
    keys: dict[tuple[int, int], list[str]] = {}
    for partition in partitions:
        for epoch in epochs:
            directory = root / f"{topic}-{topic_id}" / str(partition) / f"te={epoch}"
            directory.mkdir(parents=True)
            found = keys.setdefault((partition, epoch), [])
            for n in range(segments):
                segment_id = uuid.uuid4()
                for suffix in SUFFIXES:
                    name = f"{n * 100:020d}-{segment_id}.{suffix}"
                    (directory / name).write_bytes(b"x")
                    found.append(f"{topic}-{topic_id}/{partition}/te={epoch}/{name}")
    return keys


def remaining(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def block(root: Path, key: str) -> None:
    """Replaces the object ``key`` by a non-empty directory: no delete of it as a file works."""
    path = root / key
    path.unlink()
    path.mkdir()
    (path / "inside").write_bytes(b"x")


def unblock(root: Path, key: str) -> None:
    path = root / key
    (path / "inside").unlink()
    path.rmdir()


# ----------------------------------------------------------------------------- listing


def test_lists_only_epochs_below_e_of_the_partition(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id)
    build_tree(tmp_path, uuid.uuid4())  # same topic name, another id: never listed
    # Not epoch directories: ignored.
    for odd in ("te=01", "te=x", "tmp"):
        (tmp_path / f"{TOPIC}-{topic_id}" / "0" / odd).mkdir()
        (tmp_path / f"{TOPIC}-{topic_id}" / "0" / odd / "f").write_bytes(b"x")

    listed = list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 0, 2)
    assert listed == sorted(keys[(0, 0)] + keys[(0, 1)])
    assert list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 1, 1) == sorted(keys[(1, 0)])
    assert list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 1, 3) == sorted(
        keys[(1, 0)] + keys[(1, 1)] + keys[(1, 2)]
    )
    assert list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 0, 0) == []
    assert list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 7, 3) == []
    assert list_objects_below_epoch(str(tmp_path / "nowhere"), TOPIC, topic_id, 0, 3) == []
    with pytest.raises(ValueError, match="tiered_epoch"):
        list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 0, -1)


def test_lists_and_deletes_on_an_fsspec_url(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0, 1))
    root = f"file://{tmp_path}"
    listed = list_objects_below_epoch(root, TOPIC, topic_id, 0, 1)
    assert listed == sorted(keys[(0, 0)])
    assert delete_keys_locally(root, listed) == DeleteCounts(len(listed), 0, 0)
    assert remaining(tmp_path) == set(keys[(0, 1)])


def test_memory_filesystem() -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    topic_id = uuid.uuid4()
    root = f"memory://bulk-{topic_id.hex}"
    keys = [f"{TOPIC}-{topic_id}/0/te={e}/{0:020d}-{uuid.uuid4()}.log" for e in (0, 1)]
    for key in keys:
        fs.pipe_file(f"/bulk-{topic_id.hex}/{key}", b"x")
    assert list_objects_below_epoch(root, TOPIC, topic_id, 0, 1) == [keys[0]]
    assert delete_keys_locally(root, [keys[0], keys[0] + ".gone"]) == DeleteCounts(1, 1, 0)
    assert fs.exists(f"/bulk-{topic_id.hex}/{keys[1]}")
    fs.rm(f"/bulk-{topic_id.hex}", recursive=True)


# ----------------------------------------------------------------------------- deleting


def test_fast_path_deletes_exactly_the_listed_keys_without_spark(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id)
    before = remaining(tmp_path)
    listed = list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 0, 2)
    gone = listed[:3]
    for key in gone:
        (tmp_path / key).unlink()
    unstarted = SparkSessionProvider()
    deleter = BulkObjectDeleter(str(tmp_path), unstarted, fast_path_max_objects=len(listed))

    counts = deleter.delete(listed)

    assert counts == DeleteCounts(deleted=len(listed) - 3, missing=3, failed=0)
    assert remaining(tmp_path) == before - set(listed)
    assert set(keys[(0, 2)]) <= remaining(tmp_path)
    assert not unstarted.started  # the fast path never starts a session


def test_spark_path_deletes_exactly_the_listed_keys(
    tmp_path: Path, provider: SparkSessionProvider, caplog: pytest.LogCaptureFixture
) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, segments=30)
    before = remaining(tmp_path)
    listed = list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 1, 2)
    assert len(listed) == 2 * 30 * 4
    gone = listed[::50]
    for key in gone:
        (tmp_path / key).unlink()
    deleter = BulkObjectDeleter(str(tmp_path), provider, fast_path_max_objects=10, slices=5)

    with caplog.at_level(logging.INFO, logger=spark_delete.__name__):
        counts = deleter.delete(listed)

    assert counts == DeleteCounts(len(listed) - len(gone), len(gone), 0)
    assert remaining(tmp_path) == before - set(listed)
    assert set(keys[(1, 2)]) <= remaining(tmp_path)
    assert set(keys[(0, 0)]) <= remaining(tmp_path)
    assert "via Spark" in caplog.text


def test_delete_keys_with_spark_sums_the_slices(tmp_path: Path, spark: object) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=25)
    listed = keys[(0, 0)]
    assert delete_keys_with_spark(spark, str(tmp_path), [], slices=3) == DeleteCounts(0, 0, 0)
    counts = delete_keys_with_spark(
        spark, str(tmp_path), [*listed, "absent/key.log"], slices=7, threads_per_slice=3
    )
    assert counts == DeleteCounts(len(listed), 1, 0)
    assert remaining(tmp_path) == set()


@pytest.mark.parametrize("path", ["fast", "spark"])
def test_undeletable_keys_fail_after_retries_and_the_rest_is_deleted(
    tmp_path: Path, provider: SparkSessionProvider, path: str
) -> None:
    topic_id = uuid.uuid4()
    build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=10)
    listed = list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 0, 1)
    blocked = sorted([listed[1], listed[17], listed[30]])
    for key in blocked:
        block(tmp_path, key)
    sleeps = Sleeps()
    deleter = BulkObjectDeleter(
        str(tmp_path),
        provider,
        fast_path_max_objects=1000 if path == "fast" else 5,
        retries=2,
        backoff=FAST_BACKOFF,
        sleep=sleeps,
    )

    counts = deleter.delete(listed)

    assert counts.failed == 3
    assert sorted(counts.failed_keys) == blocked
    assert counts.deleted == len(listed) - 3 and counts.missing == 0
    assert counts.first_error is not None and "Error" in counts.first_error
    assert len(sleeps.calls) == 2  # retried twice, then given up
    assert {k for k in remaining(tmp_path) if not k.endswith("/inside")} == set()


def test_only_failed_keys_are_retried(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=5)
    listed = list_objects_below_epoch(str(tmp_path), TOPIC, topic_id, 0, 1)
    blocked = [listed[0], listed[9]]
    for key in blocked:
        block(tmp_path, key)
    # During the backoff the obstacles go away: the retry finds those keys missing.
    sleeps = Sleeps(on_sleep=lambda: [unblock(tmp_path, k) for k in blocked])
    deleter = BulkObjectDeleter(
        str(tmp_path), SparkSessionProvider(), backoff=FAST_BACKOFF, sleep=sleeps
    )

    counts = deleter.delete(listed)

    # Had the retry covered every key, the already deleted ones would count as missing too.
    assert counts == DeleteCounts(deleted=len(listed) - 2, missing=2, failed=0)
    assert len(sleeps.calls) == 1
    assert remaining(tmp_path) == set()


def test_a_failing_spark_task_is_retried_as_a_whole(
    tmp_path: Path, provider: SparkSessionProvider, caplog: pytest.LogCaptureFixture
) -> None:
    topic_id = uuid.uuid4()
    build_tree(tmp_path / "remote", topic_id, partitions=(0, 1), epochs=(0,), segments=20)
    root = tmp_path / "remote"
    keys = list_objects_below_epoch(str(root), TOPIC, topic_id, 0, 1)
    keys += list_objects_below_epoch(str(root), TOPIC, topic_id, 1, 1)
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "fail-once").write_bytes(b"")
    sleeps = Sleeps()
    deleter = BulkObjectDeleter(
        str(root),
        provider,
        fast_path_max_objects=10,
        slices=4,
        backoff=FAST_BACKOFF,
        sleep=sleeps,
        fail_task_tokens_dir=str(tokens),
    )

    with caplog.at_level(logging.WARNING, logger=spark_delete.__name__):
        counts = deleter.delete(keys)

    assert list(tokens.iterdir()) == []  # the token was taken: one task did fail
    assert len(sleeps.calls) == 1
    assert "injected task failure" in caplog.text
    assert counts.failed == 0 and counts.failed_keys == ()
    assert counts.deleted + counts.missing == len(keys)
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
        str(tmp_path / "remote"),
        provider,
        fast_path_max_objects=0,
        retries=1,
        slices=1,
        backoff=FAST_BACKOFF,
        sleep=sleeps,
        fail_task_tokens_dir=str(tokens),
    )

    with pytest.raises(
        BulkDeleteError, match=r"20 objects .* after 2 attempts.*injected task failure"
    ):
        deleter.delete(keys[(0, 0)])
    assert len(sleeps.calls) == 1
    assert len(list(tokens.iterdir())) == 8
    assert remaining(tmp_path / "remote") == set(keys[(0, 0)])


def test_the_shipped_function_needs_only_fsspec_and_the_standard_library(
    tmp_path: Path, spark: object
) -> None:
    """What executors unpickle runs with this repository's packages unimportable."""
    from pyspark import cloudpickle

    spark_delete._ship_by_value()
    keys = build_tree(tmp_path / "remote", uuid.uuid4(), partitions=(0,), epochs=(0,))[(0, 0)]
    task = functools.partial(spark_delete._delete_slice, str(tmp_path / "remote"), 4, 0.0, None)
    (tmp_path / "task.pickle").write_bytes(cloudpickle.dumps(task))
    (tmp_path / "keys").write_text("\n".join([*keys, "absent.log"]), encoding="utf-8")
    script = (
        "import pickle, sys\n"
        "for name in ('controller', 'tiered'):\n"
        "    sys.modules[name] = None  # any import of them fails\n"
        "task = pickle.loads(open(sys.argv[1], 'rb').read())\n"
        "keys = open(sys.argv[2]).read().split('\\n')\n"
        "print(list(task(iter(keys))))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "task.pickle"), str(tmp_path / "keys")],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"[({len(keys)}, 1, 0, [], None)]"
    assert remaining(tmp_path / "remote") == set()


# ----------------------------------------------------------------------------- session, counts


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


def test_delete_counts_add() -> None:
    a = DeleteCounts(1, 2, 1, ("k1",), "k1: OSError")
    b = DeleteCounts(10, 20, 2, ("k2", "k3"))
    assert a + b == DeleteCounts(11, 22, 3, ("k1", "k2", "k3"), "k1: OSError")
    assert (a + b).done == 33
    assert DeleteCounts(0, 0, 0) + b == b
