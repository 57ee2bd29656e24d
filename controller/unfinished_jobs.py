"""The active term's unfinished bulk-delete jobs, as their latest job objects say: what the
controller metrics read (jobs per state, objects remaining) without scanning every job the
image ever recorded. Whatever queues a job (a disablement with the delete policy, a deleted
topic) feeds it through the delete-job supervisor, which is the one place jobs are saved."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from tiered.cluster.model import DeleteJob


class UnfinishedDeleteJobs:
    """Written under the term's lock; ``jobs`` may be read from any thread."""

    def __init__(self) -> None:
        self._jobs: dict[tuple[uuid.UUID, int], DeleteJob] = {}

    def reset(self, jobs: Iterable[DeleteJob]) -> None:
        """A term begins with these jobs (or ends: none)."""
        self._jobs = {j.key: j for j in jobs if not j.state.finished}

    def saved(self, job: DeleteJob) -> None:
        """A job was queued or its progress persisted."""
        if job.state.finished:
            self._jobs.pop(job.key, None)
        else:
            self._jobs[job.key] = job

    def jobs(self) -> list[DeleteJob]:
        # One C-level copy: no Python code runs during it, so a writer cannot change the dict
        # under it.
        return list(self._jobs.values())


def objects_remaining(job: DeleteJob) -> int:
    """Objects listed for deletion and not deleted yet (partitions not listed yet count 0)."""
    return sum(max(p.objects_total - p.objects_deleted, 0) for p in job.progress)
