"""``tiered-broker --config broker.properties``: the broker agent process.

Prints ``broker N kafka listener on NAME://HOST:PORT`` once per Kafka listener in ``listeners``
when they are bound and ``broker N serving on HOST:PORT`` (gRPC) once it serves. SIGTERM
or SIGINT stops it gracefully: requests in flight complete (up to a grace period), tiering tasks
stop, logs are closed.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import grpc

from broker.admin_forwarder import AdminForwarder, ControllerAdmin
from broker.agent import BrokerAgent
from broker.config import BrokerConfig
from broker.controller_link import KRaftControllerLink
from broker.kafka.this_broker import ThisBroker
from broker.kafka_listeners import KafkaListenerBindError, start_kafka_listeners
from broker.listener.sasl import ScramCredentials
from broker.metrics import serve_metrics
from broker.servicer import BrokerServicer
from tiered import failpoints, signals
from tiered.cluster.model import BrokerRegistration
from tiered.daemon_logging import announce, configure_daemon_logging
from tiered.metrics_endpoint import MetricsEndpointError
from tiered.net import GRPC_EXCLUSIVE_PORT, bind_grpc_port
from tiered.properties import load_properties
from tiered.rlmm.backend import StorageBackendError
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import controller_pb2_grpc as controller_grpc
from tiered.security.access import AccessControl
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.grpc_context import use_principal_mapper
from tiered.security.scram import ScramCredential, ScramMechanism

log = logging.getLogger("tiered.broker")

GRACE_S = 10.0


class ControllerEndpoint:
    """Where the broker currently believes the active controller is (for AdminService forwarding)."""

    def __init__(self) -> None:
        self.source: Closeable | None = None

    def get(self) -> str | None:
        return getattr(self.source, "controller_endpoint", None)


class Closeable(Protocol):
    def close(self) -> None: ...


class ScramCredentialSource:
    """Where the SASL listener finds credentials: the metadata the broker follows (KRaft) or its
    watch on ``/config/users`` (ZooKeeper), known once the link to the cluster is up (the Kafka
    listeners start first: their ports go into the registration). None until then."""

    def __init__(self) -> None:
        self.lookup: ScramCredentials | None = None

    def __call__(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        lookup = self.lookup
        return None if lookup is None else lookup(user, mechanism)


def registration_of(config: BrokerConfig, this: ThisBroker | None) -> BrokerRegistration:
    """What the broker registers: its gRPC endpoint and its Kafka listeners, as advertised."""
    grpc_endpoint = config.grpc_advertised
    return BrokerRegistration(
        config.node_id,
        config.host if grpc_endpoint is None else grpc_endpoint.host,
        config.port if grpc_endpoint is None else grpc_endpoint.port,
        kafka_endpoints=() if this is None else this.endpoints,
    )


class BrokerAcls:
    """Where this broker's ACLs come from, one route per mode: KRaft, the metadata log it
    follows (``KRaftControllerLink.image``); ZooKeeper, Kafka's ACL znodes followed on its own
    session (``AclZkFollower``); a standalone broker has none."""

    def __init__(self) -> None:
        self.source: Callable[[], AclIndex] = AclIndex

    def __call__(self) -> AclIndex:
        return self.source()


def start_controller_link(
    config: BrokerConfig,
    agent: BrokerAgent,
    registration: BrokerRegistration,
    credentials: ScramCredentialSource,
    acls: BrokerAcls,
) -> Closeable | None:
    """Registers with the cluster: KRaft (controller.quorum.bootstrap.servers) or ZooKeeper
    (zookeeper.connect); neither means a standalone broker driven by local calls. Points
    ``credentials`` and ``acls`` at where this mode learns SCRAM credentials and ACLs."""
    if config.controller_bootstrap:
        link = KRaftControllerLink(
            config.controller_bootstrap,
            registration,
            # Persisted a moment later, together: a restarted broker replays the log anyway.
            functools.partial(agent.assign, persist_now=False),
            agent.check_controller_epoch,
            config.heartbeat_interval_s,
            remove_partitions=agent.remove_partitions,
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tiered-broker", description=__doc__)
    parser.add_argument("--config", required=True, help="broker .properties file")
    args = parser.parse_args(argv)
    configure_daemon_logging()
    try:
        failpoints.configure_from_environment()
        config = BrokerConfig.from_properties(load_properties(args.config))
        authorizer_config = AuthorizerConfig.from_properties(config.properties)
    except (OSError, ValueError) as e:
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    try:
        agent = BrokerAgent(config)
    except (OSError, StorageBackendError) as e:
        # The log dir, the RLMM or the remote storage cannot be opened: say which, no traceback.
        print(f"KAFKA_STORAGE_ERROR: cannot open the broker's storage: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # e.g. an RSM or RLMM setting that the plugin rejects
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    server = grpc.server(
        ThreadPoolExecutor(max_workers=32),
        maximum_concurrent_rpcs=256,
        options=[GRPC_EXCLUSIVE_PORT],
    )
    acls = BrokerAcls()
    access = AccessControl(StandardAuthorizer(authorizer_config, acls))
    pb_grpc.add_BrokerServiceServicer_to_server(BrokerServicer(agent, access), server)  # type: ignore[no-untyped-call]
    endpoint = ControllerEndpoint()
    controller = ControllerAdmin(endpoint.get, credentials=config.grpc_security.channel_credentials)
    controller_grpc.add_AdminServiceServicer_to_server(AdminForwarder(controller), server)  # type: ignore[no-untyped-call]
    address = f"{config.host}:{config.port}"
    use_principal_mapper(config.grpc_security.principal_mapper)
    if not bind_grpc_port(server, address, config.grpc_security.server_credentials):
        agent.close()
        return 1
    metrics = None
    if config.metrics_port is not None:
        try:
            metrics = serve_metrics(agent, config.metrics_host, config.metrics_port)
        except MetricsEndpointError as e:
            print(e, file=sys.stderr)
            agent.close()
            return 1
        announce(f"broker {config.node_id} metrics on {metrics.url}")
    server.start()
    credentials = ScramCredentialSource()
    try:
        kafka = start_kafka_listeners(config, agent, controller, credentials, access)
    except KafkaListenerBindError as e:
        print(e, file=sys.stderr)
        server.stop(0).wait()
        agent.close()
        return 1
    for kafka_endpoint in () if kafka is None else kafka.this.endpoints:
        announce(f"broker {config.node_id} kafka listener on {kafka_endpoint}")
    try:
        link = start_controller_link(
            config,
            agent,
            registration_of(config, None if kafka is None else kafka.this),
            credentials,
            acls,
        )
    except Exception as e:
        print(
            f"BROKER_NOT_AVAILABLE: cannot register broker {config.node_id}: {e}", file=sys.stderr
        )
        if kafka is not None:
            kafka.stop()
        server.stop(0).wait()
        agent.close()
        return 1
    endpoint.source = link
    stopping = threading.Event()
    signals.notify_on((signal.SIGTERM, signal.SIGINT), stopping)
    announce(f"broker {config.node_id} serving on {address}")
    stopping.wait()
    log.info("Stopping: letting requests in flight finish (up to %.0fs)", GRACE_S)
    if link is not None:
        link.close()
    if kafka is not None:
        kafka.stop()
    server.stop(GRACE_S).wait()
    if metrics is not None:
        metrics.close()
    controller.close()
    agent.close()
    log.info("Stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
