"""bench/report.py turns the benchmarks' "summary" rows into bench/RESULTS.md (no benchmark runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import report
from bench.common import summary_row

X = report.TIMES  # the multiplication sign after a ratio

MACHINE = {
    "nproc": 2,
    "cpu_model": "AMD EPYC",
    "memory_total_bytes": 25_276_063_744,
    "load_average": [0.6, 0.86, 0.88],
}


def document(benchmark: str, summary: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "benchmark": benchmark,
        "finished_at": "2026-11-22T04:16:01+00:00",
        "machine": MACHINE,
        "code": {"tiered": {"git_commit": "0e7319f9940e1f65dd0f", "uncommitted_changes": False}},
        "summary": summary,
        **extra,
    }


def write(directory: Path, name: str, content: dict[str, Any]) -> None:
    (directory / name).write_text(json.dumps(content), encoding="utf-8")


def table(markdown: str) -> list[list[str]]:
    """The cells of the markdown table's body rows."""
    lines = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert lines[0] == "| " + " | ".join(report.HEADERS) + " |"
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines[1:]]


def test_summary_row_ratio_is_value_over_baseline() -> None:
    row = summary_row("sc", "fig", 3.0, "s", "base", 12.0)
    assert row == {
        "scenario": "sc",
        "figure": "fig",
        "value": 3.0,
        "unit": "s",
        "baseline": "base",
        "baseline_value": 12.0,
        "ratio": 0.25,
    }
    assert summary_row("sc", "fig", 1.0, "s", "base", 0.0)["ratio"] is None


def test_report_table_rows_and_files_without_summary(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    write(
        results,
        "tiering.json",
        document(
            "tiering",
            [summary_row("1 GiB, 4 partitions", "RLM copy", 0.3, "s", "copyfile", 0.24)],
            load_average_at_end=[1.84, 1.0, 0.9],
        ),
    )
    write(
        results,
        "remote_log_size.json",
        document(
            "remote_log_size",
            [
                summary_row("sqlite, leader path", "remote_log_size", 8e-6, "s", "list", 7.5),
                summary_row("sqlite", "RSS", 3 * 1024**2, "B", "naive RSS", 12 * 1024**2),
                summary_row("sqlite", "rate", 1500.0, "MB/s", "cp", 1000.0),
            ],
        ),
    )
    write(results, "old.json", {"benchmark": "old", "results": {}})  # before summaries
    write(results, "failed.json", document("failed", [], ok=False))
    out = tmp_path / "RESULTS.md"

    assert report.main(["--results", str(results), "--out", str(out)]) == 0

    markdown = out.read_text(encoding="utf-8")
    machine = "2 CPU AMD EPYC, 23.5 GiB, load 0.6, 2026-11-22"
    assert table(markdown) == [
        [
            "remote_log_size",
            "sqlite, leader path",
            "remote_log_size",
            "8.0 us",
            "list: 7.50 s",
            f"1.1e-06{X} (1/937,500)",
            machine,
        ],
        ["remote_log_size", "sqlite", "RSS", "3.0 MiB", "naive RSS: 12.0 MiB", f"0.25{X}", machine],
        ["remote_log_size", "sqlite", "rate", "1,500 MB/s", "cp: 1,000 MB/s", f"1.50{X}", machine],
        [
            "tiering",
            "1 GiB, 4 partitions",
            "RLM copy",
            "300.00 ms",
            "copyfile: 240.00 ms",
            f"1.25{X}",
            "2 CPU AMD EPYC, 23.5 GiB, load 0.6\u21921.8, 2026-11-22",
        ],
    ]
    assert "make bench" in markdown and "commit `0e7319f9940e`" in markdown
    not_summarised = markdown.split("Not summarised", 1)[1]
    assert "`old.json`" in not_summarised and "`failed.json`" in not_summarised
    assert "tiering.json" not in not_summarised


@pytest.mark.parametrize(
    ("ratio", "text"),
    [
        (None, "n/a"),
        (0.0, f"0.00{X}"),
        (0.014, f"0.01{X}"),
        (1.0, f"1.00{X}"),
        (33.457, f"33.46{X}"),
    ],
)
def test_format_ratio(ratio: float | None, text: str) -> None:
    assert report.format_ratio(ratio) == text
