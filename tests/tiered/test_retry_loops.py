"""The daemons' retrying loops that own their waiting (on an event, so that closing interrupts
it) all count through ``tiered.retry.Backoff``: the first failure in a row waits the schedule's
initial delay, each further one longer, capped and jittered, and a success starts the schedule
again. Driven in the test thread with a scripted attempt and an event whose timed waits return
at once: no real sleeps."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
from kazoo.retry import RetryFailedError

from broker.assignment_journal import AssignmentJournal
from broker.assignment_persister import PERSIST_DELAY_S, AssignmentPersister
from broker.controller_link import KRaftControllerLink
from broker.hosted_partitions import HostedPartitions
from broker.listener.server import KafkaServer
from broker.zk_registration import BrokerZkRegistration
from controller.leadership import Leadership, Term
from controller.store import MetadataStore, MetadataStoreError
from controller.store.zookeeper.leadership import Leadership as ZkLeadership
from controller.store.zookeeper.live_brokers import LiveBrokersWatch
from tiered.cluster.model import BrokerRegistration, MetadataImage
from tiered.retry import ExponentialBackoff, RetryPolicy
from tiered.retry_policies import ZOOKEEPER_RLMM_READ_RETRY, zookeeper_connection_retry
from tiered.rlmm.zookeeper_backend import ZooKeeperBackend
from tiered.zk_client import ZkClient, connection_retry, kazoo_retry

BACKOFF = ExponentialBackoff(initial_s=0.1, max_s=0.4, jitter=0.5)


class RecordingEvent(threading.Event):
    """An event whose timed waits return at once, as if they had timed out, and are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None:
            return super().wait()
        self.waits.append(timeout)
        return self.is_set()


class Script:
    """Each call takes the next step: an exception is raised, a callable is called (its result
    returned)."""

    def __init__(self, *steps: Exception | Callable[[], Any]) -> None:
        self.steps: Iterator[Exception | Callable[[], Any]] = iter(steps)
        self.calls = 0

    def __call__(self, *_args: Any, **_kwargs: Any) -> Any:
        self.calls += 1
        step = next(self.steps)
        if isinstance(step, Exception):
            raise step
        return step()


def assert_backoff(waits: list[float], *runs: int) -> None:
    """``waits`` are those of ``runs`` failures in a row, each run after a success: every run
    doubles from the first delay up to the cap, each wait jittered below its ceiling."""
    ceilings = [min(0.4, 0.1 * 2**n) for run in runs for n in range(run)]
    assert len(waits) == len(ceilings), waits
    for wait, ceiling in zip(waits, ceilings, strict=True):
        assert ceiling * 0.5 <= wait <= ceiling
    assert len(set(waits)) == len(waits)  # jittered: no two alike


def failures(count: int, error: Exception) -> list[Exception]:
    return [error] * count


def test_the_zookeeper_election_backs_off_and_starts_over_after_reaching_zookeeper() -> None:
    leadership = ZkLeadership(
        cast(ZkClient, None),
        threading.Event(),
        threading.Event(),
        1.0,
        "zk-store",
        election_backoff=BACKOFF,
    )
    lost = ConnectionLoss()
    attempts = Script(
        *failures(5, lost), lambda: None, *failures(2, MetadataStoreError("x")), lambda: 7
    )
    leadership._try_elect = attempts  # type: ignore[method-assign]
    leadership._await_controller_change = lambda stop: None  # type: ignore[method-assign]
    stop = RecordingEvent()

    assert leadership.elect(1, "h:1", stop) == 7

    assert_backoff(stop.waits, 5, 2)  # another controller answered in between: from the start


def test_the_zookeeper_election_gives_up_when_the_store_closes() -> None:
    closed = threading.Event()
    leadership = ZkLeadership(
        cast(ZkClient, None), threading.Event(), closed, 1.0, "zk-store", election_backoff=BACKOFF
    )

    def close_then_fail() -> None:
        closed.set()
        raise ConnectionLoss()

    leadership._try_elect = Script(ConnectionLoss(), close_then_fail)  # type: ignore[method-assign]
    stop = RecordingEvent()
    with pytest.raises(MetadataStoreError, match="closed during the election"):
        leadership.elect(1, "h:1", stop)
    assert_backoff(stop.waits, 1)


class FakeStore:
    """What ``controller.leadership.Leadership`` asks of a metadata store."""

    def __init__(self, elect: Script, load: Script) -> None:
        self.elect = elect
        self.load = load
        self.leadership_lost = threading.Event()
        self.leadership_lost.set()  # an activated term ends at once
        self.resigned = 0

    def resign(self) -> None:
        self.resigned += 1

    def active_controller(self) -> None:
        return None


class QuietListener:
    def __init__(self) -> None:
        self.terms: list[int] = []

    def take_over(self, epoch: int, image: MetadataImage) -> None:
        self.terms.append(epoch)

    def serve(self, epoch: int, image: MetadataImage) -> None:
        pass

    def stand_down(self) -> None:
        pass


def test_a_controller_campaign_backs_off_on_store_and_activation_failures() -> None:
    down = MetadataStoreError("store down")
    store = FakeStore(
        elect=Script(*failures(2, down), lambda: 1, lambda: 2, down, lambda: None),
        load=Script(down, MetadataImage),  # activation of epoch 1 fails, of epoch 2 works
    )
    listener = QuietListener()
    ms = cast(MetadataStore, store)
    leadership = Leadership(1, "h:1", ms, Term(1, ms), listener, backoff=BACKOFF)
    stop = RecordingEvent()

    leadership.run(stop)

    assert (store.load.calls, listener.terms) == (2, [2])  # epoch 1's image did not load
    # Two failed elections and a failed activation in a row; the term of epoch 2 started over.
    waits = [w for w in stop.waits if w != 0.5]  # 0.5: the serving term's own polls
    assert_backoff(waits, 3, 1)


def registration(backoff: ExponentialBackoff) -> BrokerZkRegistration:
    return BrokerZkRegistration(
        "127.0.0.1:1", BrokerRegistration(1, "127.0.0.1", 1), backoff=backoff
    )


def test_broker_reregistration_backs_off_and_each_new_session_starts_over() -> None:
    broker = registration(BACKOFF)
    closed = RecordingEvent()
    broker._closed = closed
    lost = ConnectionLoss()
    broker._register = Script(  # type: ignore[method-assign]
        *failures(4, lost),
        broker._wake.set,  # registered; then a new session wakes the worker again
        *failures(2, lost),
        closed.set,
    )
    broker._wake.set()
    try:
        broker._run()
    finally:
        broker._zk.close()
    assert_backoff(closed.waits, 4, 2)


def test_live_brokers_reads_back_off_and_start_over_after_a_delivery() -> None:
    one = BrokerRegistration(1, "127.0.0.1", 1, incarnation_id=uuid.uuid4())
    delivered: list[dict[int, BrokerRegistration]] = []
    lost = ConnectionLoss()
    watch: LiveBrokersWatch

    def deliver(brokers: dict[int, BrokerRegistration]) -> None:
        delivered.append(brokers)
        if len(delivered) == 2:
            watch._stopped.set()
        watch._dirty.set()  # the next change

    reads = Script(*failures(3, lost), lambda: {1: one}, *failures(2, lost), lambda: {})
    watch = LiveBrokersWatch(cast(ZkClient, None), reads, deliver, backoff=BACKOFF)
    stopped = RecordingEvent()
    watch._stopped = stopped
    watch._dirty.set()

    watch._deliver_changes()

    assert delivered == [{1: one}, {}]
    assert_backoff(stopped.waits, 3, 2)


def test_background_persists_back_off_and_start_over_after_one_succeeds(tmp_path: Path) -> None:
    persister = AssignmentPersister(AssignmentJournal(tmp_path), HostedPartitions(1), BACKOFF)
    closed = RecordingEvent()
    persister._closed = closed
    full = OSError("disk full")

    def finish() -> None:
        closed.set()
        persister._persist_wanted.set()

    persister.persist = Script(  # type: ignore[method-assign]
        *failures(3, full), persister._persist_wanted.set, *failures(2, full), finish
    )
    persister._persist_wanted.set()
    try:
        persister._persist_later()
    finally:
        del persister.persist
        persister.close()
    # Every round first waits for the changes of a burst to gather.
    assert_backoff([w for w in closed.waits if w != PERSIST_DELAY_S], 3, 2)


def _ignore(*_args: object) -> None:
    pass


def test_a_kraft_broker_backs_off_failed_registrations_and_starts_over_after_one() -> None:
    link = KRaftControllerLink(
        [], BrokerRegistration(1, "127.0.0.1", 1), _ignore, _ignore, backoff=BACKOFF
    )
    closed = RecordingEvent()
    link._closed = closed

    def close_once_registered() -> str:
        closed.set()
        return "controller:2"

    unanswered = [lambda: None] * 3
    link._register = Script(  # type: ignore[method-assign]
        *unanswered, lambda: "controller:1", *unanswered[:2], close_once_registered
    )
    link._heartbeat = lambda endpoint: None  # type: ignore[method-assign]

    link._register_and_heartbeat()

    assert link.controller_endpoint == "controller:2"
    assert_backoff(closed.waits, 3, 2)


class _StopAcceptingError(Exception):
    pass


def test_the_kafka_listener_backs_off_failed_accepts_and_starts_over_after_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("broker.listener.server.KAFKA_ACCEPT_BACKOFF", BACKOFF)
    sleeps: list[float] = []

    async def no_sleep(delay: float) -> None:
        sleeps.append(delay)

    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted = listener.accept()
        server = KafkaServer.__new__(KafkaServer)  # only its accept loop runs here
        server._connections = set()
        served: list[socket.socket] = []

        async def serve(sock: socket.socket, peer: object) -> None:
            served.append(sock)
            sock.close()

        server._serve_connection = serve  # type: ignore[method-assign]
        exhausted = OSError(24, "Too many open files")
        accepts = Script(
            *failures(4, exhausted), lambda: accepted, exhausted, _StopAcceptingError()
        )

        async def scenario() -> None:
            loop = asyncio.get_running_loop()
            monkeypatch.setattr(loop, "sock_accept", _awaitable(accepts))
            monkeypatch.setattr(asyncio, "sleep", no_sleep)
            with pytest.raises(_StopAcceptingError):
                await server._accept(listener)
            monkeypatch.undo()
            await asyncio.gather(*server._connections)

        try:
            asyncio.run(scenario())
        finally:
            client.close()
    assert served == [accepted[0]]
    assert_backoff(sleeps, 4, 1)


def _awaitable(script: Script) -> Callable[[socket.socket], Any]:
    async def call(_listener: socket.socket) -> Any:
        return script()

    return call


def test_kazoo_gets_the_connection_policy_through_the_one_adapter() -> None:
    policy = zookeeper_connection_retry(session_timeout_s=1.5)
    assert (policy.max_tries, policy.deadline_s, policy.max_delay_s) == (None, None, 0.5)
    assert zookeeper_connection_retry(session_timeout_s=0.01).max_delay_s == policy.delay_s
    retry = connection_retry(1.5)
    assert (retry.max_tries, retry.delay, retry.backoff, retry.max_delay, retry.deadline) == (
        -1,
        policy.delay_s,
        policy.backoff,
        policy.max_delay_s,
        None,
    )
    assert retry.max_jitter == policy.jitter > 0
    sleeps: list[float] = []
    bounded = kazoo_retry(RetryPolicy(max_tries=3, delay_s=0.1, sleep=sleeps.append))
    with pytest.raises(RetryFailedError):
        bounded(Script(*failures(5, ConnectionLoss())))
    assert len(sleeps) == 2  # three tries in all, as RetryPolicy counts them


class FakeZk:
    def wait(self, answer: Any) -> Any:
        return answer


def test_zookeeper_rlmm_reads_retry_lost_connections_only_and_give_up() -> None:
    sleeps: list[float] = []
    backend = ZooKeeperBackend.__new__(ZooKeeperBackend)  # no server: only its reads run
    backend._zk = cast(ZkClient, FakeZk())
    backend._read_retry = dataclasses.replace(ZOOKEEPER_RLMM_READ_RETRY, sleep=sleeps.append)
    lost = ConnectionLoss()

    assert backend._read(Script(lost, SessionExpiredError(), lambda: "data")) == "data"
    assert len(sleeps) == 2 and sleeps[0] <= ZOOKEEPER_RLMM_READ_RETRY.delay_s < sleeps[1]
    sleeps.clear()
    with pytest.raises(ConnectionClosedError):
        backend._read(Script(ConnectionClosedError()))  # closed: not coming back
    assert sleeps == []
    with pytest.raises(ConnectionLoss):
        backend._read(Script(*failures(9, lost)))
    assert len(sleeps) == (ZOOKEEPER_RLMM_READ_RETRY.max_tries or 0) - 1
    assert max(sleeps) <= ZOOKEEPER_RLMM_READ_RETRY.max_delay_s
