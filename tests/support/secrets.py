"""Checks that no secret reached a log: every log file under a cluster's directory (``*.log``,
``*.out``, ``*.err``, anything under a ``logs`` directory: what ``tiered-cluster up`` and the test
clusters write) and the captured output of test daemons (``DaemonProcess``).

    assert_no_secrets([zk_password, scram_password], root=cluster.root, processes=processes)

The files that hold secrets on purpose (a JAAS file, a credentials file, certificates' keys) are
not log files and are not read. A failure names where each secret was found by its position in
``secrets``, not by its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from tests.support.processes import DaemonProcess

__all__ = ["assert_no_secrets", "find_secrets", "log_files"]

LOG_SUFFIXES = (".log", ".out", ".err")


def log_files(root: Path) -> list[Path]:
    """Every log file under ``root``."""
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and (path.suffix in LOG_SUFFIXES or "logs" in path.parent.parts)
    )


def find_secrets(
    secrets: Sequence[str],
    *,
    root: Path | None = None,
    processes: Iterable[DaemonProcess] = (),
) -> list[str]:
    """``where: secret #i`` for each secret found in a log file under ``root`` or in the
    output of ``processes``; [] when none is."""
    texts: list[tuple[str, str]] = []
    if root is not None:
        for path in log_files(root):
            texts.append((str(path), path.read_text(encoding="utf-8", errors="replace")))
    for process in processes:
        texts.append((f"output of {process.config.name}", "".join(process.output)))
    return [
        f"{where}: secret #{index}"
        for where, text in texts
        for index, secret in enumerate(secrets)
        if secret and secret in text
    ]


def assert_no_secrets(
    secrets: Sequence[str],
    *,
    root: Path | None = None,
    processes: Iterable[DaemonProcess] = (),
) -> None:
    processes = list(processes)
    assert root is not None or processes, "nothing to scan"
    found = find_secrets(secrets, root=root, processes=processes)
    assert not found, "secrets in logs:\n" + "\n".join(found)
