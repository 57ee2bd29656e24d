"""Reading many znodes at once: ZooKeeper's multiRead, pipelined, with a fallback to async gets
on a server that has no multiRead (ZooKeeper < 3.6).

One request per znode costs kazoo a few select() calls each way; a multiRead of 1,000 reads
pays them once for all of its reads, and a few requests in flight keep the server busy, so that
loading a cluster's topics takes a few round trips rather than one per znode.
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from kazoo.exceptions import EXCEPTIONS, MarshallingError, NoNodeError, UnimplementedError

from tiered.zk_client import TRANSPORT_ERRORS, ZkClient

__all__ = [
    "MULTI_READS_IN_FLIGHT",
    "MULTI_READ_OPS",
    "READ_WINDOW",
    "BulkReader",
    "MultiRead",
    "Znode",
    "pipelined_multi_reads",
]

log = logging.getLogger(__name__)

MULTI_READ_OPS = 1000  # reads per multiRead request
MULTI_READS_IN_FLIGHT = 8
READ_WINDOW = 2000  # async gets in flight without multiRead

Znode = tuple[bytes, int]  # (data, version)
T = TypeVar("T")

_MULTI_HEADER = struct.Struct(">i?i")
_INT = struct.Struct(">i")
# ZooKeeper's Stat: czxid, mzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner,
# dataLength, numChildren, pzxid.
_STAT = struct.Struct(">qqqqiiiqiiq")
_STAT_VERSION_OFFSET = struct.calcsize(">qqqq")
_GET_DATA = 4


class MultiRead:
    """ZooKeeper's multiRead request (OpCode 22, ZooKeeper 3.6+): many getData in one round trip,
    answered together. kazoo has no API for it; this is a request object as kazoo's protocol layer
    takes them (``type``, ``serialize()``, ``deserialize(buffer, offset)``), like its Transaction.

    Wire format (ZooKeeper's jute ``MultiOperationRecord`` / ``MultiResponse``): per op a header
    (int type, bool done, int err) and a ``GetDataRequest`` (ustring path, bool watch), then a
    header with done set; the answer has per op a header and either a ``GetDataResponse`` (buffer
    data, Stat) or, with type -1, an ``ErrorResponse`` (int err)."""

    type = 22
    watcher = None  # kazoo looks for a watch to register

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def __repr__(self) -> str:
        return f"MultiRead({len(self.paths)} paths)"

    def serialize(self) -> bytes:
        parts: list[bytes] = []
        for path in self.paths:
            encoded = path.encode()
            parts.append(_MULTI_HEADER.pack(_GET_DATA, False, -1))
            parts.append(_INT.pack(len(encoded)))
            parts.append(encoded)
            parts.append(b"\x00")  # no watch
        parts.append(_MULTI_HEADER.pack(-1, True, -1))
        return b"".join(parts)

    def deserialize(self, buffer: bytes, offset: int) -> list[Znode | None]:
        """The data and version of each path, None where it does not exist; raises any other
        error."""
        values: list[Znode | None] = []
        while True:
            op_type, done, _ = _MULTI_HEADER.unpack_from(buffer, offset)
            offset += _MULTI_HEADER.size
            if done:
                break
            if op_type == _GET_DATA:
                (length,) = _INT.unpack_from(buffer, offset)
                offset += _INT.size
                data = b"" if length < 0 else bytes(buffer[offset : offset + length])
                offset += max(length, 0)
                (version,) = _INT.unpack_from(buffer, offset + _STAT_VERSION_OFFSET)
                offset += _STAT.size
                values.append((data, version))
                continue
            (code,) = _INT.unpack_from(buffer, offset)
            offset += _INT.size
            if code != NoNodeError.code:
                raise EXCEPTIONS[code]()
            values.append(None)
        if len(values) != len(self.paths):
            raise MarshallingError(f"multiRead: {len(values)} answers to {len(self.paths)} reads")
        return values


def pipelined_multi_reads(zk: ZkClient, paths: Sequence[str]) -> Iterator[Znode | None]:
    """The znodes at ``paths`` in order by multiRead: ``MULTI_READ_OPS`` reads a request,
    ``MULTI_READS_IN_FLIGHT`` requests in flight; the answers of the oldest are yielded while the
    others are served."""
    wait = zk.wait
    client = zk.kazoo
    pending: deque[Any] = deque()
    for start in range(0, len(paths), MULTI_READ_OPS):
        if len(pending) >= MULTI_READS_IN_FLIGHT:
            yield from wait(pending.popleft())
        async_result = client.handler.async_result()
        # kazoo's own Transaction.commit_async submits its request object the same way.
        client._call(MultiRead(paths[start : start + MULTI_READ_OPS]), async_result)
        pending.append(async_result)
    while pending:
        yield from wait(pending.popleft())


class BulkReader:
    """Reads many znodes in order: by multiRead while the server takes it, else one async get per
    znode (``READ_WINDOW`` in flight). ``multi_read=False`` never tries multiRead.

    A server without multiRead answers UNIMPLEMENTED and then drops the connection: the reader
    logs it once and reads one by one from then on, and ``retrying`` runs a read again when it
    failed that way (the requests in flight on the dropped connection fail with it)."""

    def __init__(self, zk: ZkClient, *, multi_read: bool = True) -> None:
        self._zk = zk
        self.multi_read = multi_read

    def iter(self, paths: Sequence[str]) -> Iterator[Znode | None]:
        """The znodes at ``paths`` (None where missing), each as soon as its answer is in."""
        done = 0
        if self.multi_read:
            try:
                for value in pipelined_multi_reads(self._zk, paths):
                    yield value
                    done += 1
                return
            except UnimplementedError:
                log.warning("%r: ZooKeeper has no multiRead (< 3.6): reading one by one", self._zk)
                self.multi_read = False
        yield from self._async_gets(paths[done:])

    def read(self, paths: Sequence[str]) -> list[Znode | None]:
        return list(self.iter(paths))

    def retrying(self, read: Callable[[], T]) -> T:
        """``read()``, once more if it failed because the server just refused multiRead."""
        tried_multi_read = self.multi_read
        try:
            return read()
        except TRANSPORT_ERRORS:
            if not (tried_multi_read and not self.multi_read):
                raise
        # The retried requests are queued until kazoo has reconnected.
        return read()

    def _async_gets(self, paths: Sequence[str]) -> Iterator[Znode | None]:
        """ZooKeeper answers a session's requests in order, so waiting for the oldest keeps the
        window sliding."""
        pending: deque[Any] = deque()
        for path in paths:
            if len(pending) >= READ_WINDOW:
                yield self._answer(pending.popleft())
            pending.append(self._zk.kazoo.get_async(path))
        while pending:
            yield self._answer(pending.popleft())

    def _answer(self, async_result: Any) -> Znode | None:
        try:
            data, stat = self._zk.wait(async_result)
        except NoNodeError:
            return None
        return bytes(data), int(stat.version)
