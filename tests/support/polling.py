"""The one way tests wait for something: poll a predicate until it holds or a deadline passes
(never a sleep standing in for synchronisation)."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["poll_until"]

POLL_INTERVAL_S = 0.01
"""The pause between the first polls of a wait."""
MAX_POLL_INTERVAL_S = 0.1
"""The longest pause, reached once a wait has gone on for a while: most predicates ask a process
(a describe, a status, a master's page), and a tight loop of them over a long wait takes a good
share of a CPU from the processes the test is waiting on."""
SLOWDOWN = 20
"""The pause grows with the time waited so far, by this divisor: a wait of t seconds ends at
most t / SLOWDOWN after its condition began to hold."""


def poll_until(
    predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition"
) -> None:
    """Returns once ``predicate()`` is truthy; raises AssertionError naming ``what`` once
    ``timeout`` seconds have passed without. It polls every ``POLL_INTERVAL_S`` at first, then
    less often as the wait goes on, up to every ``MAX_POLL_INTERVAL_S``."""
    start = time.monotonic()
    deadline = start + timeout
    while not predicate():
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(min(MAX_POLL_INTERVAL_S, max(POLL_INTERVAL_S, (now - start) / SLOWDOWN)))
