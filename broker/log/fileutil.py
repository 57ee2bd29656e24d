"""Durable file operations shared by the log's checkpoints and segments."""

from __future__ import annotations

import os
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Suffix of a checkpoint being written. A crash can leave one behind; ``Log.open`` removes it,
because the rename that would have published it never happened."""


def fsync_dir(directory: Path) -> None:
    """Makes creations, renames and unlinks in ``directory`` durable: without it a crash can lose
    a new file's directory entry even though the file's own data was fsynced."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replaces ``path`` with ``data`` so that after a crash it holds either the old or the new
    contents, never a mix: write a temp file, fsync it, rename over ``path``, fsync the dir."""
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    fsync_dir(path.parent)
