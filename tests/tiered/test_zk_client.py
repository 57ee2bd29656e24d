"""The ZooKeeper helpers every client shares (``tiered.zk_client``) and the bulk reads
(``tiered.zk_multi_read``), against a real server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from tiered import zk_multi_read
from tiered.rlmm.backend import Versioned
from tiered.rlmm.zookeeper_backend import ZooKeeperBackend
from tiered.zk_client import ZkClient, split_connect_string
from tiered.zk_multi_read import MULTI_READS_IN_FLIGHT, BulkReader


@pytest.mark.parametrize(
    ("connect", "expected"),
    [
        ("h1:2181", ("h1:2181", "")),
        ("h1:2181,h2:2181/chroot/x", ("h1:2181,h2:2181", "/chroot/x")),
        (" h1:2181/chroot/ ", ("h1:2181", "/chroot")),
        ("h1:2181/", ("h1:2181", "")),
    ],
)
def test_split_connect_string(connect: str, expected: tuple[str, str]) -> None:
    assert split_connect_string(connect) == expected


def test_a_connect_string_without_hosts_is_refused() -> None:
    with pytest.raises(ValueError, match="names no host"):
        split_connect_string("/chroot")


@pytest.fixture
def zk(zk_connect: str) -> Iterator[ZkClient]:
    """A started client under a fresh chroot below this test's (created by ``start``)."""
    client = ZkClient(f"{zk_connect}/below", session_timeout_s=10.0)
    client.start(15.0, "/parent/child")
    try:
        yield client
    finally:
        client.close()


@pytest.mark.zookeeper
def test_start_creates_the_chroot_and_the_parents(zk: ZkClient) -> None:
    assert zk.chroot.endswith("/below")
    assert zk.children(zk.path("/parent")) == ["child"]
    assert zk.children(zk.path("/nowhere")) == []
    assert zk.get(zk.path("/nowhere")) is None


@pytest.mark.zookeeper
@pytest.mark.parametrize("multi_read", [True, False])
def test_bulk_reads_give_data_and_version_in_order(
    zk: ZkClient, multi_read: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small requests and windows, so that a few znodes fill the pipeline several times over.
    monkeypatch.setattr(zk_multi_read, "MULTI_READ_OPS", 10)
    monkeypatch.setattr(zk_multi_read, "READ_WINDOW", 10)
    count = 10 * (MULTI_READS_IN_FLIGHT + 2) + 7  # the last request short
    paths = [zk.path(f"/parent/child/n{i}") for i in range(count)]
    txn = zk.kazoo.transaction()
    for i, path in enumerate(paths):
        if i % 5 == 0:
            continue  # missing
        txn.create(path, f"v{i}".encode())
        if i % 3 == 0:
            txn.set_data(path, f"w{i}".encode())
    assert not any(isinstance(result, Exception) for result in txn.commit())
    expected: list[tuple[bytes, int] | None] = [
        None if i % 5 == 0 else ((f"w{i}" if i % 3 == 0 else f"v{i}").encode(), int(i % 3 == 0))
        for i in range(count)
    ]

    assert BulkReader(zk, multi_read=multi_read).read(paths) == expected
    assert BulkReader(zk, multi_read=multi_read).read([]) == []


@pytest.mark.zookeeper
def test_a_multi_read_error_other_than_no_node_is_raised(zk: ZkClient) -> None:
    secret = zk.path("/parent/child/secret")
    zk.kazoo.create(secret, b"s", acl=[make_digest_acl("someone", "else", all=True)])
    try:
        with pytest.raises(NoAuthError):
            BulkReader(zk).read([zk.path("/parent/child"), secret])
    finally:
        zk.kazoo.delete(secret)  # the parent's ACL allows it; listing its children would not


@pytest.mark.zookeeper
def test_the_rlmm_backend_falls_back_when_the_server_refuses_multi_read(
    zk_connect: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    backend = ZooKeeperBackend(zk_connect)
    try:
        backend.create("a/x", b"1")
        backend.create("a/y", b"2")
        # An opcode the server does not know: it answers UNIMPLEMENTED, then drops the connection,
        # as a ZooKeeper older than 3.6 does with multiRead.
        monkeypatch.setattr(zk_multi_read.MultiRead, "type", 99)
        assert backend.get_many(["a/x", "a/missing", "a/y"]) == [
            Versioned(b"1", 0),
            None,
            Versioned(b"2", 0),
        ]
        assert "no multiRead" in caplog.text
        caplog.clear()
        assert backend.get_by_prefix("a") == {"x": Versioned(b"1", 0), "y": Versioned(b"2", 0)}
        assert "no multiRead" not in caplog.text  # not tried again
    finally:
        backend.close()
