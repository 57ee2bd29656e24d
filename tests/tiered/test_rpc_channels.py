"""open_channel and ChannelCache (tiered/rpc/channels.py) against a real gRPC server (the fake
AdminService of tests/support/fake_admin.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc
import pytest

from tests.support.fake_admin import FakeAdminServer
from tiered.rpc.channels import ChannelCache, ChannelCacheClosedError, open_channel
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAdminServer]:
    with FakeAdminServer() as started:
        yield started


def describe(stub: pb_grpc.AdminServiceStub) -> pb.DescribeClusterResponse:
    response: pb.DescribeClusterResponse = stub.DescribeCluster(
        pb.DescribeClusterRequest(), timeout=10
    )
    return response


def stubs() -> ChannelCache[pb_grpc.AdminServiceStub]:
    return ChannelCache(pb_grpc.AdminServiceStub)


def test_open_channel_reaches_the_endpoint_and_applies_options(server: FakeAdminServer) -> None:
    with open_channel(server.address) as channel:
        stub = pb_grpc.AdminServiceStub(channel)  # type: ignore[no-untyped-call]
        assert describe(stub).controller_endpoint == server.address
    tiny = [("grpc.max_receive_message_length", 16)]
    with (
        open_channel(server.address, options=tiny) as channel,
        pytest.raises(grpc.RpcError) as info,
    ):
        # The answer (three brokers) is larger than 16 bytes.
        describe(pb_grpc.AdminServiceStub(channel))  # type: ignore[no-untyped-call]
    assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]


def test_cache_keeps_one_channel_per_endpoint_across_threads(server: FakeAdminServer) -> None:
    cache = stubs()
    try:
        got: list[pb_grpc.AdminServiceStub] = []
        lock = threading.Lock()
        start = threading.Barrier(8)

        def get() -> None:
            start.wait()
            stub = cache.get(server.address)
            with lock:
                got.append(stub)

        threads = [threading.Thread(target=get) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(got) == 8 and all(stub is got[0] for stub in got)
        assert cache.get("127.0.0.1:1") is not got[0]  # another endpoint, another channel
        assert describe(cache.get(server.address)).controller_endpoint == server.address
    finally:
        cache.close()


def test_forget_closes_the_channel_and_the_next_get_opens_a_fresh_one(
    server: FakeAdminServer,
) -> None:
    cache = stubs()
    try:
        old = cache.get(server.address)
        cache.forget(server.address)
        with pytest.raises(ValueError):
            describe(old)  # closed: gRPC refuses to invoke on it
        fresh = cache.get(server.address)
        assert fresh is not old
        assert describe(fresh).controller_endpoint == server.address
        cache.forget("127.0.0.1:1")  # never opened: nothing to do
    finally:
        cache.close()


def test_close_closes_every_channel_and_refuses_later_gets(server: FakeAdminServer) -> None:
    cache = stubs()
    stub = cache.get(server.address)
    cache.close()
    with pytest.raises(ValueError):
        describe(stub)  # a stub handed out before the close fails cleanly
    with pytest.raises(ChannelCacheClosedError):
        cache.get(server.address)
    cache.close()  # idempotent
