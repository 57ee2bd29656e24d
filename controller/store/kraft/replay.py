"""The image rebuilt from the metadata log: its snapshot, then the batches after it, replayed into a
new ``MetadataImage``, by the controller just elected (which holds the lock and may repair a torn
tail) and by a standby's ``load`` (which holds no lock and repairs nothing)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from controller.store.base import MetadataStoreError
from controller.store.kraft.heap import release_free_heap
from controller.store.kraft_log import MetadataLog, MetadataLogError
from tiered.cluster import serde
from tiered.cluster.model import MetadataImage
from tiered.rpc.v1 import metadata_pb2

__all__ = ["READ_ONLY_ATTEMPTS", "read_only_replay", "recover", "replay"]

logger = logging.getLogger(__name__)

READ_ONLY_ATTEMPTS = 5
"""Replays a standby tries before ``load`` fails: the active controller may delete a segment or
be mid-append while a replay without the lock reads."""


def replay(log: MetadataLog, *, read_only: bool) -> MetadataImage:
    """Opens ``log`` and replays it (snapshot, then the batches after it) into a new image whose
    offset is the log's last."""
    holder = [MetadataImage()]

    def on_snapshot(batch: metadata_pb2.MetadataRecordBatch) -> None:
        holder[0] = serde.image_from_snapshot(batch)

    def on_batch(batch: metadata_pb2.MetadataRecordBatch) -> None:
        serde.apply_batch(holder[0], batch)

    log.open(on_snapshot=on_snapshot, on_batch=on_batch, read_only=read_only)
    holder[0].offset = log.end_offset - 1
    return holder[0]


def recover(log: MetadataLog) -> MetadataImage:
    """The image of ``log``, opened for writing (its lock held): ``MetadataStoreError`` if the
    log cannot be read."""
    started = time.monotonic()
    try:
        image = replay(log, read_only=False)
    except (MetadataLogError, OSError, ValueError) as exc:
        raise MetadataStoreError(f"cannot recover the metadata log {log.directory}: {exc}") from exc
    release_free_heap()  # the snapshot's parsed batch
    logger.info(
        "metadata log %s recovered in %.3fs: %d topics, %d brokers, %d delete jobs, "
        "%d SCRAM credentials, offsets [%d, %d), snapshot at %d",
        log.directory,
        time.monotonic() - started,
        len(image.topics),
        len(image.brokers),
        len(image.delete_jobs),
        len(image.scram_credentials),
        log.log_start_offset,
        log.end_offset,
        log.snapshot_offset,
    )
    return image


def read_only_replay(directory: Path, segment_bytes: int) -> MetadataImage:
    """The image of the log in ``directory``, replayed without its lock (a standby), up to
    ``READ_ONLY_ATTEMPTS`` times; ``MetadataStoreError`` with the last failure."""
    last: Exception | None = None
    for _ in range(READ_ONLY_ATTEMPTS):
        log = MetadataLog(directory, segment_bytes=segment_bytes)
        try:
            return replay(log, read_only=True)
        except (MetadataLogError, OSError, ValueError) as exc:
            last = exc
        finally:
            log.close()
    raise MetadataStoreError(f"cannot read the metadata log {directory}: {last}") from last
