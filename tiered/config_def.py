"""Config definitions in the style of Kafka's ``ConfigDef``: each key is defined once, with its
type, default, valid values and documentation, and everything that reads a key goes through its
definition: validation, the typed values, DescribeConfigs' entries and the documentation table.

A :class:`ConfigKey` parses a raw string value into its typed value or raises
:class:`~tiered.errors.TieredError` with the key's error code and a message that names the key,
the bad value and what is valid. Values are trimmed first, as Kafka's ``ConfigDef.parseType``
does; integers are Java's ``Long.parseLong`` syntax in ASCII digits (no ``_``, no blank).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

from tiered.errors import ErrorCode, TieredError

__all__ = [
    "INT32_MAX",
    "LONG_MAX",
    "Boolean",
    "Choice",
    "ConfigDef",
    "ConfigKey",
    "ConfigType",
    "IntRange",
    "ListOf",
    "shown",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
E = TypeVar("E", bound=enum.Enum)

LONG_MAX = 2**63 - 1
"""The largest int64: the bound of Kafka's LONG configs."""
INT32_MAX = 2**31 - 1
"""The largest int32: the bound of Kafka's INT configs and of a request's partition count."""
_INTEGER = re.compile(r"[+-]?[0-9]+")


class ConfigType(enum.IntEnum):
    """Kafka's config types, with the numbers DescribeConfigs gives them."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    LIST = 7


def shown(text: str, limit: int = 64) -> str:
    """``text`` quoted for a message, cut short when long."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


class Rule(Protocol[T_co]):
    """How one key's values are parsed: ``parse`` gives the typed value or raises TieredError
    with code ``error``;
    ``normalize`` gives the string stored for a valid value; ``valid_values`` says what is valid
    (error messages and the documentation table)."""

    @property
    def error(self) -> ErrorCode:
        """The code of every refusal of a value."""
        ...

    def parse(self, key: str, raw: str) -> T_co: ...

    def normalize(self, key: str, raw: str) -> str: ...

    def valid_values(self) -> str: ...


@dataclass(frozen=True)
class Boolean:
    """``true`` or ``false``, in any case."""

    error: ErrorCode = ErrorCode.INVALID_CONFIG

    def parse(self, key: str, raw: str) -> bool:
        value = raw.strip().lower()
        if value not in ("true", "false"):
            raise TieredError(
                self.error, f"{key}={shown(raw)} is not valid; valid values: true, false"
            )
        return value == "true"

    def normalize(self, key: str, raw: str) -> str:
        return "true" if self.parse(key, raw) else "false"

    def valid_values(self) -> str:
        return "true, false"


@dataclass(frozen=True)
class IntRange:
    """An integer from ``minimum`` to ``maximum``; ``note`` explains special values."""

    minimum: int
    maximum: int
    note: str = ""
    error: ErrorCode = ErrorCode.INVALID_CONFIG

    def parse(self, key: str, raw: str) -> int:
        text = raw.strip()
        if _INTEGER.fullmatch(text) is None or not self.minimum <= int(text) <= self.maximum:
            raise TieredError(
                self.error, f"{key}={shown(raw)} is not valid; expected {self.valid_values()}"
            )
        return int(text)

    def normalize(self, key: str, raw: str) -> str:
        self.parse(key, raw)
        return raw.strip()

    def valid_values(self) -> str:
        return f"an integer from {self.minimum} to {self.maximum}{self.note}"


@dataclass(frozen=True)
class Choice(Generic[E]):
    """One of an enum's values, in any case."""

    choices: type[E]
    error: ErrorCode = ErrorCode.INVALID_CONFIG

    def parse(self, key: str, raw: str) -> E:
        try:
            return self.choices(raw.strip().lower())
        except ValueError:
            raise TieredError(
                self.error, f"{key}={shown(raw)} is not valid; valid values: {self.valid_values()}"
            ) from None

    def normalize(self, key: str, raw: str) -> str:
        return str(self.parse(key, raw).value)

    def valid_values(self) -> str:
        return ", ".join(str(choice.value) for choice in self.choices)


@dataclass(frozen=True)
class ListOf:
    """A comma-separated list of ``choices``, in any case; repeats are dropped, order kept."""

    choices: tuple[str, ...]
    error: ErrorCode = ErrorCode.INVALID_CONFIG

    def parse(self, key: str, raw: str) -> tuple[str, ...]:
        items = [item.strip().lower() for item in raw.split(",")]
        if not all(item in self.choices for item in items):
            raise TieredError(
                self.error, f"{key}={shown(raw)} is not valid; valid values: {self.valid_values()}"
            )
        return tuple(dict.fromkeys(items))

    def normalize(self, key: str, raw: str) -> str:
        return ",".join(self.parse(key, raw))

    def valid_values(self) -> str:
        return f"a comma-separated list of {', '.join(self.choices)}"


@dataclass(frozen=True)
class ConfigKey(Generic[T]):
    """One config: its name, Kafka type, default (as a string, as Kafka describes it), the rule
    its values follow and its documentation."""

    name: str
    type: ConfigType
    default: str
    rule: Rule[T]
    doc: str

    def parse(self, raw: str) -> T:
        """The typed value of ``raw``; TieredError naming the key otherwise."""
        return self.rule.parse(self.name, raw)

    def value_in(self, configs: Mapping[str, str]) -> T:
        """The typed value of this key in a config set, its default when the set lacks it."""
        return self.parse(configs.get(self.name, self.default))

    def normalize(self, raw: str) -> str:
        """The string stored for a valid ``raw``; TieredError naming the key otherwise."""
        return self.rule.normalize(self.name, raw)


class ConfigDef:
    """Every key of one kind of config, by name, in the order defined."""

    def __init__(self, *keys: ConfigKey[Any]) -> None:
        by_name = {key.name: key for key in keys}
        if len(by_name) != len(keys):
            raise ValueError("a ConfigDef defines each key once")
        for key in keys:
            key.parse(key.default)  # a default its own rule refuses is a definition bug
        self._keys: Mapping[str, ConfigKey[Any]] = MappingProxyType(by_name)
        self.defaults: Mapping[str, str] = MappingProxyType({k.name: k.default for k in keys})

    def __getitem__(self, name: str) -> ConfigKey[Any]:
        return self._keys[name]

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __iter__(self) -> Iterator[ConfigKey[Any]]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def markdown_table(self) -> str:
        """The documentation table: one row per key, sorted by name."""
        lines = [
            "| key | type | default | valid values | description |",
            "|---|---|---|---|---|",
        ]
        for key in sorted(self, key=lambda k: k.name):
            cells = (
                f"`{key.name}`",
                key.type.name,
                f"`{key.default}`",
                key.rule.valid_values(),
                key.doc,
            )
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        return "\n".join(lines)
