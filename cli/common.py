"""What the admin CLIs share: the bootstrap and format options, Kafka-style config parsing, the
exit-code wrapper that turns errors into ``NAME: message`` on stderr, and a progress line.

Exit codes: 0 success; 1 an error from the cluster or a malformed argument value (printed as
``NAME: message``); 2 a usage error (argparse's own); 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO, TypeVar

import grpc

from cli.kafka_client.client_security import KafkaClientSecurity
from cli.security.client_config import ClientSecurity
from tiered.admin import AdminClient
from tiered.errors import ErrorCode, TieredError
from tiered.properties import load_properties

__all__ = [
    "ProgressLine",
    "add_bootstrap_option",
    "add_format_option",
    "command_config",
    "command_config_credentials",
    "explaining_refusals",
    "invalid",
    "kafka_command_config",
    "parse_config_assignment",
    "parse_config_list",
    "parse_key_list",
    "print_error",
    "print_json",
    "run",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


# --------------------------------------------------------------------------------- options


def add_bootstrap_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT[,HOST:PORT]",
        help="controller or broker addresses; the active controller is found from them",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties, as Kafka's tools: security.protocol=SSL with "
        "ssl.truststore.location, and ssl.keystore.location (ssl.keystore.type=PEM) for a "
        "client certificate",
    )


def command_config_credentials(path: str | None) -> grpc.ChannelCredentials | None:
    """The channel credentials ``--command-config`` asks for (None: plaintext); INVALID_CONFIG
    naming the file and the key when it cannot be used."""
    return command_config(path).credentials


@contextlib.contextmanager
def explaining_refusals(path: str | None, bootstrap: str) -> Iterator[None]:
    """Adds to a BROKER_NOT_AVAILABLE error why the TLS handshake with the first bootstrap
    address fails, when it does (a refused certificate reaches gRPC as "Socket closed")."""
    try:
        yield
    except TieredError as e:
        if e.code is not ErrorCode.BROKER_NOT_AVAILABLE:
            raise
        why = command_config(path).explain_refusal(bootstrap.split(",", maxsplit=1)[0].strip())
        if why is None:
            raise
        raise TieredError(e.code, f"{why}; {e.message}") from None


REMOTE_STORAGE_CALL_TIMEOUT_S = 3600.0
"""A verify reads every finished segment's objects and a scrub lists the whole root: far longer
than an admin call's usual 30 s."""


@contextlib.contextmanager
def admin_client(args: argparse.Namespace, timeout_s: float = 30.0) -> Iterator[AdminClient]:
    """An admin client of ``--bootstrap-server`` with ``--command-config``'s credentials, each
    call bounded by ``timeout_s``; a refusal raised inside is explained (:func:`explaining_refusals`)."""
    with (
        explaining_refusals(args.command_config, args.bootstrap_server),
        AdminClient(
            args.bootstrap_server,
            timeout_s=timeout_s,
            credentials=command_config_credentials(args.command_config),
        ) as admin,
    ):
        yield admin


def command_config(path: str | None) -> ClientSecurity:
    """The gRPC CLIs' ``--command-config`` (PLAINTEXT or SSL)."""
    return ClientSecurity() if path is None else _read_command_config(path, ClientSecurity)


def kafka_command_config(path: str | None) -> KafkaClientSecurity:
    """``--command-config`` of a tool that speaks the Kafka protocol (SASL too)."""
    if path is None:
        return KafkaClientSecurity()
    return _read_command_config(path, KafkaClientSecurity)


_Security = TypeVar("_Security", ClientSecurity, KafkaClientSecurity)


def _read_command_config(path: str, kind: type[_Security]) -> _Security:
    """INVALID_CONFIG naming the file and the key when it cannot be used."""
    try:
        return kind.from_properties(load_properties(path))
    except OSError as e:
        raise TieredError(
            ErrorCode.INVALID_CONFIG, f"--command-config {path}: cannot read it ({e.strerror})"
        ) from None
    except ValueError as e:
        raise TieredError(ErrorCode.INVALID_CONFIG, f"--command-config {path}: {e}") from None


def add_format_option(parser: argparse.ArgumentParser, of: str = "--describe") -> None:
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help=f"output format of {of} (default: text)",
    )


# --------------------------------------------------------------------------------- errors


def invalid(message: str) -> TieredError:
    return TieredError(ErrorCode.INVALID_REQUEST, message)


def print_error(error: TieredError, stream: TextIO | None = None) -> None:
    print(f"{error.code.name}: {error.message}", file=stream or sys.stderr)


def run(body: Callable[[], int]) -> int:
    """Run a command's body and return its exit code: a TieredError is printed as
    ``NAME: message`` on stderr and exits 1, never a traceback."""
    try:
        return body()
    except TieredError as e:
        sys.stdout.flush()
        print_error(e)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into e.g. `head`: stop quietly (and keep Python from complaining at exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2))


# --------------------------------------------------------------------------------- configs


def _split_top_level(text: str, separator: str) -> list[str]:
    """Split on ``separator`` outside square brackets (Kafka's list syntax: ``a=[x,y],b=z``)."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise invalid(f"unbalanced ']' in {text!r}")
        if ch == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0:
        raise invalid(f"unbalanced '[' in {text!r}")
    parts.append("".join(current))
    return parts


def _value(raw: str, entry: str) -> str:
    value = raw.strip()
    if "[" in value or "]" in value:
        if not (value.startswith("[") and value.endswith("]")) or value.count("[") != 1:
            raise invalid(f"invalid list value in {entry.strip()!r}: use key=[a,b]")
        items = [item.strip() for item in value[1:-1].split(",")]
        if any(not item for item in items) and value != "[]":
            raise invalid(f"empty list item in {entry.strip()!r}")
        return ",".join(item for item in items if item)
    return value


def _assignment(entry: str) -> tuple[str, str]:
    parts = _split_top_level(entry, "=")
    if len(parts) != 2:
        raise invalid(
            f"invalid config entry {entry.strip()!r}: all configs must be in the format key=value"
        )
    key = parts[0].strip()
    if not key:
        raise invalid(f"invalid config entry {entry.strip()!r}: empty key")
    if any(ch.isspace() or ch in "[]" for ch in key):
        raise invalid(f"invalid config key {key!r}")
    return key, _value(parts[1], entry)


def parse_config_list(text: str) -> dict[str, str]:
    """Parse ``--add-config`` like kafka-configs.sh: ``'k=v,k2=v2'``, with spaces allowed around
    entries and ``=``, and square brackets around a list value (``cleanup.policy=[delete,compact]``
    gives ``delete,compact``). A malformed entry or a repeated key raises INVALID_REQUEST."""
    configs: dict[str, str] = {}
    for entry in _split_top_level(text, ","):
        if not entry.strip():
            raise invalid(f"empty config entry in {text!r}")
        key, value = _assignment(entry)
        if key in configs:
            raise invalid(f"config {key!r} is given more than once")
        configs[key] = value
    return configs


def parse_config_assignment(text: str) -> tuple[str, str]:
    """One ``--config K=V`` of kafka-topics.sh: the value may hold commas (``a,b`` or ``[a,b]``)."""
    if not text.strip():
        raise invalid("empty --config entry")
    return _assignment(text)


def parse_key_list(texts: Iterable[str]) -> list[str]:
    """``--delete-config 'k1,k2'`` (possibly repeated) → ``["k1", "k2"]``."""
    keys: list[str] = []
    for text in texts:
        for raw in text.split(","):
            key = raw.strip()
            if not key or any(ch.isspace() or ch in "[]=" for ch in key):
                raise invalid(f"invalid config key {raw.strip()!r} in --delete-config {text!r}")
            if key not in keys:
                keys.append(key)
    return keys


# --------------------------------------------------------------------------------- progress


class ProgressLine:
    """Progress on stderr: one line rewritten in place (``\\r``) on a terminal, else one line per
    change. ``finish()`` ends an in-place line so what follows starts on a fresh one."""

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty() if tty is None else tty
        self._last: str | None = None
        self._width = 0

    def update(self, text: str) -> None:
        if text == self._last:
            return
        self._last = text
        if self._tty:
            pad = " " * max(0, self._width - len(text))
            self._stream.write(f"\r{text}{pad}")
            self._width = len(text)
        else:
            self._stream.write(f"{text}\n")
        self._stream.flush()

    def finish(self) -> None:
        if self._tty and self._width:
            self._stream.write("\n")
            self._stream.flush()
        self._width = 0
        self._last = None


def iso_utc_ms(epoch_ms: int) -> str:
    """Wall-clock milliseconds since the epoch as ISO-8601 in UTC, to the millisecond
    (``2026-12-07T10:30:00.000Z``)."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
