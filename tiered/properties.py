"""Kafka-style ``.properties`` files: ``key=value`` (or ``key: value``) lines, ``#``/``!`` comments."""

from __future__ import annotations

from pathlib import Path


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    result: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ValueError(f"{source}:{number}: expected key=value, got {raw!r}")
        result[line[:cut].strip()] = line[cut + 1 :].strip()
    return result


def load_properties(path: str | Path) -> dict[str, str]:
    return parse_properties(Path(path).read_text(encoding="utf-8"), str(path))
