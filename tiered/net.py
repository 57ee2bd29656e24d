"""Network addresses in the daemons' configs, shared by the broker and the controller.

A broker's ``listeners`` is Kafka's comma list of ``NAME://host:port`` entries, one per listener
name (docs/design.md §6, docs/kafka-compatibility.md, docs/operations/security.md):

- ``GRPC://host:port``: the gRPC services (the controller's link, the CLIs, DisableRemoteTopic). A
  scheme-less ``host:port`` means the same, as configs written before the Kafka listener did;
- ``PLAINTEXT://host:port``: a Kafka wire-protocol listener;
- ``SSL://host:port``: a Kafka listener over TLS (``ssl.*`` keys, ``tiered.security.tls``);
- ``SASL_PLAINTEXT://host:port`` and ``SASL_SSL://host:port``: Kafka listeners whose clients log
  in with SCRAM (``sasl.enabled.mechanisms``, docs/operations/security.md) before anything else, the
  second over TLS.

A broker may have one listener of each name. The gRPC listener is TLS when Kafka's
``listener.security.protocol.map`` maps it so (``GRPC:SSL``; default ``GRPC:PLAINTEXT``); the
other listeners' names are their protocols.

An empty host binds every interface, as in Kafka. ``advertised.listeners`` has the same form and
names, per listener, the address registered for clients when it differs from the bound one.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import grpc

__all__ = [
    "GRPC",
    "GRPC_EXCLUSIVE_PORT",
    "KAFKA_LISTENER_NAMES",
    "PLAINTEXT",
    "SASL_LISTENER_NAMES",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SSL",
    "TLS_LISTENER_NAMES",
    "Listener",
    "advertised_listeners",
    "grpc_security_protocol",
    "parse_listener",
    "parse_listeners",
]

GRPC = "GRPC"
PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
KAFKA_LISTENER_NAMES: tuple[str, ...] = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
SASL_LISTENER_NAMES: tuple[str, ...] = (SASL_PLAINTEXT, SASL_SSL)
TLS_LISTENER_NAMES: tuple[str, ...] = (SSL, SASL_SSL)
SECURITY_PROTOCOL_MAP = "listener.security.protocol.map"
# gRPC servers bind with SO_REUSEPORT by default: a second daemon given a port already in use
# would share it silently, each answering some of the calls. Off, the bind fails and says so.
GRPC_EXCLUSIVE_PORT = ("grpc.so_reuseport", 0)


def bind_grpc_port(
    server: grpc.Server, address: str, credentials: grpc.ServerCredentials | None = None
) -> bool:
    """Binds ``server`` (made with ``GRPC_EXCLUSIVE_PORT``) to ``address``, over TLS with
    ``credentials``; False, having said why on stderr, when it cannot (in use, not an address of
    this host). grpcio returns 0 for some failures and raises RuntimeError for others."""
    try:
        if credentials is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, credentials)
    except RuntimeError as e:
        print(f"cannot listen on {address}: {e}", file=sys.stderr)
        return False
    if bound == 0:
        print(f"cannot listen on {address}", file=sys.stderr)
        return False
    return True


_EXPECTED = (
    "a comma list of NAME://host:port with NAME GRPC (or no NAME://), PLAINTEXT, SSL, "
    "SASL_PLAINTEXT or SASL_SSL"
)
_GRPC_PROTOCOLS = (PLAINTEXT, SSL)
_UNROUTABLE = ("", "0.0.0.0", "::", "[::]")


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``NAME://host:port`` entry."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"

    @classmethod
    def parse(cls, entry: str, key: str = "listeners") -> Listener:
        """``NAME://host:port`` or ``host:port`` (GRPC); ``ValueError`` naming ``key``, the
        entry and the expected form otherwise (a secured listener: not supported yet)."""
        name, sep, address = entry.strip().partition("://")
        if not sep:
            name, address = GRPC, entry.strip()
        name = name.strip().upper()
        if name not in (GRPC, *KAFKA_LISTENER_NAMES):
            raise ValueError(
                f"{key}: unknown listener name in {entry.strip()!r}; valid: {_EXPECTED}"
            )
        host, colon, port = address.rpartition(":")
        if not colon or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(
                f"{key}: {entry.strip()!r} is not NAME://host:port; valid: {_EXPECTED}"
            )
        return cls(name, host, int(port))


def parse_listeners(value: str, key: str = "listeners") -> dict[str, Listener]:
    """Every entry of ``value`` by listener name; ``ValueError`` naming ``key`` for a bad entry,
    an empty list or a name given twice (Kafka's rule: one listener per name)."""
    found: dict[str, Listener] = {}
    for entry in value.split(","):
        if not entry.strip():
            continue
        listener = Listener.parse(entry, key)
        if listener.name in found:
            raise ValueError(
                f"{key}={value!r} names listener {listener.name} twice; each name may appear once"
            )
        found[listener.name] = listener
    if not found:
        raise ValueError(f"{key} is empty; valid: {_EXPECTED}")
    return found


def advertised_listeners(
    listeners: Mapping[str, Listener], advertised: str | None
) -> dict[str, Listener]:
    """What each listener registers for clients: its ``advertised.listeners`` entry, else its own
    address. ``ValueError`` for an advertised name without a listener, or for a listener that
    binds every interface (empty host, 0.0.0.0) and has no advertised entry: clients cannot
    connect to that address (Kafka refuses the same)."""
    named = parse_listeners(advertised, "advertised.listeners") if advertised else {}
    unknown = sorted(set(named) - set(listeners))
    if unknown:
        raise ValueError(
            f"advertised.listeners names {', '.join(unknown)}, which listeners does not have"
        )
    result: dict[str, Listener] = {}
    for name, listener in listeners.items():
        chosen = named.get(name, listener)
        if chosen.host in _UNROUTABLE or (name in named and chosen.port == 0):
            raise ValueError(
                f"{name} listener {listener}: clients cannot connect to {chosen.address!r}; set "
                f"advertised.listeners={name}://HOST:PORT with a routable host and port"
            )
        result[name] = chosen
    return result


def grpc_security_protocol(values: Mapping[str, str]) -> str:
    """The gRPC listener's protocol from ``listener.security.protocol.map`` (``GRPC:SSL``):
    PLAINTEXT or SSL, PLAINTEXT when the map does not name GRPC. ValueError naming the key for an
    entry that is not NAME:PROTOCOL, or that maps a Kafka listener to another protocol than its
    name (listener names are their protocols here)."""
    text = values.get(SECURITY_PROTOCOL_MAP, "")
    protocol = PLAINTEXT
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, colon, mapped = (part.strip().upper() for part in entry.partition(":"))
        if not colon or not name or not mapped:
            raise ValueError(
                f"{SECURITY_PROTOCOL_MAP}={text!r}: {entry.strip()!r} is not NAME:PROTOCOL "
                f"(e.g. GRPC:SSL)"
            )
        if name == GRPC:
            if mapped not in _GRPC_PROTOCOLS:
                raise ValueError(
                    f"{SECURITY_PROTOCOL_MAP}: GRPC:{mapped} is not valid; valid: GRPC:PLAINTEXT, "
                    f"GRPC:SSL"
                )
            protocol = mapped
        elif name != mapped:
            raise ValueError(
                f"{SECURITY_PROTOCOL_MAP}: {entry.strip()!r}: a Kafka listener's protocol is its "
                f"name ({', '.join(KAFKA_LISTENER_NAMES)}); only GRPC is mapped"
            )
    return protocol


def parse_listener(value: str) -> tuple[str, int]:
    """The gRPC address of a daemon's ``listeners``: its ``GRPC://`` (or scheme-less) entry, or
    for the controller's single-entry configs also a ``PLAINTEXT://host:port`` (what configs of
    the gRPC-only days wrote); ``ValueError`` naming the value otherwise."""
    entries: Sequence[str] = [e for e in value.split(",") if e.strip()]
    if len(entries) == 1 and entries[0].strip().upper().startswith(f"{PLAINTEXT}://"):
        entries = [entries[0].strip()[len(PLAINTEXT) + 3 :]]
    try:
        listener = parse_listeners(",".join(entries)).get(GRPC)
    except ValueError as e:
        raise ValueError(f"listeners={value!r} is not valid; {e}") from None
    if listener is None or listener.port == 0:
        raise ValueError(
            f"listeners={value!r} is not valid; expected host:port or GRPC://host:port"
        )
    return listener.host, listener.port
