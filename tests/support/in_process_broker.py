"""A broker built in-process on a temporary directory (``broker.broker.Broker`` without network
listeners): its logs, a sqlite RLMM and a directory as remote storage."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from broker.broker import Broker
from broker.config import BrokerConfig


def broker_config(root: Path, **properties: str) -> BrokerConfig:
    """Broker 1's configuration under ``root``, with ``properties`` on top (keys with dots go
    through ``**{"a.b": "1"}``)."""
    return BrokerConfig.from_properties(
        {
            "node.id": "1",
            "log.dirs": str(root / "logs"),
            "rlmm.sqlite.path": str(root / "rlmm.db"),
            "remote.storage.root": str(root / "remote"),
            **properties,
        }
    )


@contextmanager
def in_process_broker(root: Path, **properties: str) -> Iterator[Broker]:
    """A broker built under ``root``, closed on exit."""
    broker = Broker(broker_config(root, **properties))
    try:
        yield broker
    finally:
        broker.close()
