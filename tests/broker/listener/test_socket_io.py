"""FrameReader over a real socket pair: frames of every size come out whole, and a client that
announces a large frame but sends little makes the reader hold about what it sent."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import tracemalloc

import pytest

from broker.listener.protocol import FrameTooLargeError
from broker.listener.socket_io import FrameReader, send_ready

MIB = 1024 * 1024


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def read_all(data: bytes, count: int, max_request_bytes: int = 100 * MIB) -> list[bytes]:
    server, client = socket.socketpair()
    server.setblocking(False)
    client.setblocking(False)
    loop = asyncio.get_running_loop()
    reader = FrameReader(server, max_request_bytes)
    sending = asyncio.create_task(loop.sock_sendall(client, data))
    try:
        frames = [bytes(await reader.read_frame()) for _ in range(count)]
        await sending
        return frames
    finally:
        server.close()
        client.close()


@pytest.mark.parametrize(
    "sizes",
    [[0, 1, 5], [64 * 1024 - 4, 64 * 1024, 64 * 1024 + 1], [3 * MIB + 7, 10, MIB, MIB + 1]],
)
def test_frames_of_every_size_come_out_whole_and_in_order(sizes: list[int]) -> None:
    payloads = [os.urandom(size) for size in sizes]
    got = asyncio.run(read_all(b"".join(frame(p) for p in payloads), len(payloads)))
    assert got == payloads


def test_a_trickle_under_a_large_announced_size_holds_about_what_was_sent() -> None:
    async def announce_90_mb_send_1_kb() -> int:
        server, client = socket.socketpair()
        server.setblocking(False)
        reader = FrameReader(server, 100 * MIB)
        client.sendall(struct.pack(">i", 90 * MIB) + b"x" * 1000)
        client.close()
        with pytest.raises(asyncio.IncompleteReadError) as raised:
            await reader.read_frame()
        server.close()
        return len(raised.value.partial)

    tracemalloc.start()
    try:
        assert asyncio.run(announce_90_mb_send_1_kb()) == 1000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB  # the first MiB of the frame's buffer, not 90


def test_a_size_over_the_limit_is_refused_before_anything_is_allocated() -> None:
    async def announce(size: int) -> None:
        server, client = socket.socketpair()
        server.setblocking(False)
        client.sendall(struct.pack(">i", size))
        try:
            await FrameReader(server, 1024).read_frame()
        finally:
            server.close()
            client.close()

    with pytest.raises(FrameTooLargeError):
        asyncio.run(announce(1025))


def test_send_ready_sends_what_fits_and_returns_the_rest_in_order() -> None:
    writer, reader = socket.socketpair()
    try:
        writer.setblocking(False)
        writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        chunks = [os.urandom(n) for n in (5, 0, 70_000, 3, 200_000, 1)]
        rest = send_ready(writer, chunks)
        assert rest, "the socket's buffer is smaller than the answer"
        assert sum(map(len, rest)) < sum(map(len, chunks))  # some went out at once
        received = bytearray()

        def read_all() -> None:
            while data := reader.recv(1 << 20):
                received.extend(data)

        reading = threading.Thread(target=read_all)
        reading.start()
        writer.setblocking(True)
        for chunk in rest:  # as the loop's send would
            writer.sendall(chunk)
        writer.shutdown(socket.SHUT_WR)
        reading.join(timeout=30)
        assert bytes(received) == b"".join(chunks)  # what went out, then the rest: unchanged
    finally:
        writer.close()
        reader.close()


def test_send_ready_leaves_everything_to_the_loop_when_the_socket_is_broken() -> None:
    writer, reader = socket.socketpair()
    reader.close()
    try:
        writer.setblocking(False)
        rest = send_ready(writer, [b"abc", b"", b"de"])
        assert [bytes(c) for c in rest] == [b"abc", b"de"]
    finally:
        writer.close()
