"""Scrub: remote objects that nothing claims (docs/design.md, "Scrub").

The active controller lists everything under the storage root (the plugin's optional
:class:`~tiered.api.RemoteStorageScanner`, in parallel by prefix) and takes an object for an
orphan when it is older than the scrub's minimum age and nothing claims it:

- no RLMM segment record claims it (every record does until DELETE_SEGMENT_FINISHED removes it,
  so a copy in flight is claimed from its COPY_SEGMENT_STARTED on);
- no unfinished delete job claims it (an object of its topic stamped below the job's epoch: the
  job deletes it, and its sweep finds what the metadata does not name).

The cluster and the RLMM are read after the listing, so that an object listed under a topic
created meanwhile is seen under a live topic, one whose topic was deleted meanwhile under that
topic's delete job, and a copy that started meanwhile under its record. A record or a job can also
end between the listing and the read, but only after its objects are deleted: so every object
that nothing claims is asked for again, and only those still stored are orphans. Each orphan gets
one :class:`~tiered.cluster.model.OrphanReason`.

``execute`` deletes the orphans with the bulk delete's engine (Spark or in process, chosen for
their count as for a delete job) and the plugin's deleter.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from controller.jobs.runner import BulkDeleteUnsupportedError, DeleteEngine, bulk_deleter_of
from tiered.api import (
    RemoteLogMetadataManager,
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RemoteStorageManager,
    RemoteStorageScanner,
    RemoteStoredObject,
    TopicIdPartition,
    missing_capability,
)
from tiered.cluster.model import (
    MAX_SCRUB_EXAMPLES,
    DeleteJobState,
    MetadataImage,
    OrphanReason,
    RemoteStorageScrub,
)
from tiered.errors import ErrorCode, TieredError

__all__ = ["SCAN_PARALLELISM", "ClaimsOfJobs", "RemoteObjectScrubber", "RemoteScrub"]

log = logging.getLogger(__name__)

SCAN_PARALLELISM = 32
"""Listings of the root at once: an object store answers each page in tens of milliseconds."""

PROGRESS_INTERVAL_S = 10.0
"""How often a long listing logs how far it got."""


@dataclass(frozen=True)
class ClaimsOfJobs:
    """What the cluster's topics and delete jobs say of objects, read after the listing.

    ``live``: the topic ids the cluster has; ``deleting_below``: per topic id, the epoch of its
    unfinished delete job (objects stamped below it are that job's); ``deleted_below``: per live
    topic id, the highest epoch of its finished (DONE) delete jobs."""

    live: frozenset[uuid.UUID]
    deleting_below: Mapping[uuid.UUID, int] = field(default_factory=dict)
    deleted_below: Mapping[uuid.UUID, int] = field(default_factory=dict)

    @classmethod
    def of_image(cls, image: MetadataImage) -> ClaimsOfJobs:
        deleting: dict[uuid.UUID, int] = {}
        deleted: dict[uuid.UUID, int] = {}
        for (topic_id, epoch), job in image.delete_jobs.items():
            if not job.state.finished:
                deleting[topic_id] = max(deleting.get(topic_id, 0), epoch)
            elif job.state is DeleteJobState.DONE:
                deleted[topic_id] = max(deleted.get(topic_id, 0), epoch)
        live = frozenset(t.topic_id for t in image.topics.values())
        return cls(live, deleting, deleted)

    def claimed_by_job(self, obj: RemoteStoredObject) -> bool:
        assert obj.topic_id is not None
        below = self.deleting_below.get(obj.topic_id)
        return below is not None and obj.segment is not None and obj.segment.tiered_epoch < below

    def reason(self, obj: RemoteStoredObject) -> OrphanReason:
        """Why an object that no record and no job claims is an orphan."""
        assert obj.topic_id is not None
        if obj.topic_id not in self.live:
            return OrphanReason.DELETED_TOPIC
        if obj.segment is not None and obj.segment.tiered_epoch < self.deleted_below.get(
            obj.topic_id, 0
        ):
            return OrphanReason.DELETED_SEGMENT
        return OrphanReason.UNKNOWN_SEGMENT


class RemoteObjectScrubber:
    """Remote storage and its metadata as the scrub reads them, and the engine it deletes with.
    Thread-safe as its RLMM, plugin and engine are."""

    def __init__(
        self,
        rlmm: RemoteLogMetadataManager,
        storage: RemoteStorageManager,
        engine: DeleteEngine,
        parallelism: int = SCAN_PARALLELISM,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._rlmm = rlmm
        self._storage = storage
        self._engine = engine
        self._parallelism = parallelism
        self._clock_ms = clock_ms

    def scanner(self) -> RemoteStorageScanner:
        if isinstance(self._storage, RemoteStorageScanner):
            return self._storage
        raise TieredError(
            ErrorCode.INVALID_REQUEST,
            missing_capability(
                self._storage,
                RemoteStorageScanner,
                "scan_objects",
                "remote storage can not be scrubbed",
            ),
        )

    def scrub(
        self, min_age_ms: int, execute: bool, claims: Callable[[], ClaimsOfJobs]
    ) -> RemoteStorageScrub:
        """Lists the root, then reads ``claims()`` and the RLMM, classifies, and with
        ``execute`` deletes the orphans."""
        scanner = self.scanner()
        if execute:
            bulk_deleter_of(self._storage)  # refused before anything is listed
        listed_at_ms = self._clock_ms()
        scanned = 0
        old: list[RemoteStoredObject] = []
        next_progress = time.monotonic() + PROGRESS_INTERVAL_S
        for batch in scanner.scan_objects(self._parallelism):
            scanned += len(batch)
            if time.monotonic() >= next_progress:
                log.info("Scrub: %d objects listed so far", scanned)
                next_progress = time.monotonic() + PROGRESS_INTERVAL_S
            old.extend(
                o
                for o in batch
                if o.topic_id is not None and listed_at_ms - o.last_modified_ms >= min_age_ms
            )
        jobs = claims()
        unclaimed = self._unclaimed([o for o in old if not jobs.claimed_by_job(o)])
        if unclaimed:
            # A record or a job that claimed an object when it was listed may be gone by now,
            # with the object: a retention or a delete job removes the objects first.
            stored = scanner.objects_still_stored([o.handle for o in unclaimed], self._parallelism)
            unclaimed = [o for o in unclaimed if o.handle in stored]
        reasons = Counter(jobs.reason(o) for o in unclaimed)
        report = RemoteStorageScrub(
            scanned_objects=scanned,
            orphan_objects=len(unclaimed),
            orphan_bytes=sum(o.size_bytes for o in unclaimed),
            by_reason={r: reasons.get(r, 0) for r in OrphanReason},
            examples=tuple(o.handle for o in unclaimed[:MAX_SCRUB_EXAMPLES]),
        )
        if not execute or not unclaimed:
            return report
        return self._delete(report, unclaimed)

    def _unclaimed(self, objects: Iterable[RemoteStoredObject]) -> list[RemoteStoredObject]:
        """The objects no RLMM segment record claims, in listing order; one RLMM listing per
        partition that has objects of segments (an object of no segment is claimed by none)."""
        by_partition: dict[TopicIdPartition, set[uuid.UUID]] = {}
        unclaimed: list[RemoteStoredObject] = []
        for obj in objects:
            if obj.segment is None:
                unclaimed.append(obj)
                continue
            assert obj.topic is not None and obj.topic_id is not None
            tp = TopicIdPartition(obj.topic_id, obj.topic, obj.segment.partition)
            recorded = by_partition.get(tp)
            if recorded is None:
                recorded = by_partition[tp] = self._recorded_segments(tp)
            if obj.segment.segment_id not in recorded:
                unclaimed.append(obj)
        return unclaimed

    def _recorded_segments(self, tp: TopicIdPartition) -> set[uuid.UUID]:
        try:
            return self._rlmm.remote_log_segment_ids(tp)
        except RemoteResourceNotFoundException:
            return set()

    def _delete(
        self, report: RemoteStorageScrub, orphans: list[RemoteStoredObject]
    ) -> RemoteStorageScrub:
        handles = [o.handle for o in orphans]
        deleter = bulk_deleter_of(self._storage).object_deleter()
        choice = self._engine.choose(len(handles))
        log.info("Scrub: deleting %d orphaned objects, %s", len(handles), choice.reason)
        outcome = self._engine.delete(deleter, handles, choice)
        if outcome.failed:
            log.warning(
                "Scrub: %d of %d orphaned objects could not be deleted (a next scrub finds them "
                "again): %s",
                outcome.failed,
                len(handles),
                outcome.first_error,
            )
        log.info("Scrub: deleted %d orphaned objects", outcome.done)
        failed = set(outcome.failed_handles)
        return replace(
            report,
            deleted=outcome.done,
            left_objects=len(failed),
            left_bytes=sum(o.size_bytes for o in orphans if o.handle in failed),
        )


class RemoteScrub:
    """What the admin call asks of the active controller.

    ``scrubber`` is None on a controller without remote storage settings; ``claims`` reads the
    active term's topics and delete jobs (NOT_CONTROLLER on a standby); ``on_scrubbed`` is told
    each finished scrub (the orphan-bytes gauge)."""

    def __init__(
        self,
        scrubber: RemoteObjectScrubber | None,
        claims: Callable[[], ClaimsOfJobs],
        on_scrubbed: Callable[[RemoteStorageScrub], None] = lambda report: None,
    ) -> None:
        self._scrubber = scrubber
        self._claims = claims
        self._on_scrubbed = on_scrubbed

    def scrub(self, min_age_ms: int, execute: bool) -> RemoteStorageScrub:
        """Errors: INVALID_REQUEST for a negative ``min_age_ms``, on a controller without remote
        storage settings or with a plugin that can not be listed (or, with ``execute``,
        bulk-deleted); NOT_CONTROLLER on a standby; KAFKA_STORAGE_ERROR when the store or the
        RLMM can not be read. Nothing is deleted unless every object was listed and classified."""
        if isinstance(min_age_ms, bool) or not isinstance(min_age_ms, int) or min_age_ms < 0:
            raise TieredError(
                ErrorCode.INVALID_REQUEST, f"--min-age-ms must be >= 0, got {min_age_ms!r}"
            )
        self._claims()  # NOT_CONTROLLER before the listing, not after it
        if self._scrubber is None:
            raise TieredError(
                ErrorCode.INVALID_REQUEST,
                "the active controller has no remote storage settings "
                "(remote.storage.root or remote.log.storage.manager.class.name): "
                "nothing to scrub",
            )
        started = time.monotonic()
        try:
            report = self._scrubber.scrub(min_age_ms, execute, self._claims)
        except BulkDeleteUnsupportedError as e:
            raise TieredError(ErrorCode.INVALID_REQUEST, str(e)) from None
        except RemoteStorageException as e:
            raise TieredError(ErrorCode.KAFKA_STORAGE_ERROR, f"scrub failed: {e}") from None
        log.info(
            "Scrub (min age %d ms%s) in %.1f s: %d objects listed, %d orphans (%d bytes): %s; "
            "%d deleted",
            min_age_ms,
            ", execute" if execute else "",
            time.monotonic() - started,
            report.scanned_objects,
            report.orphan_objects,
            report.orphan_bytes,
            ", ".join(f"{r.value}={n}" for r, n in report.by_reason.items()),
            report.deleted,
        )
        self._on_scrubbed(report)
        return report
