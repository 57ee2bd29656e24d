"""Tiered state machine cost per event: ``controller.tiered_state.fire`` over many distinct topics
against the naive use of ``transitions`` (every topic's model attached to one machine), measured in
one run.

Measured:

- *fire*: ``--topics`` distinct ENABLED topics (``TopicMetadata`` values built untimed), each
  gets one ``fire(topic, "disable")``; each call is timed and the median taken, also per each
  of ``--slices`` equal slices so that any growth with the number of topics seen shows up (last
  slice / first slice). Afterwards every
  result is checked (DISABLING, epoch + 1) and the shared machine must hold no model.
- *naive*: one ``transitions.Machine`` with the same states and transitions, and one model per
  topic attached for the topic's lifetime with ``add_model`` (what docs/design.md §2 rules
  out). Models are attached one after another; at each of ``--naive-sizes`` attached models the
  next ``--window`` ``add_model`` calls are timed: that is the cost of the event that brings a
  new topic under the machine, which grows with the number attached (``add_model`` scans the
  model list); each call is timed and the median taken. A straight line fitted through
  (attached, median seconds per call) is extrapolated to ``--topics``: the per-call cost there,
  and the total to attach that many one by one (``intercept * N + slope * N * (N - 1) / 2``).
  Then a ``disable`` trigger is timed on the attached models (a trigger on an attached model is
  O(1); the cost is in attaching).

ratio = naive median seconds per event / fire median seconds per event (above 1: the naive
machine is slower). The "summary" rows (bench/RESULTS.md) give the inverse, fire / naive.
Timings are never asserted; a wrong result (state, epoch, models left attached) exits 1.

Usage: ``python bench/state_machine.py [--quick] [--topics 100000] [--naive-sizes 5000,10000,20000]
[--window 1000] [--out PATH]`` (results default to ``bench/results/state_machine.json``).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the checkout importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transitions import Machine

from bench.common import (
    RESULTS_DIR,
    code_fingerprint,
    format_seconds,
    format_table,
    load_average,
    machine_info,
    summary_row,
    utc_now,
    write_json,
)
from controller import tiered_state
from tiered.cluster.model import TieredState, TopicMetadata

DEFAULT_OUT = RESULTS_DIR / "state_machine.json"
DEFAULT_TOPICS = 100_000
DEFAULT_NAIVE_SIZES = (5_000, 10_000, 20_000)
DEFAULT_WINDOW = 1_000
DEFAULT_SLICES = 10
QUICK_TOPICS = 5_000
QUICK_NAIVE_SIZES = (500, 1_000, 2_000)
QUICK_WINDOW = 200
CONFIGS = {"remote.storage.enable": "true"}


class NaiveTopic:
    """A topic's model attached for its lifetime (the naive approach)."""

    # Set by Machine.add_model (annotations only: an existing attribute would not be replaced).
    state: str
    trigger: Callable[..., bool]

    def __init__(self, name: str, tiered_epoch: int) -> None:
        self.name = name
        self.tiered_epoch = tiered_epoch

    def raise_epoch(self, event: Any) -> None:
        self.tiered_epoch += 1

    def reject_in_progress(self, event: Any) -> None:
        raise RuntimeError("in progress")


def naive_machine() -> Any:
    """A machine like the module's (same states, transitions and options), models kept."""
    return Machine(
        model=None,
        states=[s.value for s in TieredState],
        initial=None,
        transitions=tiered_state._TRANSITIONS,
        auto_transitions=False,
        send_event=True,
    )


def make_topics(count: int, prefix: str) -> list[TopicMetadata]:
    return [
        TopicMetadata(
            name=f"{prefix}-{i}",
            topic_id=uuid.UUID(int=i + 1),
            replicas=(0, 1, 2),
            configs=CONFIGS,
            tiered_state=TieredState.ENABLED,
            tiered_epoch=i % 7,
        )
        for i in range(count)
    ]


# ----------------------------------------------------------------------------- fire


def run_fire(
    count: int, slices: int, log: Callable[[str], None]
) -> tuple[dict[str, Any], list[str]]:
    topics = make_topics(count, "fire")
    results: list[TopicMetadata] = []
    calls: list[float] = []
    fire = tiered_state.fire
    clock = time.perf_counter
    gc.collect()
    for t in topics:
        begin = clock()
        results.append(fire(t, "disable"))
        calls.append(clock() - begin)
    total = sum(calls)
    bounds = [count * k // slices for k in range(slices + 1)]
    per_slice = [statistics.median(calls[a:b]) for a, b in itertools.pairwise(bounds)]
    failures = [
        f"fire: {t.name} is {r.tiered_state.value} epoch {r.tiered_epoch}, expected DISABLING "
        f"epoch {t.tiered_epoch + 1}"
        for t, r in zip(topics, results, strict=True)
        if r.tiered_state is not TieredState.DISABLING or r.tiered_epoch != t.tiered_epoch + 1
    ][:10]
    attached = tiered_state.attached_model_count()
    if attached != 1:
        failures.append(f"fire: {attached} models attached to the shared machine, not 1")
    figures: dict[str, Any] = {
        "topics": count,
        "events": count,
        "total_s": total,
        "per_event_s": statistics.median(calls),
        "per_event_mean_s": total / count,
        "per_event_max_s": max(calls),
        "slices": slices,
        "per_event_s_by_slice": per_slice,
        "last_over_first_slice": per_slice[-1] / per_slice[0],
        "models_attached_after": attached,
    }
    log(
        f"fire: {count} distinct topics, {format_seconds(figures['per_event_s'])} per event "
        f"(median; mean {format_seconds(total / count)}; first slice "
        f"{format_seconds(per_slice[0])}, last {format_seconds(per_slice[-1])}), "
        f"{attached} models attached after"
    )
    return figures, failures


# ----------------------------------------------------------------------------- naive


def fit_line(points: list[tuple[int, float]]) -> tuple[float, float, float]:
    """Least squares y = intercept + slope * x; returns (intercept, slope, r squared)."""
    xs, ys = [float(x) for x, _ in points], [y for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = mean_y - slope * mean_x
    ss_tot = sum((y - mean_y) ** 2 for y in ys)
    ss_res = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return intercept, slope, 1.0 - ss_res / ss_tot if ss_tot else 1.0


def run_naive(
    sizes: list[int], window: int, extrapolate_to: int, log: Callable[[str], None]
) -> tuple[dict[str, Any], list[str]]:
    machine = naive_machine()
    total = max(sizes) + window
    models = [NaiveTopic(f"naive-{i}", i % 7) for i in range(total)]
    initial = TieredState.ENABLED.value
    windows: list[dict[str, Any]] = []
    attached = 0
    attach_s = 0.0  # every add_model call, timed or not
    gc.collect()
    for size in sorted(sizes):
        begin = time.perf_counter()
        for model in models[attached:size]:
            machine.add_model(model, initial=initial)
        attach_s += time.perf_counter() - begin
        calls: list[float] = []
        for model in models[size : size + window]:
            begin = time.perf_counter()
            machine.add_model(model, initial=initial)
            calls.append(time.perf_counter() - begin)
        attach_s += sum(calls)
        attached = size + window
        # The median per call: a garbage collection landing in one call does not move it.
        windows.append(
            {
                "attached": size,
                "calls": window,
                "per_call_s": statistics.median(calls),
                "per_call_mean_s": statistics.fmean(calls),
                "per_call_max_s": max(calls),
            }
        )
        log(
            f"naive: add_model with {size} models attached: "
            f"{format_seconds(statistics.median(calls))} per call (median of {window})"
        )
    intercept, slope, r2 = fit_line([(w["attached"], w["per_call_s"]) for w in windows])
    n = extrapolate_to
    gc.collect()
    begin = time.perf_counter()
    for model in models[:attached]:
        model.trigger("disable")
    trigger_s = (time.perf_counter() - begin) / attached
    failures = [
        f"naive: {m.name} is {m.state} epoch {m.tiered_epoch}"
        for i, m in enumerate(models[:attached])
        if m.state != TieredState.DISABLING.value or m.tiered_epoch != i % 7 + 1
    ][:10]
    if len(machine.models) != attached:
        failures.append(f"naive: {len(machine.models)} models attached, expected {attached}")
    figures: dict[str, Any] = {
        "windows": windows,
        "models_attached": attached,
        "attach_all_s": attach_s,
        "fit": {
            "per_call_s": "intercept_s + slope_s_per_model * attached",
            "intercept_s": intercept,
            "slope_s_per_model": slope,
            "r_squared": r2,
        },
        "extrapolated": {
            "attached": n,
            "per_call_s": intercept + slope * n,
            "attach_all_one_by_one_s": intercept * n + slope * n * (n - 1) / 2,
        },
        "trigger_on_attached_per_event_s": trigger_s,
    }
    log(
        f"naive: fit {format_seconds(intercept)} + {slope * 1e9:.2f} ns per attached model "
        f"(r^2 {r2:.3f}); at {n}: {format_seconds(intercept + slope * n)} per call, "
        f"{figures['extrapolated']['attach_all_one_by_one_s']:.1f} s to attach all; a trigger "
        f"on an attached model {format_seconds(trigger_s)}"
    )
    return figures, failures


def ratios(fire: dict[str, Any], naive: dict[str, Any]) -> dict[str, float]:
    per_event = fire["per_event_s"]
    found = {
        f"naive_add_model_at_{w['attached']}": w["per_call_s"] / per_event for w in naive["windows"]
    }
    found[f"naive_add_model_at_{naive['extrapolated']['attached']}_extrapolated"] = (
        naive["extrapolated"]["per_call_s"] / per_event
    )
    found["naive_trigger_on_attached"] = naive["trigger_on_attached_per_event_s"] / per_event
    return found


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows for bench/RESULTS.md: fire per event against the naive add_model at the most
    models measured, and extrapolated to as many topics as were fired."""
    if "ratios" not in results:
        return []
    fire, naive = results["fire"], results["naive"]
    largest, extrapolated = naive["windows"][-1], naive["extrapolated"]
    figure = "fire(topic, 'disable') per event (median)"
    return [
        summary_row(
            f"{fire['topics']:,} distinct topics",
            figure,
            fire["per_event_s"],
            "s",
            f"naive add_model with {largest['attached']:,} models attached (median)",
            largest["per_call_s"],
        ),
        summary_row(
            f"{fire['topics']:,} distinct topics",
            figure,
            fire["per_event_s"],
            "s",
            f"naive add_model with {extrapolated['attached']:,} attached (extrapolated)",
            extrapolated["per_call_s"],
        ),
    ]


# ----------------------------------------------------------------------------- main


def parse_sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if len(sizes) < 2 or any(s < 1 for s in sizes) or len(set(sizes)) != len(sizes):
        raise argparse.ArgumentTypeError("at least two distinct positive sizes, e.g. 5000,10000")
    return sorted(sizes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--topics", type=int, help=f"distinct topics fired (default {DEFAULT_TOPICS})"
    )
    parser.add_argument(
        "--naive-sizes", type=parse_sizes, help="attached models, e.g. 5000,10000,20000"
    )
    parser.add_argument("--window", type=int, help="add_model calls timed at each size")
    parser.add_argument("--slices", type=int, default=DEFAULT_SLICES, help="fire timing slices")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_TOPICS} topics, naive sizes {QUICK_NAIVE_SIZES}",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON results file")
    args = parser.parse_args(argv)
    topics = args.topics or (QUICK_TOPICS if args.quick else DEFAULT_TOPICS)
    sizes = args.naive_sizes or list(QUICK_NAIVE_SIZES if args.quick else DEFAULT_NAIVE_SIZES)
    window = args.window or (QUICK_WINDOW if args.quick else DEFAULT_WINDOW)
    if topics < args.slices or args.slices < 1 or window < 1:
        parser.error("--topics wants at least --slices topics; --slices and --window at least 1")
    if any(b - a < window for a, b in itertools.pairwise(sizes)):
        parser.error("--naive-sizes must be at least --window apart")

    def log(message: str) -> None:
        print(message, flush=True)

    started_at, started, machine = utc_now(), time.perf_counter(), machine_info()
    code = {"tiered": code_fingerprint("tiered"), "controller": code_fingerprint("controller")}
    results: dict[str, Any] = {}
    failures: list[str] = []
    try:
        results["fire"], found = run_fire(topics, args.slices, log)
        failures += found
        results["naive"], found = run_naive(sizes, window, topics, log)
        failures += found
        results["ratios"] = ratios(results["fire"], results["naive"])
    except Exception:
        failures.append(f"crashed:\n{traceback.format_exc()}")
        log(f"CRASHED:\n{traceback.format_exc()}")
    runtime_s = time.perf_counter() - started
    document = {
        "benchmark": "state_machine",
        "description": (
            "Cost per event of controller.tiered_state.fire (one shared transitions Machine, a "
            "one resident model loaded per event) over distinct topics, versus the "
            "same run's naive baseline: one Machine with every topic's model attached by "
            "add_model, whose per-call cost grows with the models attached (measured at a few "
            "sizes, fitted with a line, extrapolated). ratio = naive median seconds per event / "
            "fire median seconds per event."
        ),
        "started_at": started_at,
        "finished_at": utc_now(),
        "runtime_s": runtime_s,
        "machine": machine,
        "load_average_at_end": load_average(),
        "code": code,
        "summary": summary(results),
        "settings": {
            "topics": topics,
            "slices": args.slices,
            "naive_sizes": sizes,
            "window": window,
            "quick": args.quick,
            "trigger": "disable on ENABLED topics (epoch += 1)",
            "gc": "enabled; gc.collect() before each phase",
        },
        "results": results,
        "failures": failures,
        "ok": not failures,
    }
    out = write_json(args.out, document)
    log("")
    if "ratios" in results:
        fire = results["fire"]["per_event_s"]
        rows: list[list[object]] = [["fire (resident model)", topics, format_seconds(fire), "1.0"]]
        for w in results["naive"]["windows"]:
            rows.append(
                [
                    "naive add_model",
                    w["attached"],
                    format_seconds(w["per_call_s"]),
                    f"{w['per_call_s'] / fire:.1f}",
                ]
            )
        extrapolated = results["naive"]["extrapolated"]
        rows.append(
            [
                "naive add_model (extrapolated)",
                extrapolated["attached"],
                format_seconds(extrapolated["per_call_s"]),
                f"{extrapolated['per_call_s'] / fire:.1f}",
            ]
        )
        log(format_table(["per event", "topics", "seconds", "ratio"], rows))
    log(f"{'ok' if not failures else 'FAILED'}; results in {out}")
    for failure in failures:
        log(f"  {failure}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
