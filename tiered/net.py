"""Network addresses in the daemons' configs, shared by the broker and the controller."""

from __future__ import annotations


def parse_listener(value: str) -> tuple[str, int]:
    """``PLAINTEXT://host:port`` or ``host:port`` (the first of a comma list) -> (host, port);
    ``ValueError`` naming the value otherwise."""
    address = value.split(",", maxsplit=1)[0].strip().split("://")[-1]
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"listeners={value!r} is not valid; expected host:port")
    return host, int(port)
