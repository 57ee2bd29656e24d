"""The KRaft-mode metadata log: an fsync'd, append-only log of ``MetadataRecordBatch`` frames with
snapshots, in one directory owned by whichever controller holds its OS file lock.

Layout of ``directory``::

    {base_offset:020d}.log     segment files; base_offset = offset of the first record in the file
    {offset:020d}.snapshot     the whole image as of ``offset`` (the last record it covers)
    .lock                      flock'ed (LOCK_EX) by the writer from election to exit

One job per module: ``frames`` (the frame format and its CRC), ``segments`` (file names, the
index of a segment file), ``lock`` (the OS file lock), ``recovery`` (snapshot fallback, segment
scan, torn-tail truncation), ``log`` (``MetadataLog``: appends, snapshots and their retention,
reads) and ``errors``.

This package knows frames and batches, not the meaning of records (that is ``tiered.cluster.serde``).
"""

from controller.store.kraft_log.errors import (
    CorruptLogError,
    LogNotWritableError,
    MetadataLogError,
    OffsetBelowLogStart,
)
from controller.store.kraft_log.frames import HEADER_SIZE, decode_frame, encode_frame
from controller.store.kraft_log.lock import LOCK_FILE
from controller.store.kraft_log.log import MetadataLog
from controller.store.kraft_log.segments import (
    DEFAULT_SEGMENT_BYTES,
    segment_file_name,
    snapshot_file_name,
)

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "HEADER_SIZE",
    "LOCK_FILE",
    "CorruptLogError",
    "LogNotWritableError",
    "MetadataLog",
    "MetadataLogError",
    "OffsetBelowLogStart",
    "decode_frame",
    "encode_frame",
    "segment_file_name",
    "snapshot_file_name",
]
