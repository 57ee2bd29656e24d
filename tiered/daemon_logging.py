"""How the daemons (tiered-broker, tiered-controller) log: one line per event, timestamped,
with the logger's name, at INFO; and how they announce readiness on stdout."""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_daemon_logging() -> None:
    logging.basicConfig(level=logging.INFO, format=FORMAT)


def announce(line: str) -> None:
    """Print a readiness line that scripts and tests parse ("serving on", "metrics on").

    One ``write`` of the line with its newline: ``print`` writes the text and the newline
    separately, and when stdout is unbuffered (``PYTHONUNBUFFERED``) a log line from another
    thread, sharing the same pipe through stderr, can land between the two.
    """
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
