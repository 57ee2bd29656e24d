"""The controller's side of its brokers: liveness from heartbeats (``controller.brokers``), each
broker's channel (``controller.broker_channel``) backing off while its broker is unreachable, and
when each broker was last reached (``controller.reachability``)."""

from __future__ import annotations

import logging
import random
import re
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from cli.launch.ports import free_port
from controller.broker_channel import AssignWork, BrokerChannel, DisableWork, RemoveWork, Work
from controller.brokers import BrokerLiveness
from controller.reachability import BrokerReachability, Reach
from tests.support.polling import poll_until
from tiered.cluster.model import BrokerRegistration
from tiered.errors import TieredError
from tiered.retry import ExponentialBackoff
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc


def test_liveness_fences_brokers_whose_heartbeats_lapse() -> None:
    now = [0.0]
    liveness = BrokerLiveness(session_timeout_s=3, clock=lambda: now[0])
    first = BrokerRegistration(1, "h", 1)
    assert liveness.register(first) is True
    assert liveness.register(first) is False  # same incarnation
    now[0] = 2.0
    assert liveness.heartbeat(1, first.incarnation_id)
    now[0] = 4.9
    assert liveness.is_live(1)
    now[0] = 5.1
    assert not liveness.is_live(1) and liveness.fenced() == {1}
    assert not liveness.heartbeat(1, uuid.uuid4())  # another incarnation must register
    assert liveness.register(BrokerRegistration(1, "h", 1)) is True
    assert liveness.is_live(1)


def test_backoff_grows_is_capped_and_jittered() -> None:
    backoff = ExponentialBackoff(initial_s=0.1, max_s=1.0, jitter=0.2)
    rng = random.Random(7)
    delays = [backoff.delay_s(n, rng) for n in range(10)]
    assert 0.08 <= delays[0] <= 0.1
    assert all(0.8 <= d <= 1.0 for d in delays[5:])
    assert len({round(d, 6) for d in delays[5:]}) > 1  # jittered, not lockstep
    with pytest.raises(ValueError):
        ExponentialBackoff(initial_s=2, max_s=1)


class _UnreachableBroker:
    """A ChannelOwner whose broker never answers: every round fails."""

    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        raise RuntimeError("unreachable")

    def on_disable_response(
        self, broker_id: int, work: DisableWork, errors: Sequence[TieredError | None]
    ) -> None:
        raise AssertionError("no request is sent")

    def on_assign_response(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None:
        raise AssertionError("no request is sent")

    def on_remove_response(
        self, broker_id: int, work: RemoveWork, errors: Sequence[TieredError | None]
    ) -> None:
        raise AssertionError("no request is sent")

    def on_stale_controller_epoch(self, broker_id: int, message: str) -> None:
        raise AssertionError("no request is sent")


def test_a_channel_backs_off_more_each_failure_until_its_broker_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Backoff long enough that only a wake starts the next round.
    channel = BrokerChannel(7, _UnreachableBroker(), ExponentialBackoff(60.0, 600.0), 1.0)
    attempts: list[tuple[int, float]] = []  # (attempt, next wait) as logged

    def attempt() -> int:
        before = len(attempts)
        channel.wake()

        def logged() -> bool:
            attempts[:] = [
                (int(found.group(1)), float(found.group(2)))
                for r in caplog.records
                if r.name == "controller.broker_channel"
                and (
                    found := re.search(
                        r"request failed \(attempt (\d+), next in ([\d.]+)s", r.getMessage()
                    )
                )
            ]
            return len(attempts) > before

        poll_until(logged, what="a failed round")
        return attempts[-1][0]

    try:
        with caplog.at_level(logging.WARNING, logger="controller.broker_channel"):
            assert [attempt(), attempt()] == [1, 2]
            channel.reset_backoff()  # the broker re-registered
            assert attempt() == 1
    finally:
        channel.close()
    # The first failure in a row waits the initial delay (jittered below it), the next twice it.
    waits = [wait for _, wait in attempts]
    assert 48 <= waits[0] <= 60 and 96 <= waits[1] <= 120 and 48 <= waits[2] <= 60


# ----------------------------------------------------------------------------- reachability


def test_a_broker_is_reached_by_answered_calls_and_by_what_it_says_while_calls_get_through() -> (
    None
):
    now = [100.0]
    reach = BrokerReachability(clock=lambda: now[0])
    reach.begin_term()
    now[0] = 103.0
    assert reach.since_reached_s(1) == 3.0  # never reached this term: since the term began
    reach.heard(1)  # a heartbeat
    now[0] = 104.5
    assert reach.since_reached_s(1) == 1.5
    assert reach.reach(1, request_timeout_s=1.5) == Reach(1.5, reachable=True)
    assert reach.reach(1, request_timeout_s=1.0) == Reach(1.5, reachable=False)

    reach.unanswered(1)  # a call to it timed out: a one-way cut
    now[0] = 110.0
    reach.heard(1)  # its heartbeats still arrive, and do not count
    assert reach.since_reached_s(1) == 7.0  # last reached by the heartbeat at 103
    reach.answered(1)  # a call got through again
    now[0] = 111.0
    assert reach.since_reached_s(1) == 1.0
    reach.heard(1)  # heartbeats count again
    assert reach.since_reached_s(1) == 0.0

    reach.unanswered(1)
    now[0] = 115.0
    reach.nothing_owed(1)  # what it was owed went away (its topic was deleted)
    reach.heard(1)  # so its heartbeats count again
    assert reach.since_reached_s(1) == 0.0

    now[0] = 120.0
    reach.begin_term()  # a new term knows nothing yet
    now[0] = 122.0
    assert reach.since_reached_s(1) == 2.0


def test_a_broker_held_by_its_zookeeper_session_is_reached_until_it_drops_out() -> None:
    now = [0.0]
    reach = BrokerReachability(clock=lambda: now[0])
    reach.hold([1, 2])
    now[0] = 50.0
    assert reach.since_reached_s(1) == reach.since_reached_s(2) == 0.0
    reach.unanswered(2)  # held, but a call to it went unanswered from now on
    reach.hold([1])  # broker 1's session holds on; broker 2's expired
    now[0] = 54.0
    assert reach.since_reached_s(1) == 0.0
    assert reach.since_reached_s(2) == 4.0
    reach.hold([])
    now[0] = 57.0
    assert reach.since_reached_s(1) == 3.0  # last held at 54


class _AssigningOwner(_UnreachableBroker):
    """A ChannelOwner that owes its broker one (empty) AssignPartitions, sent to ``endpoint``."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.answered = threading.Event()

    def next_work(self, broker_id: int) -> tuple[str, Work] | None:
        if self.answered.is_set():
            return None
        return self.endpoint, AssignWork(1, (), broker_id)

    def on_assign_response(
        self, broker_id: int, work: AssignWork, errors: Sequence[TieredError | None]
    ) -> None:
        self.answered.set()


class _AnsweringBroker(pb_grpc.BrokerServiceServicer):
    def AssignPartitions(
        self, request: pb.AssignPartitionsRequest, context: grpc.ServicerContext
    ) -> pb.AssignPartitionsResponse:
        return pb.AssignPartitionsResponse()


def test_a_channel_records_whether_its_calls_were_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    reach = BrokerReachability(clock=lambda: now[0])
    port = free_port()
    owner = _AssigningOwner(f"127.0.0.1:{port}")  # nothing listens there yet
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    now[0] = 5.0
    reach.heard(7)  # a heartbeat
    with caplog.at_level(logging.WARNING, logger="controller.broker_channel"):
        channel = BrokerChannel(7, owner, ExponentialBackoff(0.05, 0.05), 1.0, reachability=reach)
        try:
            channel.wake()
            poll_until(
                lambda: any("request failed" in r.getMessage() for r in caplog.records),
                what="an unanswered call",
            )
            now[0] = 10.0
            reach.heard(7)  # counts for nothing while the calls go unanswered
            assert reach.since_reached_s(7) == 5.0

            pb_grpc.add_BrokerServiceServicer_to_server(_AnsweringBroker(), server)  # type: ignore[no-untyped-call]
            server.add_insecure_port(f"127.0.0.1:{port}")
            server.start()
            poll_until(owner.answered.is_set, what="an answered call")
            assert reach.since_reached_s(7) == 0.0
        finally:
            channel.close()
            server.stop(grace=None)
