"""An active controller in this process over a real KRaft store, with one registered broker and
no broker process: for tests of the controller's admin operations."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from controller.config import ControllerConfig
from controller.controller import Controller
from controller.store.kraft import KRaftMetadataStore
from tiered.cluster.model import BrokerRegistration, TopicMetadata


@contextlib.contextmanager
def running_controller(tmp_path: Path) -> Iterator[Controller]:
    store = KRaftMetadataStore.from_config({"metadata.log.dir": str(tmp_path / "meta")})
    config = ControllerConfig.from_properties(
        {"node.id": "100", "metadata.log.dir": str(tmp_path / "meta")}
    )
    controller = Controller(config, store)
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,))
    runner.start()
    assert controller.wait_active(10)
    controller.brokers.register(BrokerRegistration(1, "127.0.0.1", 1))
    try:
        yield controller
    finally:
        stop.set()
        runner.join(10)
        controller.close()
        store.close()


def reloaded(controller: Controller) -> dict[str, TopicMetadata]:
    """The topics as the store has them (what a new controller would load)."""
    return dict(controller.store.load().topics)
