"""``tiered-broker --config broker.properties``: the broker agent process.

Prints ``broker N kafka listener on NAME://HOST:PORT`` once per Kafka listener in ``listeners``
when they are bound and ``broker N serving on HOST:PORT`` (gRPC) once it serves. SIGTERM
or SIGINT stops it gracefully: requests in flight complete (up to a grace period), tiering tasks
stop, logs are closed.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from broker.broker import GRACE_S, Broker
from broker.config import BrokerConfig
from tiered import failpoints, signals, source_address
from tiered.daemon_logging import announce, configure_daemon_logging
from tiered.properties import load_properties
from tiered.rlmm.backend import StorageBackendError
from tiered.security.authorizer import AuthorizerConfig

log = logging.getLogger("tiered.broker")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tiered-broker", description=__doc__)
    parser.add_argument("--config", required=True, help="broker .properties file")
    args = parser.parse_args(argv)
    configure_daemon_logging()
    try:
        failpoints.configure_from_environment()
        config = BrokerConfig.from_properties(load_properties(args.config))
        source_address.choose(config.source_address)
        authorizer_config = AuthorizerConfig.from_properties(config.properties)
    except (OSError, ValueError) as e:
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    try:
        broker = Broker(config, authorizer_config)
    except (OSError, StorageBackendError) as e:
        # The log dir, the RLMM or the remote storage cannot be opened: say which, no traceback.
        print(f"KAFKA_STORAGE_ERROR: cannot open the broker's storage: {e}", file=sys.stderr)
        return 1
    except ValueError as e:  # e.g. an RSM or RLMM setting that the plugin rejects
        print(f"INVALID_CONFIG: {e}", file=sys.stderr)
        return 2
    if not broker.start():
        broker.close(grace_s=0)
        return 1
    stopping = threading.Event()
    signals.notify_on((signal.SIGTERM, signal.SIGINT), stopping)
    announce(f"broker {config.node_id} serving on {broker.address}")
    stopping.wait()
    log.info("Stopping: letting requests in flight finish (up to %.0fs)", GRACE_S)
    broker.close()
    log.info("Stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
