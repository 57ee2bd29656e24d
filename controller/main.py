"""``tiered-controller --config controller.properties``: the controller daemon.

It serves AdminService and ControllerService at once (a standby answers NOT_CONTROLLER and names
the active controller), campaigns for leadership through the metadata store, and prints
``controller N serving on HOST:PORT`` once it listens. SIGTERM or SIGINT stops it: it resigns so
that a standby takes over without waiting for a session to expire.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from controller import store as store_factory
from controller.broker_servicer import ControllerServicer
from controller.config import ControllerConfig
from controller.controller import Controller
from controller.jobs import wiring as jobs_wiring
from controller.metrics import ControllerMetrics, serve_metrics
from controller.remote_scrub import RemoteObjectScrubber
from controller.remote_verify import SegmentVerifier
from controller.request_metrics import AdminRequestMetrics
from controller.store import MetadataStore, MetadataStoreError
from tiered import failpoints, signals, source_address
from tiered.daemon_logging import announce, configure_daemon_logging
from tiered.metrics_endpoint import MetricsEndpointError
from tiered.net import GRPC_EXCLUSIVE_PORT, bind_grpc_port
from tiered.properties import load_properties
from tiered.rpc.v1 import controller_pb2_grpc as pb_grpc
from tiered.security.grpc_context import use_principal_mapper

log = logging.getLogger("tiered.controller")

GRACE_S = 5.0
MAX_MESSAGE_BYTES = 256 * 1024 * 1024
MESSAGE_SIZE_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tiered-controller", description=__doc__)
    parser.add_argument("--config", required=True, help="controller .properties file")
    args = parser.parse_args(argv)
    configure_daemon_logging()
    try:
        failpoints.configure_from_environment()
        config = ControllerConfig.from_properties(load_properties(args.config))
        source_address.choose(config.source_address)
        store = store_factory.create(config.store)
    except (OSError, ValueError, MetadataStoreError) as e:
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    metrics = ControllerMetrics(store.mode)
    try:
        bulk_delete = jobs_wiring.create(
            config.node_id, config.remote, config.spark, metrics.objects_deleted, metrics
        )
    except (OSError, ValueError) as e:
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        store.close()
        return 2
    controller = Controller(
        config,
        store,
        bulk_delete.runner if bulk_delete else None,
        metrics,
        bulk_delete.spark if bulk_delete else None,
        SegmentVerifier(bulk_delete.rlmm, bulk_delete.storage) if bulk_delete else None,
        RemoteObjectScrubber(bulk_delete.rlmm, bulk_delete.storage, bulk_delete.engine)
        if bulk_delete
        else None,
    )
    stopping = threading.Event()
    server = grpc.server(
        ThreadPoolExecutor(max_workers=64),
        interceptors=[AdminRequestMetrics(metrics)],
        maximum_concurrent_rpcs=512,
        # a metadata snapshot of 100k topics is larger than gRPC's 4 MiB default
        options=[*MESSAGE_SIZE_OPTIONS, GRPC_EXCLUSIVE_PORT],
    )
    pb_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
        controller.admin_servicer(),
        server,
    )
    pb_grpc.add_ControllerServiceServicer_to_server(  # type: ignore[no-untyped-call]
        ControllerServicer(controller.brokers, controller.term, store, stopping, controller.access),
        server,
    )
    use_principal_mapper(config.grpc_security.principal_mapper)
    if not bind_grpc_port(server, config.endpoint, config.grpc_security.server_credentials):
        return _gave_up(store, bulk_delete)
    endpoint = None
    if config.metrics_port is not None:
        try:
            endpoint = serve_metrics(
                metrics, controller.state_collector(), config.metrics_host, config.metrics_port
            )
        except MetricsEndpointError as e:
            print(e, file=sys.stderr)
            return _gave_up(store, bulk_delete)
        announce(f"controller {config.node_id} metrics on {endpoint.url}")
    server.start()
    signals.notify_on((signal.SIGTERM, signal.SIGINT), stopping)
    announce(
        f"controller {config.node_id} serving on {config.endpoint} "
        f"(metadata.store={config.metadata_mode})"
    )
    runner = threading.Thread(target=controller.run, args=(stopping,), name="controller-main")
    runner.start()
    stopping.wait()
    log.info("Stopping")
    runner.join()
    server.stop(GRACE_S).wait()
    if endpoint is not None:
        endpoint.close()
    controller.close()
    if bulk_delete is not None:
        bulk_delete.close()
    store.close()
    log.info("Stopped")
    return 0


def _gave_up(store: MetadataStore, bulk_delete: jobs_wiring.BulkDelete | None) -> int:
    """The daemon cannot listen where it is told: it releases what it opened and exits 1."""
    if bulk_delete is not None:
        bulk_delete.close()
    store.close()
    return 1


if __name__ == "__main__":
    sys.exit(main())
