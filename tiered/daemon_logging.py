"""How the daemons (tiered-broker, tiered-controller) log: one line per event, timestamped,
with the logger's name, at INFO."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_daemon_logging() -> None:
    logging.basicConfig(level=logging.INFO, format=FORMAT)
