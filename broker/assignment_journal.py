"""The broker's durable record of the partitions it hosts and their tiering state: a snapshot
(``assignments.json``, a JSON list of entries, replaced atomically) and a journal
(``assignments.journal``, one JSON line per changed or removed entry, appended).

A write appends only what changed and costs one ``fdatasync``, whatever the number of partitions
hosted, so that stopping one partition on a broker hosting thousands does not rewrite and fsync
an entry for each of them. When the journal outgrows the snapshot, the snapshot is rewritten from
memory and the journal emptied.

Crash safety: an entry is durable once ``write`` returns. A torn last line (a crash mid-append)
is dropped when loading. A crash between writing a new snapshot and emptying the journal only
replays, on top of the new snapshot, the changes that snapshot already holds, in their order, so
each entry ends as the snapshot has it. A snapshot written by an earlier version (without a
journal) loads as it is.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiered.durable import atomic_write, fsync_dir

__all__ = ["AssignmentJournal", "EntryKey", "read_entries"]

log = logging.getLogger(__name__)

SNAPSHOT = "assignments.json"
JOURNAL = "assignments.journal"
# The journal is compacted once it is larger than this and than the snapshot.
MIN_COMPACT_BYTES = 256 * 1024

EntryKey = tuple[uuid.UUID, int]  # (topic id, partition)


def _key_of(entry: Mapping[str, Any]) -> EntryKey:
    return uuid.UUID(str(entry["topic_id"])), int(entry["partition"])


class AssignmentJournal:
    """Entries are JSON objects with at least ``topic_id`` and ``partition``; the caller
    serializes them (compactly, one line each) and keeps their meaning. ``write`` and ``close``
    may be called from any thread; ``load`` once, before them."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._snapshot = directory / SNAPSHOT
        self._journal = directory / JOURNAL
        self._entries: dict[EntryKey, str] = {}  # what the files hold, as serialized
        self._snapshot_bytes = 0
        self._journal_bytes = 0
        self._fd = -1
        self._lock = threading.Lock()

    def load(self) -> list[dict[str, Any]]:
        """Reads the snapshot, replays the journal over it (cutting off a torn tail) and returns
        the entries, in the order they were first written."""
        stored = _read(self._directory)
        self._entries = stored.entries
        self._snapshot_bytes = stored.snapshot_bytes
        if stored.journal_good_bytes < stored.journal_bytes:
            os.truncate(self._journal, stored.journal_good_bytes)
        self._journal_bytes = stored.journal_good_bytes
        return [json.loads(text) for text in self._entries.values()]

    def write(self, changes: Mapping[EntryKey, str | None]) -> int:
        """Persists each changed entry (its serialized text, or None for a removal) that differs
        from what is stored, in one append and one ``fdatasync``; returns how many were
        written (0 writes nothing)."""
        with self._lock:
            lines: list[str] = []
            for key, text in changes.items():
                if text is None:
                    if self._entries.pop(key, None) is not None:
                        removal = {"topic_id": str(key[0]), "partition": key[1]}
                        lines.append(json.dumps({"remove": removal}, separators=(",", ":")))
                elif self._entries.get(key) != text:
                    self._entries[key] = text
                    lines.append(text)
            if not lines:
                return 0
            self._append(("\n".join(lines) + "\n").encode())
            if self._journal_bytes > max(MIN_COMPACT_BYTES, self._snapshot_bytes):
                self._compact()
            return len(lines)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def _append(self, data: bytes) -> None:
        if self._fd < 0:
            created = not self._journal.exists()
            self._fd = os.open(self._journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if created:
                fsync_dir(self._directory)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fdatasync(self._fd)
        self._journal_bytes += len(data)

    def _compact(self) -> None:
        snapshot = ("[" + ",".join(self._entries.values()) + "]").encode()
        atomic_write(self._snapshot, snapshot)
        self._snapshot_bytes = len(snapshot)
        os.ftruncate(self._fd, 0)
        os.fsync(self._fd)
        self._journal_bytes = 0


def read_entries(directory: Path) -> list[dict[str, Any]]:
    """What a broker restarted on ``directory`` would restore (tools and tests; changes
    nothing)."""
    return [json.loads(text) for text in _read(directory).entries.values()]


@dataclass
class _Stored:
    entries: dict[EntryKey, str]
    snapshot_bytes: int = 0
    journal_bytes: int = 0
    journal_good_bytes: int = 0  # up to the first torn or unreadable line


def _read(directory: Path) -> _Stored:
    stored = _Stored({})
    snapshot, journal = directory / SNAPSHOT, directory / JOURNAL
    if snapshot.exists():
        data = snapshot.read_bytes()
        stored.snapshot_bytes = len(data)
        for entry in json.loads(data):
            stored.entries[_key_of(entry)] = json.dumps(entry, separators=(",", ":"))
    if not journal.exists():
        return stored
    data = journal.read_bytes()
    stored.journal_bytes = len(data)
    for line in data.splitlines(keepends=True):
        try:
            if not line.endswith(b"\n"):
                raise ValueError("no newline at the end")
            change = json.loads(line)
            if "remove" in change:
                stored.entries.pop(_key_of(change["remove"]), None)
            else:
                stored.entries[_key_of(change)] = line.decode().rstrip("\n")
        except (ValueError, KeyError, TypeError) as e:
            log.warning(
                "%s: ignoring the journal from byte %d on (%d bytes; %s): a write cut short by "
                "a crash",
                journal,
                stored.journal_good_bytes,
                len(data) - stored.journal_good_bytes,
                e,
            )
            break
        stored.journal_good_bytes += len(line)
    return stored
