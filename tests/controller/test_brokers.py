"""The controller's side of its brokers: liveness from heartbeats (``controller.brokers``) and each
broker's channel (``controller.broker_channel``) backing off while its broker is unreachable."""

from __future__ import annotations

import logging
import random
import re
import uuid
from collections.abc import Sequence

import pytest

from controller.broker_channel import AssignWork, BrokerChannel, DisableWork, RemoveWork, Work
from controller.brokers import BrokerLiveness
from tests.support.polling import poll_until
from tiered.cluster.model import BrokerRegistration
from tiered.errors import TieredError
from tiered.retry import ExponentialBackoff


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
