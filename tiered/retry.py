"""Retrying, in two shapes that wait out one ``ExponentialBackoff`` schedule and count alike: the
wait after the first failure in a row is the schedule's initial delay, and each further failure
multiplies it, up to the cap.

- ``RetryPolicy`` runs the loop (kazoo's ``KazooRetry`` shape): a caller hands it an attempt, or
  iterates ``attempts()`` when each attempt re-reads state and ``continue``s after losing a race;
  the policy bounds the tries and the deadline and sleeps in between. Use it for one operation
  that must succeed or give up: a request, a read, a conditional write.
- ``Backoff`` is the schedule's count for a loop that owns its waiting: a daemon thread that
  retries for as long as it runs, waiting on its stop event (``stop.wait(backoff.next_delay())``)
  so that closing interrupts the wait, on a condition, or in ``asyncio.sleep``. The loop calls
  ``next_delay()`` after a failure and ``reset()`` after a success; its own stop condition ends
  it, so there are no tries or deadline.

The product's named schedules and policies, each with who uses it and why its values, are in
``tiered.retry_policies``. kazoo's connection loop takes only its own ``KazooRetry``:
``tiered.zk_client.kazoo_retry`` is the one translation of a policy into it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["Backoff", "ExponentialBackoff", "RetryPolicy"]

R = TypeVar("R")
E = TypeVar("E", bound=BaseException)


@dataclass(frozen=True)
class ExponentialBackoff:
    """Capped exponential backoff with full-range jitter: attempt ``n`` (0-based) waits a random
    time in ``[(1 - jitter) * d, d]`` where ``d = min(max_s, initial_s * multiplier ** n)``.
    Jitter keeps many retrying senders from hitting a recovering broker in lockstep. A schedule
    only: loops count their failures through :class:`Backoff`."""

    initial_s: float = 0.1
    max_s: float = 10.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.initial_s <= 0 or self.max_s < self.initial_s or self.multiplier < 1:
            raise ValueError(f"invalid backoff {self}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], not {self.jitter}")

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """The wait after ``attempt + 1`` failures in a row (0: after the first)."""
        ceiling = min(self.max_s, self.initial_s * self.multiplier ** min(attempt, 64))
        r = (rng or random).random()
        return ceiling * (1 - self.jitter * r)


class Backoff:
    """The failures in a row of one loop that owns its waiting, and the waits ``schedule`` gives
    them: ``next_delay()`` counts a failure and returns the wait before the next try (the
    schedule's initial delay after the first failure, jittered, then growing by its multiplier up
    to its cap); ``reset()`` after a success starts the schedule again. ``rng`` draws the jitter
    (default: the ``random`` module).

    Not thread-safe: one loop owns one instance and calls it from its own thread. A loop whose
    state other threads change too (a reset when a peer comes back) calls it only under the lock
    that guards that state."""

    __slots__ = ("_failures", "_rng", "schedule")

    def __init__(self, schedule: ExponentialBackoff, rng: random.Random | None = None) -> None:
        self.schedule = schedule
        self._rng = rng
        self._failures = 0

    @property
    def failures(self) -> int:
        """Failures counted since the last ``reset()`` (or since the start)."""
        return self._failures

    def next_delay(self) -> float:
        """Counts one more failure and returns the wait before the next try, in seconds."""
        delay = self.schedule.delay_s(self._failures, self._rng)
        self._failures += 1
        return delay

    def reset(self) -> None:
        """After a success: the next failure waits the schedule's initial delay again."""
        self._failures = 0


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``max_tries`` attempts in all (None: as many as the deadline allows), none started
    later than ``deadline_s`` after the first (None: no deadline), waiting
    ``ExponentialBackoff(delay_s, max_delay_s, backoff, jitter)`` in between. Stateless: one
    policy serves every call, from any thread. ``sleep`` and ``clock`` are injectable for
    tests."""

    max_tries: int | None = None
    deadline_s: float | None = 30.0
    delay_s: float = 0.05
    backoff: float = 2.0
    max_delay_s: float = 1.0
    jitter: float = 0.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    schedule: ExponentialBackoff = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_tries is not None and self.max_tries < 1:
            raise ValueError(f"max_tries must be at least 1, not {self.max_tries}")
        if self.deadline_s is not None and self.deadline_s < 0:
            raise ValueError(f"deadline_s must not be negative, not {self.deadline_s}")
        schedule = ExponentialBackoff(self.delay_s, self.max_delay_s, self.backoff, self.jitter)
        object.__setattr__(self, "schedule", schedule)  # frozen: derived once, here

    def __call__(
        self,
        attempt: Callable[[], R],
        *,
        retry_on: type[E] | tuple[type[E], ...],
        retry_if: Callable[[E], bool] | None = None,
        on_retry: Callable[[E, int, float], None] | None = None,
        give_up: Callable[[E, int], BaseException] | None = None,
    ) -> R:
        """``attempt()``'s result. An exception of a ``retry_on`` type for which ``retry_if``
        (default: always) holds is retried while tries and deadline allow, telling
        ``on_retry(error, tries_so_far, delay_s)`` first; when it is not retried, what
        ``give_up(error, tries)`` returns is raised (default: the error itself). Any other
        exception propagates at once."""
        start = self.clock()
        backoff = Backoff(self.schedule)
        while True:
            try:
                return attempt()
            except retry_on as error:
                delay = backoff.next_delay()
                tries = backoff.failures
                retry = retry_if is None or retry_if(error)
                if not (retry and self._allows(tries, self.clock() + delay - start)):
                    if give_up is None:
                        raise
                    raise give_up(error, tries) from None
                if on_retry is not None:
                    on_retry(error, tries, delay)
            self.sleep(delay)

    def attempts(self) -> Iterator[int]:
        """The same policy for a loop that owns its attempt (it re-reads state each time and
        ``continue``s after losing a race): yields attempt numbers 0, 1, ..., sleeping the
        backoff before each one after the first, until tries or deadline run out; the caller
        returns or breaks on success and raises its own error after the loop."""
        start = self.clock()
        backoff = Backoff(self.schedule)
        while True:
            yield backoff.failures
            delay = backoff.next_delay()
            if not self._allows(backoff.failures, self.clock() + delay - start):
                return
            self.sleep(delay)

    def _allows(self, tries: int, next_start_s: float) -> bool:
        """Whether attempt ``tries + 1``, starting ``next_start_s`` after the first, may run."""
        if self.max_tries is not None and tries >= self.max_tries:
            return False
        return self.deadline_s is None or next_start_s <= self.deadline_s
