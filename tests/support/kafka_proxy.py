"""A TCP proxy in front of one broker's Kafka listener that can cut a connection at the worst
moment for a producer: after a request reached the broker and was answered, before the client
sees the answer. A broker advertised at the proxy's port (``advertised.listeners``) gets all of
its clients' traffic through it; otherwise it relays bytes unchanged."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")


class CuttingProxy:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self._listener = socket.create_server((host, 0))
        self.address = self._listener.getsockname()[:2]
        self._target: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._cut_api_key: int | None = None
        self._cut_correlation: dict[int, int] = {}  # client connection id -> correlation id
        self._sockets: set[socket.socket] = set()
        self.cuts = 0  # connections cut so far
        self._closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.address[1])

    def forward_to(self, host: str, port: int) -> None:
        self._target = (host, port)

    def cut_after_answer(self, api_key: int) -> None:
        """The next request of ``api_key`` goes to the broker; when its answer comes back, the
        client's connection is closed instead of the answer being relayed."""
        with self._lock:
            self._cut_api_key = api_key

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._cut_api_key is not None

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._target is None:
                client.close()
                continue
            try:
                broker = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            broker.settimeout(None)
            with self._lock:
                self._sockets.update((client, broker))
            connection = id(client)
            threading.Thread(
                target=self._requests, args=(client, broker, connection), daemon=True
            ).start()
            threading.Thread(
                target=self._responses, args=(broker, client, connection), daemon=True
            ).start()

    def _requests(self, client: socket.socket, broker: socket.socket, connection: int) -> None:
        with self._relay(client, broker):
            for frame in _frames(client):
                api_key, _, correlation = _KEY_VERSION_CORRELATION.unpack_from(frame, 4)
                with self._lock:
                    if api_key == self._cut_api_key:
                        self._cut_api_key = None
                        self._cut_correlation[connection] = correlation
                broker.sendall(frame)

    def _responses(self, broker: socket.socket, client: socket.socket, connection: int) -> None:
        with self._relay(broker, client):
            for frame in _frames(broker):
                (correlation,) = _SIZE.unpack_from(frame, 4)
                with self._lock:
                    cut = self._cut_correlation.get(connection) == correlation
                    if cut:
                        del self._cut_correlation[connection]
                        self.cuts += 1
                if cut:
                    return  # the answer is dropped; both sides are closed below
                client.sendall(frame)

    @contextlib.contextmanager
    def _relay(self, source: socket.socket, sink: socket.socket) -> Iterator[None]:
        try:
            yield
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
                with self._lock:
                    self._sockets.discard(sock)


def _frames(sock: socket.socket) -> Iterator[bytes]:
    """Whole frames (size prefix included) until the peer closes."""
    while True:
        prefix = _read_exactly(sock, _SIZE.size)
        if prefix is None:
            return
        (size,) = _SIZE.unpack(prefix)
        body = _read_exactly(sock, size)
        if body is None:
            return
        yield prefix + body


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(min(size - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)
