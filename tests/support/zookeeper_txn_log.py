"""Reading a ZooKeeper server's transaction log (``dataDir/version-2/log.*``) in tests: which
session wrote which znodes, transaction by transaction, in zxid order.

ZooKeeper logs every committed write with the session that made it, so a test can tell who wrote
what after the fact, without trusting the writers' own logs: ``writes_outside_leadership`` finds
controller-store writes made by a session that did not hold ``/controller`` at the time (a zombie
controller). The format is jute: a file header, then for each transaction a checksum, the length,
``TxnHeader`` and the transaction record, and an end-of-record byte; preallocated zeros end it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLOSE_SESSION", "DELETE", "Txn", "read_txn_log", "writes_outside_leadership"]

_MAGIC = b"ZKLG"
_FILE_HEADER = struct.Struct(">4siq")  # magic, version, dbid
_ENTRY_PREFIX = struct.Struct(">qi")  # checksum, length
_TXN_HEADER = struct.Struct(">qiqqi")  # session (clientId), cxid, zxid, time, type
_END_OF_RECORD = 0x42  # 'B'

# ZooDefs.OpCode: the writes that name a path first in their record.
CREATE, DELETE, SET_DATA, CHECK, MULTI, CREATE2 = 1, 2, 5, 13, 14, 15
CREATE_CONTAINER, CREATE_TTL, CLOSE_SESSION, ERROR = 19, 21, -11, -1
_CREATES = frozenset({CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL})
_WRITES = _CREATES | {DELETE, SET_DATA}


@dataclass(frozen=True)
class Txn:
    """One logged transaction: its session, zxid and type, and the (op, path) of each znode it
    created, set or deleted (a multi's ops in order; none for a failed multi)."""

    session: int
    zxid: int
    type: int
    writes: tuple[tuple[int, str], ...]


def _ustring(data: bytes, offset: int) -> str:
    (length,) = struct.unpack_from(">i", data, offset)
    return data[offset + 4 : offset + 4 + max(length, 0)].decode("utf-8", errors="replace")


def _writes(txn_type: int, record: bytes) -> Iterator[tuple[int, str]]:
    if txn_type in _WRITES:
        yield txn_type, _ustring(record, 0)
    elif txn_type == MULTI:
        (count,) = struct.unpack_from(">i", record, 0)
        offset = 4
        for _ in range(max(count, 0)):
            op, length = struct.unpack_from(">ii", record, offset)
            body = record[offset + 8 : offset + 8 + length]
            offset += 8 + length
            if op in _WRITES:
                yield op, _ustring(body, 0)


def _read_file(path: Path) -> Iterator[Txn]:
    data = path.read_bytes()
    if len(data) < _FILE_HEADER.size or data[:4] != _MAGIC:
        raise ValueError(f"{path}: not a ZooKeeper transaction log")
    offset = _FILE_HEADER.size
    while offset + _ENTRY_PREFIX.size <= len(data):
        _checksum, length = _ENTRY_PREFIX.unpack_from(data, offset)
        if length <= 0:
            return  # the preallocated, zeroed tail
        body = data[offset + _ENTRY_PREFIX.size : offset + _ENTRY_PREFIX.size + length]
        end = offset + _ENTRY_PREFIX.size + length
        if len(body) < length or end >= len(data) or data[end] != _END_OF_RECORD:
            return  # a record still being written
        session, _cxid, zxid, _time, txn_type = _TXN_HEADER.unpack_from(body, 0)
        writes = tuple(_writes(txn_type, body[_TXN_HEADER.size :]))
        yield Txn(session, zxid, txn_type, writes)
        offset = end + 1


def read_txn_log(data_dir: Path, *more_data_dirs: Path) -> list[Txn]:
    """Every transaction in the logs of ``data_dir`` (and of ``more_data_dirs``: an ensemble's
    members, none of which need have logged every commit), once each, in zxid order."""
    by_zxid: dict[int, Txn] = {}
    for directory in (data_dir, *more_data_dirs):
        for path in sorted((directory / "version-2").glob("log.*")):
            for txn in _read_file(path):
                by_zxid.setdefault(txn.zxid, txn)
    return [by_zxid[zxid] for zxid in sorted(by_zxid)]


def writes_outside_leadership(
    txns: Iterable[Txn],
    leader_path: str,
    guarded: Sequence[str],
    bootstrap: Iterable[str] = (),
) -> list[str]:
    """The writes below any of the ``guarded`` paths made by a session that did not own the
    ephemeral ``leader_path`` at that point of the log (created by it, not deleted nor closed
    since). ``bootstrap`` paths (parents every process creates where missing) are exempt."""
    exempt = set(bootstrap)
    owner: int | None = None
    found: list[str] = []
    for txn in txns:
        if txn.type == CLOSE_SESSION and txn.session == owner:
            owner = None
        for op, path in txn.writes:
            if path == leader_path:
                owner = txn.session if op in _CREATES else None
            elif (
                path not in exempt
                and any(path == g or path.startswith(g + "/") for g in guarded)
                and txn.session != owner
            ):
                holder = "nobody" if owner is None else f"0x{owner:x}"
                found.append(
                    f"zxid 0x{txn.zxid:x}: session 0x{txn.session:x} wrote {path} while "
                    f"{leader_path} was {holder}'s"
                )
    return found
