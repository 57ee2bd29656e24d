"""Moving Kafka frames over a non-blocking socket with asyncio's ``sock_*`` calls.

Why not asyncio streams: a StreamReader copies every byte twice on the way in (into its buffer,
then out of it) and a transport copies whatever the kernel did not take at once; at record-batch
sizes (MiBs per Produce or Fetch) those copies cost more than the rest of the request. Here a
large request is received straight into its own buffer, and a response goes out as the chunks
it was encoded into, record bytes by reference (``sock_sendall`` sends from a memoryview).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Sequence

from broker.listener.protocol import SIZE_PREFIX, frame_size
from tiered.kafka.record_batch import Buffer

__all__ = ["FrameReader", "Receive", "Send", "send_chunks", "send_ready"]

# What a connection moves bytes with: ``loop.sock_recv_into`` / ``loop.sock_sendall`` on the raw
# socket, or a TLS layer's methods of the same shape (``broker.listener.tls_stream``).
Receive = Callable[[memoryview], Awaitable[int]]
Send = Callable[[Buffer], Awaitable[None]]

_READ_BUFFER_BYTES = 64 * 1024
_MAX_CHUNKS_PER_SEND = 512  # below IOV_MAX (1024 on Linux)
# A large frame's buffer starts this big (a typical producer batch fits) and doubles as needed.
_EAGER_FRAME_BYTES = 1024 * 1024


class FrameReader:
    """Reads size-prefixed frames from one connection.

    Small frames are cut out of a reusable read buffer (one ``recv`` often brings several);
    a frame larger than that buffer is received into a buffer of its own. Frames are returned
    as read-only memoryviews that stay valid after later reads.
    """

    def __init__(
        self,
        source: socket.socket | Receive,
        max_request_bytes: int,
        buffer_bytes: int = _READ_BUFFER_BYTES,
    ) -> None:
        """``source``: a non-blocking socket, or what receives from one (TLS)."""
        if isinstance(source, socket.socket):
            sock = source

            def receive(view: memoryview) -> Awaitable[int]:
                return asyncio.get_running_loop().sock_recv_into(sock, view)

            self._receive: Receive = receive
        else:
            self._receive = source
        self._max_request_bytes = max_request_bytes
        self._buffer = bytearray(buffer_bytes)
        self._view = memoryview(self._buffer)
        self._start = 0  # unread bytes are self._buffer[self._start:self._end]
        self._end = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned."""
        return self._end - self._start

    async def read_frame(self) -> memoryview:
        """The next frame without its size prefix.

        Raises ``asyncio.IncompleteReadError`` when the peer closes (``partial`` is empty only
        at a frame boundary) and ``FrameTooLargeError`` for a size prefix out of range, before
        anything of that size is allocated.
        """
        await self._fill(SIZE_PREFIX.size)
        size = frame_size(
            self._view[self._start : self._start + SIZE_PREFIX.size], self._max_request_bytes
        )
        self._start += SIZE_PREFIX.size
        if size <= len(self._buffer):
            await self._fill(size)
            frame = bytes(self._view[self._start : self._start + size])
            self._start += size
            return memoryview(frame)
        return await self._read_large(size)

    async def _read_large(self, size: int) -> memoryview:
        """A frame larger than the read buffer, received straight into a buffer of its own
        that grows with what arrives (at most doubling): a client announcing 100 MB and
        sending a trickle holds about what it sent, not what it announced."""
        frame = bytearray(min(size, _EAGER_FRAME_BYTES))
        have = self.buffered
        frame[:have] = self._view[self._start : self._end]
        self._start = self._end = 0
        while have < size:
            if have == len(frame):
                frame.extend(bytes(min(len(frame), size - len(frame))))
            view = memoryview(frame)
            target = view[have:]
            try:
                got = await self._receive(target)
            finally:  # released at once: the next resize needs the buffer unexported
                target.release()
                view.release()
            if got == 0:
                raise asyncio.IncompleteReadError(bytes(frame[:have]), size)
            have += got
        return memoryview(frame).toreadonly()

    async def _fill(self, wanted: int) -> None:
        """Makes at least ``wanted`` (<= the buffer's size) unread bytes buffered."""
        if self.buffered >= wanted:
            return
        if self._start + wanted > len(self._buffer):
            have = self.buffered
            self._buffer[:have] = self._view[self._start : self._end]
            self._start, self._end = 0, have
        while self.buffered < wanted:
            got = await self._receive(self._view[self._end :])
            if got == 0:
                raise asyncio.IncompleteReadError(
                    bytes(self._view[self._start : self._end]), wanted
                )
            self._end += got


async def send_chunks(send: Send, chunks: Sequence[Buffer]) -> None:
    """Sends ``chunks`` in order (``encode_response_chunks`` already coalesced the small ones)."""
    for chunk in chunks:
        await send(chunk)


def send_ready(sock: socket.socket, chunks: Sequence[Buffer]) -> list[Buffer]:
    """Sends what a non-blocking ``sock`` takes now, from any thread, and returns the rest of
    ``chunks`` (in order, for ``send_chunks``). For the one writer of a connection only.

    Why a handler thread sends: a small answer then reaches the client without waiting for the
    event loop to wake up and resume the connection, a wake-up that costs about as much as the
    rest of a small request's round trip. A send that fails leaves every unsent byte to the
    loop's send, which reports the error as it would have."""
    pending = [memoryview(chunk).cast("B") for chunk in chunks if len(chunk)]
    while pending:
        try:
            sent = sock.sendmsg(pending[:_MAX_CHUNKS_PER_SEND])
        except (BlockingIOError, InterruptedError, OSError):
            break
        while sent:
            first = pending[0]
            if sent < len(first):
                pending[0] = first[sent:]
                break
            sent -= len(first)
            pending.pop(0)
    return list(pending)
