"""Child processes that must not outlive their starter (a test's servers)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["death_signal_preexec"]

_PR_SET_PDEATHSIG = 1


def death_signal_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks the kernel to SIGTERM the child when the thread that started
    it dies (``PR_SET_PDEATHSIG``, Linux; None elsewhere): start such children from the main
    thread or another long-lived one."""
    if not sys.platform.startswith("linux"):
        return None
    # Resolve prctl before fork: the child should do as little as possible.
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = libc.prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent_pid = os.getpid()

    def preexec() -> None:
        if prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        # The parent may have died between fork and prctl: nobody would signal us.
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec
