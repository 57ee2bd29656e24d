"""Supervision of the bulk delete jobs on the active controller: the runner is started with the
unfinished jobs each term, handed every job a completed delete-policy disablement or a topic
deletion queues, and persists their progress through the term's fenced writes.

A deleted topic's job holds back until every live broker dropped the topic's partitions (the
broker registry says which still owe it): a broker stops copying a partition when it drops it,
as Kafka's RemoteLogManager stops a deleted topic's partitions, so the job's listing comes after
the last upload a live broker makes.

A delayed job (``controller.delete_schedule``) waits SCHEDULED for its start in the runner; then
it holds until every live broker acked the delete-policy stop of its topic (``delete_stops_owed``:
the log start rises and remote fetches end before an object goes). Cancelling it writes
CANCELLED; a write the table of job states does not allow (the runner's RUNNING after that) is
refused here, the one place jobs are saved."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable

from controller.jobs.runner import BulkDeleteUnsupportedError, DeleteJobRunner, JobHold
from controller.leadership import Term
from controller.store import MetadataStore
from controller.unfinished_jobs import UnfinishedDeleteJobs
from tiered.cluster.model import DeleteJob, DeleteJobState, DeletionEstimate

log = logging.getLogger(__name__)

# Builds the delete-job runner of an active controller, given how it persists progress and what
# holds a job back.
JobRunnerFactory = Callable[[Callable[[DeleteJob], None], JobHold], DeleteJobRunner]

# The live brokers that have not yet dropped the partitions of a deleted topic (by topic id).
RemovalsOwed = Callable[[uuid.UUID], list[int]]

# The live brokers that have not yet acked the delete-policy stop a delayed job's start owes
# (owing it, the first time a term asks).
DeleteStopsOwed = Callable[[DeleteJob], list[int]]


def _none_owed(topic_id: uuid.UUID) -> list[int]:
    return []


def _no_stops_owed(job: DeleteJob) -> list[int]:
    return []


class DeleteJobSupervisor:
    def __init__(
        self,
        term: Term,
        store: MetadataStore,
        factory: JobRunnerFactory | None,
        removals_owed: RemovalsOwed = _none_owed,
        delete_stops_owed: DeleteStopsOwed = _no_stops_owed,
    ) -> None:
        self._term = term
        self._store = store
        self._factory = factory
        self._removals_owed = removals_owed
        self._delete_stops_owed = delete_stops_owed
        self._runner: DeleteJobRunner | None = None
        self.unfinished = UnfinishedDeleteJobs()  # what the metrics read

    def start(self, jobs: Iterable[DeleteJob]) -> None:
        """As a term begins (outside the lock): runs every unfinished job of the image."""
        unfinished = [j for j in jobs if not j.state.finished]
        with self._term.lock:
            self.unfinished.reset(unfinished)
        if self._factory is None:
            if unfinished:
                log.error(
                    "%d delete jobs are unfinished but this controller cannot run them: set "
                    "remote.storage.root (and the rlmm.* keys) as on the brokers",
                    len(unfinished),
                )
            return
        runner = self._factory(self._persist, self._hold)
        runner.start(unfinished)
        with self._term.lock:
            self._runner = runner
        if unfinished:
            log.info("Resuming %d unfinished delete jobs", len(unfinished))

    def stop(self) -> None:
        """As a term ends (outside the lock: the runner persists under it)."""
        with self._term.lock:
            runner, self._runner = self._runner, None
            self.unfinished.reset(())
        if runner is not None:
            runner.stop()

    def queued(self, job: DeleteJob) -> None:
        """``job`` was persisted with the change that queues it (a delete-policy disablement
        completed, or a topic was deleted; the caller holds the lock): it runs now."""
        self._term.image.delete_jobs[job.key] = job
        self.unfinished.saved(job)
        if self._runner is not None:
            self._runner.submit(job)

    def scheduled_job(self, topic_id: uuid.UUID, tiered_epoch: int) -> DeleteJob | None:
        """The topic's job below ``tiered_epoch`` if it is SCHEDULED, else None. Under the lock."""
        job = self._term.image.delete_jobs.get((topic_id, tiered_epoch))
        return job if job is not None and job.state is DeleteJobState.SCHEDULED else None

    def cancelled(self, job: DeleteJob) -> None:
        """``job`` was persisted CANCELLED with the topic change that cancels it (the caller
        holds the lock): it is finished, and the runner drops it."""
        self._term.image.delete_jobs[job.key] = job
        self.unfinished.saved(job)
        if self._runner is not None:
            self._runner.submit(job)
        log.info(
            "Topic %s: the scheduled bulk delete below tiered epoch %d is cancelled; nothing "
            "was deleted",
            job.topic,
            job.tiered_epoch,
        )

    def estimate(self, job: DeleteJob) -> DeletionEstimate | None:
        """What ``job`` would delete if it ran now (a dry run's answer, from the RLMM's
        aggregates: nothing is persisted nor queued), or None on a controller that can not run
        delete jobs (no remote storage settings, or a plugin without the bulk delete
        capability). Outside the lock: it reads the RLMM."""
        with self._term.lock:
            runner = self._runner
        if runner is None:
            return None
        try:
            return runner.estimate(job)
        except BulkDeleteUnsupportedError as e:
            log.warning("No estimate of what a delete job of %s would delete: %s", job.topic, e)
            return None

    def latest(self) -> dict[uuid.UUID, DeleteJob]:
        """Each topic's latest delete job with the runner's freshest progress, in one pass over
        the jobs. Under the lock."""
        latest: dict[uuid.UUID, DeleteJob] = {}
        for (topic_id, _), job in self._term.image.delete_jobs.items():
            known = latest.get(topic_id)
            if known is None or job.tiered_epoch > known.tiered_epoch:
                latest[topic_id] = job
        return {t: self._freshest(j) for t, j in latest.items()}

    def jobs_with_progress(self) -> list[DeleteJob]:
        """Every delete job of the term's image (DONE ones included), each with the runner's
        freshest progress (``objects_deleted``, ``objects_total``, ``partitions_done``): what the
        controller's metrics and describes read. Takes the lock."""
        with self._term.lock:
            return [self._freshest(j) for j in self._term.image.delete_jobs.values()]

    def deleted_topics_being_deleted(self) -> list[DeleteJob]:
        """The unfinished jobs of deleted topics, freshest progress, by topic name. Takes the
        lock."""
        jobs = self.jobs_with_progress()
        return sorted(
            (j for j in jobs if j.topic_deleted and not j.state.finished),
            key=lambda j: (j.topic, str(j.topic_id)),
        )

    def _freshest(self, job: DeleteJob) -> DeleteJob:
        return job if self._runner is None else self._runner.progress(job)

    def _hold(self, job: DeleteJob) -> str | None:
        """Why ``job`` must not list yet, or None (from the runner's thread)."""
        if job.delayed:
            owing_stop = self._delete_stops_owed(job)
            if owing_stop:
                return (
                    f"waiting for brokers {owing_stop} to stop the topic as the delete policy does"
                )
        if not job.topic_deleted:
            return None
        with self._term.lock:
            owing = self._removals_owed(job.topic_id)
        if not owing:
            return None
        return f"waiting for brokers {owing} to drop the deleted topic's partitions"

    def _persist(self, job: DeleteJob) -> None:
        """The runner's progress, written from its thread."""
        with self._term.lock:
            self._term.require_active()
            saved = self._term.image.delete_jobs.get(job.key)
            if saved is not None:
                saved.with_state(job.state)  # InvalidDeleteJobTransition: e.g. cancelled meanwhile
            self._term.persist(lambda: self._store.writes.put_delete_job(job))
            self._term.image.delete_jobs[job.key] = job
            self.unfinished.saved(job)
