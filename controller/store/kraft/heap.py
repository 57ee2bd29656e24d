"""Handing the heap that a snapshot-sized batch occupied back to the operating system."""

from __future__ import annotations

import contextlib
import ctypes
import sys

__all__ = ["release_free_heap"]


def release_free_heap() -> None:
    """Hands freed heap pages back to the OS (glibc ``malloc_trim``). Parsing or building a
    snapshot allocates a protobuf arena of the whole image's size that is freed at once but,
    interleaved with the image's objects, would otherwise stay in the process's resident set.
    A no-op where there is no glibc."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)
