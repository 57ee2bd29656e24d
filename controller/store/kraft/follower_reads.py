"""What a broker following the metadata log reads next (FetchMetadata): the committed batches
from its offset on, or the whole image as one batch when that history is gone or not worth
replaying."""

from __future__ import annotations

import time

from controller.store.base import MetadataStoreError
from controller.store.kraft.active_log import ActiveLog
from controller.store.kraft.snapshots import SnapshotCache
from controller.store.kraft_log import MetadataLogError, OffsetBelowLogStart
from tiered.cluster import serde
from tiered.rpc.v1 import metadata_pb2

__all__ = ["DEFAULT_MAX_BATCHES_PER_READ", "DEFAULT_MAX_BYTES_PER_READ", "FollowerReads"]

DEFAULT_MAX_BATCHES_PER_READ = 1000
DEFAULT_MAX_BYTES_PER_READ = 1024 * 1024


class FollowerReads:
    """``read_batches`` over ``active``'s log; a follower more than ``snapshot_interval_records``
    records behind gets the image (kept in ``cache``)."""

    def __init__(
        self, active: ActiveLog, cache: SnapshotCache, snapshot_interval_records: int
    ) -> None:
        self._active = active
        self._cache = cache
        self._snapshot_interval_records = snapshot_interval_records

    def read_batches(
        self, from_offset: int, max_wait_s: float, *, max_batches: int, max_bytes: int
    ) -> tuple[list[metadata_pb2.MetadataRecordBatch], bool]:
        """Committed batches from the one holding ``from_offset`` on, waiting up to
        ``max_wait_s`` for one if there is none yet (``([], False)`` then). If ``from_offset`` is
        0 (a broker that starts), below the log start (deleted by snapshot retention), beyond the
        end (a follower of another log) or more than ``snapshot_interval_records`` records
        behind the end, ``([snapshot], True)``: the whole image as one batch whose
        ``base_offset`` is the image offset (apply it with ``serde.image_from_snapshot`` and
        continue from ``base_offset + 1``). ``ControllerFencedError`` if not active.

        A broker that starts gets the image, never the history: its disk already holds what
        later records made of its partitions, and replaying an earlier state would undo it (a
        topic deleted and created again under the same name: the old topic's record would
        replace the new topic's log with the old one's, whose removal comes later).

        Far behind, the image is cheaper than the history: one batch to encode and apply
        instead of one per write, for the follower and the controller alike. It is built
        outside ``active.mu`` (writes go on meanwhile) and kept for followers that start
        together (``SnapshotCache``)."""
        active = self._active
        deadline = time.monotonic() + max_wait_s
        with active.mu:
            self._cache.expire()
            while True:
                log = active.require_active()
                end = log.end_offset
                if (
                    from_offset == 0 < end
                    or from_offset > end
                    or end - from_offset > self._snapshot_interval_records
                ):
                    break
                if from_offset < end:
                    try:
                        return log.read(from_offset, max_batches, max_bytes), False
                    except OffsetBelowLogStart:
                        break
                    except (MetadataLogError, OSError) as exc:
                        raise MetadataStoreError(f"cannot read the metadata log: {exc}") from exc
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return [], False
                active.appended.wait(remaining)
            cached = self._cache.at(active.image.offset)
            if cached is not None:
                return [cached], True
            image = active.image.copy()
        batch = serde.image_to_batch(image, image.offset)
        with active.mu:
            self._cache.keep(batch)
        return [batch], True
