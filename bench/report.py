"""Writes bench/RESULTS.md from the benchmarks' JSON results: one table of every headline figure.

Each benchmark's results JSON carries a top-level ``"summary"``: rows made by
:func:`bench.common.summary_row` (scenario, figure, value, unit, baseline, baseline value and
ratio = value / baseline value, the baseline measured in the same run), and ``"machine"``
(:func:`bench.common.machine_info`). This reads every ``*.json`` of the results directory and
writes one markdown table, a row per summary row. Files without a ``"summary"`` (written before
summaries existed, or by a run that failed before it had one) are not in the table; they are
listed under it. Nothing here measures anything or asserts a timing.

``make bench`` (``scripts/bench.sh``) runs it after the benchmarks.

Usage: ``python bench/report.py [--results DIR] [--out PATH]`` (defaults: ``bench/results`` and
``bench/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO_ROOT, RESULTS_DIR, format_bytes, format_seconds, utc_now

DEFAULT_OUT = REPO_ROOT / "bench" / "RESULTS.md"
TIMES = "\u00d7"  # the multiplication sign after a ratio
HEADERS = ("benchmark", "scenario", "figure", "value", "baseline", "ratio", "machine")


@dataclass
class Results:
    """The documents of a results directory: (file name, document) with summary rows, and
    (file name, why) for the others."""

    summarised: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def load_results(results_dir: Path) -> Results:
    found = Results()
    for path in sorted(results_dir.glob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            found.skipped.append((path.name, f"unreadable: {e}"))
            continue
        if not isinstance(document, dict) or "summary" not in document:
            found.skipped.append((path.name, 'no "summary" (written before summaries existed)'))
        elif not document["summary"]:
            found.skipped.append((path.name, "empty summary (the run failed: see the file)"))
        else:
            found.summarised.append((path.name, document))
    return found


# ----------------------------------------------------------------------------- formatting


def format_value(value: float, unit: str) -> str:
    """Seconds (unit ``s``) and bytes (``B``) in a readable unit, anything else as number + unit."""
    if unit == "s":
        return format_seconds(value)
    if unit == "B":
        return format_bytes(value)
    number = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{number} {unit}".strip()


def format_ratio(ratio: float | None) -> str:
    """Two decimals and a multiplication sign (0.25 -> "0.25" + TIMES); below 0.01, where two
    decimals would say 0.00, two significant digits and the reciprocal ("1.1e-06" + TIMES +
    " (1/920,000)")."""
    if ratio is None:
        return "n/a"
    if ratio == 0 or ratio >= 0.01:
        return f"{ratio:.2f}{TIMES}"
    return f"{ratio:.2g}{TIMES} (1/{1 / ratio:,.0f})"


def describe_machine(document: dict[str, Any]) -> str:
    """E.g. ``2 CPU AMD EPYC, 23.5 GiB, load 0.6, 2026-11-22``: the 1-minute load average at the
    start, and at the end (``load 0.6->1.8`` with an arrow) where the document has it."""
    machine = document.get("machine") or {}
    parts = []
    cpus = machine.get("nproc") or machine.get("cpu_count")
    cpu = " ".join(str(p) for p in (cpus and f"{cpus} CPU", machine.get("cpu_model")) if p)
    if cpu:
        parts.append(cpu)
    if machine.get("memory_total_bytes"):
        parts.append(format_bytes(machine["memory_total_bytes"]))
    load = machine.get("load_average")
    if load:
        end = document.get("load_average_at_end")
        parts.append(f"load {load[0]:.1f}" + (f"\u2192{end[0]:.1f}" if end else ""))
    when = document.get("finished_at") or document.get("started_at")
    if when:
        parts.append(str(when)[:10])
    return ", ".join(parts) or "unknown"


def code_commit(document: dict[str, Any]) -> str:
    """The git commit a document says it measured (``code`` is a fingerprint, or a dict of them by
    package), shortened, with ``+`` when the measured packages had uncommitted changes."""
    code = document.get("code")
    if not isinstance(code, dict):
        return "unknown"
    fingerprints = (
        [code] if "git_commit" in code else [v for v in code.values() if isinstance(v, dict)]
    )
    commits = sorted({str(f["git_commit"])[:12] for f in fingerprints if f.get("git_commit")})
    dirty = any(f.get("uncommitted_changes") for f in fingerprints)
    return (", ".join(commits) or "unknown") + ("+" if dirty else "")


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_rows(results: Results) -> list[list[str]]:
    """The table's rows, as text, in file order then summary order."""
    rows = []
    for name, document in results.summarised:
        benchmark = Path(name).stem + (" (FAILED)" if document.get("ok") is False else "")
        machine = describe_machine(document)
        for row in document["summary"]:
            unit = row.get("unit", "")
            rows.append(
                [
                    benchmark,
                    row["scenario"],
                    row["figure"],
                    format_value(row["value"], unit),
                    f"{row['baseline']}: {format_value(row['baseline_value'], unit)}",
                    format_ratio(row.get("ratio")),
                    machine,
                ]
            )
    return [[_cell(c) for c in r] for r in rows]


def render(results: Results, generated_at: str) -> str:
    by_commit: dict[str, list[str]] = {}
    for name, document in results.summarised:
        by_commit.setdefault(code_commit(document), []).append(Path(name).stem)
    if len(by_commit) == 1:
        code = f"commit `{next(iter(by_commit))}`"
    else:
        code = "; ".join(f"`{c}` ({', '.join(names)})" for c, names in sorted(by_commit.items()))
    lines = [
        "# Benchmark results",
        "",
        f"Produced by `make bench` (`scripts/bench.sh` runs every benchmark, then "
        f"`python bench/report.py` writes this file from `bench/results/*.json`) on "
        f"{generated_at[:10]}. Code measured: {code}"
        + (" (`+`: uncommitted changes)." if "+`" in code else "."),
        "",
        "Every figure is compared with a baseline measured in the same run of the same "
        f"benchmark: ratio = value / baseline, so below 1{TIMES} the figure is faster (or "
        f"smaller) than the baseline and above 1{TIMES} slower (or bigger). Absolute values "
        "depend on the machine and its load and are shown for context only; no timing is "
        "asserted. The JSON files say how each figure was measured, and hold every other "
        "measurement.",
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" for _ in HEADERS) + "|",
        *("| " + " | ".join(row) + " |" for row in table_rows(results)),
    ]
    if results.skipped:
        lines += ["", "Not summarised (re-run `make bench`):", ""]
        lines += [f"- `{name}`: {why}" for name, why in results.skipped]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="the JSON results")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the markdown to write")
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(f"{args.results} is not a directory")
    results = load_results(args.results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(results, utc_now()), encoding="utf-8")
    rows = sum(len(d["summary"]) for _, d in results.summarised)
    print(
        f"report: {rows} rows from {len(results.summarised)} file(s) in {args.out}"
        + (f"; {len(results.skipped)} file(s) not summarised" if results.skipped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
