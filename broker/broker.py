"""The broker's composition root: builds each piece, wires them together, serves, and closes them.

Who does what (a partition's life, top to bottom; ``docs/internals/disable-path.md`` follows a
stop file by file):
the controller's calls arrive on ``BrokerServicer`` (gRPC) and, in KRaft mode, from the metadata
log that ``KRaftControllerLink`` follows (``cluster_link`` starts the link of the configured
mode). ``ControllerEpochFence`` refuses those of a stale controller; ``Hosting`` hosts,
re-configures, stops and removes partitions (listed in ``HostedPartitions``), fires each tiering
event through the ``TieringDriver`` on the ``RemoteLogManager``, which reaches the RLMM and RSM
plugins through their contracts only, and has the ``AssignmentPersister`` journal what changed
before a controller's call is answered. Records go in and out through the ``DataPlane``
(produce, fetch from both tiers, offsets, DeleteRecords, log dirs), over gRPC and through the
Kafka listeners (``KafkaListeners``: one ``BrokerKafkaHandler`` with this broker's
``ConsumerGroups``; its admin APIs go to the active controller through ``ControllerAdmin``). The
metrics endpoint reads the data plane and the RemoteLogManager's meters when scraped.

``Broker(config)`` opens the storage and hosts again what the assignment journal holds, with
nothing on the network (tests use it in-process); :meth:`Broker.start` binds and serves;
:meth:`Broker.close` undoes both.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import grpc
from kio.static.protocol import ResponsePayload

from broker.admin_forwarder import AdminForwarder, ControllerAdmin
from broker.assignment_journal import AssignmentJournal
from broker.assignment_persister import AssignmentPersister
from broker.cluster_link import (
    BrokerAcls,
    ClusterLink,
    ControllerEndpoint,
    ScramCredentialSource,
    registration_of,
    start_cluster_link,
)
from broker.cluster_view import ClusterView
from broker.config import BrokerConfig
from broker.controller_epoch import ControllerEpochFence
from broker.data_plane import DataPlane
from broker.groups.consumer_groups import ConsumerGroups
from broker.groups.offsets_config import OffsetsConfig
from broker.hosted_partitions import HostedPartitions
from broker.hosting import Hosting
from broker.kafka.fetch_waits import FetchWaits
from broker.kafka.handler import BrokerKafkaHandler
from broker.kafka.producer_ids import ProducerIdBlocks
from broker.kafka.this_broker import ThisBroker
from broker.kafka_listeners import KafkaListenerBindError, KafkaListeners, start_kafka_listeners
from broker.metrics import serve_metrics
from broker.rlm.manager import RemoteLogManager
from broker.servicer import BrokerServicer
from broker.tiering import TieringDriver
from tiered import rlmm as rlmm_factory
from tiered import rsm as rsm_factory
from tiered.api import TopicIdPartition
from tiered.daemon_logging import announce
from tiered.metrics_endpoint import MetricsEndpoint, MetricsEndpointError
from tiered.net import GRPC_EXCLUSIVE_PORT, bind_grpc_port
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import controller_pb2_grpc as controller_grpc
from tiered.security.access import AccessControl
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.grpc_context import use_principal_mapper

__all__ = ["GRACE_S", "Broker"]

GRACE_S = 10.0
"""How long requests in flight may take to finish when the broker stops."""


class Broker:
    def __init__(self, config: BrokerConfig, authorizer: AuthorizerConfig | None = None) -> None:
        """Opens the log dir, the RLMM and the remote storage (``OSError``,
        ``StorageBackendError``; ``ValueError`` for a setting a plugin rejects) and hosts again
        what the assignment journal holds. ``authorizer``: the ``authorizer.*`` keys (None:
        none enabled)."""
        self.config = config
        config.log_dir.mkdir(parents=True, exist_ok=True)
        self.rlm: RemoteLogManager | None = None
        tiering: TieringDriver | None = None
        if config.remote_storage_enabled:
            self.rlm = RemoteLogManager(
                config.rlm, rlmm_factory.create(config.rlmm), rsm_factory.create(config.rsm)
            )
            tiering = TieringDriver(self.rlm)
        self.partitions = HostedPartitions(config.node_id)
        self.fence = ControllerEpochFence(config.node_id)
        self.persister = AssignmentPersister(AssignmentJournal(config.log_dir), self.partitions)
        self.hosting = Hosting(config.log_dir, self.partitions, self.fence, tiering, self.persister)
        self.hosting.restore()
        self.data = DataPlane(self.partitions, self.rlm)
        # What the cluster link learns, read through holders: the link starts last.
        self.acls = BrokerAcls()
        self.credentials = ScramCredentialSource()
        self.controller_endpoint = ControllerEndpoint()
        self.access = AccessControl(StandardAuthorizer(authorizer or AuthorizerConfig(), self.acls))
        self.controller = ControllerAdmin(
            self.controller_endpoint.get, credentials=config.grpc_security.channel_credentials
        )
        self._server: grpc.Server | None = None
        self._metrics: MetricsEndpoint | None = None
        self._kafka: KafkaListeners | None = None
        self._link: ClusterLink | None = None

    def kafka_handler(
        self,
        this: ThisBroker,
        controller: ControllerAdmin,
        access: AccessControl,
        metadata_max_age_s: float = 1.0,
    ) -> BrokerKafkaHandler:
        """The Kafka APIs over this broker's partitions, as ``this`` (what the listeners serve;
        tests hand it requests directly), with what they share: the cluster view (kept
        ``metadata_max_age_s``), the consumer groups (started; loading each ``__consumer_offsets``
        partition hosted here from then on), the fetches waiting for appends, the producer id
        blocks. The handler's ``close()`` stops them."""
        view = ClusterView(controller, metadata_max_age_s)
        waits: FetchWaits[ResponsePayload | None] = FetchWaits()

        def appended(tp: TopicIdPartition, size: int) -> None:
            waits.appended((tp.topic_id, tp.partition), size)

        self.data.on_append(appended)
        groups = ConsumerGroups(
            view,
            controller,
            this.node_id,
            OffsetsConfig.from_properties(this.properties),
            self.config.groups,
            self.partitions,
        )
        self.hosting.on_hosting(groups.hosted)
        groups.start()
        return BrokerKafkaHandler(
            this,
            controller,
            view,
            access,
            self.partitions,
            self.data,
            waits,
            groups,
            self.data.local_partitions,
            ProducerIdBlocks(this.node_id, this.log_dir),
            self.config.topic_auto_creation,
        )

    def start(self) -> bool:
        """Binds gRPC and the metrics endpoint, serves gRPC, binds the Kafka listeners (each
        announced once bound), then joins the cluster. False, having said why on stderr, when
        it cannot; :meth:`close` then releases what started."""
        config = self.config
        server = grpc.server(
            ThreadPoolExecutor(max_workers=32),
            maximum_concurrent_rpcs=256,
            options=[GRPC_EXCLUSIVE_PORT],
        )
        pb_grpc.add_BrokerServiceServicer_to_server(  # type: ignore[no-untyped-call]
            BrokerServicer(self.hosting, self.partitions, self.data, self.access), server
        )
        controller_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
            AdminForwarder(self.controller), server
        )
        use_principal_mapper(config.grpc_security.principal_mapper)
        if not bind_grpc_port(server, self.address, config.grpc_security.server_credentials):
            return False
        if config.metrics_port is not None:
            remote = None if self.rlm is None else self.rlm.metrics
            try:
                self._metrics = serve_metrics(
                    self.data, remote, config.metrics_host, config.metrics_port
                )
            except MetricsEndpointError as e:
                print(e, file=sys.stderr)
                return False
            announce(f"broker {config.node_id} metrics on {self._metrics.url}")
        server.start()
        self._server = server
        this = None
        if config.kafka_listeners:
            this = ThisBroker(
                config.node_id,
                tuple(listener.advertised for listener in config.kafka_listeners),
                config.log_dir,
                config.properties,
            )
            handler = self.kafka_handler(this, self.controller, self.access)
            try:
                self._kafka = start_kafka_listeners(
                    config.kafka_listeners, this, handler, self.credentials
                )
            except KafkaListenerBindError as e:
                print(e, file=sys.stderr)
                return False
            for endpoint in this.endpoints:
                announce(f"broker {config.node_id} kafka listener on {endpoint}")
        try:
            self._link = start_cluster_link(
                config,
                self.hosting,
                self.fence,
                registration_of(config, this),
                self.credentials,
                self.acls,
            )
        except Exception as e:
            print(
                f"BROKER_NOT_AVAILABLE: cannot register broker {config.node_id}: {e}",
                file=sys.stderr,
            )
            return False
        self.controller_endpoint.source = self._link
        return True

    @property
    def address(self) -> str:
        """Where gRPC listens, ``HOST:PORT``."""
        return f"{self.config.host}:{self.config.port}"

    def close(self, grace_s: float = GRACE_S) -> None:
        """Stops serving, then closes the rest: the link to the cluster, the Kafka listeners,
        gRPC (requests in flight get up to ``grace_s`` to finish), the metrics endpoint, the
        controller client; then what is owed is persisted, tiering stops and the logs close."""
        if self._link is not None:
            self._link.close()
        if self._kafka is not None:
            self._kafka.stop()
        if self._server is not None:
            self._server.stop(grace_s).wait()
        if self._metrics is not None:
            self._metrics.close()
        self.controller.close()
        self.persister.close()
        if self.rlm is not None:
            self.rlm.close()  # its tasks read the logs: they end before the logs close
            self.rlm.rsm.close()
            self.rlm.rlmm.close()
        self.partitions.close()
