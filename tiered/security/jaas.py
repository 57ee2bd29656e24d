"""Java's JAAS configuration syntax, as Kafka and ZooKeeper clients read it: a file of sections

    Client {
      org.apache.zookeeper.server.auth.DigestLoginModule required
      username="tiered"
      password="...";
    };

and the inline form of ``sasl.jaas.config`` (the entries of one section, without its name and
braces). Comments (``//`` and ``/* */``) are skipped; values are quoted strings (``\\"`` and
``\\\\`` escapes) or bare words. Errors say where the text is wrong, never what a value is: values
here are passwords.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

__all__ = ["CONTROL_FLAGS", "JaasEntry", "JaasSyntaxError", "parse_jaas_entries", "parse_jaas_file"]

CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<punct>[{};=])|(?P<word>[^\s{};="]+)',
    re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


class JaasSyntaxError(ValueError):
    """The text is not JAAS configuration; the message says where, not what a value is."""


@dataclass(frozen=True, repr=False)
class JaasEntry:
    """One login module line: its class, its control flag and its options (secrets among them:
    the repr shows option names only)."""

    login_module: str
    flag: str
    options: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"JaasEntry({self.login_module} {self.flag} options={sorted(self.options)})"


@dataclass(frozen=True)
class _Token:
    kind: str  # "word", "quoted" or "punct"
    text: str
    line: int


def _tokens(text: str) -> Iterator[_Token]:
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        line = text.count("\n", 0, position) + 1
        if match is None:
            raise JaasSyntaxError(f"line {line}: unterminated quote or comment")
        position = match.end()
        if match.group("quoted") is not None:
            yield _Token("quoted", _ESCAPE.sub(r"\1", match.group("quoted")), line)
        elif match.group("punct") is not None:
            yield _Token("punct", match.group("punct"), line)
        elif match.group("word") is not None:
            yield _Token("word", match.group("word"), line)


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = list(_tokens(text))
        self._next = 0

    def at_end(self) -> bool:
        return self._next >= len(self._tokens)

    def peek(self, punct: str) -> bool:
        return not self.at_end() and self._tokens[self._next] == _Token(
            "punct", punct, self._tokens[self._next].line
        )

    def take(self, what: str, punct: str | None = None) -> _Token:
        if self.at_end():
            last = self._tokens[-1].line if self._tokens else 1
            raise JaasSyntaxError(f"line {last}: the text ends where {what} was expected")
        token = self._tokens[self._next]
        wrong_kind = token.kind != "punct" if punct else token.kind == "punct"
        if wrong_kind or (punct is not None and token.text != punct):
            found = token.text if token.kind == "punct" else "a value"
            raise JaasSyntaxError(f"line {token.line}: expected {what}, found {found!r}")
        self._next += 1
        return token

    def entries(self, closing: str | None) -> list[JaasEntry]:
        """Login module entries up to ``closing`` (or the end of the text)."""
        entries = []
        while not (self.peek(closing) if closing else self.at_end()):
            module = self.take("a login module class name").text
            flag = self.take(f"a control flag ({', '.join(CONTROL_FLAGS)})")
            if flag.text.lower() not in CONTROL_FLAGS:
                raise JaasSyntaxError(
                    f"line {flag.line}: expected a control flag ({', '.join(CONTROL_FLAGS)}) "
                    f"after {module}"
                )
            options: dict[str, str] = {}
            while not self.peek(";"):
                name = self.take("an option name or ';'").text
                self.take(f"'=' after option {name}", "=")
                options[name] = self.take(f"the value of option {name}").text
            self.take("';'", ";")
            entries.append(JaasEntry(module, flag.text.lower(), options))
        return entries

    def sections(self) -> dict[str, list[JaasEntry]]:
        sections: dict[str, list[JaasEntry]] = {}
        while not self.at_end():
            name = self.take("a section name").text
            self.take(f"'{{' after section {name}", "{")
            sections[name] = self.entries("}")
            self.take(f"'}}' closing section {name}", "}")
            self.take(f"';' after section {name}", ";")
        return sections


def parse_jaas_file(text: str) -> dict[str, list[JaasEntry]]:
    """The sections of a JAAS configuration file, by name."""
    return _Parser(text).sections()


def parse_jaas_entries(text: str) -> list[JaasEntry]:
    """The entries of an inline JAAS configuration (``sasl.jaas.config``)."""
    return _Parser(text).entries(None)
