"""``tiered-broker --config broker.properties``: the broker agent process.

Prints ``broker N serving on HOST:PORT`` once it serves. SIGTERM or SIGINT stops it gracefully:
requests in flight complete (up to a grace period), tiering tasks stop, logs are closed.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from broker.agent import BrokerAgent
from broker.config import BrokerConfig
from broker.metrics import serve_metrics
from broker.servicer import BrokerServicer
from tiered.properties import load_properties
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc

log = logging.getLogger("tiered.broker")

GRACE_S = 10.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tiered-broker", description=__doc__)
    parser.add_argument("--config", required=True, help="broker .properties file")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = BrokerConfig.from_properties(load_properties(args.config))
    except (OSError, ValueError) as e:
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    agent = BrokerAgent(config)
    server = grpc.server(ThreadPoolExecutor(max_workers=32), maximum_concurrent_rpcs=256)
    pb_grpc.add_BrokerServiceServicer_to_server(BrokerServicer(agent), server)  # type: ignore[no-untyped-call]
    address = f"{config.host}:{config.port}"
    if server.add_insecure_port(address) == 0:
        print(f"cannot listen on {address}", file=sys.stderr)
        agent.close()
        return 1
    server.start()
    if config.metrics_port is not None:
        port = serve_metrics(agent, config.host, config.metrics_port)
        print(f"broker {config.node_id} metrics on http://{config.host}:{port}/metrics", flush=True)
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    print(f"broker {config.node_id} serving on {address}", flush=True)
    stopping.wait()
    log.info("Stopping: letting requests in flight finish (up to %.0fs)", GRACE_S)
    server.stop(GRACE_S).wait()
    agent.close()
    log.info("Stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
