"""The one way tests wait for something: poll a predicate until it holds or a deadline passes
(never a sleep standing in for synchronisation)."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["poll_until"]

POLL_INTERVAL_S = 0.01


def poll_until(
    predicate: Callable[[], object], timeout: float = 10.0, what: str = "condition"
) -> None:
    """Returns once ``predicate()`` is truthy; raises AssertionError naming ``what`` once
    ``timeout`` seconds have passed without."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_INTERVAL_S)
