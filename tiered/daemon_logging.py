"""How the daemons (tiered-broker, tiered-controller) log: one line per event, timestamped,
with the logger's name, at INFO; how they announce readiness on stdout; and reading the end of a
log file for an error message."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

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


def log_tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the log file at ``path`` (read from its last 64 KiB), or a
    short note saying why there are none."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65_536))
            text = f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return "<no log file>"
    except OSError as e:
        return f"<cannot read the log: {e}>"
    return "\n".join(text.splitlines()[-lines:])
