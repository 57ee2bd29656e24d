"""Producer ids unique across brokers and restarts, and the waits of long-polling fetches."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.kafka.fetch_waits import FetchWaits
from broker.kafka.producer_ids import BLOCK_FILE, ProducerIdBlocks, ProducerIdsExhaustedError

# ------------------------------------------------------------------------------- producer ids


def test_ids_carry_the_node_id_and_a_restart_never_reuses_one(tmp_path: Path) -> None:
    first = ProducerIdBlocks(7, tmp_path, block_size=10)
    handed = [first.next_id() for _ in range(3)]
    assert handed == [(7 << 32) | n for n in range(3)]
    # The whole block is reserved on disk before its first id is handed out.
    assert (tmp_path / BLOCK_FILE).read_text() == "10\n"
    restarted = ProducerIdBlocks(7, tmp_path, block_size=10)
    again = [restarted.next_id() for _ in range(12)]
    assert again[0] == (7 << 32) | 10 and again[-1] == (7 << 32) | 21
    assert (tmp_path / BLOCK_FILE).read_text() == "30\n"
    (tmp_path / "other").mkdir()
    other_node = ProducerIdBlocks(8, tmp_path / "other", block_size=10).next_id()
    assert other_node not in handed + again


def test_ids_are_unique_across_threads(tmp_path: Path) -> None:
    blocks = ProducerIdBlocks(1, tmp_path, block_size=7)
    found: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        mine = [blocks.next_id() for _ in range(50)]
        with lock:
            found.extend(mine)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 200


def test_a_damaged_block_file_is_refused_not_guessed(tmp_path: Path) -> None:
    (tmp_path / BLOCK_FILE).write_text("many\n")
    with pytest.raises(ValueError, match="not a producer id counter"):
        ProducerIdBlocks(1, tmp_path).next_id()


def test_the_counter_runs_out_loudly(tmp_path: Path) -> None:
    (tmp_path / BLOCK_FILE).write_text(f"{2**32 - 1}\n")
    with pytest.raises(ProducerIdsExhaustedError):
        ProducerIdBlocks(1, tmp_path, block_size=2).next_id()
    with pytest.raises(ValueError, match="node id"):
        ProducerIdBlocks(2**31, tmp_path)


# -------------------------------------------------------------------------------- fetch waits


@pytest.fixture
def waits() -> Iterator[FetchWaits[str]]:
    w: FetchWaits[str] = FetchWaits()
    yield w
    w.close()


def test_a_waiter_completes_once_enough_bytes_arrived(waits: FetchWaits[str]) -> None:
    calls: list[str] = []

    def complete() -> str:
        calls.append("read")
        return "answer"

    future = waits.park(["a", "b"], 100, 30.0, complete, lambda: False)
    waits.appended("c", 1000)  # another partition
    waits.appended("a", 60)
    assert waits.waiting() == 1 and not future.done()
    waits.appended("b", 40)
    assert future.result(5) == "answer" and calls == ["read"]
    assert waits.waiting() == 0
    waits.appended("a", 100)  # completed once only
    assert calls == ["read"]


def test_a_waiter_completes_at_its_deadline(waits: FetchWaits[str]) -> None:
    started = time.monotonic()
    late = waits.park(["a"], 1, 0.5, lambda: "late", lambda: False)
    early = waits.park(["a"], 1, 0.1, lambda: "early", lambda: False)
    assert early.result(5) == "early"
    assert not late.done()
    assert late.result(5) == "late"
    assert time.monotonic() - started >= 0.45


def test_an_append_between_read_and_park_is_not_lost(waits: FetchWaits[str]) -> None:
    future = waits.park(["a"], 1, 30.0, lambda: "now", lambda: True)
    assert future.result(5) == "now"


def test_a_failing_completion_fails_its_future(waits: FetchWaits[str]) -> None:
    def broken() -> str:
        raise RuntimeError("boom")

    future = waits.park(["a"], 1, 30.0, broken, lambda: False)
    waits.appended("a", 1)
    with pytest.raises(RuntimeError, match="boom"):
        future.result(5)


def test_close_cancels_what_waits() -> None:
    waits: FetchWaits[str] = FetchWaits()
    future = waits.park(["a"], 1, 30.0, lambda: "never", lambda: False)
    waits.close()
    assert future.cancelled()
    assert waits.park(["a"], 1, 30.0, lambda: "never", lambda: False).cancelled()
