"""Kafka-style ``.properties`` files: ``key=value`` (or ``key: value``) lines, ``#``/``!`` comments."""

from __future__ import annotations

from collections.abc import Mapping
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


def int_property(
    values: Mapping[str, str], key: str, default: int, minimum: int | None = None
) -> int:
    """``values[key]`` as an integer (``default`` when absent or blank); the error names the key,
    the value and what is valid."""
    raw = values.get(key)
    if raw is None or not str(raw).strip():
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not valid; expected an integer") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"{key}={value} is not valid; expected an integer >= {minimum}")
    return value


def bool_property(values: Mapping[str, str], key: str, default: bool) -> bool:
    raw = values.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ValueError(f"{key}={raw!r} is not valid; valid values: true, false")
