"""How a broker stays known to the controller and follows the cluster metadata.

KRaft mode (``controller.quorum.bootstrap.servers``): find the active controller among the
bootstrap addresses, RegisterBroker, heartbeat every ``broker.heartbeat.interval.ms`` (a silence
from the controller is logged: ``broker.controller_contact``), and follow
the metadata log through FetchMetadata, applying every change to a topic this broker hosts
(configs, tiered epoch) as the controller's AssignPartitions would: configs for a hosted
partition, the topic's tiering state for a new one. SCRAM credentials come with the image
(``scram_credential``), for the SASL listener. Stopping tiering is DisableRemoteTopic's
alone, pushed by the controller (``broker.tiering``). A controller that stops answering or says
NOT_CONTROLLER sends the broker back to discovery.

ZooKeeper mode (``zookeeper.connect``): an ephemeral ``/brokers/ids/{id}`` registration,
re-created after a session expiry; SCRAM credentials are watched under ``/config/users`` on the
same session (``broker.zk_scram_watch``); the controller pushes everything else.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence

import grpc

from broker.controller_contact import ControllerContact
from tiered.api import TopicIdPartition
from tiered.cluster.model import BrokerRegistration, MetadataImage, TopicMetadata
from tiered.cluster.serde import apply_batch, broker_registration_to_proto, image_from_snapshot
from tiered.errors import ErrorCode
from tiered.retry import Backoff, ExponentialBackoff
from tiered.retry_policies import CONTROLLER_LINK_BACKOFF
from tiered.rpc.channels import open_channel
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.rpc.v1 import metadata_pb2
from tiered.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger(__name__)

ApplyTopics = Callable[[Sequence[tuple[TopicIdPartition, dict[str, str], int]]], object]


class KRaftControllerLink:
    def __init__(
        self,
        bootstrap: Sequence[str],
        registration: BrokerRegistration,
        apply_assignments: ApplyTopics,
        on_controller_epoch: Callable[[int], None],
        heartbeat_interval_s: float = 2.0,
        backoff: ExponentialBackoff = CONTROLLER_LINK_BACKOFF,
        remove_partitions: Callable[[int, Sequence[tuple[uuid.UUID, int]]], object] | None = None,
        credentials: grpc.ChannelCredentials | None = None,  # TLS to the controllers
    ) -> None:
        self._bootstrap = list(bootstrap)
        self._credentials = credentials
        self.registration = registration
        self._apply_assignments = apply_assignments
        self._on_controller_epoch = on_controller_epoch
        self._remove_partitions = remove_partitions
        self._heartbeat_interval_s = heartbeat_interval_s
        self._backoff = backoff
        self.contact = ControllerContact(heartbeat_interval_s)
        self._closed = threading.Event()
        self.controller_endpoint: str | None = None
        self.image = MetadataImage()
        self._next_offset = 0
        self._threads = [
            threading.Thread(
                target=self._register_and_heartbeat, name="broker-heartbeat", daemon=True
            ),
            threading.Thread(target=self._follow, name="broker-metadata-follower", daemon=True),
        ]
        self.registered = threading.Event()
        self._stream: grpc.Future[pb.FetchMetadataResponse] | None = None

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def scram_credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """A SCRAM credential as the followed metadata has it (None before the first batch)."""
        return self.image.scram_credentials.get((user, mechanism))

    def close(self) -> None:
        self._closed.set()
        stream = self._stream
        if stream is not None:
            stream.cancel()  # the follower blocks in the stream until the next batch
        for thread in self._threads:
            thread.join(timeout=5)

    # ----------------------------------------------------------------------------- registration

    def _stub(self, endpoint: str) -> tuple[grpc.Channel, pb_grpc.ControllerServiceStub]:
        # A metadata snapshot of 100k topics is larger than gRPC's 4 MiB default.
        channel = open_channel(
            endpoint,
            options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)],
            credentials=self._credentials,
        )
        return channel, pb_grpc.ControllerServiceStub(channel)  # type: ignore[no-untyped-call]

    def _register(self) -> str | None:
        """Registers with the active controller; returns its endpoint, or None if none answered."""
        request = pb.RegisterBrokerRequest(
            registration=broker_registration_to_proto(self.registration)
        )
        candidates = (
            [self.controller_endpoint] if self.controller_endpoint else []
        ) + self._bootstrap
        for endpoint in dict.fromkeys(candidates):
            channel, stub = self._stub(endpoint)
            try:
                response = stub.RegisterBroker(request, timeout=5.0)
            except grpc.RpcError as e:
                log.debug("Controller candidate %s: %s", endpoint, e.code())
                continue
            finally:
                channel.close()
            if response.error.code == 0:
                self.contact.heard(endpoint)
                self._on_controller_epoch(response.controller_epoch)
                if endpoint != self.controller_endpoint:
                    log.info(
                        "Registered with the active controller at %s (controller epoch %d)",
                        endpoint,
                        response.controller_epoch,
                    )
                return endpoint
            log.debug("Controller candidate %s: %s", endpoint, response.error.name)
        return None

    def _register_and_heartbeat(self) -> None:
        backoff = Backoff(self._backoff)
        while not self._closed.is_set():
            endpoint = self._register()
            if endpoint is None:
                self.contact.check()
                self._closed.wait(backoff.next_delay())
                continue
            backoff.reset()
            self.controller_endpoint = endpoint
            self.registered.set()
            self._heartbeat(endpoint)

    def _heartbeat(self, endpoint: str) -> None:
        """Heartbeats until the controller is lost or asks for a new registration."""
        channel, stub = self._stub(endpoint)
        request = pb.BrokerHeartbeatRequest(
            broker_id=self.registration.broker_id,
            incarnation_id=self.registration.incarnation_id.bytes,
        )
        try:
            while not self._closed.wait(self._heartbeat_interval_s):
                try:
                    response = stub.BrokerHeartbeat(request, timeout=self._heartbeat_interval_s * 2)
                except grpc.RpcError as e:
                    log.warning("Heartbeat to the controller at %s failed: %s", endpoint, e.code())
                    self.contact.check()
                    return
                if response.error.code != 0:
                    log.info(
                        "Controller at %s: %s; registering again", endpoint, response.error.name
                    )
                    self.contact.check()
                    return
                self.contact.heard(endpoint)
                self._on_controller_epoch(response.controller_epoch)
        finally:
            channel.close()

    # ----------------------------------------------------------------------------- following

    def _follow(self) -> None:
        backoff = Backoff(self._backoff)
        while not self._closed.is_set():
            endpoint = self.controller_endpoint
            if endpoint is None:
                self.registered.wait(0.2)
                continue
            channel, stub = self._stub(endpoint)
            try:
                stream = stub.FetchMetadata(
                    pb.FetchMetadataRequest(
                        broker_id=self.registration.broker_id, from_offset=self._next_offset
                    )
                )
                self._stream = stream
                if self._closed.is_set():
                    stream.cancel()
                for response in stream:
                    if self._closed.is_set():
                        stream.cancel()
                        break
                    if response.error.code != 0:
                        if response.error.code == ErrorCode.NOT_CONTROLLER:
                            self.controller_endpoint = None
                        log.info("FetchMetadata from %s: %s", endpoint, response.error.name)
                        break
                    self.contact.heard(endpoint)
                    self._apply(response.batch, response.is_snapshot)
                    self._next_offset = response.next_offset
                    backoff.reset()
            except grpc.RpcError as e:
                if not self._closed.is_set():
                    log.info("FetchMetadata from %s ended: %s", endpoint, e.code())
            except Exception:
                log.exception("Applying cluster metadata failed; fetching again")
            finally:
                channel.close()
            self._closed.wait(backoff.next_delay())

    def _apply(self, batch: metadata_pb2.MetadataRecordBatch, is_snapshot: bool) -> None:
        if is_snapshot:
            self.image = image_from_snapshot(batch)
            touched = {t.topic_id for t in self.image.topics.values()}
        else:
            removed = [
                (topic.topic_id, p)
                for record in batch.records
                if record.WhichOneof("record") == "remove_topic"
                and (topic := self.image.topic_by_id(uuid.UUID(bytes=record.remove_topic.topic_id)))
                for p in topic.partitions_on(self.registration.broker_id)
            ]
            apply_batch(self.image, batch)
            if removed and self._remove_partitions is not None:
                self._remove_partitions(0, removed)
            touched = set()
            for record in batch.records:
                kind = record.WhichOneof("record")
                if kind in ("topic", "partition", "config", "tiered_state"):
                    touched.add(uuid.UUID(bytes=getattr(record, kind).topic_id))
        hosted: list[tuple[TopicIdPartition, dict[str, str], int]] = []
        for topic_id in touched:
            topic = self.image.topic_by_id(topic_id)
            if topic is not None:
                hosted.extend(self._assignments(topic))
        if hosted:
            self._apply_assignments(hosted)

    def _assignments(
        self, topic: TopicMetadata
    ) -> list[tuple[TopicIdPartition, dict[str, str], int]]:
        return [
            (
                TopicIdPartition(topic.topic_id, topic.name, p),
                dict(topic.configs),
                topic.tiered_epoch,
            )
            for p in topic.partitions_on(self.registration.broker_id)
        ]
