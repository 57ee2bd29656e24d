"""The Kafka listener: an asyncio TCP server that hands decoded requests to a KafkaHandler.

Why asyncio plus a thread pool: thousands of mostly idle client connections cost a coroutine
each instead of a thread each, while handlers (storage I/O, gRPC to the controller) are
ordinary blocking code that runs on a bounded pool. Decoding, handling and encoding a request
run on the pool in one trip, so the event loop only moves bytes, and moves record bytes without
copying them (``socket_io``). Like Kafka's SocketServer, a
connection's requests are processed one at a time and answered in request order (a produce
pipeline stays ordered); the reader stays ``pipeline_depth`` frames ahead so the next request
is already buffered when the previous answer goes out. A handler that returns a Future (a
long-poll Fetch) releases its worker thread while the connection waits for the answer.

Bad input closes that connection only, never the server, as in Kafka: a size prefix over
``socket.request.max.bytes`` (nothing of that size is allocated), a truncated frame, bytes that
do not decode, an api key or version not in the registry, no complete request within
``connections.max.idle.ms``. Requests that arrived before the bad frame are still answered.
``start()`` runs the loop on a daemon thread so a synchronous broker can mount the listener
beside its gRPC server.

Each connection has a ``ConnectionAuthenticator`` from the listener's ``Authentication``
(``broker.listener.sasl``): it decides which requests may be decoded before the connection is
authenticated, answers SaslHandshake and SaslAuthenticate, and names the principal every other
request is handled as. A refused login is answered, then the connection closes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kio.static.protocol import ResponsePayload

from broker.listener.api_versions import API_VERSIONS_KEY, PRODUCE_KEY, ApiVersionRegistry
from broker.listener.handler import (
    CloseConnectionError,
    HandlerResult,
    KafkaHandler,
    RequestContext,
)
from broker.listener.protocol import (
    DEFAULT_MAX_REQUEST_BYTES,
    ProtocolError,
    Request,
    decode_request,
    encode_response_chunks,
)
from broker.listener.sasl import SASL_KEYS, Authentication, ConnectionAuthenticator
from broker.listener.socket_io import FrameReader, Receive, Send, send_chunks, send_ready
from tiered.kafka.record_batch import Buffer
from tiered.retry import Backoff
from tiered.retry_policies import KAFKA_ACCEPT_BACKOFF
from tiered.security.principal import ANONYMOUS

if TYPE_CHECKING:
    from broker.listener.tls_stream import TlsListener

__all__ = ["DEFAULT_RECEIVE_BUFFER_BYTES", "KafkaServer", "ListenerSettings"]

log = logging.getLogger(__name__)

_END: Final = None  # queue marker: the connection's input ended (EOF or a bad frame)
_LISTENER_APIS = frozenset({"api_versions", "sasl_handshake", "sasl_authenticate"})
DEFAULT_RECEIVE_BUFFER_BYTES = 100 * 1024  # Kafka's socket.receive.buffer.bytes


class _DropConnectionError(Exception):
    """Stop serving this connection (the reason has been logged)."""


@dataclass(frozen=True, slots=True)
class _LastAnswer:
    """An answer after which the connection closes (a refused login)."""

    chunks: list[Buffer]


class _CloseAfterAnswerError(Exception):
    def __init__(self, request: Request, response: ResponsePayload) -> None:
        super().__init__("closing after this answer")
        self.request = request
        self.response = response


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """Listener knobs, named after the Kafka broker keys they mirror."""

    host: str = "127.0.0.1"
    port: int = 0  # 0 picks a free port
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # socket.request.max.bytes
    handler_threads: int = 16  # num.io.threads
    connections_max_idle_s: float = 600.0  # connections.max.idle.ms / 1000
    pipeline_depth: int = 1  # complete frames read ahead of the one being handled
    backlog: int = 1024
    # socket.receive.buffer.bytes (None: the OS's autotuned default). Kafka's bounded default
    # matters over TLS: a producer writes a record per write() call, many of them a few bytes,
    # and a window that fills makes its kernel coalesce them into full segments instead of
    # carrying each small one through TCP to this socket.
    receive_buffer_bytes: int | None = DEFAULT_RECEIVE_BUFFER_BYTES
    name: str = "PLAINTEXT"  # the listener's name in ``listeners``
    tls: TlsListener | None = None  # SSL: the handshake and principal of every connection


class KafkaServer:
    """One Kafka listener serving ``handler`` with ``registry``'s APIs."""

    def __init__(
        self,
        handler: KafkaHandler,
        settings: ListenerSettings | None = None,
        registry: ApiVersionRegistry | None = None,
        authentication: Authentication | None = None,
    ) -> None:
        """Raises ValueError when ``handler`` lacks a method for an API the registry lists (but
        those the listener answers itself: ApiVersions, SaslHandshake, SaslAuthenticate).
        ``authentication``: how connections authenticate (default: nobody, PLAINTEXT)."""
        self._registry = registry or ApiVersionRegistry()
        self._authentication = authentication or Authentication()
        missing = [
            name
            for name in self._registry.api_names()
            if name not in _LISTENER_APIS and not callable(getattr(handler, name, None))
        ]
        if missing:
            raise ValueError(f"handler has no method for advertised APIs: {', '.join(missing)}")
        self._handler = handler
        self._settings = settings or ListenerSettings()
        self._pool = ThreadPoolExecutor(
            self._settings.handler_threads, thread_name_prefix="kafka-handler"
        )
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._address: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); raises RuntimeError before ``start()``."""
        if self._address is None:
            raise RuntimeError("the Kafka listener is not started")
        return self._address

    def start(self) -> None:
        """Bind and start serving on a background thread; raises OSError if the bind fails."""
        bound: Future[tuple[str, int]] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(bound,), name="kafka-listener", daemon=True
        )
        self._thread.start()
        self._address = bound.result()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listener and every connection; in-flight handler calls are abandoned."""
        if self._thread is None:
            return
        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        self._thread = None
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> KafkaServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, bound: Future[tuple[str, int]]) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            listener = self._bind()
        except OSError as e:
            bound.set_exception(e)
            self._loop.close()
            return
        listener.setblocking(False)
        self._listener = listener
        host, port = listener.getsockname()[:2]
        bound.set_result((host, port))
        self._accepting = self._loop.create_task(self._accept(listener))
        try:
            self._loop.run_forever()
        finally:
            listener.close()
            self._loop.close()

    def _bind(self) -> socket.socket:
        settings = self._settings
        listener = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if settings.receive_buffer_bytes is not None:
                # before listen(): accepted sockets inherit it, and the window scale offered in
                # the handshake is chosen from it
                listener.setsockopt(
                    socket.SOL_SOCKET, socket.SO_RCVBUF, settings.receive_buffer_bytes
                )
            listener.bind((settings.host, settings.port))
            listener.listen(settings.backlog)
        except OSError:
            listener.close()
            raise
        return listener

    async def _shutdown(self) -> None:
        if self._accepting is not None:  # before the close: no accept waits on a closed socket
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        backoff = Backoff(KAFKA_ACCEPT_BACKOFF)  # at full speed again once an accept succeeds
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except OSError as e:
                # Out of file descriptors and the like: the clients already connected go on.
                delay_s = backoff.next_delay()
                log.warning("kafka listener cannot accept a connection: %s", e)
                await asyncio.sleep(delay_s)
                continue
            backoff.reset()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._serve_connection(sock, peer))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve_connection(self, sock: socket.socket, peer: object) -> None:
        client = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        loop = asyncio.get_running_loop()
        receive: Receive | socket.socket = sock
        send: Send = functools.partial(loop.sock_sendall, sock)
        principal = ANONYMOUS
        direct: socket.socket | None = sock  # a handler thread may send answers itself
        tls = self._settings.tls
        if tls is not None:
            accepted = await tls.accept(sock, client, self._settings.connections_max_idle_s)
            if accepted is None:
                sock.close()
                return
            stream, principal = accepted
            receive, send, direct = stream.recv_into, stream.sendall, None
        frames: asyncio.Queue[memoryview | None] = asyncio.Queue(self._settings.pipeline_depth)
        reader = FrameReader(receive, self._settings.max_request_bytes)
        reading = asyncio.create_task(self._read_frames(reader, frames, client))
        authenticator = self._authentication.connection(principal)
        try:
            await self._answer_in_order(frames, send, _Peer(client, authenticator, direct))
        except (_DropConnectionError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # the listener is stopping; ending quietly keeps asyncio from logging it
        except Exception:
            log.exception("kafka connection from %s failed", client)
        finally:
            reading.cancel()
            await asyncio.gather(reading, return_exceptions=True)
            sock.close()

    async def _read_frames(
        self, reader: FrameReader, frames: asyncio.Queue[memoryview | None], client: str
    ) -> None:
        try:
            while True:
                async with asyncio.timeout(self._settings.connections_max_idle_s):
                    frame = await reader.read_frame()
                await frames.put(frame)
        except TimeoutError:
            log.info("closing idle kafka connection from %s", client)
        except asyncio.IncompleteReadError as e:
            if e.partial:
                log.debug("kafka client %s closed inside a frame", client)
        except ProtocolError as e:
            log.info("closing kafka connection from %s: %s", client, e)
        except ConnectionError:
            pass
        await frames.put(_END)

    async def _answer_in_order(
        self, frames: asyncio.Queue[memoryview | None], send: Send, peer: _Peer
    ) -> None:
        loop = asyncio.get_running_loop()
        while (frame := await frames.get()) is not _END:
            # Decoding, handling and encoding in one trip to the pool: a hop costs about as
            # much as decoding a small request.
            answer = await loop.run_in_executor(self._pool, self._answer, frame, peer)
            if isinstance(answer, _LastAnswer):
                await send_chunks(send, answer.chunks)
                return
            if isinstance(answer, _Delayed):
                result = await asyncio.wrap_future(answer.result)
                answer = await loop.run_in_executor(
                    self._pool, self._encode_and_send, answer.request, result, peer
                )
            if answer:
                await send_chunks(send, answer)

    def _answer(
        self, frame: memoryview, peer: _Peer
    ) -> list[Buffer] | _Delayed | _LastAnswer | None:
        try:
            request, result = self._handle(frame, peer)
        except _CloseAfterAnswerError as last:
            chunks = self._encode(last.request, last.response, peer.client)
            return None if chunks is None else _LastAnswer(chunks)
        if isinstance(result, Future):
            return _Delayed(request, result)
        return self._encode_and_send(request, result, peer)

    def _encode_and_send(
        self, request: Request, response: ResponsePayload | None, peer: _Peer
    ) -> list[Buffer] | None:
        """The answer's chunks, less what this (handler) thread could send at once: the
        connection's one writer is the request in hand, answers leaving in request order."""
        chunks = self._encode(request, response, peer.client)
        if chunks is None or peer.direct is None:
            return chunks
        return send_ready(peer.direct, chunks)

    def _handle(self, frame: memoryview, peer: _Peer) -> tuple[Request, HandlerResult]:
        client, authenticator = peer.client, peer.authenticator
        # Before authentication, a request the exchange does not expect is not even decoded.
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if not authenticator.admits(api_key):
            log.info(
                "closing kafka connection from %s: api key %d is not served before SASL "
                "authentication",
                client,
                api_key,
            )
            raise _DropConnectionError
        try:
            request = decode_request(frame, self._registry)
        except ProtocolError as e:
            log.info("closing kafka connection from %s: %s", client, e)
            raise _DropConnectionError from e
        if request.body is None or request.api_key == API_VERSIONS_KEY:
            authenticator.api_versions_answered(request.body is not None)
            return request, self._registry.api_versions_response(request.api_version)
        if request.api_key in SASL_KEYS:
            step = authenticator.handle(request.body)
            if step.close:
                raise _CloseAfterAnswerError(request, step.response)
            return request, step.response
        name = self._registry.schema(request.api_key, request.api_version).name
        principal = authenticator.principal
        assert principal is not None  # admitted: authenticated
        try:
            result: HandlerResult = getattr(self._handler, name)(
                request.body,
                RequestContext(request.header, client, principal, self._settings.name),
            )
        except CloseConnectionError as e:
            log.info("closing kafka connection from %s after %s: %s", client, name, e)
            raise _DropConnectionError from e
        except Exception as e:
            log.exception("kafka %s handler failed for %s; closing the connection", name, client)
            raise _DropConnectionError from e
        return request, result

    def _encode(
        self, request: Request, response: ResponsePayload | None, client: str
    ) -> list[Buffer] | None:
        if response is None:
            if request.api_key != PRODUCE_KEY:
                log.error("kafka handler returned no %s response; closing", request.api_key)
                raise _DropConnectionError
            return None
        if request.api_key != API_VERSIONS_KEY and (
            response.__api_key__ != request.api_key or response.__version__ != request.api_version
        ):
            log.error(
                "kafka handler answered api %s v%s with %s; closing the connection to %s",
                request.api_key,
                request.api_version,
                type(response).__module__,
                client,
            )
            raise _DropConnectionError
        try:
            return encode_response_chunks(request.header.correlation_id, response)
        except Exception as e:
            log.exception("kafka response for api %s does not encode", request.api_key)
            raise _DropConnectionError from e


@dataclass(frozen=True, slots=True)
class _Peer:
    """Who is at the other end of a connection: ``host:port``, and how it authenticates (its
    principal once it has)."""

    client: str
    authenticator: ConnectionAuthenticator
    direct: socket.socket | None  # PLAINTEXT: the socket a handler thread may send on


@dataclass(frozen=True, slots=True)
class _Delayed:
    """A handler's answer that is not ready yet (a long-poll Fetch)."""

    request: Request
    result: Future[ResponsePayload | None]
