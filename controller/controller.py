"""The controller's composition root: builds each piece, wires them together, and rebuilds
their per-term state as ``Leadership`` activates and deactivates it.

Who does what (a disable, top to bottom): ``servicer`` converts the request and calls
``AdminOperations``, which persists DISABLING through the ``Term`` and queues it with
``DisableCompletion``; the ``BrokerRegistry`` hands it to each hosting broker's
``BrokerChannel`` and passes the acks back to ``DisableCompletion``, which persists DISABLED and
hands the bulk delete to the ``DeleteJobSupervisor``. ``LogDirsClient`` asks brokers for
partition states when a describe wants them.
"""

from __future__ import annotations

import logging
import threading
import uuid

from controller.acl_operations import AclOperations
from controller.admin_operations import AdminOperations
from controller.admin_servicer import AdminServicer
from controller.broker_registry import BrokerRegistry
from controller.config import ControllerConfig
from controller.delete_jobs import DeleteJobSupervisor, JobRunnerFactory
from controller.disable_completion import DisableCompletion
from controller.leadership import Leadership, Term
from controller.log_dirs import LogDirsClient
from controller.metrics import ControllerMetrics
from controller.scram_users import ScramUsers
from controller.store import MetadataStore
from tiered.cluster.model import MetadataImage
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
    ) -> None:
        self.config = config
        self.store = store
        self.metrics = metrics or ControllerMetrics(store.mode)
        self.term = Term(
            config.node_id,
            store,
            self.metrics.store_written,
            self.metrics.topic_writes_flushed,
        )
        self.delete_jobs = DeleteJobSupervisor(self.term, store, jobs, self._brokers_owing_removal)
        self.disablements = DisableCompletion(self.term, store, self.delete_jobs)
        self.brokers = BrokerRegistry(config, store, self.term, self.disablements, self.metrics)
        self._log_dirs = LogDirsClient(credentials=config.grpc_security.channel_credentials)
        self.admin = AdminOperations(
            config.node_id,
            config.endpoint,
            store,
            self.term,
            self.brokers,
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
        self.leadership = Leadership(config.node_id, config.endpoint, store, self.term, self)
        self._requeued = 0

    def _brokers_owing_removal(self, topic_id: uuid.UUID) -> list[int]:
        # The registry is built after the supervisor (through DisableCompletion it needs it).
        return self.brokers.brokers_owing_removal(topic_id)

    def admin_servicer(self) -> AdminServicer:
        """AdminService over this controller's operations (the gRPC server's edge)."""
        return AdminServicer(
            self.admin, self.access, self.acls, self.scram_users, self.term.changes
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
        self._requeued = self.disablements.take_over(image.topics.values())
        self.brokers.take_over(image)

    def serve(self, epoch: int, image: MetadataImage) -> None:
        self.brokers.serve()
        self.delete_jobs.start(list(image.delete_jobs.values()))
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
