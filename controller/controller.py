"""The controller's composition root: builds each piece, wires them together, and rebuilds
their per-term state as ``Leadership`` activates and deactivates it.

Who does what (a disable, top to bottom; ``docs/internals/disable-path.md`` follows it file by
file):
``AdminServicer`` converts the request and calls ``AdminOperations``, which submits DISABLING to
the term's group commit (``TopicWrites``) and, once durable, tells ``Disablements``; each
hosting broker's ``BrokerChannel`` sends what ``Disablements`` says it owes and hands the answer
back; the last ack submits DISABLED, and with the delete policy the job goes to the
``DeleteJobSupervisor``. ``LogDirsClient`` asks brokers for partition states when a describe
wants them.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable

from controller.acl_operations import AclOperations
from controller.admin_operations import AdminOperations
from controller.admin_servicer import AdminServicer
from controller.broker_registry import BrokerRegistry
from controller.broker_work import BrokerWork
from controller.config import ControllerConfig
from controller.delete_jobs import DeleteJobSupervisor, JobRunnerFactory
from controller.disablements import Disablements
from controller.jobs.spark_session import SparkSessionProvider
from controller.leadership import Leadership, Term
from controller.log_dirs import LogDirsClient
from controller.metrics import ControllerMetrics, ControllerSnapshot, ControllerStateCollector
from controller.periodic_verify import VerifyGauges, periodic_verify
from controller.remote_scrub import ClaimsOfJobs, RemoteObjectScrubber, RemoteScrub
from controller.remote_verify import RemoteVerify, SegmentVerifier, partitions_of
from controller.scram_users import ScramUsers
from controller.store import MetadataStore
from tiered.api import TopicIdPartition
from tiered.cluster.model import DeleteJob, MetadataImage, TieredState
from tiered.security.access import AccessControl
from tiered.security.authorizer import StandardAuthorizer

log = logging.getLogger(__name__)


class Controller:
    def __init__(
        self,
        config: ControllerConfig,
        store: MetadataStore,
        jobs: JobRunnerFactory | None = None,
        metrics: ControllerMetrics | None = None,
        spark: SparkSessionProvider | None = None,
        verifier: SegmentVerifier | None = None,
        scrubber: RemoteObjectScrubber | None = None,
    ) -> None:
        """``verifier`` and ``scrubber``: remote storage as the verify and the scrub read it
        (None without remote storage settings: VerifyRemoteStorage and ScrubRemoteStorage are
        refused, and no periodic verify runs)."""
        self.config = config
        self.spark = spark  # the bulk delete's session: its start and stop follow the terms
        self.store = store
        self.metrics = metrics or ControllerMetrics(store.mode)
        self.term = Term(
            config.node_id,
            store,
            self.metrics.store_written,
            self.metrics.topic_writes_flushed,
        )
        self.delete_jobs = DeleteJobSupervisor(
            self.term, store, jobs, self._brokers_owing_removal, self._delete_stops_owed
        )
        self.disablements = Disablements(self.term, self.delete_jobs)
        self.broker_work = BrokerWork(
            self.term,
            self.disablements,
            config.max_entries_per_request,
            self._live_endpoint,
            self._wake_channels,
            brokers_follow_log=store.mode == "kraft",
        )
        self.brokers = BrokerRegistry(config, store, self.term, self.broker_work, self.metrics)
        self._log_dirs = LogDirsClient(credentials=config.grpc_security.channel_credentials)
        self.admin = AdminOperations(
            config.node_id,
            config.endpoint,
            store,
            self.term,
            self.brokers,
            self.broker_work,
            self.disablements,
            self.delete_jobs,
            self._log_dirs,
            cluster_id=config.cluster_id,
        )
        self.scram_users = ScramUsers(store, self.term)
        self.acls = AclOperations(store, self.term)
        # Checks read the term's image (its ACLs), on the active controller only.
        self.access = AccessControl(
            StandardAuthorizer(config.authorizer, lambda: self.term.image.acls),
            self.term.require_active,
        )
        self.remote_verify = RemoteVerify(verifier, self._partitions)
        self.remote_scrub = RemoteScrub(
            scrubber, self._claims_of_jobs, self.metrics.remote_storage_scrubbed
        )
        self.periodic_verify = periodic_verify(
            verifier, self._every_partition, config.verify_interval_ms
        )
        self.leadership = Leadership(config.node_id, config.endpoint, store, self.term, self)
        self._requeued = 0

    # The registry is built after the broker work whose channels it runs, which asks it who is
    # live; the broker work after the supervisor, which asks it who still owes a removal.

    def _brokers_owing_removal(self, topic_id: uuid.UUID) -> list[int]:
        return self.broker_work.brokers_owing_removal(topic_id)

    def _delete_stops_owed(self, job: DeleteJob) -> list[int]:
        return self.broker_work.delete_stops_owed(job)

    def _live_endpoint(self, broker_id: int) -> str | None:
        return self.brokers.live_endpoint(broker_id)

    def _wake_channels(self, broker_ids: Iterable[int]) -> None:
        self.brokers.wake(broker_ids)

    def _partitions(self, topic: str | None) -> list[TopicIdPartition]:
        """The partitions of ``topic`` (all for None) in the active term's image."""
        with self.term.lock:
            self.term.require_active()
            return partitions_of(self.term.image, topic)

    def _claims_of_jobs(self) -> ClaimsOfJobs:
        """The active term's topics and delete jobs, as the scrub reads them."""
        with self.term.lock:
            self.term.require_active()
            return ClaimsOfJobs.of_image(self.term.image)

    def _every_partition(self) -> list[TopicIdPartition]:
        return self._partitions(None)

    def state_collector(self, lock_timeout_s: float = 2.0) -> ControllerStateCollector:
        """The metrics endpoint's view of this controller's state (read at scrape time)."""
        return ControllerStateCollector(
            lambda: self.term.active_epoch, self._metrics_snapshot, lock_timeout_s
        )

    def _metrics_snapshot(self, lock_timeout_s: float) -> ControllerSnapshot | None:
        """What the metrics endpoint shows of the term, copied under its lock; None when the
        lock stays busy for ``lock_timeout_s`` (a scrape must not hang behind a write)."""
        if not self.term.lock.acquire(timeout=lock_timeout_s):
            return None
        try:
            if self.term.active_epoch is None:
                return ControllerSnapshot()
            image = self.term.image
            verify = (
                self.periodic_verify.gauges()
                if self.periodic_verify is not None
                else VerifyGauges()
            )
            return ControllerSnapshot(
                topics_by_state={s: image.topic_count(s) for s in TieredState},
                disable_backlogs=self.disablements.backlogs(),
                unfinished_jobs=self.delete_jobs.unfinished.jobs(),
                since_reached_s={b: r.since_reached_s for b, r in self.brokers.reach().items()},
                verify_segments_checked=verify.segments_checked,
                verify_segments_missing=verify.segments_missing,
            )
        finally:
            self.term.lock.release()

    def admin_servicer(self) -> AdminServicer:
        """AdminService over this controller's operations (the gRPC server's edge)."""
        return AdminServicer(
            self.admin,
            self.access,
            self.acls,
            self.scram_users,
            self.term.changes,
            self.broker_work,
            self.remote_verify,
            self.remote_scrub,
        )

    @property
    def active_epoch(self) -> int | None:
        return self.term.active_epoch

    def wait_active(self, timeout_s: float) -> bool:
        return self.leadership.wait_active(timeout_s)

    def run(self, stop: threading.Event) -> None:
        """Campaigns, serves while active, and campaigns again after losing leadership."""
        self.leadership.run(stop)

    def close(self) -> None:
        self.leadership.deactivate()
        self._log_dirs.close()

    # ----------------------------------------------------------------------------- TermListener

    def take_over(self, epoch: int, image: MetadataImage) -> None:
        self._requeued = self.disablements.term_started(image.topics.values())
        self.broker_work.term_started(image)
        self.brokers.take_over(image)

    def serve(self, epoch: int, image: MetadataImage) -> None:
        if self.spark is not None:
            self.spark.term_started()  # in the background: returns at once
        self.brokers.serve()
        self.delete_jobs.start(list(image.delete_jobs.values()))
        if self.periodic_verify is not None:
            self.periodic_verify.start()
        log.info(
            "Active as controller %d with controller epoch %d: %d topics, %d brokers, %d topics "
            "DISABLING re-queued",
            self.config.node_id,
            epoch,
            len(image.topics),
            len(image.brokers),
            self._requeued,
        )

    def stand_down(self) -> None:
        self.brokers.stand_down()
        self.delete_jobs.stop()
        if self.periodic_verify is not None:
            self.periodic_verify.stop()
        if self.spark is not None:
            self.spark.term_ended()  # stopped in the background
