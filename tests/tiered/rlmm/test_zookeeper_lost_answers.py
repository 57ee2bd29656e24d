"""RLMM writes on ZooKeeper whose answer is lost (the connection drops while a transaction is in
flight, as when the ZooKeeper leader dies): the transaction may have committed. The backend reads
it back once the session is back, so a write that committed is not reported failed (a broker would
copy the segment again and leave a duplicate) and one that did not is not taken for done."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.exceptions import ConnectionLoss

from tests.rlmm_support import COPY_SEGMENT_FINISHED, new_tp, segment, update_of
from tiered import rlmm
from tiered.api import RemoteStorageException
from tiered.rlmm import StorageBackendError, StoreRemoteLogMetadataManager
from tiered.rlmm.backend import Create, Update, Versioned
from tiered.rlmm.zookeeper_backend import ZooKeeperBackend

pytestmark = pytest.mark.zookeeper


def _lose_next_answer(backend: ZooKeeperBackend, *, committed: bool) -> None:
    """The backend's next transaction reports ConnectionLoss after committing (``committed``)
    or without being sent."""
    kazoo = backend._zk.kazoo
    original = kazoo.transaction

    def transaction():  # type: ignore[no-untyped-def]
        kazoo.transaction = original  # only the next one
        txn = original()
        commit_async = txn.commit_async

        def lost_commit_async():  # type: ignore[no-untyped-def]
            if committed:
                commit_async().get(timeout=10)
            lost = kazoo.handler.async_result()
            lost.set_exception(ConnectionLoss())
            return lost

        txn.commit_async = lost_commit_async
        return txn

    kazoo.transaction = transaction


@pytest.fixture
def backend(zk_connect: str) -> Iterator[ZooKeeperBackend]:
    opened = ZooKeeperBackend(zk_connect)
    try:
        yield opened
    finally:
        opened.close()


def test_a_committed_transaction_whose_answer_is_lost_succeeds(backend: ZooKeeperBackend) -> None:
    backend.multi([Create("topics/a/record", b"v0")])
    _lose_next_answer(backend, committed=True)

    backend.multi([Update("topics/a/record", b"v1", 0), Create("topics/a/segments/s1", b"s1")])

    assert backend.get("topics/a/record") == Versioned(b"v1", 1)
    assert backend.get("topics/a/segments/s1") == Versioned(b"s1", 0)


def test_a_lost_transaction_that_did_not_commit_is_reported_unknown(
    backend: ZooKeeperBackend,
) -> None:
    backend.multi([Create("topics/b/record", b"v0")])
    _lose_next_answer(backend, committed=False)

    with pytest.raises(StorageBackendError, match="outcome unknown"):
        backend.multi([Update("topics/b/record", b"v1", 0), Create("topics/b/segments/s1", b"")])

    assert backend.get("topics/b/record") == Versioned(b"v0", 0)
    assert backend.get("topics/b/segments/s1") is None


def test_a_segment_copy_whose_rlmm_answers_are_lost_is_recorded_once(zk_connect: str) -> None:
    manager = rlmm.create(
        {"rlmm.backend": "zookeeper", "rlmm.zookeeper.connect": zk_connect, "broker.id": "1"}
    )
    assert isinstance(manager, StoreRemoteLogMetadataManager)
    backend = manager.backend
    assert isinstance(backend, ZooKeeperBackend)
    try:
        tp = new_tp()
        manager.on_partition_leadership_changes({tp}, set())
        copied = segment(tp, {0: 0}, 0, 99)
        _lose_next_answer(backend, committed=True)
        manager.add_remote_log_segment_metadata(copied)
        _lose_next_answer(backend, committed=True)
        manager.update_remote_log_segment_metadata(update_of(copied, COPY_SEGMENT_FINISHED))

        listed = list(manager.list_remote_log_segments(tp))
        assert [(m.remote_log_segment_id, m.state) for m in listed] == [
            (copied.remote_log_segment_id, COPY_SEGMENT_FINISHED)
        ]
        assert manager.remote_log_size(tp, 0) == copied.segment_size_in_bytes
        # A write that did not commit still fails, for the copy to be retried.
        _lose_next_answer(backend, committed=False)
        with pytest.raises(RemoteStorageException, match="outcome unknown"):
            manager.add_remote_log_segment_metadata(segment(tp, {0: 100}, 100, 199))
        assert len(list(manager.list_remote_log_segments(tp))) == 1
    finally:
        manager.close()
