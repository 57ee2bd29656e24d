"""What ``scripts/demo.py`` prints (its narration, the commands it runs, sizes and times) and
the order lines it feeds the producer."""

from __future__ import annotations

import os
import random
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

RECORD_BYTES = 100

# --------------------------------------------------------------------------------- output

_TTY = sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _style(code: str, text: str) -> str:
    return f"\033[{code}m{text}\033[0m" if _TTY else text


def say(text: str = "") -> None:
    """A line of the demo's own narration, flushed before any subprocess writes."""
    print(text, flush=True)


def explain(*lines: str) -> None:
    """The narration before a step: a blank line, then comment lines."""
    say()
    for line in lines:
        comment(line)


def comment(text: str) -> None:
    say(_style("36", f"# {text}"))


def show_command(args: Sequence[str], suffix: str = "") -> None:
    say(_style("1", "$ " + shlex.join(args) + suffix))


def human_bytes(n: int) -> str:
    if n < 1024:
        return f"{n}B"
    if n < 1024 * 1024:
        return f"{n / 1024:.0f}K"
    return f"{n / 1024 / 1024:.1f}M"


def elapsed_text(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


# --------------------------------------------------------------------------------- records


def write_records(path: Path, first: int, count: int, seed: int) -> None:
    """``count`` order lines of about RECORD_BYTES bytes, numbered from ``first``."""
    rng = random.Random(seed)
    lines = []
    for i in range(first, first + count):
        line = (
            f"order-{i:06d} customer=c{rng.randrange(10_000):04d} item=sku-{rng.randrange(1000):03d}"
            f" qty={rng.randrange(1, 10)} price={rng.randrange(100, 100_000) / 100:.2f} note="
        )
        line += "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(40))
        lines.append(line[:RECORD_BYTES])
    path.write_text("\n".join(lines) + "\n")
