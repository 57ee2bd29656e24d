"""The fsspec RemoteStorageManager's bulk delete capability (tiered.api.RemoteStorageBulkDeleter):
listing by ``te=`` prefix and its picklable object deleter, on a local directory, a file:// URL,
fsspec's memory filesystem and S3 (a real moto server over HTTP)."""

from __future__ import annotations

import dataclasses
import pickle
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pytest

from tests.support.remote_tree import (
    TOPIC,
    ObjectStore,
    block,
    build_tree,
    listed,
    remaining,
    write_objects,
)
from tests.support.s3 import S3Store
from tiered import rsm
from tiered.api import (
    DeleteOutcome,
    RemoteStorageBulkDeleter,
    RemoteStorageException,
    TopicIdPartition,
)
from tiered.rsm import FsspecObjectDeleter, FsspecRemoteStorageManager, S3ObjectDeleter, fsspec_rsm


@dataclass
class Store:
    """A remote root, local or S3, with the config of a storage on it."""

    tree: Path | ObjectStore
    config: dict[str, str]

    def create(self, **extra: str) -> FsspecRemoteStorageManager:
        storage = rsm.create({**self.config, **extra})
        assert isinstance(storage, FsspecRemoteStorageManager)
        return storage


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "local":
        return Store(tmp_path, {"remote.storage.root": str(tmp_path)})
    s3: S3Store = request.getfixturevalue("s3_store")
    return Store(s3, s3.config())


def test_lists_only_epochs_below_e_of_the_partition(store: Store) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(store.tree, topic_id)
    build_tree(store.tree, uuid.uuid4())  # same topic name, another id: never listed
    # Not epoch directories (one that prefixes te=1 included): ignored.
    odd_dirs = ("te=01", "te=x", "tmp", "te=1x")
    write_objects(store.tree, {f"{TOPIC}-{topic_id}/0/{odd}/f": b"x" for odd in odd_dirs})
    storage = store.create()
    assert isinstance(storage, RemoteStorageBulkDeleter)

    assert listed(storage, topic_id, 0, 2) == sorted(keys[(0, 0)]) + sorted(keys[(0, 1)])
    assert listed(storage, topic_id, 1, 1) == sorted(keys[(1, 0)])
    assert sorted(listed(storage, topic_id, 1, 3)) == sorted(
        keys[(1, 0)] + keys[(1, 1)] + keys[(1, 2)]
    )
    assert listed(storage, topic_id, 0, 0) == []
    assert listed(storage, topic_id, 7, 3) == []
    nowhere = store.create(**{"remote.storage.root": f"{store.config['remote.storage.root']}/no"})
    assert listed(nowhere, topic_id, 0, 3) == []
    with pytest.raises(ValueError, match="tiered_epoch"):
        listed(storage, topic_id, 0, -1)
    with pytest.raises(TypeError, match="TopicIdPartition"):
        next(storage.list_objects_below_epoch("orders-0", 1))  # type: ignore[arg-type]


def test_listing_comes_in_batches_each_handle_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fsspec_rsm, "LIST_BATCH_SIZE", 5)
    topic_id = uuid.uuid4()
    keys = build_tree(store.tree, topic_id, partitions=(0,), epochs=(0, 1, 2), segments=3)
    storage = store.create()
    batches = list(storage.list_objects_below_epoch(TopicIdPartition(topic_id, TOPIC, 0), 2))
    assert [len(b) for b in batches] == [5, 5, 2, 5, 5, 2]  # 12 objects an epoch
    flat = [h for b in batches for h in b]
    assert sorted(flat) == sorted(keys[(0, 0)] + keys[(0, 1)])
    assert len(set(flat)) == len(flat)


def test_lists_and_deletes_on_an_fsspec_url(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0, 1))
    storage = rsm.create({"remote.storage.root": f"file://{tmp_path}"})
    assert isinstance(storage, FsspecRemoteStorageManager)
    handles = listed(storage, topic_id, 0, 1)
    assert handles == sorted(keys[(0, 0)])
    assert storage.object_deleter().delete_objects(handles) == DeleteOutcome(len(handles))
    assert remaining(tmp_path) == set(keys[(0, 1)])


def test_memory_filesystem() -> None:
    fs = fsspec.filesystem("memory")
    topic_id = uuid.uuid4()
    root = f"memory://bulk-{topic_id.hex}"
    keys = [f"{TOPIC}-{topic_id}/0/te={e}/{0:020d}-{uuid.uuid4()}.log" for e in (0, 1)]
    for key in keys:
        fs.pipe_file(f"/bulk-{topic_id.hex}/{key}", b"x")
    storage = FsspecRemoteStorageManager(root)
    assert listed(storage, topic_id, 0, 1) == [keys[0]]
    outcome = storage.object_deleter().delete_objects([keys[0], keys[0] + ".gone"])
    assert outcome == DeleteOutcome(deleted=1, missing=1)
    assert fs.exists(f"/bulk-{topic_id.hex}/{keys[1]}")
    fs.rm(f"/bulk-{topic_id.hex}", recursive=True)


def test_a_failing_delete_is_reported_and_the_rest_deleted(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    keys = build_tree(tmp_path, topic_id, partitions=(0,), epochs=(0,), segments=5)[(0, 0)]
    for key in (keys[3], keys[11]):
        block(tmp_path, key)
    deleter = FsspecRemoteStorageManager(str(tmp_path), delete_threads=3).object_deleter()
    outcome = deleter.delete_objects(keys)
    assert outcome.deleted == len(keys) - 2 and outcome.missing == 0
    assert sorted(outcome.failed_handles) == sorted([keys[3], keys[11]])
    assert outcome.first_error is not None and outcome.first_error.startswith((keys[3], keys[11]))
    assert {k for k in remaining(tmp_path) if not k.endswith("/inside")} == set()
    assert deleter.delete_objects([]) == DeleteOutcome()


def test_the_deleter_runs_a_pool_of_the_configured_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = build_tree(tmp_path, uuid.uuid4(), partitions=(0,), epochs=(0,), segments=5)[(0, 0)]
    storage = rsm.create(
        {"remote.storage.root": str(tmp_path), "remote.storage.delete.threads": "3"}
    )
    assert isinstance(storage, FsspecRemoteStorageManager)
    deleter = storage.object_deleter()
    assert deleter == FsspecObjectDeleter(str(tmp_path), threads=3)
    fs = fsspec.filesystem("file")
    names: set[str] = set()
    all_in = threading.Condition()
    real_rm = fs.rm_file

    def recording_rm(path: str, *args: Any, **kwargs: Any) -> None:
        with all_in:  # each thread's first delete waits for the others: all 3 run at once
            names.add(threading.current_thread().name)
            all_in.notify_all()
            all_in.wait_for(lambda: len(names) >= 3, timeout=10)
        real_rm(path, *args, **kwargs)

    monkeypatch.setattr(fs, "rm_file", recording_rm)
    assert deleter.delete_objects(keys) == DeleteOutcome(len(keys))
    assert len(names) == 3 and all(n.startswith("rsm-delete") for n in names)


def test_the_deleter_pickles_to_an_equal_deleter_that_works(store: Store) -> None:
    keys = build_tree(store.tree, uuid.uuid4(), partitions=(0,), epochs=(0,), segments=2)[(0, 0)]
    deleter = store.create(**{"remote.storage.delete.threads": "2"}).object_deleter()
    copy = pickle.loads(pickle.dumps(deleter))
    if isinstance(deleter, S3ObjectDeleter):  # its credentials stay: the copy reads their file
        unsent = dataclasses.replace(deleter.settings, credentials=None)
        deleter = dataclasses.replace(deleter, settings=unsent)
    assert copy == deleter
    assert copy.delete_objects(keys[:5]) == DeleteOutcome(5)
    # Missing objects count as deleted (S3 can not tell them apart) or as missing.
    outcome = copy.delete_objects(keys)
    assert outcome.done == len(keys) and outcome.failed == 0
    assert remaining(store.tree) == set()


def test_an_unusable_store_fails_the_batch_as_a_whole() -> None:
    deleter = FsspecObjectDeleter("nosuchfs://bucket/x")
    with pytest.raises(RemoteStorageException, match="nosuchfs"):
        deleter.delete_objects(["a/b.log"])


@pytest.mark.parametrize("threads", [0, True, "2"])
def test_bad_deleter_threads(threads: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        FsspecObjectDeleter("/tmp/x", threads=threads)  # type: ignore[arg-type]
