"""A broker's KRaft metadata follower against a real controller process: it registers,
heartbeats and applies topic changes from the FetchMetadata stream alone (nothing listens on the
broker's port here, so the controller's own pushes cannot reach it)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from broker.controller_link import KRaftControllerLink
from cli.launch.ports import free_port
from tests.support.polling import poll_until
from tests.support.processes import DaemonProcess
from tiered.admin import AdminClient
from tiered.api import TopicIdPartition
from tiered.cluster.model import BrokerRegistration

pytestmark = pytest.mark.processes


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[DaemonProcess]:
    process = DaemonProcess(
        "controller.main",
        tmp_path / "controller.properties",
        {
            "node.id": "100",
            "listeners": f"127.0.0.1:{free_port()}",
            "metadata.store": "kraft",
            "metadata.log.dir": str(tmp_path / "metadata"),
            "broker.session.timeout.ms": "3000",
            "controller.retry.backoff.max.ms": "500",
        },
    )
    process.start()
    process.wait_for_line("Active as controller")
    try:
        yield process
    finally:
        process.close()


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latest: dict[TopicIdPartition, tuple[dict[str, str], int]] = {}
        self.epochs: list[int] = []

    def apply(self, assignments: Sequence[tuple[TopicIdPartition, dict[str, str], int]]) -> None:
        with self.lock:
            for tp, configs, tiered_epoch in assignments:
                self.latest[tp] = (configs, tiered_epoch)

    def controller_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


def test_follower_applies_topic_changes_from_the_metadata_log(controller: DaemonProcess) -> None:
    endpoint = controller.properties["listeners"]
    recorder = Recorder()
    link = KRaftControllerLink(
        [f"127.0.0.1:{free_port()}", endpoint],  # a dead address first: discovery skips it
        BrokerRegistration(1, "127.0.0.1", free_port()),
        recorder.apply,
        recorder.controller_epoch,
        heartbeat_interval_s=0.2,
    )
    link.start()
    try:
        assert link.registered.wait(15)
        assert link.controller_endpoint == endpoint
        with AdminClient(endpoint) as admin:
            poll_until(
                lambda: any(not b.fenced for b in admin.describe_cluster().brokers),
                what="the broker to be live",
            )
            topic_id = admin.create_topic("orders", 3, {"remote.storage.enable": "true"})
            expected = {TopicIdPartition(topic_id, "orders", p) for p in range(3)}
            poll_until(lambda: set(recorder.latest) == expected, what="the topic to be applied")
            assert all(c["remote.storage.enable"] == "true" for c, _ in recorder.latest.values())
            assert all(epoch == 0 for _, epoch in recorder.latest.values())

            admin.incremental_alter_configs(
                "orders", {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}
            )
            poll_until(
                lambda: all(
                    c.get("remote.storage.enable") == "false" and epoch == 1
                    for c, epoch in recorder.latest.values()
                ),
                what="the disablement to be applied from the log",
            )
            assert all(
                c["remote.log.disable.policy"] == "delete" for c, _ in recorder.latest.values()
            )
        assert recorder.epochs and set(recorder.epochs) == {1}
    finally:
        link.close()
