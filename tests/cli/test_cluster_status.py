"""``tiered-cluster status`` rendered from a fake AdminService: each broker's reachability as the
active controller reports it, in JSON and text, and the exit status it makes
(``cli.cluster.status``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cli.cluster.status import all_alive, all_reachable, describe_cluster, status_of, status_table
from cli.launch.ports import free_port
from tests.support.fake_admin import FakeAdminServer, FakeAdminService

BROKER_IDS = {"broker-1": 1, "broker-2": 2, "broker-3": 3}


@pytest.fixture
def server() -> Iterator[FakeAdminServer]:
    with FakeAdminServer(FakeAdminService(brokers=2)) as server:
        yield server


def processes(controller_port: int) -> list[dict[str, Any]]:
    """A controller at ``controller_port`` and brokers 1 and 2, every process alive."""
    return [
        {"name": "controller-0", "role": "controller", "pid": 10, "alive": True,
         "ports": {"client": controller_port, "metrics": 1}},
        {"name": "broker-1", "role": "broker", "pid": 11, "alive": True,
         "ports": {"client": 2, "kafka": 3, "metrics": 4}},
        {"name": "broker-2", "role": "broker", "pid": 12, "alive": True,
         "ports": {"client": 5, "kafka": 6, "metrics": 7}},
    ]  # fmt: skip


def brokers(status: dict[str, Any]) -> dict[str, tuple[bool | None, int | None]]:
    return {
        p["name"]: (p["reachable"], p["last_reached_ms"])
        for p in status["processes"]
        if p["role"] == "broker"
    }


def test_a_broker_the_controller_has_not_reached_is_unreachable(server: FakeAdminServer) -> None:
    server.service.reach = {1: (420, True), 2: (12_345, False)}
    found = processes(server.port)
    status = status_of(found, BROKER_IDS, describe_cluster(found))

    assert status["active_controller"] == "controller-0"
    assert brokers(status) == {"broker-1": (True, 420), "broker-2": (False, 12_345)}
    assert "reachable" not in status["processes"][0]  # a controller's entry has no such field
    assert json.loads(json.dumps(status)) == status  # the JSON document as printed
    assert all_alive(status) and not all_reachable(status)  # so the exit status is 1
    text = status_table(status).splitlines()
    assert text[-2:] == [
        "active controller: controller-0",
        "unreachable: broker-2, last reached by the active controller 12.3s ago",
    ]


def test_every_broker_reached_is_reachable(server: FakeAdminServer) -> None:
    found = processes(server.port)
    status = status_of(found, BROKER_IDS, describe_cluster(found))

    assert brokers(status) == {"broker-1": (True, 0), "broker-2": (True, 0)}
    assert all_reachable(status)
    assert status_table(status).splitlines()[-1] == "active controller: controller-0"


def test_a_broker_the_controller_does_not_know_is_unreachable(server: FakeAdminServer) -> None:
    found = [
        *processes(server.port),
        {"name": "broker-3", "role": "broker", "pid": 13, "alive": True,
         "ports": {"client": 8, "kafka": 9, "metrics": 10}},
    ]  # fmt: skip
    status = status_of(found, BROKER_IDS, describe_cluster(found))

    assert brokers(status)["broker-3"] == (False, None)
    assert not all_reachable(status)
    assert status_table(status).splitlines()[-1] == (
        "unreachable: broker-3 is not registered with the active controller"
    )


def test_with_no_controller_answering_reachability_is_unknown_not_unreachable() -> None:
    found = processes(free_port())  # nothing listens there
    cluster = describe_cluster(found)
    status = status_of(found, BROKER_IDS, cluster)

    assert cluster is None and status["active_controller"] is None
    assert brokers(status) == {"broker-1": (None, None), "broker-2": (None, None)}
    assert all_reachable(status)
    assert status_table(status).splitlines()[-1] == "active controller: none answered"
