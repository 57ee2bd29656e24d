"""The bulk delete's SparkSession provider (controller.jobs.spark_session) with a fake session
factory: started in the background when a term starts, stopped when it ends, a job waiting only
for the rest of a start, a lost session restarted with backoff, the metrics; the settings a real
session gets (no JVM); the idle-timeout key. Starts no process."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller.config import (
    DEFAULT_SPARK_IDLE_TIMEOUT_MS,
    SPARK_IDLE_TIMEOUT_KEY,
    ControllerConfig,
    spark_idle_timeout_ms,
)
from controller.controller import Controller
from controller.jobs.spark_delete import BulkObjectDeleter, EngineChoice
from controller.jobs.spark_session import (
    PySparkSessions,
    SparkSessionProvider,
    SparkSessionUnavailableError,
)
from controller.metrics import ControllerMetrics
from controller.store.kraft import KRaftMetadataStore
from tests.support.polling import poll_until
from tiered.api import DeleteOutcome, RemoteObjectDeleter
from tiered.retry import ExponentialBackoff

SECOND = 1.0
FAST = ExponentialBackoff(initial_s=0.01, max_s=0.05, jitter=0.0)


@dataclass
class FakeSession:
    number: int
    alive: bool = True
    unreachable: bool = False
    stopped: bool = False
    checked: int = 0


class FakeSessions:
    """Starts numbered fake sessions; a start can be held at ``gate`` or made to fail."""

    def __init__(self) -> None:
        self.sessions: list[FakeSession] = []
        self.attempts = 0
        self.gate: threading.Event | None = None
        self.fail_starts = 0
        self.starting = threading.Event()

    def start(self) -> FakeSession:
        self.attempts += 1
        self.starting.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.fail_starts:
            self.fail_starts -= 1
            raise RuntimeError("All masters are unresponsive! Giving up.\n\tat org.apache...")
        session = FakeSession(len(self.sessions) + 1)
        self.sessions.append(session)
        return session

    def healthy(self, session: FakeSession) -> bool:
        session.checked += 1
        if session.unreachable:
            raise ConnectionError("Failed to send RPC to 127.0.0.1:7077")
        return session.alive

    def stop(self, session: FakeSession) -> None:
        session.alive = False
        session.stopped = True


@dataclass(frozen=True)
class RecordingBackoff(ExponentialBackoff):
    """The product's backoff schedule, recording the attempt numbers asked for."""

    asked: list[int] = field(default_factory=list, compare=False)

    def delay_s(self, attempt: int, rng: Any = None) -> float:
        self.asked.append(attempt)
        return super().delay_s(attempt, rng)


class Events:
    """A SessionObserver that records what it is told."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def spark_session_up(self, up: bool) -> None:
        self.seen.append("up" if up else "down")

    def spark_session_started(self, seconds: float) -> None:
        self.seen.append("started")

    def spark_session_start_failed(self) -> None:
        self.seen.append("start failed")

    def spark_session_lost(self) -> None:
        self.seen.append("lost")


def provider_of(
    sessions: FakeSessions,
    *,
    background: bool = True,
    observer: Any = None,
    backoff: ExponentialBackoff = FAST,
    probe_interval_s: float = 0.01,
) -> SparkSessionProvider:
    return SparkSessionProvider(
        "spark://127.0.0.1:7077",
        factory=sessions,
        background=background,
        observer=observer,
        backoff=backoff,
        probe_interval_s=probe_interval_s,
    )


@pytest.fixture
def sessions() -> FakeSessions:
    return FakeSessions()


@pytest.fixture
def closing() -> Iterator[list[SparkSessionProvider]]:
    """Providers to close after the test, whatever happens."""
    made: list[SparkSessionProvider] = []
    yield made
    for provider in made:
        provider.close(timeout_s=10)


def metric(metrics: ControllerMetrics, name: str) -> float | None:
    return metrics.registry.get_sample_value(f"kafka_controller_bulkdelete_{name}")


# ----------------------------------------------------------------------------- lifecycle


def test_a_term_starts_the_session_in_the_background_and_its_end_stops_it(
    sessions: FakeSessions, closing: list[SparkSessionProvider], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "controller.jobs.spark_session")
    metrics = ControllerMetrics("kraft")
    provider = provider_of(sessions, observer=metrics)
    closing.append(provider)
    sessions.gate = threading.Event()  # the start takes as long as the test says

    began = time.monotonic()
    provider.term_started()
    assert time.monotonic() - began < 0.5 * SECOND  # did not wait for the start
    assert sessions.starting.wait(5)
    assert not provider.started and metric(metrics, "sparksessionup") == 0
    sessions.gate.set()
    poll_until(lambda: provider.started, timeout=5, what="the session up")
    assert metric(metrics, "sparksessionup") == 1
    assert metric(metrics, "sparksessionstartspersec_total") == 1

    [session] = sessions.sessions
    assert provider.get() is session  # up: no wait
    assert "Waited" not in caplog.text

    provider.term_ended()  # returns at once; the thread stops it
    poll_until(lambda: session.stopped, timeout=5, what="the session stopped")
    poll_until(lambda: metric(metrics, "sparksessionup") == 0, timeout=5, what="up 0")
    assert not provider.started

    provider.term_started()  # the next term has its own session
    poll_until(lambda: provider.started, timeout=5, what="the next term's session")
    assert [s.number for s in sessions.sessions] == [1, 2]
    provider.close(timeout_s=5)
    assert sessions.sessions[1].stopped
    assert metric(metrics, "sparksessionstartspersec_total") == 2
    assert metric(metrics, "sparksessionlostpersec_total") == 0


def test_a_job_waits_only_for_the_rest_of_the_start_under_way(
    sessions: FakeSessions, closing: list[SparkSessionProvider], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "controller.jobs.spark_session")
    provider = provider_of(sessions)
    closing.append(provider)
    sessions.gate = threading.Event()
    provider.term_started()
    assert sessions.starting.wait(5)
    time.sleep(0.2)  # the start is 0.2 s under way when the job asks

    got: list[Any] = []
    job = threading.Thread(target=lambda: got.append(provider.get()))
    job.start()
    time.sleep(0.2)
    assert job.is_alive() and not got  # waits for the start...
    sessions.gate.set()
    job.join(5)
    assert got == sessions.sessions  # ... and takes it: no second start
    assert sessions.attempts == 1
    [waited] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Waited")]
    found = re.fullmatch(
        r"Waited ([\d.]+) s for the SparkSession on spark://127.0.0.1:7077: the rest of its "
        r"start, begun ([\d.]+) s before the job asked",
        waited,
    )
    assert found is not None, waited
    assert 0.1 <= float(found[1]) < 5 and float(found[2]) >= 0.2


def test_a_job_after_the_start_does_not_wait(
    sessions: FakeSessions,
    closing: list[SparkSessionProvider],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, "controller.jobs.spark_session")
    provider = provider_of(sessions)
    closing.append(provider)
    provider.term_started()
    poll_until(lambda: provider.started, timeout=5, what="the session up")
    engine = BulkObjectDeleter(provider, fast_path_max_objects=0)
    used: list[Any] = []

    def on_spark(spark: Any, deleter: Any, handles: Any, **_: Any) -> DeleteOutcome:
        used.append(spark)
        return DeleteOutcome(deleted=len(handles))

    monkeypatch.setattr("controller.jobs.spark_delete.delete_with_spark", on_spark)
    outcome = engine.delete(NoDeleter(), ["a", "b"], engine.choose(2))
    assert outcome.deleted == 2 and used == sessions.sessions
    assert not [r for r in caplog.records if r.getMessage().startswith("Waited")]


class NoDeleter(RemoteObjectDeleter):
    def delete_objects(self, handles: Any) -> DeleteOutcome:
        raise AssertionError("the Spark path was chosen")


def test_local_mode_starts_on_first_use_and_keeps_the_session_across_terms(
    sessions: FakeSessions, closing: list[SparkSessionProvider], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "controller.jobs.spark_session")
    provider = SparkSessionProvider(factory=sessions, backoff=FAST, probe_interval_s=0.01)
    closing.append(provider)
    assert not provider.background  # local[*]: today's behaviour
    provider.term_started()
    time.sleep(0.1)
    assert sessions.attempts == 0  # nothing starts with the term

    session = provider.get()  # the first job starts it, and says it waited
    assert session is sessions.sessions[0]
    assert "to start for this job" in caplog.text
    provider.term_ended()
    time.sleep(0.1)
    assert not session.stopped and provider.get() is session  # kept
    provider.close(timeout_s=5)
    assert session.stopped
    with pytest.raises(SparkSessionUnavailableError, match="closed"):
        provider.get()


def test_which_masters_start_in_the_background() -> None:
    assert SparkSessionProvider("spark://h:7077").background
    assert SparkSessionProvider(conf={"spark.master": "spark://h:7077"}).background
    assert not SparkSessionProvider().background
    assert not SparkSessionProvider("local[2]").background
    assert not SparkSessionProvider(conf={"spark.master": "local-cluster[2,1,512]"}).background


# ----------------------------------------------------------------------------- losses


def test_a_lost_session_is_restarted_with_backoff_and_counted(
    sessions: FakeSessions, closing: list[SparkSessionProvider]
) -> None:
    metrics = ControllerMetrics("kraft")
    backoff = RecordingBackoff(initial_s=0.01, max_s=0.05, jitter=0.0)
    provider = provider_of(sessions, observer=metrics, backoff=backoff)
    closing.append(provider)
    provider.term_started()
    poll_until(lambda: provider.started, timeout=5, what="the session up")

    sessions.sessions[0].alive = False  # e.g. the master removed the application
    poll_until(lambda: len(sessions.sessions) == 2, timeout=5, what="a restart")
    assert sessions.sessions[0].stopped
    assert metric(metrics, "sparksessionlostpersec_total") == 1

    poll_until(lambda: sessions.sessions[1].checked > 0, timeout=5, what="session 2 healthy")
    sessions.fail_starts = 3  # the master is down for three attempts
    sessions.sessions[1].alive = False
    poll_until(lambda: len(sessions.sessions) == 3, timeout=5, what="the third session")
    poll_until(lambda: provider.started, timeout=5, what="the third session up")
    assert metric(metrics, "sparksessionlostpersec_total") == 2
    assert metric(metrics, "sparksessionstartfailurespersec_total") == 3
    assert metric(metrics, "sparksessionstartspersec_total") == 3
    assert metric(metrics, "sparksessionup") == 1
    # One loss (first delay), then a loss and three failed starts in a row, the delays growing;
    # the schedule starts over once a session is seen healthy.
    poll_until(lambda: sessions.sessions[2].checked > 0, timeout=5, what="session 3 healthy")
    sessions.sessions[2].alive = False
    poll_until(lambda: len(sessions.sessions) == 4, timeout=5, what="the fourth session")
    assert backoff.asked == [0, 0, 1, 2, 3, 0]


def test_an_unreachable_master_counts_as_a_loss_on_the_second_check_in_a_row(
    sessions: FakeSessions, closing: list[SparkSessionProvider]
) -> None:
    events = Events()
    provider = provider_of(sessions, observer=events, probe_interval_s=3600)
    closing.append(provider)
    provider.term_started()
    poll_until(lambda: provider.started, timeout=5, what="the session up")
    session = sessions.sessions[0]

    def check(expected: int) -> None:
        provider.check_soon()  # one check now
        poll_until(lambda: session.checked == expected, timeout=5, what=f"check {expected}")

    session.unreachable = True
    check(1)
    poll_until(lambda: events.seen[-1] == "down", timeout=5, what="the session reported down")
    session.unreachable = False  # one check could not tell; the next one could
    check(2)
    poll_until(lambda: events.seen[-1] == "up", timeout=5, what="the session up again")
    assert "lost" not in events.seen and not session.stopped

    session.unreachable = True
    check(3)
    check(4)
    poll_until(lambda: len(sessions.sessions) == 2, timeout=5, what="a restart")
    assert session.stopped and events.seen.count("lost") == 1


def test_a_failed_spark_job_has_the_session_checked_at_once(
    sessions: FakeSessions, closing: list[SparkSessionProvider]
) -> None:
    provider = provider_of(sessions, probe_interval_s=3600)
    closing.append(provider)
    provider.term_started()
    poll_until(lambda: provider.started, timeout=5, what="the session up")
    sessions.sessions[0].alive = False
    time.sleep(0.1)
    assert len(sessions.sessions) == 1  # the next check is an hour away
    provider.check_soon()
    poll_until(lambda: len(sessions.sessions) == 2, timeout=5, what="a restart")


def test_a_failed_start_fails_the_waiting_job_and_the_next_one_asks_at_once(
    sessions: FakeSessions, closing: list[SparkSessionProvider]
) -> None:
    slow = ExponentialBackoff(initial_s=60.0, max_s=60.0, jitter=0.0)
    provider = provider_of(sessions, backoff=slow)
    closing.append(provider)
    sessions.fail_starts = 1
    with pytest.raises(SparkSessionUnavailableError, match=r"could not start: .*unresponsive"):
        provider.get()
    began = time.monotonic()
    assert provider.get() is sessions.sessions[0]  # not after the minute of backoff
    assert time.monotonic() - began < 5


def test_the_thread_survives_a_failing_iteration(
    sessions: FakeSessions, closing: list[SparkSessionProvider], caplog: pytest.LogCaptureFixture
) -> None:
    class Flaky(Events):
        def spark_session_started(self, seconds: float) -> None:
            super().spark_session_started(seconds)
            if self.seen.count("started") == 1:
                raise RuntimeError("a metrics bug")

    events = Flaky()
    provider = provider_of(sessions, observer=events)
    closing.append(provider)
    provider.term_started()
    poll_until(lambda: provider.started, timeout=5, what="the session up")
    sessions.sessions[0].alive = False
    poll_until(lambda: len(sessions.sessions) == 2, timeout=5, what="a restart all the same")
    assert "SparkSession upkeep failed; carrying on" in caplog.text


def test_stopping_during_a_start_stops_the_session_once_started(
    sessions: FakeSessions, closing: list[SparkSessionProvider]
) -> None:
    provider = provider_of(sessions)
    closing.append(provider)
    sessions.gate = threading.Event()
    provider.term_started()
    assert sessions.starting.wait(5)
    provider.term_ended()  # returns at once, the start still under way
    sessions.gate.set()
    poll_until(lambda: bool(sessions.sessions), timeout=5, what="the start to end")
    poll_until(lambda: sessions.sessions[0].stopped, timeout=5, what="the session stopped")
    assert not provider.started and sessions.attempts == 1


# ----------------------------------------------------------------------------- the controller


def test_the_controller_starts_the_session_as_it_serves_and_stops_it_as_it_stands_down(
    tmp_path: Path, sessions: FakeSessions, closing: list[SparkSessionProvider]
) -> None:
    provider = provider_of(sessions)
    closing.append(provider)
    sessions.gate = threading.Event()  # a start that never ends must not hold the term
    meta = str(tmp_path / "meta")
    store = KRaftMetadataStore.from_config({"metadata.log.dir": meta})
    config = ControllerConfig.from_properties({"node.id": "100", "metadata.log.dir": meta})
    controller = Controller(config, store, spark=provider)
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,))
    runner.start()
    try:
        assert controller.wait_active(10)
        assert sessions.starting.wait(5)
        assert controller.term.lock.acquire(timeout=1)  # free while the session starts
        controller.term.lock.release()
        sessions.gate.set()
        poll_until(lambda: provider.started, timeout=5, what="the session up")
    finally:
        stop.set()
        runner.join(10)
        controller.close()
        store.close()
    poll_until(lambda: sessions.sessions[0].stopped, timeout=5, what="stopped at stand-down")


# ----------------------------------------------------------------------------- settings


def test_a_cluster_session_gives_idle_executors_back_after_the_idle_timeout() -> None:
    conf = {"spark.cores.max": "4", "spark.executor.cores": "2", "spark.driver.host": "h1"}
    settings = PySparkSessions("spark://m:7077", conf, idle_timeout_ms=90_000).settings("-Dx=1")
    assert settings["spark.dynamicAllocation.enabled"] == "true"
    assert settings["spark.dynamicAllocation.shuffleTracking.enabled"] == "true"
    assert settings["spark.dynamicAllocation.executorIdleTimeout"] == "90000ms"
    assert settings["spark.dynamicAllocation.shuffleTracking.timeout"] == "90000ms"
    assert settings["spark.dynamicAllocation.initialExecutors"] == "2"  # 4 cores / 2 each
    assert settings["spark.driver.host"] == "h1"
    assert settings["spark.driver.extraJavaOptions"] == "-Dx=1"

    at_once = PySparkSessions("spark://m:7077", conf, idle_timeout_ms=0).settings()
    assert at_once["spark.dynamicAllocation.executorIdleTimeout"] == "0ms"
    assert "spark.dynamicAllocation.initialExecutors" not in at_once  # none to keep idle

    overridden = {**conf, "spark.dynamicAllocation.enabled": "false"}
    assert (
        PySparkSessions("spark://m:7077", overridden).settings()["spark.dynamicAllocation.enabled"]
        == "false"
    )  # the operator's spark.* keys win
    local = PySparkSessions("local[2]", conf).settings()
    assert not [k for k in local if k.startswith("spark.dynamicAllocation.")]


def test_the_idle_timeout_key_is_parsed_and_bad_values_named() -> None:
    assert spark_idle_timeout_ms({}) == DEFAULT_SPARK_IDLE_TIMEOUT_MS == 600_000
    assert spark_idle_timeout_ms({SPARK_IDLE_TIMEOUT_KEY: " 0 "}) == 0
    assert spark_idle_timeout_ms({SPARK_IDLE_TIMEOUT_KEY: "2147483647"}) == 2**31 - 1
    base = {"node.id": "1", "metadata.log.dir": "/tmp/x"}
    config = ControllerConfig.from_properties({**base, SPARK_IDLE_TIMEOUT_KEY: "30000"})
    assert config.spark_idle_timeout_ms == 30_000
    for bad in ("-1", "2147483648", "ten minutes", "1.5"):
        with pytest.raises(ValueError) as error:
            ControllerConfig.from_properties({**base, SPARK_IDLE_TIMEOUT_KEY: bad})
        assert str(error.value) == (
            f"bulk.delete.spark.idle.timeout.ms={bad!r} is not valid; expected milliseconds, "
            "an integer in 0..2147483647 (0: executors given back as soon as a job ends; "
            "default 600000)"
        )


def test_engine_choice_names_the_master_before_the_session_starts() -> None:
    engine = BulkObjectDeleter(SparkSessionProvider("spark://m:7077"), fast_path_max_objects=1)
    assert engine.choose(2) == EngineChoice(
        True, "engine Spark (spark://m:7077) since 2 > bulk.delete.fast.path.max.objects=1"
    )
