"""The files of a metadata log directory (laid out as the package docstring shows): how segments
and snapshots are named and found, the in-memory index of one segment file, and reading its bytes
back."""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from controller.store.kraft_log.errors import CorruptLogError

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
SEGMENT_SUFFIX = ".log"
SNAPSHOT_SUFFIX = ".snapshot"
CORRUPT_SUFFIX = ".corrupt"


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def numbered(directory: Path, suffix: str) -> list[tuple[int, Path]]:
    found = []
    for path in directory.iterdir():
        name = path.name
        if name.endswith(suffix) and len(name) == 20 + len(suffix) and name[:20].isdigit():
            found.append((int(name[:20]), path))
    return sorted(found)


@dataclass
class Segment:
    base_offset: int
    path: Path
    size: int = 0  # bytes of valid frames
    end_offset: int = -1  # the offset after its last record
    offsets: array[int] = field(default_factory=lambda: array("q"))  # base offset per batch
    positions: array[int] = field(default_factory=lambda: array("q"))  # file position per batch

    def __post_init__(self) -> None:
        if self.end_offset < 0:
            self.end_offset = self.base_offset


def pread(path: Path, position: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while length > 0:
            chunk = os.pread(fd, length, position)
            if not chunk:
                raise CorruptLogError(f"{path}: ends before byte {position + length}")
            chunks.append(chunk)
            position += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
