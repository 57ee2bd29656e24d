"""tiered/retry.py's two shapes: RetryPolicy, the loop that retries one operation, on a fake
clock (no real sleeps); Backoff, the count of a loop that owns its waiting."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tiered.retry import Backoff, ExponentialBackoff, RetryPolicy


class FakeTime:
    """A clock that only ``sleep`` moves (plus what an attempt says it took)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FlakyError(Exception):
    pass


class BrokenError(Exception):
    pass


def policy(time: FakeTime, **settings: Any) -> RetryPolicy:
    """Unbounded unless ``settings`` bound it; delays from 0.1 s doubling to 1 s."""
    defaults: dict[str, Any] = {"max_tries": None, "deadline_s": None, "delay_s": 0.1}
    return RetryPolicy(sleep=time.sleep, clock=time.clock, **(defaults | settings))


def test_success_at_once_does_not_sleep() -> None:
    time = FakeTime()
    assert policy(time, max_tries=3)(lambda: 42, retry_on=FlakyError) == 42
    assert time.sleeps == []


def test_retries_until_success_telling_on_retry_each_time() -> None:
    time = FakeTime()
    calls: list[int] = []
    heard: list[tuple[str, int, float]] = []

    def attempt() -> str:
        calls.append(1)
        if len(calls) <= 3:
            raise FlakyError(f"failure {len(calls)}")
        return "done"

    result = policy(time, max_tries=5)(
        attempt, retry_on=FlakyError, on_retry=lambda e, n, d: heard.append((str(e), n, d))
    )
    assert result == "done"
    assert len(calls) == 4
    # Exponential from delay_s, no jitter by default.
    assert time.sleeps == [0.1, 0.2, 0.4]
    assert heard == [("failure 1", 1, 0.1), ("failure 2", 2, 0.2), ("failure 3", 3, 0.4)]


def test_delay_is_capped() -> None:
    time = FakeTime()
    with pytest.raises(FlakyError):
        policy(time, max_tries=8, max_delay_s=0.5)(_always_flaky, retry_on=FlakyError)
    assert time.sleeps == [0.1, 0.2, 0.4, 0.5, 0.5, 0.5, 0.5]


def _always_flaky() -> str:
    raise FlakyError("again")


def test_max_tries_counts_attempts_in_all_and_raises_the_last_error() -> None:
    time = FakeTime()
    raised: list[FlakyError] = []

    def attempt() -> str:
        raised.append(FlakyError(f"failure {len(raised) + 1}"))
        raise raised[-1]

    with pytest.raises(FlakyError) as info:
        policy(time, max_tries=3)(attempt, retry_on=FlakyError)
    assert len(raised) == 3
    assert info.value is raised[-1]
    assert len(time.sleeps) == 2  # none after the last attempt


def test_deadline_stops_before_an_attempt_that_would_start_too_late() -> None:
    time = FakeTime()
    starts: list[float] = []

    def attempt() -> str:
        starts.append(time.now - 100.0)
        time.now += 0.05  # each attempt takes 50 ms
        raise FlakyError("again")

    with pytest.raises(FlakyError):
        policy(time, deadline_s=1.0)(attempt, retry_on=FlakyError)
    # Attempts at 0, 0.15 (0.05 + 0.1), 0.4 (0.2 + 0.2); the next would start at 0.45 + 0.4.
    assert starts == pytest.approx([0.0, 0.15, 0.4, 0.85])
    assert all(start <= 1.0 for start in starts)
    assert time.sleeps == pytest.approx([0.1, 0.2, 0.4])  # no sleep past the deadline


def test_deadline_and_max_tries_whichever_comes_first() -> None:
    time = FakeTime()
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise FlakyError("again")

    with pytest.raises(FlakyError):
        policy(time, max_tries=2, deadline_s=60.0)(attempt, retry_on=FlakyError)
    assert len(calls) == 2


def test_jitter_keeps_each_delay_within_its_bounds_and_varies_it() -> None:
    time = FakeTime()
    with pytest.raises(FlakyError):
        policy(time, max_tries=200, max_delay_s=0.4, jitter=0.5)(_always_flaky, retry_on=FlakyError)
    ceilings = [0.1, 0.2] + [0.4] * (len(time.sleeps) - 2)
    assert len(time.sleeps) == 199
    for delay, ceiling in zip(time.sleeps, ceilings, strict=True):
        assert 0.5 * ceiling <= delay <= ceiling
    assert len({round(d, 9) for d in time.sleeps[2:]}) > 100  # not in lockstep


def test_an_error_not_retried_on_is_raised_at_once() -> None:
    time = FakeTime()
    calls: list[int] = []
    heard: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise BrokenError("not retriable")

    with pytest.raises(BrokenError):
        policy(time, max_tries=5)(
            attempt,
            retry_on=FlakyError,
            on_retry=lambda e, n, d: heard.append(n),
            give_up=lambda e, n: AssertionError("give_up is for retry_on errors"),
        )
    assert (len(calls), heard, time.sleeps) == (1, [], [])


def test_retry_if_false_gives_up_at_once_through_give_up() -> None:
    time = FakeTime()
    calls: list[int] = []

    def attempt() -> str:
        calls.append(1)
        raise FlakyError("fatal" if len(calls) == 2 else "transient")

    with pytest.raises(RuntimeError) as info:
        policy(time, max_tries=5)(
            attempt,
            retry_on=FlakyError,
            retry_if=lambda e: str(e) == "transient",
            give_up=lambda e, tries: RuntimeError(f"{e} after {tries} tries"),
        )
    assert str(info.value) == "fatal after 2 tries"
    assert info.value.__suppress_context__  # the wrapper it replaced stays out of the traceback
    assert len(calls) == 2 and time.sleeps == [0.1]


def test_one_policy_serves_calls_one_after_another() -> None:
    time = FakeTime()
    shared = policy(time, max_tries=2)
    for _ in range(2):
        calls: list[int] = []

        def attempt(calls: list[int] = calls) -> str:
            calls.append(1)
            if len(calls) == 1:
                raise FlakyError("once")
            return "ok"

        assert shared(attempt, retry_on=FlakyError) == "ok"
    assert time.sleeps == [0.1, 0.1]  # each call starts from the first delay


@pytest.mark.parametrize(
    "bad",
    [
        {"max_tries": 0},
        {"deadline_s": -1.0},
        {"delay_s": 0.0},
        {"delay_s": 2.0, "max_delay_s": 1.0},
        {"backoff": 0.5},
        {"jitter": 1.5},
    ],
)
def test_invalid_policies_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def test_a_backoffs_first_delay_is_the_initial_one_and_each_next_grows_by_the_multiplier() -> None:
    backoff = Backoff(ExponentialBackoff(initial_s=0.1, max_s=100.0, multiplier=3.0, jitter=0.0))
    delays = [backoff.next_delay() for _ in range(4)]
    assert delays == pytest.approx([0.1, 0.3, 0.9, 2.7])
    assert backoff.failures == 4


def test_a_backoffs_delays_are_capped() -> None:
    backoff = Backoff(ExponentialBackoff(initial_s=0.1, max_s=0.5, jitter=0.0))
    delays = [backoff.next_delay() for _ in range(100)]
    assert delays[:5] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    assert set(delays[3:]) == {0.5}  # a long run of failures stays at the cap


def test_a_backoffs_jitter_keeps_each_delay_within_its_bounds_and_varies_it() -> None:
    backoff = Backoff(ExponentialBackoff(initial_s=0.1, max_s=0.4, jitter=0.5), random.Random(7))
    delays = [backoff.next_delay() for _ in range(50)]
    ceilings = [min(0.4, 0.1 * 2**n) for n in range(50)]
    assert all(c * 0.5 <= d <= c for d, c in zip(delays, ceilings, strict=True))
    assert len(set(delays[2:])) == len(delays) - 2  # no two alike at the cap: not in lockstep


def test_a_reset_backoff_starts_over_from_the_initial_delay() -> None:
    backoff = Backoff(ExponentialBackoff(initial_s=0.1, max_s=1.0, jitter=0.0))
    before = [backoff.next_delay() for _ in range(3)]
    backoff.reset()
    assert backoff.failures == 0
    after = [backoff.next_delay() for _ in range(3)]
    assert before == after == pytest.approx([0.1, 0.2, 0.4])


def test_a_policy_and_a_backoff_of_one_schedule_wait_alike() -> None:
    time = FakeTime()
    bounded = policy(time, max_tries=5, max_delay_s=0.5)
    with pytest.raises(FlakyError):
        bounded(_always_flaky, retry_on=FlakyError)
    backoff = Backoff(bounded.schedule)
    assert time.sleeps == [backoff.next_delay() for _ in range(4)] == [0.1, 0.2, 0.4, 0.5]
