"""Durable file writes, the one copy every daemon uses: the broker's log checkpoints, segments and
assignment journal, the controller's metadata log, snapshots and controller file.

A write is durable once its bytes are fsynced *and* its directory entry is: without the directory
fsync a crash can lose a new or renamed file even though its data reached the disk."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Suffix of a file being written by ``atomic_write``. A crash can leave one behind; whoever opens
the directory removes it, because the rename that would have published it never happened."""

fdatasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)
"""fsync without the metadata a reader does not need (mtime); the size is still made durable."""


def fsync_dir(directory: Path) -> None:
    """Makes creations, renames and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    """``os.write`` until every byte is written (a write may be short)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def atomic_write(path: Path, data: bytes) -> None:
    """Replaces ``path`` with ``data`` so that after a crash it holds either the old or the new
    contents, never a mix: write a temp file, fsync it, rename it over ``path``, fsync the dir."""
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    fsync_dir(path.parent)
