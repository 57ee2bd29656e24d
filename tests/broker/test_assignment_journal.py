"""The broker's assignment journal: what a write persists, what a restart reads back, torn tails,
compaction and a crash in the middle of it, and the single-file format of earlier versions."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker import assignment_journal
from broker.assignment_journal import JOURNAL, SNAPSHOT, AssignmentJournal, EntryKey, read_entries


def entry(topic_id: uuid.UUID, partition: int, epoch: int = 0, policy: str | None = None) -> str:
    return json.dumps(
        {
            "topic_id": str(topic_id),
            "topic": f"t-{topic_id.hex[:6]}",
            "partition": partition,
            "configs": {"remote.storage.enable": "true"},
            "tiered_epoch": epoch,
            "stopped_policy": policy,
        },
        separators=(",", ":"),
    )


def hosted(count: int) -> dict[EntryKey, str | None]:
    topic = uuid.uuid4()
    return {(topic, p): entry(topic, p) for p in range(count)}


def by_key(entries: list[dict[str, Any]]) -> dict[EntryKey, dict[str, Any]]:
    return {(uuid.UUID(e["topic_id"]), e["partition"]): e for e in entries}


def test_what_is_written_is_what_a_restart_loads(tmp_path: Path) -> None:
    journal = AssignmentJournal(tmp_path)
    assert journal.load() == []
    changes = hosted(5)
    assert journal.write(changes) == 5
    journal.close()
    loaded = by_key(AssignmentJournal(tmp_path).load())
    assert loaded == {k: json.loads(v) for k, v in changes.items() if v is not None}
    assert by_key(read_entries(tmp_path)) == loaded


def test_an_unchanged_entry_writes_nothing(tmp_path: Path) -> None:
    journal = AssignmentJournal(tmp_path)
    changes = hosted(3)
    journal.write(changes)
    size = (tmp_path / JOURNAL).stat().st_size
    assert journal.write(changes) == 0
    assert (tmp_path / JOURNAL).stat().st_size == size


def test_a_write_costs_what_changed_not_what_is_hosted(tmp_path: Path) -> None:
    journal = AssignmentJournal(tmp_path)
    changes = hosted(3000)
    journal.write(changes)
    journal.close()
    journal = AssignmentJournal(tmp_path)
    journal.load()
    before = (tmp_path / JOURNAL).stat().st_size + (tmp_path / SNAPSHOT).stat().st_size
    key = next(iter(changes))
    stopped = entry(key[0], key[1], epoch=1, policy="retain")
    assert journal.write({key: stopped}) == 1
    after = (tmp_path / JOURNAL).stat().st_size + (tmp_path / SNAPSHOT).stat().st_size
    assert after - before == len(stopped) + 1  # one line appended
    assert by_key(AssignmentJournal(tmp_path).load())[key]["stopped_policy"] == "retain"


def test_a_removal_is_persisted(tmp_path: Path) -> None:
    journal = AssignmentJournal(tmp_path)
    changes = hosted(3)
    journal.write(changes)
    gone = next(iter(changes))
    assert journal.write({gone: None}) == 1
    assert journal.write({gone: None}) == 0  # already removed
    assert set(by_key(AssignmentJournal(tmp_path).load())) == set(changes) - {gone}


def test_a_torn_last_line_is_dropped_and_cut_off(tmp_path: Path) -> None:
    journal = AssignmentJournal(tmp_path)
    changes = hosted(4)
    journal.write(changes)
    journal.close()
    good = (tmp_path / JOURNAL).stat().st_size
    key = next(iter(changes))
    with (tmp_path / JOURNAL).open("ab") as f:  # a crash in the middle of the next append
        f.write(entry(key[0], key[1], epoch=7).encode()[:40])
    journal = AssignmentJournal(tmp_path)
    loaded = by_key(journal.load())
    assert loaded[key]["tiered_epoch"] == 0 and len(loaded) == 4
    assert (tmp_path / JOURNAL).stat().st_size == good
    journal.write({key: entry(key[0], key[1], epoch=2)})  # appends after the cut
    assert by_key(AssignmentJournal(tmp_path).load())[key]["tiered_epoch"] == 2


def test_the_journal_is_compacted_into_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assignment_journal, "MIN_COMPACT_BYTES", 2000)
    journal = AssignmentJournal(tmp_path)
    changes = hosted(10)
    journal.write(changes)
    epochs = {}
    for epoch in range(1, 30):  # the same entries rewritten until the journal outgrows all
        key = list(changes)[epoch % 10]
        journal.write({key: entry(key[0], key[1], epoch=epoch)})
        epochs[key] = epoch
    assert (tmp_path / SNAPSHOT).exists()
    assert (tmp_path / JOURNAL).stat().st_size < 2000
    loaded = by_key(AssignmentJournal(tmp_path).load())
    assert {k: e["tiered_epoch"] for k, e in loaded.items() if k in epochs} == epochs
    assert len(loaded) == 10


def test_a_crash_between_snapshot_and_emptied_journal_loads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(assignment_journal, "MIN_COMPACT_BYTES", 0)
    journal = AssignmentJournal(tmp_path)
    changes = hosted(6)
    journal.write(changes)  # the journal (>0 bytes) outgrows the empty snapshot: compacted
    keys = list(changes)
    journal.write({keys[0]: entry(keys[0][0], keys[0][1], epoch=3), keys[1]: None})
    journal.close()
    expected = by_key(AssignmentJournal(tmp_path).load())
    # The journal before its last compaction: replaying it over the newer snapshot.
    stale = tmp_path / "stale"
    stale.mkdir()
    shutil.copy(tmp_path / SNAPSHOT, stale / SNAPSHOT)
    (stale / JOURNAL).write_text(
        "\n".join(v for v in changes.values() if v is not None)
        + "\n"
        + entry(keys[0][0], keys[0][1], epoch=3)
        + "\n"
        + json.dumps({"remove": {"topic_id": str(keys[1][0]), "partition": keys[1][1]}})
        + "\n"
    )
    assert by_key(AssignmentJournal(stale).load()) == expected
    assert expected[keys[0]]["tiered_epoch"] == 3 and keys[1] not in expected


def test_the_single_file_of_earlier_versions_loads(tmp_path: Path) -> None:
    changes = hosted(3)
    legacy = [json.loads(v) for v in changes.values() if v is not None]
    (tmp_path / SNAPSHOT).write_text(json.dumps(legacy, indent=1))
    journal = AssignmentJournal(tmp_path)
    assert by_key(journal.load()) == by_key(legacy)
    assert journal.write(changes) == 0  # the same entries: nothing to write
