"""Retry policies as injected objects (in the spirit of kazoo's ``KazooRetry``): the caller owns
the loop, the policy owns the timing."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class ExponentialBackoff:
    """Capped exponential backoff with full-range jitter: attempt ``n`` (0-based) waits a random
    time in ``[(1 - jitter) * d, d]`` where ``d = min(max_s, initial_s * multiplier ** n)``.
    Jitter keeps many retrying senders from hitting a recovering broker in lockstep."""

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
        ceiling = min(self.max_s, self.initial_s * self.multiplier ** min(attempt, 64))
        r = (rng or random).random()
        return ceiling * (1 - self.jitter * r)
