"""AdminService WatchTopics on an in-process controller behind a real gRPC server: an answer at
once, then one per change (woken by the change, not by a poll), a watcher that goes away gives
its slot back, and one beyond the limit is refused so that the client polls instead."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from controller import admin_servicer
from controller.admin_servicer import MAX_WATCHES
from controller.broker_channel import DisableWork
from controller.controller import Controller
from tests.support.controller import running_controller
from tests.support.polling import poll_until
from tiered.admin import AdminClient
from tiered.admin_serde import TopicDescription
from tiered.cluster.model import TieredState
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc

TIERED = {"remote.storage.enable": "true"}


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Controller, str]]:
    # Without a change a watch would describe again only after this long: a test that sees
    # every answer quickly saw it woken by the change.
    monkeypatch.setattr(admin_servicer, "WATCH_REFRESH_S", 60.0)
    with running_controller(tmp_path) as controller:
        server = grpc.server(ThreadPoolExecutor(max_workers=MAX_WATCHES + 4))
        pb_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
            controller.admin_servicer(),
            server,
        )
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            yield controller, f"127.0.0.1:{port}"
        finally:
            server.stop(0).wait()


def _ack_every_disable(controller: Controller) -> None:
    found = controller.broker_work.next_work(1)
    assert found is not None and isinstance(found[1], DisableWork)
    work = found[1]
    controller.broker_work.on_disable_response(1, work, [None] * len(work.entries))


def test_a_watch_answers_now_and_on_each_change(served: tuple[Controller, str]) -> None:
    controller, address = served
    controller.admin.create_topic("t", 2, TIERED)
    answers: list[list[TopicDescription]] = []
    arrived = threading.Condition()

    def watch() -> None:
        with AdminClient(address) as client:
            for described in client.watch_topics(["t"], timeout_s=30):
                with arrived:
                    answers.append(described)
                    arrived.notify_all()
                if described[0].tiered_state is TieredState.DISABLED:
                    return

    def states() -> list[TieredState]:
        return [a[0].tiered_state for a in answers]

    watcher = threading.Thread(target=watch)
    watcher.start()
    with arrived:
        assert arrived.wait_for(lambda: len(answers) == 1, 10)
    assert states() == [TieredState.ENABLED]
    controller.admin.alter_configs("t", set_={"remote.storage.enable": "false"})
    with arrived:
        assert arrived.wait_for(lambda: TieredState.DISABLING in states(), 10)
    _ack_every_disable(controller)
    watcher.join(10)
    assert not watcher.is_alive()
    assert states()[0] == TieredState.ENABLED and states()[-1] == TieredState.DISABLED
    assert answers[-1][0].tiered_epoch == 1


def test_a_watcher_that_goes_away_gives_its_slot_back(served: tuple[Controller, str]) -> None:
    controller, address = served
    controller.admin.create_topic("t", 1, TIERED)  # unchanged from now on
    channel = grpc.insecure_channel(address)
    stub = pb_grpc.AdminServiceStub(channel)
    request = pb.DescribeTopicsRequest(names=["t"])
    try:

        def open_all() -> list[Any]:
            streams = [stub.WatchTopics(request, timeout=30) for _ in range(MAX_WATCHES)]
            for stream in streams:
                assert next(stream).topics[0].name == "t"  # each one is being served
            return streams

        streams = open_all()
        refused = stub.WatchTopics(request, timeout=30)
        with pytest.raises(grpc.RpcError) as info:
            next(refused)
        assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        for stream in streams:
            stream.cancel()  # the clients disconnect mid-stream, with nothing changing

        def slots_back() -> bool:
            probe = stub.WatchTopics(request, timeout=30)
            try:
                next(probe)
                return True
            except grpc.RpcError as e:
                assert e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                return False
            finally:
                probe.cancel()

        poll_until(slots_back, timeout=10, what="a watch slot to be given back")
        for stream in open_all():
            stream.cancel()
    finally:
        channel.close()
