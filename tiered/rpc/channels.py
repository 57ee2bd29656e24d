"""How every client opens its gRPC channels: ``open_channel`` is the one place a channel is made
(where TLS credentials will plug in, docs/operations/security.md), and ``ChannelCache`` keeps one
channel, and the stub on it, per endpoint for clients that talk to several.

A channel multiplexes concurrent calls and reconnects by itself, so it is kept rather than opened
per call; ``forget`` it after UNAVAILABLE when the next attempt should not wait out gRPC's own
reconnect backoff (up to minutes, even after the peer is back).

The cache hands out stubs, not channels, and makes each stub with its channel: making a stub on a
channel that another thread closed meanwhile crashes the process (grpcio 1.85: a segmentation
fault registering the methods), while calling a stub made before the close raises ValueError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import grpc

__all__ = ["ChannelCache", "ChannelCacheClosedError", "ChannelOptions", "open_channel"]

ChannelOptions = Sequence[tuple[str, str | int]]
S = TypeVar("S")


def open_channel(
    endpoint: str,
    *,
    options: ChannelOptions = (),
    credentials: grpc.ChannelCredentials | None = None,
) -> grpc.Channel:
    """A channel to ``host:port``: plaintext, or over TLS with ``credentials``."""
    if credentials is None:
        return grpc.insecure_channel(endpoint, options=list(options))
    return grpc.secure_channel(endpoint, credentials, options=list(options))


class ChannelCacheClosedError(RuntimeError):
    """``ChannelCache.get`` after ``close()``."""


class ChannelCache(Generic[S]):
    """One channel per endpoint, opened by ``open_channel`` on first use, and the ``stub`` (e.g.
    ``BrokerServiceStub``) on it. Thread-safe."""

    def __init__(
        self,
        stub: Callable[[grpc.Channel], S],
        *,
        options: ChannelOptions = (),
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._stub = stub
        self._options = options
        self._credentials = credentials
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[grpc.Channel, S]] = {}
        self._closed = False

    def get(self, endpoint: str) -> S:
        """The stub on the endpoint's channel; raises ``ChannelCacheClosedError`` once closed."""
        with self._lock:
            if self._closed:
                raise ChannelCacheClosedError("the channel cache is closed")
            entry = self._entries.get(endpoint)
            if entry is None:
                channel = open_channel(
                    endpoint, options=self._options, credentials=self._credentials
                )
                entry = self._entries[endpoint] = (channel, self._stub(channel))
            return entry[1]

    def forget(self, endpoint: str) -> None:
        """Closes the endpoint's channel (if any); the next ``get`` opens a fresh one."""
        with self._lock:
            entry = self._entries.pop(endpoint, None)
        if entry is not None:
            entry[0].close()

    def close(self) -> None:
        """Closes every channel; ``get`` refuses from now on. Idempotent."""
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
        for channel, _stub in entries:
            channel.close()
