"""How a broker joins its cluster, one route per mode, and where the rest of the broker reads
what it learns there:

- KRaft (``controller.quorum.bootstrap.servers``): ``KRaftControllerLink`` registers, heartbeats
  and follows the metadata log, applying what it says of the partitions hosted here; SCRAM
  credentials and ACLs come with the metadata it follows;
- ZooKeeper (``zookeeper.connect``): an ephemeral registration, with SCRAM credentials and ACLs
  followed on its session; the controller pushes everything else;
- neither: a standalone broker, driven by local calls.

The Kafka listeners start before the link (their ports go into the registration), so what the
link learns is reached through holders set once it is up: ``ScramCredentialSource``,
``BrokerAcls`` and ``ControllerEndpoint`` (where AdminService calls are forwarded).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Protocol

from broker.config import BrokerConfig
from broker.controller_epoch import ControllerEpochFence
from broker.controller_link import KRaftControllerLink
from broker.hosting import Hosting
from broker.kafka.this_broker import ThisBroker
from broker.listener.sasl import ScramCredentials
from tiered.cluster.model import BrokerRegistration
from tiered.security.acl_index import AclIndex
from tiered.security.scram import ScramCredential, ScramMechanism

__all__ = [
    "BrokerAcls",
    "ClusterLink",
    "ControllerEndpoint",
    "ScramCredentialSource",
    "registration_of",
    "start_cluster_link",
]

log = logging.getLogger(__name__)


class ClusterLink(Protocol):
    def close(self) -> None: ...


class ControllerEndpoint:
    """Where the broker currently believes the active controller is (for AdminService
    forwarding): what the link says, None before it is up or while it knows none."""

    def __init__(self) -> None:
        self.source: ClusterLink | None = None

    def get(self) -> str | None:
        return getattr(self.source, "controller_endpoint", None)


class ScramCredentialSource:
    """Where the SASL listener finds credentials: the metadata the broker follows (KRaft) or its
    watch on ``/config/users`` (ZooKeeper), known once the link to the cluster is up. None until
    then."""

    def __init__(self) -> None:
        self.lookup: ScramCredentials | None = None

    def __call__(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        lookup = self.lookup
        return None if lookup is None else lookup(user, mechanism)


class BrokerAcls:
    """Where this broker's ACLs come from, one route per mode: KRaft, the metadata log it
    follows (``KRaftControllerLink.image``); ZooKeeper, Kafka's ACL znodes followed on its own
    session (``AclZkFollower``); a standalone broker has none."""

    def __init__(self) -> None:
        self.source: Callable[[], AclIndex] = AclIndex

    def __call__(self) -> AclIndex:
        return self.source()


def registration_of(config: BrokerConfig, this: ThisBroker | None) -> BrokerRegistration:
    """What the broker registers: its gRPC endpoint and its Kafka listeners, as advertised."""
    grpc_endpoint = config.grpc_advertised
    return BrokerRegistration(
        config.node_id,
        config.host if grpc_endpoint is None else grpc_endpoint.host,
        config.port if grpc_endpoint is None else grpc_endpoint.port,
        kafka_endpoints=() if this is None else this.endpoints,
    )


def start_cluster_link(
    config: BrokerConfig,
    hosting: Hosting,
    fence: ControllerEpochFence,
    registration: BrokerRegistration,
    credentials: ScramCredentialSource,
    acls: BrokerAcls,
) -> ClusterLink | None:
    """Registers with the cluster in the mode the config names (None: standalone). Points
    ``credentials`` and ``acls`` at where this mode learns SCRAM credentials and ACLs."""
    if config.controller_bootstrap:
        link = KRaftControllerLink(
            config.controller_bootstrap,
            registration,
            # Persisted a moment later, together: a restarted broker replays the log anyway.
            functools.partial(hosting.assign, persist_now=False),
            fence.check,
            config.heartbeat_interval_s,
            remove_partitions=hosting.remove_partitions,
            credentials=config.grpc_security.channel_credentials,
        )
        link.start()
        credentials.lookup = link.scram_credential
        acls.source = lambda: link.image.acls
        return link
    if config.zookeeper_connect:
        from broker.zk_registration import BrokerZkRegistration  # noqa: PLC0415 - lazy
        from broker.zk_scram_watch import ZkScramCredentials  # noqa: PLC0415
        from tiered.cluster.zk_acls import AclZkFollower  # noqa: PLC0415 - lazy
        from tiered.zk_client import ZkClient  # noqa: PLC0415

        zk = BrokerZkRegistration(
            config.zookeeper_connect, registration, security=config.zookeeper_security
        )
        followers: list[AclZkFollower] = []

        def follow(client: ZkClient) -> None:
            """SCRAM credentials and ACLs, loaded before the registration makes the controller
            send requests that need them."""
            watch = ZkScramCredentials(client)
            watch.start()
            follower = AclZkFollower(client)
            follower.start()
            followers.append(follower)
            credentials.lookup = watch.scram_credential
            acls.source = lambda: follower.acls
            zk.on_close(follower.close)

        try:
            zk.start(follow)  # raises BrokerRegistrationError if another live broker holds the id
        except BaseException:
            for follower in followers:
                follower.close()
            raise
        return zk
    log.info("No controller.quorum.bootstrap.servers or zookeeper.connect: standalone broker")
    return None
