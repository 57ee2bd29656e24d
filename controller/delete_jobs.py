"""Supervision of the bulk delete jobs (delete policy) on the active controller: the runner is
started with the unfinished jobs each term, handed every job a completed disablement queues,
and persists their progress through the term's fenced writes."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable

from controller.jobs.runner import DeleteJobRunner
from controller.leadership import Term
from controller.store import MetadataStore
from controller.unfinished_jobs import UnfinishedDeleteJobs
from tiered.cluster.model import DeleteJob, DeleteJobState

log = logging.getLogger(__name__)

# Builds the delete-job runner of an active controller, given how it persists progress.
JobRunnerFactory = Callable[[Callable[[DeleteJob], None]], DeleteJobRunner]


class DeleteJobSupervisor:
    def __init__(self, term: Term, store: MetadataStore, factory: JobRunnerFactory | None) -> None:
        self._term = term
        self._store = store
        self._factory = factory
        self._runner: DeleteJobRunner | None = None
        self.unfinished = UnfinishedDeleteJobs()  # what the metrics read

    def start(self, jobs: Iterable[DeleteJob]) -> None:
        """As a term begins (outside the lock): runs every unfinished job of the image."""
        unfinished = [j for j in jobs if j.state is not DeleteJobState.DONE]
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
        runner = self._factory(self._persist)
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
        """A disablement completed with the delete policy and ``job`` was persisted with it (the
        caller holds the lock): it runs now."""
        self._term.image.delete_jobs[job.key] = job
        self.unfinished.saved(job)
        if self._runner is not None:
            self._runner.submit(job)

    def latest(self) -> dict[uuid.UUID, DeleteJob]:
        """Each topic's latest delete job with the runner's freshest progress, in one pass over
        the jobs. Under the lock."""
        latest: dict[uuid.UUID, DeleteJob] = {}
        for (topic_id, _), job in self._term.image.delete_jobs.items():
            known = latest.get(topic_id)
            if known is None or job.tiered_epoch > known.tiered_epoch:
                latest[topic_id] = job
        if self._runner is not None:
            latest = {t: self._runner.progress(j) for t, j in latest.items()}
        return latest

    def _persist(self, job: DeleteJob) -> None:
        """The runner's progress, written from its thread."""
        with self._term.lock:
            self._term.require_active()
            self._term.persist(lambda: self._store.put_delete_job(job))
            self._term.image.delete_jobs[job.key] = job
            self.unfinished.saved(job)
