"""TLS on an accepted non-blocking socket for the asyncio Kafka listener (SSL, SASL_SSL).

Why an ``ssl.SSLObject`` over memory BIOs rather than asyncio streams: the listener moves bytes
with ``loop.sock_*`` calls (``broker.listener.socket_io``), and this keeps that shape: ``recv_into``
and ``sendall`` have the signatures of ``loop.sock_recv_into`` / ``loop.sock_sendall``, so the
PLAINTEXT path stays the raw socket calls and only a TLS connection pays for the layer.

The reader task and the writer task of a connection share the SSLObject: both run on the event
loop thread, and every flush of encrypted bytes to the socket happens under one lock, so records
leave in the order they were encrypted.

Why decryption stays on the event loop thread: ``SSLObject.read`` returns one TLS record per call
and releases the GIL for it, so a decrypting worker hands the GIL back and forth once per record
(librdkafka sends a request as hundreds of records, many of them a few bytes); moving the reads
to a pool of threads cost the broker more CPU than the loop saved. asyncio's own TLS transport
(``sslproto``) decrypts the same way with more Python per record, and cost more still.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import cast

from tiered.kafka.record_batch import Buffer
from tiered.security.principal import KafkaPrincipal
from tiered.security.ssl_principal import NoMatchingRuleError, SslPrincipalMapper

__all__ = ["TlsListener", "TlsStream", "describe_tls_error"]

log = logging.getLogger(__name__)

_RECEIVE_BYTES = 256 * 1024
# Plaintext encrypted per write: bounds the encrypted copy of a large Fetch response in memory.
_WRITE_BYTES = 256 * 1024


def describe_tls_error(error: BaseException) -> str:
    """One line for a failed handshake, e.g. ``CERTIFICATE_VERIFY_FAILED: certificate has
    expired``, without a traceback."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"{error.reason}: {error.verify_message}"
    if isinstance(error, ssl.SSLError) and error.reason:
        return str(error.reason)
    if isinstance(error, asyncio.IncompleteReadError | ConnectionError | EOFError):
        return "the client closed the connection"
    if isinstance(error, TimeoutError):
        return "no handshake within connections.max.idle.ms"
    return str(error) or type(error).__name__


class TlsStream:
    """The server side of one TLS connection over ``sock``."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._flushing = asyncio.Lock()

    async def handshake(self) -> None:
        """Raises ``ssl.SSLError`` (a certificate refused, ...) or ``ConnectionError``."""
        while True:
            try:
                self._ssl.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._receive():
                    raise ConnectionResetError("closed during the TLS handshake") from None
            except ssl.SSLError:
                await self._flush_quietly()  # the alert tells the client why
                raise
        await self._flush()

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER), None when it sent none."""
        return self._ssl.getpeercert(binary_form=True)

    async def recv_into(self, buffer: memoryview) -> int:
        """Decrypted bytes into ``buffer``; 0 once the client closed."""
        while True:
            try:
                # With a buffer, read() returns a count (typeshed says bytes).
                got = cast(int, self._ssl.read(len(buffer), buffer))
            except ssl.SSLWantReadError:
                await self._flush()  # e.g. a TLS 1.3 key update's answer
                if not await self._receive():
                    return 0
                continue
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return 0
            got += self._read_ready(buffer[got:])
            if self._outgoing.pending:
                await self._flush()
            return got

    def _read_ready(self, buffer: memoryview) -> int:
        """Decrypts what already arrived into ``buffer``, without waiting: a read returns one TLS
        record at most, and a trip through the event loop for each would cost more than the
        decryption (an end of stream is left for the next read to report)."""
        got, size, read = 0, len(buffer), self._ssl.read
        while got < size:
            try:
                more: int = read(size - got, buffer[got:])  # type: ignore[assignment]
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
            if not more:
                break
            got += more
        return got

    async def sendall(self, data: Buffer) -> None:
        view = memoryview(data).cast("B")
        for start in range(0, len(view), _WRITE_BYTES):
            piece = view[start : start + _WRITE_BYTES]
            while piece:
                written = self._ssl.write(piece)
                piece = piece[written:]
            await self._flush()

    async def _receive(self) -> bool:
        data = await asyncio.get_running_loop().sock_recv(self._sock, _RECEIVE_BYTES)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        async with self._flushing:
            while self._outgoing.pending:
                await loop.sock_sendall(self._sock, self._outgoing.read())

    async def _flush_quietly(self) -> None:
        with contextlib.suppress(OSError):
            await self._flush()


@dataclass(frozen=True)
class TlsListener:
    """What a TLS Kafka listener needs: its server context (keystore, truststore,
    ``ssl.client.auth``) and how a client certificate becomes a principal."""

    context: ssl.SSLContext
    principal_mapper: SslPrincipalMapper

    async def accept(
        self, sock: socket.socket, client: str, timeout_s: float
    ) -> tuple[TlsStream, KafkaPrincipal] | None:
        """The handshake with a new client and its principal; None (logged at INFO, one line)
        when the client is refused: no certificate where one is required, one from another CA,
        an expired one, a name no mapping rule applies to."""
        stream = TlsStream(sock, self.context)
        try:
            async with asyncio.timeout(timeout_s):
                await stream.handshake()
            return stream, self.principal_mapper.principal_of_der(stream.peer_certificate())
        except NoMatchingRuleError as e:
            log.info("kafka client %s refused: %s", client, e)
        except (OSError, EOFError, TimeoutError, ValueError) as e:  # ssl.SSLError is an OSError
            log.info("kafka TLS handshake with %s failed: %s", client, describe_tls_error(e))
        return None
